"""Generation jobs: captions of captioner versions made on a worker (queue ``gpu``), with their progress
on a GenerationJob row, and with ``eval_kind`` the human-evaluation campaign over them.

``job_create`` (the web process, the API, the CLI) checks everything it can without torch (the runs,
the kind, the name, the fluency version that will rerank) and stores a queued job; ``job_enqueue``
sends it after commit; ``job_run`` (the task, or the CLI inline) does the work.

Safe to run twice: a job is claimed with a conditional UPDATE (queued, or running with a stale
heartbeat after its worker died), captions already generated are kept (modeling.generate skips
their images), and the campaign is created in the same transaction that marks the job done.
"""
from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from captionlab import tasks

from .models import GenerationJob

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(minutes=10)  # a running job this long without a heartbeat lost its worker
HEARTBEAT_EVERY_S = 1.0


class GenerationError(Exception):
    """A job that cannot be made as asked; ``code`` and ``field`` say why and where."""

    def __init__(self, message: str, code: str = "invalid", field: str | None = None):
        super().__init__(message)
        self.message, self.code, self.field = message, code, field

    def __str__(self):
        return self.message


def job_create(*, runs, eval_kind: str = "", name: str = "", user=None, rerank: bool = False,
               beam_size: int | None = None, split: str | None = None, limit: int | None = None) -> GenerationJob:
    """A queued job (not started: see ``job_enqueue``). ``eval_kind`` "" generates captions only."""
    from annotation.models import Campaign
    from annotation.services import CampaignError

    from .generate import check_runs, resolve_reranker
    from .trainers.base import TrainingError

    name = (name or "").strip()
    if eval_kind and not name:
        raise GenerationError("Give the campaign a name.", field="name")
    if eval_kind and Campaign.objects.filter(name=name).exists():
        raise GenerationError(f"A campaign named {name!r} already exists.", code="duplicate", field="name")
    for value, label in ((beam_size, "beam size"), (limit, "limit")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise GenerationError(f"The {label} must be a whole number of at least 1.", field=label.replace(" ", "_"))
    try:
        versions = check_runs(runs, eval_kind or None)
        reranker = resolve_reranker(rerank)
    except CampaignError as exc:
        raise GenerationError(exc.message, exc.code, exc.field) from None
    except TrainingError as exc:  # NoFluencyModel: reranking asked with no fluency classifier active
        raise GenerationError(f"Rerank by fluency: {exc}", exc.code, "rerank") from None
    options = {"beam_size": beam_size, "split": split, "limit": limit, "rerank": reranker is not None,
               "model_versions": [v.pk for v in versions]}
    if reranker is not None:  # pinned now, so the job reranks with the version the person saw active
        from .captioning.provenance import version_entry

        options["fluency_version"] = version_entry(reranker, role="rerank")
    return GenerationJob.objects.create(name=name or _default_name(versions), eval_kind=eval_kind or "",
                                        runs=[v.run_id for v in versions], options=options, created_by=user)


def _default_name(versions) -> str:
    return f"Captions of run(s) {', '.join(str(v.run_id) for v in versions)}"


def job_enqueue(job: GenerationJob) -> None:
    """Send the job to its queue (``gpu``: the task ``modeling.generate_for_evaluation``) once the surrounding
    transaction commits."""
    transaction.on_commit(lambda: tasks.enqueue("modeling.generate_for_evaluation", job.pk))


def percent(job: GenerationJob) -> int:
    if job.status == GenerationJob.Status.DONE:
        return 100
    return int(100 * job.done / job.total) if job.total else 0


def _claim(job_id: int) -> bool:
    """Mark the job running unless another worker holds it (a fresh heartbeat); True when ours."""
    now = timezone.now()
    claimable = Q(status=GenerationJob.Status.QUEUED) | Q(status=GenerationJob.Status.RUNNING) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=now - STALE_AFTER))
    return GenerationJob.objects.filter(claimable, pk=job_id).update(
        status=GenerationJob.Status.RUNNING, heartbeat_at=now, done=0, error="") == 1


