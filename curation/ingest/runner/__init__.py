"""Drive one ImportJob: read its source, land good rows, report bad ones, then fetch images.

``import_run`` is safe to run twice (a re-delivered task): rows are upserted, so a second pass
creates nothing new, and the report is rebuilt from scratch.

The modules, by responsibility:

- ``job``: running one job (``import_run``), recording a failure, counting what it created;
- ``source``: what the readers share: a local path for the source, the caption origin and language,
  how often progress is written;
- ``tsv``, ``comments``, ``folders`` (folders and zip archives of images with a sidecar CSV) and
  ``coco``: one reader per source kind;
- ``downloads``: queuing the job's image downloads in chunks, and fetching one chunk.

Every name the single module had is importable from here. Setting one of them on this package
(``runner.write_url_rows = ...`` in a test) sets it in the module that uses it too, as it did when
the runner was one module.
"""
from __future__ import annotations

import sys
import types

from .. import download, images, lines
from ..report import Report, RowError
from ..writer import UrlRow, insert_captions, write_url_rows
from . import coco, comments, downloads, folders, job, source, tsv
from .coco import _land_coco_image, _run_coco
from .comments import _images_by_external_id, _run_comments
from .downloads import _store_downloaded, download_chunk, start_downloads
from .folders import _land_member, _read_sidecar, _run_images
from .job import _fail, _finalise_counts, import_run, log
from .source import DEFAULT_ORIGIN, PROGRESS_EVERY, PROGRESS_ROWS, _language, _local_source, _origin
from .tsv import _BatchWriter, _run_tsv

# Every name the single module defined or used as a module attribute (its helpers included), so that
# pyflakes and readers see them as re-exports.
__all__ = [
    "download", "images", "lines", "Report", "RowError", "UrlRow", "insert_captions", "write_url_rows",
    "_land_coco_image", "_run_coco", "_images_by_external_id", "_run_comments", "_store_downloaded",
    "download_chunk", "start_downloads", "_land_member", "_read_sidecar", "_run_images", "_fail",
    "_finalise_counts", "import_run", "log", "DEFAULT_ORIGIN", "PROGRESS_EVERY", "PROGRESS_ROWS", "_language",
    "_local_source", "_origin", "_BatchWriter", "_run_tsv", "coco", "comments", "downloads", "folders", "job",
    "source", "tsv",
]

_MODULES = (source, tsv, comments, folders, coco, downloads, job)


class _Package(types.ModuleType):
    """This package, whose attributes, when set, are set in each of its modules that holds the name: the
    functions and settings that tests replace (``write_url_rows``, ``PROGRESS_ROWS``) keep their effect."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        for module in _MODULES:
            if name in vars(module):
                setattr(module, name, value)


sys.modules[__name__].__class__ = _Package
