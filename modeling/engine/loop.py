"""The epoch loop shared by a run (``driver.train``) and ``fit_in_memory``: batches, loss, optimizer
step (mixed precision on CUDA; the lr of schedule.py set before each step), validation, the
out-of-memory retry with half the batch, early stopping and the best-validation weights. It knows
nothing of run rows or storage: the run's driver hooks its checkpoint in through ``after_epoch``, and
progress goes to a ``_Progress`` or a ``Quiet``.

Every epoch seeds its batch order and dropout from (seed, epoch), so an epoch trained again after a
resume, or in another process, draws exactly what it drew the first time.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from .. import registry
from ..trainers.base import TrainingError
from .checkpoints import cpu as _cpu
from .checkpoints import state_bytes
from .device import amp_dtype, epoch_seed, is_oom
from .progress import Cancelled
from .schedule import apply as apply_schedule
from .schedule import current_lr, is_constant
from .schedule import start as start_schedule

POINTS_PER_EPOCH = 20  # loss points per epoch in the history (the live curve)


@dataclass
class LoopState:
    """Where the loop stands. ``epoch``: the epoch being trained (0-based); once the loop returns, the
    number of epochs trained. ``best_epoch`` is 1-based like the history's epoch ends; ``best_state`` is a
    CPU copy of that epoch's weights (kept only with select_best)."""

    batch_size: int
    epoch: int = 0
    history: list = field(default_factory=list)
    global_step: int = 0
    steps_per_epoch: int = 0
    best_val_loss: float | None = None
    best_epoch: int | None = None
    best_state: dict | None = None
    stopped_early: bool = False


class EpochResult(NamedTuple):
    loss: float
    samples: int
    seconds: float
    steps: int
    val_loss: float | None
    lr: float | None = None  # the lr of the epoch's last optimizer step


def select_best(config: dict) -> bool:
    return bool(config.get("select_best", True))


def patience(config: dict) -> int:
    return max(0, int(config.get("early_stopping_patience") or 0))


def _count(iterable):
    try:
        return len(iterable)
    except TypeError:
        return 0


def _steps_in_epoch(trainer, batches, split_data, cfg, epoch, seed, known: int) -> tuple[int, bool]:
    """(the epoch's number of batches, whether a dry pass counted them). A list knows its length; a
    generator's count is the previous epoch's, the trainer's ``count_batches``, or (first epoch of a run)
    a dry pass over a twin generator, so that the loss points and the lr schedule know where in the
    epoch they are instead of piling up at its end."""
    import torch

    n = _count(batches) or known
    if n:
        return n, False
    counter = getattr(trainer, "count_batches", None)
    if counter is not None:
        n = int(counter(split_data, cfg) or 0)
        if n:
            return n, False
    twin = torch.Generator().manual_seed(epoch_seed(seed, epoch))
    return sum(1 for _ in trainer.batches(split_data, cfg, epoch, twin, True)), True


def _place_points(history: list, mark: int, epoch: int, first_step: int, steps: int) -> None:
    """Put the epoch's loss points (history[mark:]) at epoch + their share of its actual steps, now that
    the count is certain (a strategy's random mask or an estimate may have been off by a few)."""
    for point in history[mark:]:
        point["epoch"] = round(epoch + min((point["step"] - first_step) / max(steps, 1), 1.0), 4)


def _step(loss, model, optimizer, scaler, grad_clip):
    import torch

    optimizer.zero_grad(set_to_none=True)
    if scaler is not None and scaler.is_enabled():
        scaler.scale(loss).backward()
        if grad_clip:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()


