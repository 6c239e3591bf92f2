"""The training engine: one generic loop that every trainer (modeling/trainers/) runs under.

``train(run_id)`` picks the device, seeds everything, runs the epochs with mixed precision on CUDA,
writes live progress to the TrainingRun row (at most about once a second), saves a checkpoint to
storage after every epoch, and at the end evaluates, saves the artifact and registers a ModelVersion.

Resuming: a run whose worker was killed is still "running" with a checkpoint; the task is delivered
again (acks_late) and ``train`` continues from that checkpoint. Batch order and dropout are seeded from
(seed, epoch), so a resumed run ends with the same weights as one that was never interrupted.

Out of memory: the epoch is restarted from its start with half the batch size, down to
``min_batch_size``; below that the run fails with a message.
"""
from __future__ import annotations

import io
import logging
import math
import random
import time

from django.db import transaction
from django.utils import timezone

from . import registry
from .models import Kind, ModelVersion, TrainingRun
from .registry import activate, active_version, load_version  # noqa: F401 - part of the engine's API
from .trainers import get_trainer
from .trainers.base import Prepared, Trainer, TrainingError

logger = logging.getLogger(__name__)

PROGRESS_EVERY_S = 1.0
POINTS_PER_EPOCH = 20  # loss points per epoch in the history (the live curve)
CHECKPOINT_DIR = "modeling/runs"
KEEP_CHECKPOINTS = 3
MAX_ATTEMPTS = 5


# --- Run creation -------------------------------------------------------------------------------------


def create_run(trainer_name: str, config: dict | None = None, *, release=None, campaign=None, user=None,
               name: str = "") -> TrainingRun:
    """Validate and store a queued run (does not start it: see ``enqueue``)."""
    trainer = get_trainer(trainer_name)
    config = dict(config or {})
    config["trainer"] = trainer.name
    merged = trainer.config(config)
    device = str(merged.get("device", "auto"))
    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise TrainingError(f"Unknown device {device!r}: use auto, cpu or cuda.", code="bad_config")
    for key in ("epochs", "batch_size", "min_batch_size"):
        try:
            if int(merged[key]) < 1:
                raise ValueError
        except (TypeError, ValueError):
            raise TrainingError(f"{key} must be a whole number of at least 1.", code="bad_config") from None
    try:
        int(merged["seed"])
        if not float(merged["lr"]) > 0:
            raise ValueError
    except (TypeError, ValueError):
        raise TrainingError("seed must be a whole number and lr a positive number.", code="bad_config") from None
    return TrainingRun.objects.create(
        name=name[:200], kind=trainer.kind, config=config, release=release, campaign=campaign,
        created_by=user, epochs=int(merged["epochs"]))


def enqueue(run: TrainingRun) -> None:
    """Send the run to the ``gpu`` queue once the surrounding transaction commits."""
    from .tasks import train as train_task

    transaction.on_commit(lambda: train_task.delay(run.pk))


def retry(run: TrainingRun) -> TrainingRun:
    """Queue a failed or cancelled run again; it continues from its last checkpoint."""
    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.QUEUED, error="", attempts=0,
                                                  finished_at=None)
    run.refresh_from_db()
    enqueue(run)
    return run


def cancel(run: TrainingRun) -> TrainingRun:
    """Ask a run to stop: the loop checks between progress updates."""
    if not run.finished:
        TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.CANCELLED, finished_at=timezone.now())
    run.refresh_from_db()
    return run


# --- Device and seeds ---------------------------------------------------------------------------------


def pick_device(requested: str = "auto"):
    import torch

    requested = (requested or "auto").strip().lower()
    if requested == "cpu":
        return torch.device("cpu")
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TrainingError("CUDA was requested but this worker has no GPU.", code="no_cuda")
        device = torch.device(requested)
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise TrainingError(f"{requested} was requested but this worker has {torch.cuda.device_count()} GPU(s).",
                                code="no_cuda")
        return device
    if requested != "auto":
        raise TrainingError(f"Unknown device {requested!r}: use auto, cpu or cuda.", code="bad_config")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def describe_device(device) -> str:
    import torch

    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"[:40]
    return "cpu"


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def epoch_seed(seed: int, epoch: int) -> int:
    return (int(seed) * 1_000_003 + epoch * 7919 + 17) % (2 ** 63)


def is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


# --- Progress ------------------------------------------------------------------------------------------


