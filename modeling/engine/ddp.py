"""Training one run on several processes with PyTorch DistributedDataParallel.

When a run wants more than one process (``processes``: config ``ddp_processes``, or every visible GPU
when it trains on CUDA and the worker sees several), the driver calls ``launch``: it starts
``python -m torch.distributed.run --standalone --nproc_per_node N -m modeling.ddp_worker RUN``
and waits. Each process (a rank) runs ``train_rank``:

- one GPU per rank with NCCL, or the CPU with gloo;
- the same seed, data and initial weights on every rank (DDP also broadcasts rank 0's weights);
- training batches sharded: of every ``world_size`` consecutive batches of the trainer's epoch, rank
  r takes the r-th, and an incomplete last group is left out so that every rank takes as many steps
  (a rank with one step more would wait forever in the gradient all-reduce);
- the training loss all-reduced at every step (the value every rank reports is the mean over all
  ranks' samples; the gradient stays the rank's own, which DDP averages); the validation loss is
  computed by every rank over the whole validation split with the same weights, so every rank takes
  the same best-epoch and early-stopping decisions without exchanging them;
- rank 0 alone writes progress, checkpoints, the evaluation and the artifact; the others are quiet.

Resume is the driver's (steps.py): every rank loads the run's last checkpoint. A rank that dies takes the others
down (torchrun stops the group); ``launch`` then fails the run with the exit code and the last lines of
the processes' output, and keeps its checkpoint, so a retry continues from there.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from ..trainers.base import TrainingError

logger = logging.getLogger("modeling.engine")

ROOT = Path(__file__).resolve().parents[2]
RANK_ENV = "CAPTIONLAB_DDP_RANK"  # set in the ranks: a rank never launches ranks of its own
OUTPUT_TAIL = 1500


def processes(config: dict) -> int:
    """How many processes the run trains on: ``ddp_processes`` when above 0, else every visible GPU
    when the run uses CUDA, else 1. Inside a rank, always 1."""
    if os.environ.get(RANK_ENV) is not None:
        return 1
    wanted = int(config.get("ddp_processes") or 0)
    if wanted > 0:
        return wanted
    if str(config.get("device", "auto")) not in ("auto", "cuda"):
        return 1
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 1


def backend(config: dict) -> str:
    """nccl with a GPU per rank, gloo on the CPU."""
    import torch

    device = str(config.get("device", "auto"))
    return "nccl" if device != "cpu" and torch.cuda.is_available() else "gloo"


def launch(run, trainer, config: dict, progress, n: int) -> None:
    """Train ``run`` on ``n`` processes and wait for them. Raises TrainingError (code ddp_failed) when
    they fail without recording why on the run; a run they failed, cancelled or finished is left so."""
    from ..models import TrainingRun

    chosen = backend(config)
    if chosen == "nccl":
        import torch

        if n > torch.cuda.device_count():
            raise TrainingError(f"ddp_processes is {n} but this worker sees {torch.cuda.device_count()} GPU(s).",
                                code="bad_config")
    progress.log(f"Training on {n} processes (DistributedDataParallel, {chosen}).")
    progress.flush(force=True)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
               "-m", "modeling.ddp_worker", str(run.pk), "--trainer-module", type(trainer).__module__]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings")}
    done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    run.refresh_from_db()  # rank 0 wrote the log and fields; the caller's progress continues from them
    if done.returncode == 0:
        return
    logger.warning("run %s: DDP processes exited with %s:\n%s", run.pk, done.returncode, done.stdout[-20000:])
    if run.status in (TrainingRun.Status.FAILED, TrainingRun.Status.CANCELLED, TrainingRun.Status.DONE):
        return
    tail = " | ".join(line.strip() for line in done.stdout.strip().splitlines()[-6:])[-OUTPUT_TAIL:]
    raise TrainingError(f"A training process stopped (torchrun exit code {done.returncode}); the last "
                        f"checkpoint is kept, so a retry continues from it. Output: {tail}", code="ddp_failed")


class ShardedTrainer:
    """The run's trainer as one rank sees it: its share of the training batches and all-reduced
    training losses; everything else is the trainer's own."""

    def __init__(self, inner, rank: int, world: int):
        self.inner, self.rank, self.world = inner, rank, world

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def batches(self, split, config, epoch, generator, train):
        out = self.inner.batches(split, config, epoch, generator, train)
        if not train:
            return out
        if hasattr(out, "__len__"):
            out = list(out)
            return out[self.rank:len(out) - len(out) % self.world:self.world]
        return self._shard(out)

    def _shard(self, batches):
        group = []
        for batch in batches:
            group.append(batch)
            if len(group) == self.world:
                yield group[self.rank]
                group = []

    def count_batches(self, split, config) -> int:
        counter = getattr(self.inner, "count_batches", None)
        return int(counter(split, config) or 0) // self.world if counter else 0

    def loss(self, model, batch, device, config):
        import torch
        import torch.distributed as dist

        loss, n = self.inner.loss(model, batch, device, config)
        if not model.training:
            return loss, n
        stats = torch.tensor([float(loss.detach()) * int(n), float(n)], device=loss.device, dtype=torch.float64)
        dist.all_reduce(stats)
        mean = (stats[0] / stats[1]).to(loss.dtype)
        # The value is every rank's mean, the gradient the rank's own loss's (DDP averages those).
        return loss + (mean - loss.detach()), int(stats[1].item())


