"""Embedding jobs: a collection's image and caption vectors by one model, then its FAISS indexes, on the ``gpu``
queue (the CPU where the worker has no GPU), with progress and a heartbeat on the EmbeddingJob row.

``job_create`` (page, API, CLI) checks the model and the collection and stores a queued job; ``job_enqueue``
sends it after commit to the runner an app above registered (``register_runner``: modeling's ready() registers
its ``gpu`` queue task, which calls ``job_run`` with the worker's torch threads); ``job_run`` (the task, or the
CLI inline) does the work. Safe to run twice: a job is
claimed with a conditional UPDATE (queued, or running with a stale heartbeat after its worker died), stored
vectors are skipped, and rows are inserted ignoring conflicts, so a killed worker resumes without duplicates.
"""
from __future__ import annotations

import logging
import resource
import time
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from .. import PackError

log = logging.getLogger(__name__)
STALE_AFTER = timedelta(minutes=2)  # a running job this long without a heartbeat lost its worker
HEARTBEAT_EVERY_S = 1.0
IMAGE_BLOCK = 512
CAPTION_BLOCK = 4096


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def job_create(*, collection, model=None, user=None):
    """A queued job for the collection; ``model`` is a PretrainedModel, a registered name, or None (the default
    image-text model). A job already queued or running for the same collection and model is returned as is."""
    import pack

    from ..models import EmbeddingJob, PretrainedModel

    if not isinstance(model, PretrainedModel):
        found = (pack.find_model(model, kind="clip") or pack.find_model(model, kind="text")) if model else None
        model = found or pack.get_model(model or None, kind="clip")
    active = EmbeddingJob.objects.filter(collection=collection, model=model,
                                         status__in=[EmbeddingJob.Status.QUEUED, EmbeddingJob.Status.RUNNING]).first()
    if active is not None:
        return active
    return EmbeddingJob.objects.create(collection=collection, model=model,
                                       created_by=user if getattr(user, "is_authenticated", False) else None)


_runner = None  # called with a job's id after commit: sends it to a worker (modeling.apps registers its task)


def register_runner(send) -> None:
    """``send(job_id)`` queues a job (the modeling app registers its ``modeling.embed_collection`` task)."""
    global _runner
    _runner = send


def job_enqueue(job) -> None:
    if _runner is None:
        raise PackError("No worker runs embedding jobs: the modeling app is not installed.", code="no_runner")
    send = _runner
    transaction.on_commit(lambda: send(job.pk))


def percent(job) -> int:
    if job.status == job.Status.DONE:
        return 100
    return int(100 * job.done / job.total) if job.total else 0


def is_stale(job) -> bool:
    """A running job whose worker stopped beating (killed, or the machine went away)."""
    return job.status == job.Status.RUNNING and (job.heartbeat_at is None
                                                 or job.heartbeat_at < timezone.now() - STALE_AFTER)


def _claim(job_id: int) -> bool:
    from ..models import EmbeddingJob

    now = timezone.now()
    claimable = Q(status=EmbeddingJob.Status.QUEUED) | Q(status=EmbeddingJob.Status.RUNNING) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=now - STALE_AFTER))
    return EmbeddingJob.objects.filter(claimable, pk=job_id).update(
        status=EmbeddingJob.Status.RUNNING, heartbeat_at=now, error="", started_at=now) == 1


class _Progress:
    """Counts finished items onto the job row (about once a second) and echoes them to a terminal."""

    def __init__(self, job, echo=None):
        self.job, self.echo, self.last = job, echo, 0.0

    def stage(self, name: str) -> None:
        from ..models import EmbeddingJob

        self.job.stage = name
        EmbeddingJob.objects.filter(pk=self.job.pk).update(stage=name, heartbeat_at=timezone.now())
        if self.echo:
            self.echo(f"{name}...")

    def __call__(self, n: int, failed: int = 0) -> None:
        from ..models import EmbeddingJob

        self.job.done += n
        self.job.failed += failed
        now = time.monotonic()
        if now - self.last >= HEARTBEAT_EVERY_S or self.job.done >= self.job.total:
            self.last = now
            EmbeddingJob.objects.filter(pk=self.job.pk).update(done=self.job.done, failed=self.job.failed,
                                                               heartbeat_at=timezone.now())
            if self.echo:
                self.echo(f"{self.job.done}/{self.job.total} embedded ({self.job.failed} failed to decode)")


def job_run(job_id: int, echo=None):
    """Run (or resume) a job to the end; errors are stored on it (status failed), never raised."""
    from ..models import EmbeddingJob

    job = EmbeddingJob.objects.select_related("model", "collection").get(pk=job_id)
    if job.status in (EmbeddingJob.Status.DONE, EmbeddingJob.Status.FAILED) or not _claim(job.pk):
        return job
    job.refresh_from_db()
    try:
        _run(job, _Progress(job, echo))
    except Exception as exc:
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, PackError):
            log.exception("embedding job %s failed", job.pk)
        EmbeddingJob.objects.filter(pk=job.pk).update(status=EmbeddingJob.Status.FAILED, error=message[:5000],
                                                      finished_at=timezone.now())
    job.refresh_from_db()
    return job


def _run(job, progress: _Progress) -> None:
    import pack
    from curation.models import Caption, Image

    from ..models import EmbeddingJob
    from .index import index_build
    from .store import image_vectors, text_vectors

    started, cpu = time.monotonic(), _cpu_seconds()
    model, collection = job.model, job.collection
    encoder = pack.load(model)
    image_ids = list(Image.objects.filter(collection=collection).order_by("pk").values_list("pk", flat=True)) \
        if model.kind == "clip" else []
    captions = Caption.objects.filter(image__collection=collection).order_by("pk")
    job.total, job.done, job.failed = len(image_ids) + captions.count(), 0, 0
    EmbeddingJob.objects.filter(pk=job.pk).update(total=job.total, done=0, failed=0, device=encoder.device)
    errors = 0
    if image_ids:
        progress.stage("images")
        for start in range(0, len(image_ids), IMAGE_BLOCK):
            block = image_ids[start:start + IMAGE_BLOCK]
            _, failed = image_vectors(model, block, encoder=encoder, progress=lambda n: progress(n))
            errors += len(failed)
            progress(0, len(failed))
    progress.stage("captions")
    block = []
    for text in captions.values_list("text", flat=True).iterator(chunk_size=CAPTION_BLOCK):
        block.append(text)
        if len(block) >= CAPTION_BLOCK:
            text_vectors(model, block, encoder=encoder)
            progress(len(block))
            block = []
    if block:
        text_vectors(model, block, encoder=encoder)
        progress(len(block))
    progress.stage("index")
    built = {}
    for target in (("image", "caption") if image_ids else ("caption",)):
        try:
            row = index_build(collection=collection, model=model, target=target)
            built[target] = {"count": row.count, "type": row.index_type}
        except PackError as exc:
            if exc.code != "no_embeddings":
                raise
    seconds, cpu = time.monotonic() - started, _cpu_seconds() - cpu
    summary = {"images": len(image_ids), "undecodable": errors, "captions": job.total - len(image_ids),
               "indexes": built, "seconds": round(seconds, 2), "device": encoder.device,
               "cpu_ms_per_item": round(1000 * cpu / max(1, job.total), 2), "model": model.key}
    EmbeddingJob.objects.filter(pk=job.pk).update(status=EmbeddingJob.Status.DONE, done=job.total, stage="",
                                                  summary=summary, finished_at=timezone.now(),
                                                  heartbeat_at=timezone.now())
    if progress.echo:
        progress.echo(f"Done in {seconds:.1f} s: {summary}")
