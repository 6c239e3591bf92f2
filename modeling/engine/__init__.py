"""The training engine: one generic loop that every trainer (modeling/trainers/) runs under.

    runs.py         create_run (validated), enqueue, retry (also of a worker-lost run), cancel
    device.py       pick_device, describe_device, seed_everything, epoch_seed, is_oom
    progress.py     the run row's live fields and log (_Progress), or none (Quiet); the heartbeat and worker_lost
    checkpoints.py  checkpoints in storage: save, load, list
    schedule.py     the learning-rate schedule (constant, cosine with warm-up, the seed's step decay)
    loop.py         the epoch loop: batches, mixed precision, validation, OOM retry, early stopping, best epoch
    fit.py          fit_in_memory: the same loop without a run row or storage
    cv.py           k-fold cross-validation of small binary data sets
    driver.py       train(run_id): a run from start (or checkpoint) to a registered ModelVersion
    steps.py        the run's steps the driver and every DDP rank take: start, resume, evaluate, register
    ddp.py          the same run on several processes (DistributedDataParallel via torchrun, modeling/ddp_worker.py)

Out of memory: the epoch is restarted from its start with half the batch size, down to
``min_batch_size``; below that the run fails with a message.
"""
from __future__ import annotations

from .. import registry  # noqa: F401 - engine.registry, as before the split
from ..models import Kind, ModelVersion, TrainingRun  # noqa: F401
from ..registry import activate, active_version, load_version
from ..trainers.base import Prepared, Trainer, TrainingError  # noqa: F401
from .checkpoints import (  # noqa: F401
                          CHECKPOINT_DIR,
                          KEEP_CHECKPOINTS,
                          checkpoint_name,
                          cpu,
                          list_checkpoints,
                          load_checkpoint,
                          save_checkpoint,
                          state_bytes,
)
from .cv import cross_validate, folds_wanted, labelled_count  # noqa: F401
from .device import describe_device, epoch_seed, is_oom, pick_device, seed_everything
from .driver import MAX_ATTEMPTS, train  # noqa: F401
from .fit import fit_in_memory, setup_model  # noqa: F401
from .loop import POINTS_PER_EPOCH, LoopState, restore_best, run_epoch, run_epochs, validate  # noqa: F401
from .progress import (  # noqa: F401
                          PROGRESS_EVERY_S,
                          Cancelled,
                          Progress,
                          Quiet,
                          worker_lost,
)
from .runs import cancel, create_run, enqueue, retry, retryable

__all__ = ["train", "create_run", "enqueue", "retry", "retryable", "worker_lost", "cancel", "pick_device", "describe_device", "seed_everything",
           "epoch_seed", "is_oom", "fit_in_memory", "cross_validate", "list_checkpoints", "load_checkpoint",
           "save_checkpoint", "load_version", "active_version", "activate", "TrainingError", "Kind"]
