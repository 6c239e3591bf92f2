"""The run driver: ``train(run_id)`` runs (or resumes) one training run to the end.

It picks the device, seeds everything, prepares the data, runs the shared epoch loop (loop.py) with a
checkpoint every ``checkpoint_every`` epochs, restores the best-validation weights, evaluates (and
cross-validates small data sets, cv.py), judges the model against the majority class, saves the artifact
and registers a ModelVersion.

Resuming: a run whose worker was killed is still "running" with a checkpoint; the task is delivered
again (acks_late) and ``train`` continues from that checkpoint, best epoch and early stop included, so it
ends with the weights and metrics of a run that was never interrupted.
"""
from __future__ import annotations

import logging

from ..models import TrainingRun
from ..threads import describe as describe_threads
from ..threads import run_threads, torch_threads
from ..trainers import get_trainer
from ..trainers.base import Prepared, Trainer, TrainingError
from .checkpoints import save_checkpoint
from .ddp import launch, processes
from .device import pick_device, seed_everything
from .fit import setup_model
from .loop import LoopState, restore_best, run_epochs
from .progress import Cancelled, Progress, heartbeat
from .steps import (
    checkpoint_due,
    evaluate_model,
    fail_run,
    log_data,
    mark_started,
    register_model,
    resume_from_checkpoint,
)

logger = logging.getLogger("modeling.engine")

MAX_ATTEMPTS = 5


def train(run_id: int, echo=None) -> TrainingRun:
    """Run (or resume) one training run to the end. Errors are stored on the run (status failed).

    ``echo`` (optional callable) receives each log line, for the CLI."""
    run = TrainingRun.objects.get(pk=run_id)
    if run.finished:
        return run
    TrainingRun.objects.filter(pk=run.pk).update(attempts=run.attempts + 1)
    run.attempts += 1
    progress = Progress(run, echo)
    try:
        if run.attempts > MAX_ATTEMPTS:
            raise TrainingError(f"Gave up after {MAX_ATTEMPTS} attempts (the worker kept stopping).",
                                code="too_many_attempts")
        with heartbeat(run.pk):
            _train(run, progress)
    except Cancelled:
        progress.log("Cancelled.")
        progress.flush(force=True)
    except TrainingError as exc:
        fail_run(run, progress, str(exc))
    except Exception as exc:
        fail_run(run, progress, f"{type(exc).__name__}: {exc}")
        logger.exception("training run %s failed", run.pk)
    run.refresh_from_db()
    return run


def _train(run: TrainingRun, progress: Progress) -> None:
    trainer: Trainer = get_trainer((run.config or {}).get("trainer", ""))
    config = trainer.config(run.config)
    n = processes(config)
    if n > 1:  # the ranks run the rest of the run's steps in their own processes (ddp.py)
        return launch(run, trainer, config, progress, n)
    with torch_threads(run_threads(config)):
        progress.log(f"{describe_threads(config)}.")
        _train_with(run, progress, trainer, config)


def _train_with(run: TrainingRun, progress: Progress, trainer: Trainer, config: dict) -> None:
    device = pick_device(str(config.get("device", "auto")))
    seed = int(config.get("seed", 0))
    mark_started(run, progress, trainer, config, device)

    seed_everything(seed)
    prepared: Prepared = trainer.prepare(run)
    log_data(progress, prepared)

    seed_everything(seed)
    model, optimizer, scaler = setup_model(trainer, config, prepared.info, device)
    state = LoopState(batch_size=int(config["batch_size"]), steps_per_epoch=run.steps_per_epoch or 0)
    if run.checkpoint:
        resume_from_checkpoint(run, state, model, optimizer, scaler, prepared, config, progress)

    def checkpoint(s: LoopState) -> None:
        if checkpoint_due(s, config):
            progress.set(checkpoint=save_checkpoint(run, s, model, optimizer, scaler, prepared.data_hash))

    run_epochs(trainer, model, optimizer, scaler, prepared, config, device, state, progress, after_epoch=checkpoint)
    restore_best(model, state, config, progress)

    progress.set(status=TrainingRun.Status.EVALUATING)
    progress.flush(force=True)
    metrics = evaluate_model(trainer, model, prepared, config, device, state, progress)
    register_model(run, trainer, model, prepared, config, device, metrics, progress)
