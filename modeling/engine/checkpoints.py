"""Checkpoints in storage: one file per saved epoch under modeling/runs/<run>/, the newest
KEEP_CHECKPOINTS kept. A checkpoint holds everything the loop needs to continue exactly: weights,
optimizer, scaler, the epoch, the batch size after any out-of-memory halving, the history, the data
hash, and the best-validation bookkeeping (best epoch, its loss and its weights). The lr schedule's plan
rides in the optimizer's param groups (schedule.py), so the optimizer state resumes it too."""
from __future__ import annotations

import io

from .. import registry
from ..models import TrainingRun
from ..trainers.base import TrainingError

CHECKPOINT_DIR = "modeling/runs"
KEEP_CHECKPOINTS = 3


def checkpoint_name(run: TrainingRun, epoch: int) -> str:
    return f"{CHECKPOINT_DIR}/{run.pk}/checkpoint-epoch{epoch:03d}.pt"


def list_checkpoints(run: TrainingRun) -> list[str]:
    from django.core.files.storage import default_storage

    folder = f"{CHECKPOINT_DIR}/{run.pk}"
    try:
        _, files = default_storage.listdir(folder)
    except (FileNotFoundError, OSError, NotImplementedError):
        return [run.checkpoint] if run.checkpoint else []
    return sorted(f"{folder}/{name}" for name in files if name.endswith(".pt"))


def state_bytes(state) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def cpu(obj):
    """A copy of a (nested) state with every tensor on the CPU."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(cpu(v) for v in obj)
    return obj


def save_checkpoint(run, state, model, optimizer, scaler, data_hash) -> str:
    """Write the checkpoint of the epoch ``state.epoch`` (0-based, just finished; ``state`` is the loop's
    LoopState) and delete the older ones beyond KEEP_CHECKPOINTS. Returns its storage name."""
    import torch

    payload = {
        "model": cpu(model.state_dict()),
        "optimizer": cpu(optimizer.state_dict()),
        "scaler": scaler.state_dict() if scaler is not None and scaler.is_enabled() else {},
        "epoch": int(state.epoch),
        "batch_size": int(state.batch_size),
        "history": state.history,
        "data_hash": data_hash,
        "rng": {"torch": torch.get_rng_state()},
        "best": _best_payload(state),
    }
    name = registry.save_storage(checkpoint_name(run, state.epoch), state_bytes(payload))
    _prune(run, keep=name)
    return name


def _best_payload(state) -> dict:
    # When this very epoch is the best one its weights are "model" already: not stored twice.
    same = state.best_epoch == state.epoch + 1
    return {"epoch": state.best_epoch, "val_loss": state.best_val_loss, "stopped_early": bool(state.stopped_early),
            "model": None if same else state.best_state}


def _prune(run, keep: str) -> None:
    from django.core.files.storage import default_storage

    old = [n for n in list_checkpoints(run) if n != keep]
    for stale in old[:-(KEEP_CHECKPOINTS - 1)] if KEEP_CHECKPOINTS > 1 else old:
        try:
            default_storage.delete(stale)
        except OSError:
            pass


def load_checkpoint(name: str) -> dict:
    """The checkpoint's dict, read with weights_only=True; TrainingError when it is not one."""
    state = registry.load_state_bytes(registry.read_storage(name, "The checkpoint"), f"The checkpoint {name!r}")
    if not isinstance(state, dict) or "model" not in state or "epoch" not in state:
        raise TrainingError(f"The checkpoint {name!r} is not a training checkpoint (no model/epoch).",
                            code="bad_checkpoint")
    return state