def wrap(model, device):
    """``model`` in DistributedDataParallel; attributes the trainer reads on its model (``branch_names``)
    and the state dict (no ``module.`` prefix) are the model's own, so checkpoints stay interchangeable."""
    from torch.nn.parallel import DistributedDataParallel

    class Wrapped(DistributedDataParallel):
        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.module, name)

        def state_dict(self, *args, **kwargs):
            return self.module.state_dict(*args, **kwargs)

        def load_state_dict(self, state, strict: bool = True, **kwargs):
            return self.module.load_state_dict(state, strict=strict, **kwargs)

    ids = [device.index] if device.type == "cuda" else None
    return Wrapped(model, device_ids=ids)


def train_rank(run, rank: int, world: int, local_rank: int) -> None:
    """One rank's part of the run (see the module docstring); rank 0 also evaluates and registers."""
    import torch

    from ..threads import run_threads, torch_threads
    from ..trainers import get_trainer
    from .checkpoints import save_checkpoint
    from .device import seed_everything
    from .fit import setup_model
    from .loop import LoopState, restore_best, run_epochs
    from .progress import Progress, Quiet
    from .steps import checkpoint_due, evaluate_model, log_data, mark_started, register_model, resume_from_checkpoint

    trainer = get_trainer((run.config or {}).get("trainer", ""))
    config = trainer.config(run.config)
    device = torch.device(f"cuda:{local_rank}") if backend(config) == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    progress = Progress(run) if rank == 0 else Quiet()
    with torch_threads(max(1, run_threads(config) // world)):  # the ranks share the worker's cores
        seed = int(config.get("seed", 0))
        if rank == 0:
            mark_started(run, progress, trainer, config, device)
        seed_everything(seed)
        prepared = trainer.prepare(run)
        if rank == 0:
            log_data(progress, prepared)
        seed_everything(seed)
        model, optimizer, scaler = setup_model(trainer, config, prepared.info, device)
        state = LoopState(batch_size=int(config["batch_size"]), steps_per_epoch=run.steps_per_epoch or 0)
        if run.checkpoint:
            resume_from_checkpoint(run, state, model, optimizer, scaler, prepared, config, progress)

        def checkpoint(s) -> None:
            if rank == 0 and checkpoint_due(s, config):
                progress.set(checkpoint=save_checkpoint(run, s, model, optimizer, scaler, prepared.data_hash))

        run_epochs(ShardedTrainer(trainer, rank, world), wrap(model, device), optimizer, scaler, prepared, config,
                   device, state, progress, after_epoch=checkpoint)
        if rank != 0:
            return
        restore_best(model, state, config, progress)
        progress.set(status=run.Status.EVALUATING)
        progress.flush(force=True)
        metrics = evaluate_model(trainer, model, prepared, config, device, state, progress)
        metrics["ddp"] = {"processes": world, "backend": backend(config)}
        register_model(run, trainer, model, prepared, config, device, metrics, progress)


__all__ = ["processes", "backend", "launch", "ShardedTrainer", "wrap", "train_rank", "RANK_ENV"]