class _Progress:
    """Buffers the run's live fields and writes them at most every PROGRESS_EVERY_S seconds."""

    def __init__(self, run: TrainingRun, echo=None):
        self.run = run
        self.echo = echo
        self.last = 0.0
        self.fields: dict = {}
        self.log_lines: list[str] = []

    def log(self, message: str) -> None:
        line = f"[{timezone.now():%Y-%m-%d %H:%M:%S}] {message}"
        self.log_lines.append(line)
        logger.info("run %s: %s", self.run.pk, message)
        if self.echo:
            self.echo(message)

    def set(self, **fields) -> None:
        self.fields.update(fields)
        for key, value in fields.items():
            setattr(self.run, key, value)

    def flush(self, force: bool = False) -> bool:
        """Write the buffered fields; return False when the run was cancelled meanwhile."""
        now = time.monotonic()
        if not force and now - self.last < PROGRESS_EVERY_S:
            return True
        self.last = now
        fields = dict(self.fields)
        if self.log_lines:
            self.run.log = (self.run.log + "\n" if self.run.log else "") + "\n".join(self.log_lines)
            self.log_lines = []
            fields["log"] = self.run.log
        self.fields = {}
        if fields:
            TrainingRun.objects.filter(pk=self.run.pk).exclude(status=TrainingRun.Status.CANCELLED).update(**fields)
        return TrainingRun.objects.filter(pk=self.run.pk).values_list("status", flat=True).first() != \
            TrainingRun.Status.CANCELLED


class _Cancelled(Exception):
    pass


# --- Checkpoints ---------------------------------------------------------------------------------------


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


