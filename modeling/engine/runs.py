"""A run's life outside the worker: create (validated), enqueue, retry, cancel."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from captionlab import tasks

from ..captioning.references import check_release_references
from ..models import Kind, TrainingRun
from ..trainers import get_trainer
from ..trainers.base import TrainingError
from .progress import worker_lost
from .schedule import check as check_schedule

# config key -> smallest allowed whole number
WHOLE_NUMBERS = {"epochs": 1, "batch_size": 1, "min_batch_size": 1, "checkpoint_every": 1,
                 "early_stopping_patience": 0, "cv_folds": 0, "cv_below": 0, "ddp_processes": 0}


def create_run(trainer_name: str, config: dict | None = None, *, release=None, campaign=None, user=None,
               name: str = "") -> TrainingRun:
    """Validate and store a queued run (does not start it: see ``enqueue``).

    Raises TrainingError (code bad_config) naming the first bad setting, or (code own_outputs) for a
    captioner whose release holds its own outputs as test references; nothing is stored then."""
    trainer = get_trainer(trainer_name)
    config = dict(config or {})
    config["trainer"] = trainer.name
    merged = trainer.config(config)
    _check_config(merged)
    if trainer.kind == Kind.CAPTIONER:
        check_release_references(release, trainer.name)
    return TrainingRun.objects.create(
        name=name[:200], kind=trainer.kind, config=config, release=release, campaign=campaign,
        created_by=user, epochs=int(merged["epochs"]))


def _check_config(merged: dict) -> None:
    device = str(merged.get("device", "auto"))
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise TrainingError(f"Unknown device {device!r}: use auto, cpu or cuda.", code="bad_config")
    for key, floor in WHOLE_NUMBERS.items():
        if key not in merged:
            continue
        try:
            if int(merged[key]) < floor:
                raise ValueError
        except (TypeError, ValueError):
            raise TrainingError(f"{key} must be a whole number of at least {floor}.", code="bad_config") from None
    try:
        int(merged["seed"])
        if not float(merged["lr"]) > 0:
            raise ValueError
    except (TypeError, ValueError):
        raise TrainingError("seed must be a whole number and lr a positive number.", code="bad_config") from None
    if not isinstance(merged.get("select_best", True), bool):
        raise TrainingError("select_best must be true or false.", code="bad_config")
    check_schedule(merged)


def enqueue(run: TrainingRun) -> None:
    """Send the run to the ``gpu`` queue (the task ``modeling.train``) once the surrounding transaction commits."""
    transaction.on_commit(lambda: tasks.enqueue("modeling.train", run.pk))


def retryable(run: TrainingRun) -> bool:
    """Failed, cancelled, or running on a worker that stopped beating (progress.worker_lost)."""
    return run.status in (TrainingRun.Status.FAILED, TrainingRun.Status.CANCELLED) or worker_lost(run)


def retry(run: TrainingRun) -> TrainingRun:
    """Queue a failed, cancelled or worker-lost run again; it continues from its last checkpoint."""
    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.QUEUED, error="", attempts=0,
                                                  finished_at=None, heartbeat_at=None)
    run.refresh_from_db()
    enqueue(run)
    return run


def cancel(run: TrainingRun) -> TrainingRun:
    """Ask a run to stop: the loop checks between progress updates."""
    if not run.finished:
        TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.CANCELLED, finished_at=timezone.now())
    run.refresh_from_db()
    return run
