"""Writes of the curation app, called by views, API views, commands and tasks alike."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction

from captionlab import tasks

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
    unknown_images = (options or {}).get("unknown_images")
    if unknown_images is not None and (kind != ImportJob.Kind.COMMENTS or unknown_images not in ("placeholder", "skip")):
        raise IngestError("options.unknown_images applies to comment dumps and is 'placeholder' or 'skip'.",
                          code="bad_option")
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
        transaction.on_commit(lambda: tasks.enqueue("curation.run_import", job.pk))
    return job


def pipeline_save(*, name: str, steps, description: str = "", pipeline=None, user=None):
    """Create or update a pipeline after checking every step and parameter."""
    from .models import Pipeline
    from .pipeline.executor import PipelineError, validate_steps

    name = (name or "").strip()
    if not name:
        raise IngestError("A pipeline needs a name.")
    try:
        validate_steps(steps)
    except PipelineError as exc:
        raise IngestError(exc.message, code="invalid_pipeline") from None
    if Pipeline.objects.filter(name=name).exclude(pk=getattr(pipeline, "pk", None)).exists():
        raise IngestError(f"A pipeline named {name!r} already exists.", code="duplicate")
    pipeline = pipeline or Pipeline(created_by=user)
    pipeline.name, pipeline.steps, pipeline.description = name, steps, description
    pipeline.save()
    return pipeline


def run_create(*, collection: Collection, pipeline, user=None, enqueue: bool = True):
    """Snapshot the pipeline (steps, versions, parameters) and queue a run over the collection."""
    from .models import FilterRun
    from .pipeline.executor import PipelineError, library_versions, validate_steps

    try:
        snapshot = validate_steps(pipeline.steps)
    except PipelineError as exc:
        raise IngestError(exc.message, code="invalid_pipeline") from None
    run = FilterRun.objects.create(
        collection=collection, pipeline=pipeline, snapshot=snapshot, versions=library_versions(),
        created_by=user if (user and user.is_authenticated) else None,
    )
    if enqueue:
        transaction.on_commit(lambda: tasks.enqueue("curation.filter_start", run.pk))
    return run


def decision_override(*, decision, outcome: str, note: str = "", user=None):
    """A curator's override of one decision, kept with its history; the run's funnel is recounted."""
    from .models import FilterDecision, Review
    from .pipeline.executor.funnel import compute_funnel, funnel_lock

    if outcome not in FilterDecision.Outcome.values:
        raise IngestError(f"outcome must be one of {FilterDecision.Outcome.values}")
    with funnel_lock(decision.run_id):  # the review and the recount that includes it commit together
        Review.objects.create(decision=decision, outcome=outcome, note=note, user=user)
        FilterDecision.objects.filter(pk=decision.pk).update(override="" if outcome == decision.outcome else outcome)
        run = decision.run
        run.funnel = compute_funnel(run)
        run.save(update_fields=["funnel"])
        _reconcile_on_commit([decision])
    decision.refresh_from_db()
    return decision


RECONCILE_IMAGES = 2000  # images per reconcile task


def _reconcile_on_commit(decisions) -> None:
    """An override in a finished run changes what reached the steps after it: ``executor.reconcile``
    brings their decisions in line, on the filters queue once this commits."""
    from .models import FilterRun

    runs = FilterRun.objects.only("status", "snapshot").in_bulk({d.run_id for d in decisions})
    by_run: dict[int, set[int]] = {}
    for d in decisions:
        run = runs[d.run_id]
        if run.status == FilterRun.Status.DONE and d.step + 1 < len(run.snapshot):
            by_run.setdefault(d.run_id, set()).add(d.image_id)
    for run_id, image_ids in by_run.items():
        ordered = sorted(image_ids)
        for start in range(0, len(ordered), RECONCILE_IMAGES):  # a bulk override: tasks of a chunk's size
            batch = ordered[start:start + RECONCILE_IMAGES]
            transaction.on_commit(lambda r=run_id, i=batch: tasks.enqueue("curation.filter_reconcile", r, i))


def decisions_override(*, decisions, outcome: str, note: str = "", user=None) -> int:
    """Bulk override (one Review per decision), then one recount."""
    from .models import FilterDecision, Review
    from .pipeline.executor.funnel import compute_funnel, funnel_lock

    if outcome not in FilterDecision.Outcome.values:
        raise IngestError(f"outcome must be one of {FilterDecision.Outcome.values}")
    decisions = list(decisions)
    with funnel_lock(*(d.run_id for d in decisions)):
        Review.objects.bulk_create([Review(decision=d, outcome=outcome, note=note, user=user) for d in decisions])
        # Two statements, not one per decision: an override equal to the filter's outcome clears it.
        FilterDecision.objects.filter(pk__in=[d.pk for d in decisions if d.outcome == outcome]).update(override="")
        FilterDecision.objects.filter(pk__in=[d.pk for d in decisions if d.outcome != outcome]).update(override=outcome)
        for run in {d.run_id: d.run for d in decisions}.values():
            run.funnel = compute_funnel(run)
            run.save(update_fields=["funnel"])
        _reconcile_on_commit(decisions)
    return len(decisions)
