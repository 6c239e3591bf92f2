"""A tiny trainer on synthetic data so the engine is tested without the real trainers: a two-layer MLP
regressing a fixed random linear target. Hooks on the trainer let tests simulate a killed worker, an
out-of-memory error for large batches, and too few labels."""
import hashlib

import pytest
import torch
from torch import nn

from modeling.models import Kind
from modeling.trainers import register
from modeling.trainers.base import Prepared, Trainer, TrainingError


class WorkerKilled(BaseException):
    """Not an Exception: like a SIGKILL, the engine cannot catch it and the run stays 'running'."""


class TinyTrainer(Trainer):
    kind = Kind.FLUENCY
    name = "test-tiny"
    default_config = {"epochs": 3, "batch_size": 16, "lr": 0.01, "hidden": 8, "n": 96}

    def __init__(self):
        self.reset()

    def reset(self):
        self.kill_after_epoch = None  # raise WorkerKilled when an epoch > this starts
        self.oom_above = None  # batches bigger than this raise out of memory
        self.oom_cuda_error = False
        self.too_few = False
        self.seen_batch_sizes = []
        self.epochs_started = []
        self.finished_runs = []

    def prepare(self, run):
        n = int(run.config.get("n", self.default_config["n"]))
        if self.too_few:
            raise TrainingError(f"Too few labels: 20 needed, {n // 10} present.", code="too_few_labels")
        g = torch.Generator().manual_seed(1234)
        x = torch.randn(n, 4, generator=g)
        y = x @ torch.tensor([1.5, -2.0, 0.5, 1.0]) + 0.05 * torch.randn(n, generator=g)
        cut = int(n * 0.75)
        digest = hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()
        return Prepared(train=(x[:cut], y[:cut]), val=(x[cut:], y[cut:]), test=(x[cut:], y[cut:]),
                        info={"inputs": 4}, data_hash=digest, summary={"train": cut, "val": n - cut})

    def build(self, config, info):
        return nn.Sequential(nn.Linear(info["inputs"], config["hidden"]), nn.Tanh(), nn.Dropout(0.1),
                             nn.Linear(config["hidden"], 1))

    def batches(self, split, config, epoch, generator, train):
        x, y = split
        if train:
            self.epochs_started.append(epoch)
            if self.kill_after_epoch is not None and epoch > self.kill_after_epoch:
                self.kill_after_epoch = None  # only the first attempt dies
                raise WorkerKilled()
            order = torch.randperm(len(x), generator=generator)
        else:
            order = torch.arange(len(x))
        size = int(config["batch_size"])
        return [(x[order[i:i + size]], y[order[i:i + size]]) for i in range(0, len(x), size)]

    def loss(self, model, batch, device, config):
        x, y = batch
        self.seen_batch_sizes.append(len(x))
        if self.oom_above is not None and len(x) > self.oom_above:
            if self.oom_cuda_error:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            raise RuntimeError("CUDA error: out of memory")
        x, y = x.to(device), y.to(device)
        return nn.functional.mse_loss(model(x).squeeze(-1), y), len(x)

    def evaluate(self, model, prepared, device, config):
        x, y = prepared.test
        with torch.no_grad():
            return {"test_mse": float(nn.functional.mse_loss(model(x.to(device)).squeeze(-1), y.to(device)))}

    def finish(self, run, model, prepared, device, config):
        self.finished_runs.append(run.pk)
        return {"version": run.model_version.version}


TINY = TinyTrainer()
register(TINY)


@pytest.fixture
def tiny():
    TINY.reset()
    yield TINY
    TINY.reset()