def run_epoch(trainer, model, optimizer, scaler, prepared, config, device, epoch, seed, batch_size,
               progress, history, global_step, steps_per_epoch):
    """One training epoch; appends about POINTS_PER_EPOCH loss points to ``history``.
    Returns (mean_loss, samples, seconds, steps). Raises Cancelled when progress says so."""
    import torch

    use_amp = device.type == "cuda" and bool(config.get("amp", True))
    cfg = dict(config, batch_size=batch_size)
    torch.manual_seed(epoch_seed(seed, epoch))
    generator = torch.Generator().manual_seed(epoch_seed(seed, epoch))
    model.train()
    batches = trainer.batches(prepared.train, cfg, epoch, generator, True)
    n_steps, dry = _steps_in_epoch(trainer, batches, prepared.train, cfg, epoch, seed, steps_per_epoch)
    if dry:
        torch.manual_seed(epoch_seed(seed, epoch))  # the dry pass may have drawn from the global generator
    scheduled = not is_constant(config)
    if scheduled:
        start_schedule(optimizer, config)
    every = max(1, (n_steps or POINTS_PER_EPOCH) // POINTS_PER_EPOCH)
    started, mark = time.perf_counter(), len(history)
    total_loss, total_n, window_loss, window_n, step = 0.0, 0, 0.0, 0, 0
    grad_clip = float(config.get("grad_clip") or 0)
    lr = current_lr(optimizer)
    pending: list = []  # (loss tensor, n) since the last point: read together, one GPU sync per point, not per step
    for batch in batches:
        if scheduled:
            lr = apply_schedule(optimizer, global_step + step, epoch + min(step / max(n_steps, 1), 1.0), epoch)
        with torch.autocast(device_type=device.type, dtype=amp_dtype(device), enabled=use_amp):
            loss, n = trainer.loss(model, batch, device, cfg)
        _step(loss, model, optimizer, scaler, grad_clip)
        pending.append((loss.detach(), int(n)))
        step += 1
        if step % every == 0:
            window_loss, window_n = _read_losses(pending, epoch, step)
            total_loss, total_n = total_loss + window_loss, total_n + window_n
            pending = []
            elapsed = max(time.perf_counter() - started, 1e-9)
            point = {"epoch": round(epoch + step / max(n_steps, step), 4), "step": global_step + step,
                     "loss": window_loss / max(window_n, 1), "lr": lr}
            history.append(point)
            progress.set(step=step, loss=point["loss"], samples_per_second=total_n / elapsed, history=history)
            if not progress.flush():
                raise Cancelled()
    if pending:
        window_loss, window_n = _read_losses(pending, epoch, step)
        total_loss, total_n = total_loss + window_loss, total_n + window_n
    seconds = max(time.perf_counter() - started, 1e-9)
    _place_points(history, mark, epoch, global_step, step)
    return total_loss / max(total_n, 1), total_n, seconds, step


def _read_losses(pending: list, epoch: int, step: int) -> tuple[float, int]:
    """(sum of loss x samples, samples) of the steps since the last point, copied from the device at once; a loss
    that is not finite stops the run, naming the step where it first appeared."""
    import torch

    values = torch.stack([loss.float() for loss, _ in pending]).cpu().tolist()
    first = step - len(pending) + 1
    for offset, value in enumerate(values):
        if not math.isfinite(value):
            raise TrainingError(f"The loss became {value} at epoch {epoch + 1}, step {first + offset}: "
                                "lower the learning rate.", code="diverged")
    return sum(v * n for v, (_, n) in zip(values, pending)), sum(n for _, n in pending)


def validate(trainer, model, prepared, config, device, epoch, seed, batch_size):
    """Mean loss over the validation split (None without one), in eval mode, without gradients."""
    import torch

    if not prepared.val:
        return None
    use_amp = device.type == "cuda" and bool(config.get("amp", True))
    cfg = dict(config, batch_size=batch_size)
    generator = torch.Generator().manual_seed(epoch_seed(seed, epoch) + 1)
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in trainer.batches(prepared.val, cfg, epoch, generator, False):
            with torch.autocast(device_type=device.type, dtype=amp_dtype(device), enabled=use_amp):
                loss, n = trainer.loss(model, batch, device, cfg)
            total += float(loss) * int(n)
            count += int(n)
    model.train()
    return total / count if count else None


def run_epochs(trainer, model, optimizer, scaler, prepared, config, device, state: LoopState, progress,
               after_epoch=None) -> LoopState:
    """Train from ``state.epoch`` to config["epochs"], or until early stopping. ``after_epoch(state)`` is
    called after each epoch's bookkeeping (the run writes its checkpoint there), before the progress
    flush that notices a cancellation."""
    epochs = int(config["epochs"])
    if patience(config) and not prepared.val and state.epoch < epochs:
        progress.log("early_stopping_patience is set but there is no validation split: all epochs are trained.")
    while state.epoch < epochs and not state.stopped_early:
        result = _attempt_epoch(trainer, model, optimizer, scaler, prepared, config, device, state, progress)
        if result is None:
            continue  # out of memory: the same epoch again with half the batch
        _record(state, result, model, config)
        if after_epoch:
            after_epoch(state)
        _log_epoch(progress, state, result, epochs, config)
        if not progress.flush(force=True):
            raise Cancelled()
        state.epoch += 1
    return state


def _attempt_epoch(trainer, model, optimizer, scaler, prepared, config, device, state, progress):
    """Train and validate one epoch; on out of memory restore the weights and optimizer of the epoch's
    start, halve the batch size and return None (TrainingError below ``min_batch_size``)."""
    import torch

    seed, floor = int(config.get("seed", 0)), max(1, int(config.get("min_batch_size", 1)))
    snapshot = state_bytes({"model": _cpu(model.state_dict()), "optimizer": _cpu(optimizer.state_dict())})
    mark = len(state.history)
    progress.set(epoch=state.epoch, step=0)
    try:
        loss, samples, seconds, steps = run_epoch(
            trainer, model, optimizer, scaler, prepared, config, device, state.epoch, seed, state.batch_size,
            progress, state.history, state.global_step, state.steps_per_epoch)
        val_loss = validate(trainer, model, prepared, config, device, state.epoch, seed, state.batch_size)
    except (Cancelled, TrainingError):
        raise
    except Exception as exc:
        if not is_oom(exc):
            raise
        del exc
        if device.type == "cuda":
            torch.cuda.empty_cache()
        smaller = state.batch_size // 2
        if smaller < floor:
            raise TrainingError(f"Out of memory at batch size {state.batch_size} (epoch {state.epoch + 1}) and the "
                                f"floor is {floor}: use a smaller model or a bigger GPU.",
                                code="out_of_memory") from None
        progress.log(f"Out of memory at batch size {state.batch_size}; retrying epoch {state.epoch + 1} "
                     f"with {smaller}.")
        state.batch_size = smaller
        state.steps_per_epoch = 0  # counted again at the new batch size
        saved = registry.load_state_bytes(snapshot, "the epoch snapshot")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        del state.history[mark:]
        return None
    return EpochResult(loss, samples, seconds, steps, val_loss, current_lr(optimizer))


def _record(state: LoopState, result: EpochResult, model, config) -> None:
    """The epoch's end point in the history, the best epoch so far (its weights copied with select_best)
    and the early-stopping decision."""
    done = state.epoch + 1
    state.steps_per_epoch = result.steps
    state.global_step += result.steps
    point = {"epoch": done, "step": state.global_step, "loss": result.loss, "val_loss": result.val_loss,
             "samples_per_s": result.samples / result.seconds, "batch_size": state.batch_size, "lr": result.lr,
             "end": True}
    state.history.append(point)
    val = result.val_loss
    if val is not None and math.isfinite(val) and (state.best_val_loss is None or val < state.best_val_loss):
        state.best_val_loss, state.best_epoch = val, done
        state.best_state = _cpu(model.state_dict()) if select_best(config) else None
    mark_best(state.history, state.best_epoch)
    wait = patience(config)
    if wait and state.best_epoch is not None and done - state.best_epoch >= wait and done < int(config["epochs"]):
        state.stopped_early = True
        point["stopped_early"] = True


def mark_best(history: list[dict], best_epoch: int | None) -> None:
    """Flag the best epoch's end point (and only it) with "best": True, for the loss chart."""
    for h in history:
        if h.get("end"):
            if h["epoch"] == best_epoch:
                h["best"] = True
            else:
                h.pop("best", None)


def _log_epoch(progress, state, result, epochs, config) -> None:
    rate = result.samples / result.seconds
    progress.set(epoch=state.epoch + 1, step=result.steps, steps_per_epoch=result.steps, loss=result.loss,
                 samples_per_second=rate, history=state.history)
    val = f", val {result.val_loss:.4f}" if result.val_loss is not None else ""
    progress.log(f"Epoch {state.epoch + 1}/{epochs}: loss {result.loss:.4f}{val}, {rate:.1f} samples/s.")
    if state.stopped_early:
        progress.log(f"Stopped early after epoch {state.epoch + 1}: the validation loss has not improved since "
                     f"epoch {state.best_epoch} ({state.best_val_loss:.4f}; patience {patience(config)}).")


def restore_best(model, state: LoopState, config, progress) -> bool:
    """With select_best, load the best epoch's weights into ``model`` unless the last epoch is the best.
    Returns whether the weights changed."""
    if not select_best(config) or state.best_state is None or state.best_epoch in (None, state.epoch):
        return False
    registry.load_state_dict_into(model, state.best_state, "The best epoch's weights")
    progress.log(f"Restored the weights of epoch {state.best_epoch}, the lowest validation loss "
                 f"({state.best_val_loss:.4f}).")
    return True