def _state_bytes(state) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _cpu(obj):
    """A copy of a (nested) state with every tensor on the CPU."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu(v) for v in obj)
    return obj


def save_checkpoint(run, epoch, model, optimizer, scaler, history, batch_size, data_hash) -> str:
    import torch

    state = {
        "model": _cpu(model.state_dict()),
        "optimizer": _cpu(optimizer.state_dict()),
        "scaler": scaler.state_dict() if scaler is not None and scaler.is_enabled() else {},
        "epoch": int(epoch),
        "batch_size": int(batch_size),
        "history": history,
        "data_hash": data_hash,
        "rng": {"torch": torch.get_rng_state()},
    }
    name = registry.save_storage(checkpoint_name(run, epoch), _state_bytes(state))
    old = [n for n in list_checkpoints(run) if n != name]
    for stale in old[:-(KEEP_CHECKPOINTS - 1)] if KEEP_CHECKPOINTS > 1 else old:
        try:
            from django.core.files.storage import default_storage

            default_storage.delete(stale)
        except OSError:
            pass
    return name


def load_checkpoint(name: str) -> dict:
    state = registry.load_state_bytes(registry.read_storage(name, "The checkpoint"), f"The checkpoint {name!r}")
    if not isinstance(state, dict) or "model" not in state or "epoch" not in state:
        raise TrainingError(f"The checkpoint {name!r} is not a training checkpoint (no model/epoch).",
                            code="bad_checkpoint")
    return state


# --- The loop ------------------------------------------------------------------------------------------


def _count(iterable):
    try:
        return len(iterable)
    except TypeError:
        return 0


def _run_epoch(trainer, model, optimizer, scaler, prepared, config, device, epoch, seed, batch_size,
               progress, history, global_step, steps_per_epoch):
    """One training epoch. Returns (mean_loss, samples, seconds, steps)."""
    import torch

    use_amp = device.type == "cuda" and bool(config.get("amp", True))
    cfg = dict(config, batch_size=batch_size)
    torch.manual_seed(epoch_seed(seed, epoch))
    generator = torch.Generator().manual_seed(epoch_seed(seed, epoch))
    model.train()
    batches = trainer.batches(prepared.train, cfg, epoch, generator, True)
    n_steps = _count(batches) or steps_per_epoch
    every = max(1, (n_steps or POINTS_PER_EPOCH) // POINTS_PER_EPOCH)
    started = time.perf_counter()
    total_loss, total_n, window_loss, window_n, step = 0.0, 0, 0.0, 0, 0
    grad_clip = float(config.get("grad_clip") or 0)
    for batch in batches:
        with torch.autocast(device_type=device.type, enabled=use_amp):
            loss, n = trainer.loss(model, batch, device, cfg)
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
        value = float(loss.detach())
        if not math.isfinite(value):
            raise TrainingError(f"The loss became {value} at epoch {epoch + 1}, step {step + 1}: "
                                "lower the learning rate.", code="diverged")
        n = int(n)
        step += 1
        total_loss += value * n
        total_n += n
        window_loss += value * n
        window_n += n
        if step % every == 0:
            elapsed = max(time.perf_counter() - started, 1e-9)
            point = {"epoch": round(epoch + step / max(n_steps, step), 4), "step": global_step + step,
                     "loss": window_loss / max(window_n, 1)}
            history.append(point)
            window_loss, window_n = 0.0, 0
            progress.set(step=step, loss=point["loss"], samples_per_second=total_n / elapsed, history=history)
            if not progress.flush():
                raise _Cancelled()
    seconds = max(time.perf_counter() - started, 1e-9)
    return total_loss / max(total_n, 1), total_n, seconds, step


def _validate(trainer, model, prepared, config, device, epoch, seed, batch_size):
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
            with torch.autocast(device_type=device.type, enabled=use_amp):
                loss, n = trainer.loss(model, batch, device, cfg)
            total += float(loss) * int(n)
            count += int(n)
    model.train()
    return total / count if count else None


def train(run_id: int, echo=None) -> TrainingRun:
    """Run (or resume) one training run to the end. Errors are stored on the run (status failed).

    ``echo`` (optional callable) receives each log line, for the CLI."""
    run = TrainingRun.objects.get(pk=run_id)
    if run.finished:
        return run
    TrainingRun.objects.filter(pk=run.pk).update(attempts=run.attempts + 1)
    run.attempts += 1
    progress = _Progress(run, echo)
    try:
        if run.attempts > MAX_ATTEMPTS:
            raise TrainingError(f"Gave up after {MAX_ATTEMPTS} attempts (the worker kept stopping).",
                                code="too_many_attempts")
        _train(run, progress)
    except _Cancelled:
        progress.log("Cancelled.")
        progress.flush(force=True)
    except TrainingError as exc:
        _fail(run, progress, str(exc))
    except Exception as exc:  # noqa: BLE001 - any failure is stored on the run, then re-raised for the worker log
        _fail(run, progress, f"{type(exc).__name__}: {exc}")
        logger.exception("training run %s failed", run.pk)
    run.refresh_from_db()
    return run


def _fail(run, progress, message):
    progress.log(f"Failed: {message}")
    progress.set(status=TrainingRun.Status.FAILED, error=message, finished_at=timezone.now())
    progress.flush(force=True)


def _train(run: TrainingRun, progress: _Progress) -> None:
    import torch

    trainer: Trainer = get_trainer((run.config or {}).get("trainer", ""))
    config = trainer.config(run.config)
    device = pick_device(str(config.get("device", "auto")))
    seed = int(config.get("seed", 0))
    epochs = int(config["epochs"])
    batch_size = int(config["batch_size"])
    floor = max(1, int(config.get("min_batch_size", 1)))
    use_amp = device.type == "cuda" and bool(config.get("amp", True))

    resuming = bool(run.checkpoint)
    progress.set(status=TrainingRun.Status.RUNNING, device=describe_device(device), epochs=epochs, error="",
                 started_at=run.started_at or timezone.now())
    progress.log(f"Attempt {run.attempts} on {describe_device(device)} with trainer {trainer.name}"
                 f"{' (mixed precision)' if use_amp else ''}; seed {seed}.")
    progress.flush(force=True)

    seed_everything(seed)
    prepared: Prepared = trainer.prepare(run)
    progress.set(data_hash=prepared.data_hash or "", data_summary=prepared.summary or {})
    for note in (prepared.summary or {}).get("notes", []):
        progress.log(str(note))
    progress.log(f"Data {prepared.data_hash[:12] if prepared.data_hash else '(no hash)'}: "
                 f"{_split_counts(prepared)}.")

    seed_everything(seed)
    model = trainer.build(config, prepared.info).to(device)
    optimizer = trainer.optimizer(model, config)
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp) if device.type == "cuda" else None
    start_epoch, history = 0, []
    if resuming:
        state = load_checkpoint(run.checkpoint)
        if prepared.data_hash and state.get("data_hash") and state["data_hash"] != prepared.data_hash:
            raise TrainingError("The training data changed since the checkpoint was written "
                                f"({state['data_hash'][:12]} then, {prepared.data_hash[:12]} now); start a new run.",
                                code="mismatched_checkpoint")
        registry.load_state_dict_into(model, state["model"], f"The checkpoint {run.checkpoint!r}")
        try:
            optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, RuntimeError) as exc:
            raise TrainingError(f"The optimizer state in {run.checkpoint!r} does not match: {exc}",
                                code="mismatched_checkpoint") from None
        if scaler is not None and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        start_epoch = int(state["epoch"]) + 1
        history = list(state.get("history") or [])
        batch_size = min(batch_size, int(state.get("batch_size") or batch_size))
        progress.log(f"Resumed from {run.checkpoint} after epoch {start_epoch}.")

    steps_per_epoch = run.steps_per_epoch or 0
    global_step = history[-1]["step"] if history else 0
    epoch = start_epoch
    while epoch < epochs:
        snapshot = _state_bytes({"model": _cpu(model.state_dict()), "optimizer": _cpu(optimizer.state_dict())})
        mark = len(history)
        progress.set(epoch=epoch, step=0)
        try:
            mean_loss, samples, seconds, steps = _run_epoch(
                trainer, model, optimizer, scaler, prepared, config, device, epoch, seed, batch_size,
                progress, history, global_step, steps_per_epoch)
            val_loss = _validate(trainer, model, prepared, config, device, epoch, seed, batch_size)
        except (_Cancelled, TrainingError):
            raise
        except Exception as exc:  # noqa: BLE001
            if not is_oom(exc):
                raise
            del exc
            if device.type == "cuda":
                torch.cuda.empty_cache()
            smaller = batch_size // 2
            if smaller < floor:
                raise TrainingError(f"Out of memory at batch size {batch_size} (epoch {epoch + 1}) and the floor is "
                                    f"{floor}: use a smaller model or a bigger GPU.", code="out_of_memory") from None
            progress.log(f"Out of memory at batch size {batch_size}; retrying epoch {epoch + 1} with {smaller}.")
            batch_size = smaller
            state = registry.load_state_bytes(snapshot, "the epoch snapshot")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            del history[mark:]
            continue
        steps_per_epoch = steps
        global_step += steps
        rate = samples / seconds
        history.append({"epoch": epoch + 1, "step": global_step, "loss": mean_loss, "val_loss": val_loss,
                        "samples_per_s": rate, "batch_size": batch_size, "end": True})
        name = save_checkpoint(run, epoch, model, optimizer, scaler, history, batch_size, prepared.data_hash)
        progress.set(epoch=epoch + 1, step=steps, steps_per_epoch=steps, loss=mean_loss, samples_per_second=rate,
                     history=history, checkpoint=name)
        progress.log(f"Epoch {epoch + 1}/{epochs}: loss {mean_loss:.4f}"
                     f"{f', val {val_loss:.4f}' if val_loss is not None else ''}, {rate:.1f} samples/s.")
        if not progress.flush(force=True):
            raise _Cancelled()
        epoch += 1

    progress.set(status=TrainingRun.Status.EVALUATING)
    progress.flush(force=True)
    model.eval()
    metrics = trainer.evaluate(model, prepared, device, config) or {}
    metrics.setdefault("train_loss", history[-1]["loss"] if history else None)
    ends = [h for h in history if h.get("end")]
    if ends and ends[-1].get("val_loss") is not None:
        metrics.setdefault("val_loss", ends[-1]["val_loss"])
    artifact, sha = registry.save_artifact(run, model, prepared.info, config, trainer.name)
    version = registry.register_version(run, artifact, sha, trainer.name, config, prepared.info, metrics)
    progress.set(metrics=metrics, artifact=artifact)
    progress.log(f"Registered {version} ({artifact}).")
    progress.flush(force=True)
    extras = trainer.finish(run, model, prepared, device, config) or {}
    if extras:
        metrics = dict(metrics, extras=extras)
        ModelVersion.objects.filter(pk=version.pk).update(metrics=metrics)
    progress.set(status=TrainingRun.Status.DONE, metrics=metrics, finished_at=timezone.now())
    progress.log("Done.")
    progress.flush(force=True)


def _split_counts(prepared: Prepared) -> str:
    summary = prepared.summary or {}
    parts = [f"{key} {value}" for key, value in summary.items() if isinstance(value, (int, float, str))]
    return ", ".join(parts[:12]) or "no summary"


__all__ = ["train", "create_run", "enqueue", "retry", "cancel", "pick_device", "seed_everything", "load_version",
           "active_version", "activate", "TrainingError", "Kind"]
