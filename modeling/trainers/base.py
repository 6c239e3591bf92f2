"""The interface every trainer implements; the engine (modeling/engine/) drives it.

A trainer knows its data and its model; the engine knows devices, seeds, mixed precision, progress,
checkpoints, resuming, out-of-memory retries and the registry. Trainers never touch those.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


class TrainingError(Exception):
    """A training problem with a message meant for the person who started the run.

    ``code`` is a short machine-readable reason (``too_few_labels``, ``no_cuda``, ``bad_checkpoint``,
    ``out_of_memory``, ``missing_images``, ``bad_weights``, ``bad_config`` ...).
    """

    def __init__(self, message: str, code: str = "training_error"):
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self):
        return self.message


@dataclass
class Prepared:
    """What ``Trainer.prepare`` returns: the splits (any trainer-specific structure), the JSON-able
    info needed to rebuild the model (vocabularies, sizes), the sha256 of the data as read and a
    JSON-able summary (counts per split, label balance, notes such as "POS branches left out")."""

    train: Any
    val: Any
    test: Any
    info: dict = field(default_factory=dict)
    data_hash: str = ""
    summary: dict = field(default_factory=dict)


class Trainer:
    """Base class. Subclasses set ``kind``, ``name`` and ``default_config`` and implement
    ``prepare``, ``build``, ``batches``, ``loss`` and ``evaluate``.

    Config keys the engine itself reads (defaults in ``ENGINE_DEFAULTS``): ``epochs``, ``batch_size``,
    ``lr``, ``weight_decay``, ``seed``, ``device`` ("auto" | "cpu" | "cuda"), ``amp`` (bool, CUDA only),
    ``min_batch_size`` (OOM floor), ``grad_clip`` (0 = off), ``early_stopping_patience``,
    ``select_best``, ``checkpoint_every``, ``cv_folds``, ``cv_below``, and the lr schedule's
    ``lr_schedule``, ``warmup_steps``, ``warmup_fraction``, ``min_lr_ratio``, ``lr_decay``,
    ``lr_decay_every`` (see the comments below and modeling/engine/schedule.py).

    ``batches`` may return a list (or anything with a length) or a generator; for a generator the engine
    counts the first epoch's batches with a dry pass unless the trainer defines
    ``count_batches(split_data, config) -> int``.

    A binary classifier may also implement ``folds``, ``labels`` and ``predict_proba``: then the engine
    cross-validates it on small data sets (modeling/engine/cv.py).
    """

    kind: str = ""
    name: str = ""
    default_config: dict = {}
    # Whether a fit takes seconds, so that the learning loop's random arm may refit it per point
    # (modeling/loop/random_arm.py); a trainer that fine-tunes a transformer says False.
    fast_refit: bool = True

    ENGINE_DEFAULTS = {
        "epochs": 3,
        "batch_size": 32,
        "lr": 1e-3,
        "weight_decay": 0.0,
        "seed": 0,
        "device": "auto",
        "amp": True,
        "min_batch_size": 1,
        "grad_clip": 0.0,
        # The learning-rate schedule (modeling/engine/schedule.py): "constant", "cosine" (linear warm-up over
        # warmup_steps, or warmup_fraction of the training, then a half cosine to min_lr_ratio x lr) or
        # "step" (x lr_decay every lr_decay_every epochs, the seed's). Set before every optimizer step.
        "lr_schedule": "constant",
        "warmup_steps": 0,
        "warmup_fraction": 0.0,
        "min_lr_ratio": 0.0,
        "lr_decay": 1.0,
        "lr_decay_every": 1,
        # Stop when the validation loss has not improved for this many epochs; 0: train every epoch.
        "early_stopping_patience": 0,
        # With a validation split, keep (evaluate and register) the weights of the lowest validation loss.
        "select_best": True,
        # Write a storage checkpoint every N epochs (and at the last one); small fast models set it higher.
        "checkpoint_every": 1,
        # torch's intra-op threads while this run trains (modeling.threads); 0: TORCH_THREADS, else the
        # worker's share of the cores.
        "torch_threads": 0,
        # Processes to train on with DistributedDataParallel (modeling/engine/ddp.py): 0 every GPU when the
        # run uses CUDA and the worker sees several, else 1; N>1 on the CPU trains N gloo processes.
        "ddp_processes": 0,
        # k-fold cross-validation after training (trainers with folds/labels/predict_proba); 0 or 1: off ...
        "cv_folds": 0,
        # ... and only for data sets with fewer labelled items than this.
        "cv_below": 500,
    }

    def config(self, overrides: dict | None = None) -> dict:
        """Engine defaults, then the trainer's defaults, then the run's overrides."""
        merged = dict(self.ENGINE_DEFAULTS)
        merged.update(self.default_config or {})
        merged.update(overrides or {})
        return merged

    # --- data -----------------------------------------------------------------------------------
    def prepare(self, run) -> Prepared:
        """Read the run's data (run.campaign or run.release, run.config) and split it.
        Raise TrainingError(code="too_few_labels") naming the counts needed and present."""
        raise NotImplementedError

    # --- model ----------------------------------------------------------------------------------
    def build(self, config: dict, info: dict):
        """Return a fresh torch.nn.Module (on CPU; the engine moves it)."""
        raise NotImplementedError

    def optimizer(self, model, config: dict):
        """Default: Adam with config lr / weight_decay. Override for something else."""
        import torch

        params = [p for p in model.parameters() if p.requires_grad]
        return torch.optim.Adam(params, lr=float(config.get("lr", 1e-3)),
                                weight_decay=float(config.get("weight_decay", 0.0)))

    def batches(self, split_data, config: dict, epoch: int, generator, train: bool) -> Iterable:
        """Yield batches of ``config["batch_size"]`` items (the engine may lower it after an OOM).
        Shuffle with ``generator`` (a torch.Generator seeded per epoch) when ``train``."""
        raise NotImplementedError

    def loss(self, model, batch, device, config: dict):
        """Return ``(loss_tensor, n_samples)``. Move the batch to ``device`` here.
        Called inside torch.autocast on CUDA."""
        raise NotImplementedError

    def evaluate(self, model, prepared: Prepared, device, config: dict) -> dict:
        """Held-out metrics (a flat dict of numbers, or nested dicts of numbers)."""
        return {}

    # --- optional: cross-validation of a binary classifier ------------------------------------------
    # folds(prepared, k, seed) -> list[Prepared]: k Prepared, each with train, val (may be empty) and the
    #     fold as test, and the parent's info.
    # labels(split_data) -> list[int]: the 0/1 labels of a split.
    # predict_proba(model, split_data, device) -> list[float]: the probability of class 1 per item.
    # Not defined here, so that the engine can tell the trainers that have them (cv.folds_wanted).

    def finish(self, run, model, prepared: Prepared, device, config: dict) -> dict:
        """Optional extras after training (e.g. generated captions); returns JSON-able extras that are
        stored under run.metrics["extras"]. Called after the ModelVersion is registered, so
        ``run.model_version`` exists."""
        return {}

    def __repr__(self):
        return f"<Trainer {self.name} ({self.kind})>"
