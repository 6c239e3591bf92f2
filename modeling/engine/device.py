"""Devices and seeds: which device a run trains on, how it is named on the run page, and the seeds that
make a run (and a resumed run) repeat itself exactly."""
from __future__ import annotations

import random

from ..trainers.base import TrainingError


def pick_device(requested: str = "auto"):
    """The torch.device for "auto" | "cpu" | "cuda" | "cuda:N"; TrainingError (code no_cuda) when a GPU
    is asked for and this worker has none, or not that one."""
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


def as_device(device):
    """A torch.device from a torch.device or a name (names go through ``pick_device``)."""
    import torch

    return device if isinstance(device, torch.device) else pick_device(str(device))


def describe_device(device) -> str:
    """"cpu" or "cuda:0 (NVIDIA H100 ...)", at most 40 characters (the run row's field)."""
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
    """The seed of one epoch's batch order and dropout: a function of (seed, epoch) only, so an epoch
    trained again after a resume draws exactly what it drew the first time."""
    return (int(seed) * 1_000_003 + epoch * 7919 + 17) % (2 ** 63)


def is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def amp_dtype(device):
    """The mixed-precision type on CUDA: bf16 where the GPU supports it (no loss scaling needed), else fp16 (with a
    GradScaler). None on the CPU, where the engine trains in fp32."""
    import torch

    if getattr(device, "type", device) != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
