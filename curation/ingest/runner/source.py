"""Plumbing every reader shares: the default caption origin per kind, how often progress is written,
a local path for the job's source (the server path, or the upload, copied out of object storage
when it has no path), and the caption origin and language a job's options ask for.
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from ...models import Caption, ImportJob
from ..report import RowError

DEFAULT_ORIGIN = {
    ImportJob.Kind.IMAGES: Caption.Origin.ALT_TEXT,
    ImportJob.Kind.TSV: Caption.Origin.ALT_TEXT,
    ImportJob.Kind.COCO: Caption.Origin.DATASET,
    ImportJob.Kind.COMMENTS: Caption.Origin.WEB_COMMENT,
}
PROGRESS_EVERY = 200  # members or rows between progress writes for the slow (per-image) readers
# Rows between progress writes for the line readers: the bar counts rows as they are read, not batches
# as they land (a batch is INGEST_BATCH_SIZE rows: 10,000 by default, most of a small file).
PROGRESS_ROWS = 2000


@contextlib.contextmanager
def local_source(job: ImportJob):
    """A local path for the job's source: the server path, or the upload (copied out of S3 if need be)."""
    if job.source_path:
        yield Path(job.source_path)
        return
    try:
        yield Path(job.upload.path)
        return
    except NotImplementedError:
        pass
    suffix = PurePosixPath(job.upload.name).suffix
    with tempfile.NamedTemporaryFile(suffix=suffix) as tmp:
        with job.upload.open("rb") as src:
            shutil.copyfileobj(src, tmp, 1 << 20)
        tmp.flush()
        yield Path(tmp.name)


def caption_origin(job: ImportJob) -> str:
    origin = job.options.get("origin") or DEFAULT_ORIGIN[job.kind]
    if origin not in Caption.Origin.values:
        raise RowError("bad_option", f"unknown caption origin {origin!r}")
    return origin


def caption_language(job: ImportJob) -> str:
    return job.options.get("language") or job.collection.language
