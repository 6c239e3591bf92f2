"""Writes of the curation app, called by views, API views, commands and tasks alike."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction

from .errors import IngestError
from .models import Collection, ImportJob

UPLOAD_SUFFIXES = {
    ImportJob.Kind.IMAGES: (".zip",),
    ImportJob.Kind.TSV: (".tsv", ".txt", ".csv"),
    ImportJob.Kind.COCO: (".json",),
    ImportJob.Kind.COMMENTS: (".tsv", ".txt", ".csv"),
}


def collection_create(*, name: str, user=None, **fields) -> Collection:
    name = (name or "").strip()
    if not name:
        raise IngestError("A collection needs a name.", code="invalid")
    if Collection.objects.filter(name=name).exists():
        raise IngestError(f"A collection named {name!r} already exists.", code="duplicate")
    return Collection.objects.create(name=name, created_by=user, **fields)


def import_create(
    *,
    collection: Collection,
    kind: str,
    upload=None,
    source_path: str | None = None,
    source_name: str | None = None,
    options: dict | None = None,
    user=None,
    enqueue: bool = True,
) -> ImportJob:
    """Record an import of an uploaded file (web, API) or of a server path (commands) and queue it.

    ``upload`` is a Django File (e.g. an UploadedFile); it is copied to storage so a worker on
    another machine can read it. ``source_path`` is only for trusted callers (management commands):
    a folder of images, or a file on this machine.
    """
    if kind not in ImportJob.Kind.values:
        raise IngestError(f"Unknown import kind {kind!r}; choose one of {', '.join(ImportJob.Kind.values)}.")
    if (upload is None) == (source_path is None):
        raise IngestError("Give either an uploaded file or a server path, not both or neither.")
    if upload is not None:
        name = Path(upload.name or "").name
        if not name.lower().endswith(UPLOAD_SUFFIXES[kind]):
            raise IngestError(
                f"{name!r} does not look like a {ImportJob.Kind(kind).label} file "
                f"(expected {', '.join(UPLOAD_SUFFIXES[kind])}).",
                code="bad_file_type",
            )
        if upload.size is not None and upload.size > settings.INGEST_MAX_UPLOAD_BYTES:
            raise IngestError(
                f"{name!r} is {upload.size} bytes; the limit is {settings.INGEST_MAX_UPLOAD_BYTES}.",
                code="too_large",
            )
        if upload.size == 0:
            raise IngestError(f"{name!r} is empty.", code="empty")
    else:
        path = Path(source_path)
        if not path.exists():
            raise IngestError(f"{source_path} does not exist.", code="not_found")
        if kind != ImportJob.Kind.IMAGES and not path.is_file():
            raise IngestError(f"{source_path} is not a file.", code="not_found")
        name = path.name
    job = ImportJob(
        collection=collection,
        kind=kind,
        source_name=(source_name or name)[:300],
        source_path=str(Path(source_path).resolve()) if source_path else "",
        options=options or {},
        created_by=user if (user and user.is_authenticated) else None,
    )
    if upload is not None:
        job.upload.save(name, upload, save=False)
    job.save()
    if enqueue:
        from .tasks import run_import

        transaction.on_commit(lambda: run_import.delay(job.pk))
    return job
