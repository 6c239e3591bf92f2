"""Running one ImportJob: reset its counts and report, hand its source to the reader for its kind,
record a failure (an unreadable source, or an unexpected error, which is re-raised for the worker
to log), count what the job really created from the rows themselves, then queue the downloads.
"""
from __future__ import annotations

import logging

from django.utils import timezone

from ...models import Caption, Image, ImportIssue, ImportJob
from ..report import Report, RowError
from .coco import run_coco
from .comments import run_comments
from .downloads import start_downloads
from .folders import run_images
from .tsv import run_tsv

log = logging.getLogger(__package__)  # the logger the single module had: curation.ingest.runner


def import_run(job_id: int, *, on_progress=None) -> ImportJob:
    job = ImportJob.objects.select_related("collection").get(pk=job_id)
    if job.finished:
        return job
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJob.Status.RUNNING, started_at=timezone.now(), rows_read=0, rows_imported=0,
        rows_skipped=0, rows_duplicate=0, images_created=0, captions_created=0, error="",
    )
    ImportIssue.objects.filter(job=job).delete()
    job.refresh_from_db()
    reader = {
        ImportJob.Kind.IMAGES: run_images,
        ImportJob.Kind.TSV: run_tsv,
        ImportJob.Kind.COCO: run_coco,
        ImportJob.Kind.COMMENTS: run_comments,
    }[job.kind]
    report = Report(job)
    try:
        reader(job, report, on_progress or (lambda job: None))
    except RowError as exc:  # the source as a whole is unreadable
        report.flush()
        return _fail(job, exc.message)
    except Exception as exc:
        log.exception("import %s failed", job.pk)
        report.flush()
        _fail(job, f"{type(exc).__name__}: {exc}")
        raise
    report.flush()
    _finalise_counts(job)
    return start_downloads(job)


def _fail(job: ImportJob, message: str) -> ImportJob:
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJob.Status.FAILED, error=message, finished_at=timezone.now()
    )
    job.refresh_from_db()
    return job


def _finalise_counts(job: ImportJob) -> None:
    """Counts from the rows themselves, so a resumed import reports what this job really created."""
    job.refresh_from_db()
    captions = Caption.objects.filter(import_job=job).count()
    imgs = Image.objects.filter(import_job=job).count()
    imported = captions if job.kind in (ImportJob.Kind.TSV, ImportJob.Kind.COMMENTS) else job.rows_imported
    ImportJob.objects.filter(pk=job.pk).update(
        captions_created=captions, images_created=imgs, rows_imported=imported,
        rows_duplicate=max(job.rows_read - job.rows_skipped - imported, 0),
    )