class _Progress:
    """Counts finished images onto the job row (at most about once a second) and echoes them."""

    def __init__(self, job: GenerationJob, echo=None):
        self.job, self.echo, self.last = job, echo, 0.0

    def start(self, total: int) -> None:
        GenerationJob.objects.filter(pk=self.job.pk).update(total=total,
                                                            started_at=Coalesce(F("started_at"), timezone.now()))
        self.job.total = total
        if self.echo:
            self.echo(f"Generating captions for {total} image(s).")

    def __call__(self, n: int) -> None:
        self.job.done += n
        now = time.monotonic()
        if now - self.last >= HEARTBEAT_EVERY_S or self.job.done >= self.job.total:
            self.last = now
            GenerationJob.objects.filter(pk=self.job.pk).update(done=self.job.done, heartbeat_at=timezone.now())
        if self.echo:
            self.echo(f"{self.job.done}/{self.job.total} images captioned.")


def job_run(job_id: int, echo=None) -> GenerationJob:
    """Run (or resume) a job to the end; errors are stored on it (status failed), never raised.
    ``echo`` (optional callable) receives progress lines, for the CLI."""
    job = GenerationJob.objects.get(pk=job_id)
    if job.status in (GenerationJob.Status.DONE, GenerationJob.Status.FAILED) or not _claim(job.pk):
        return job
    job.refresh_from_db()
    try:
        _run(job, _Progress(job, echo))
    except Exception as exc:
        # already generated stay (a new job for the same runs reuses them)
        message = getattr(exc, "message", None) or str(exc)
        if not _expected(exc):
            logger.exception("generation job %s failed", job.pk)
            message = f"{type(exc).__name__}: {exc}"
        _fail(job, message)
    job.refresh_from_db()
    return job


def _expected(exc) -> bool:
    from annotation.services import CampaignError

    from .trainers.base import TrainingError

    return isinstance(exc, (CampaignError, TrainingError, GenerationError))


def _run(job: GenerationJob, progress: _Progress) -> None:
    from . import generate

    options = job.options or {}
    versions = generate.check_runs(job.runs, job.eval_kind or None)
    reranker = generate.resolve_reranker(bool(options.get("rerank")), options.get("fluency_version"))
    split, limit = options.get("split"), options.get("limit")
    if job.eval_kind:
        split, limit = None, None  # an evaluation covers each version's whole evaluation split
    progress.start(sum(len(generate.caption_targets(v, split, limit)) for v in versions))
    beam_size = options.get("beam_size")
    if not job.eval_kind:
        for version in versions:
            generate.generate_captions(version, split=split, limit=limit, beam_size=beam_size,
                                       rerank=reranker is not None, fluency_version=reranker, progress=progress)
        _finish(job, None)
        return
    # Captions are committed chunk by chunk (the progress is visible meanwhile, a killed worker keeps
    # them); the campaign and the job's "done" commit together, so a re-run never makes a second one.
    per_version = generate.evaluation_captions(versions, reranker, beam_size=beam_size, progress=progress)
    with transaction.atomic():
        campaign = generate.evaluation_campaign_create(versions, job.eval_kind, per_version, user=job.created_by,
                                                       name=job.name, reranker=reranker)
        _finish(job, campaign)
    if progress.echo:
        progress.echo(f"Campaign {campaign} (#{campaign.pk}) created.")


def _finish(job, campaign) -> None:
    GenerationJob.objects.filter(pk=job.pk).update(
        status=GenerationJob.Status.DONE, campaign=campaign, done=F("total"), finished_at=timezone.now(),
        heartbeat_at=timezone.now())


def _fail(job, message: str) -> None:
    GenerationJob.objects.filter(pk=job.pk).update(status=GenerationJob.Status.FAILED, error=message[:5000],
                                                   finished_at=timezone.now())


__all__ = ["GenerationError", "job_create", "job_enqueue", "job_run", "percent"]
