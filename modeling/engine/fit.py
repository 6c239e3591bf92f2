"""``fit_in_memory``: a model trained by the run's own epoch loop, without a run row, storage or
checkpoints. Cross-validation, the learning loop's simulated random arm and the benchmarks use it.

Seeded like a run (seed_everything(config["seed"]) before ``build``, the per-epoch seeds in the loop),
so on the same Prepared and config it ends with the weights a run registers as its artifact.
"""
from __future__ import annotations

from ..threads import torch_threads
from ..trainers.base import Prepared, Trainer
from .device import amp_dtype, as_device, seed_everything
from .loop import LoopState, restore_best, run_epochs
from .progress import Quiet


def setup_model(trainer: Trainer, config: dict, info: dict, device):
    """(model on ``device``, optimizer, scaler or None): the trainer's model and optimizer, and a grad
    scaler when mixed precision runs on CUDA. The caller seeds first."""
    import torch

    use_amp = device.type == "cuda" and bool(config.get("amp", True))
    model = trainer.build(config, info).to(device)
    optimizer = trainer.optimizer(model, config)
    # bf16 keeps fp32's exponent range: only fp16 needs its loss scaled.
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp and amp_dtype(device) == torch.float16) \
        if device.type == "cuda" else None
    return model, optimizer, scaler


def fit_in_memory(trainer: Trainer, prepared: Prepared, config: dict, device="cpu", echo=None):
    """Train a fresh model on ``prepared.train`` (validating on ``prepared.val`` when it has items: early
    stopping and best-epoch selection as configured) and return it in eval mode on ``device``.

    ``config``: overrides on the trainer's defaults (a full config works too). ``echo`` receives the log
    lines (epochs, early stop). Raises TrainingError as a run would (diverged, out_of_memory ...)."""
    config = trainer.config(config)
    with torch_threads(int(config.get("torch_threads") or 0)):
        return _fit(trainer, prepared, config, as_device(device), echo)


def _fit(trainer, prepared, config, device, echo):
    seed_everything(int(config.get("seed", 0)))
    model, optimizer, scaler = setup_model(trainer, config, prepared.info, device)
    state = LoopState(batch_size=int(config["batch_size"]))
    progress = Quiet(echo)
    run_epochs(trainer, model, optimizer, scaler, prepared, config, device, state, progress)
    restore_best(model, state, config, progress)
    return model.eval()
