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

A test that replaces a function patches the module that owns it (``curation.ingest.writer.write_url_rows``),
not this package.
"""
from __future__ import annotations

from .downloads import download_chunk, start_downloads
from .job import import_run

__all__ = ["download_chunk", "import_run", "start_downloads"]
