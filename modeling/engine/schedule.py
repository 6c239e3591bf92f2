"""The learning-rate schedule: a factor on each parameter group's starting lr, set before every
optimizer step by the epoch loop.

    constant  the lr of the config throughout (the default; optional linear warm-up)
    cosine    linear warm-up over ``warmup_steps`` (or ``warmup_fraction`` of the training), then a
              half cosine down to ``min_lr_ratio`` x lr at the last step
    step      the seed's decay: x ``lr_decay`` every ``lr_decay_every`` epochs (optional warm-up)

Progress is measured in epochs (epoch + step / steps of the epoch) rather than in optimizer steps, so an
out-of-memory retry that halves the batch (and doubles the steps) keeps the curve's shape.

The plan (the schedule's settings and each group's starting lr) lives in the optimizer's param groups,
as torch's own schedulers keep ``initial_lr`` there: the optimizer's state dict carries it into every
checkpoint and back on resume, and the out-of-memory snapshot restores it with the rest, so no other
file has to know the schedule exists.
"""
from __future__ import annotations

import math

from ..trainers.base import TrainingError

SCHEDULES = ("constant", "cosine", "step")
PLAN_KEY = "lr_plan"  # in each param group: {"initial_lr": float}; the settings sit in group 0's


def check(config: dict) -> None:
    """TrainingError (code bad_config) naming the first bad schedule setting."""
    name = str(config.get("lr_schedule") or "constant")
    if name not in SCHEDULES:
        raise TrainingError(f"Unknown lr_schedule {name!r}: use {', '.join(SCHEDULES)}.", code="bad_config")
    try:
        plan = settings(config)
    except (TypeError, ValueError):
        raise TrainingError("warmup_steps and lr_decay_every must be whole numbers; warmup_fraction, min_lr_ratio "
                            "and lr_decay numbers.", code="bad_config") from None
    steps, fraction, ratio = plan["warmup_steps"], plan["warmup_fraction"], plan["min_lr_ratio"]
    decay, every = plan["lr_decay"], plan["lr_decay_every"]
    if steps < 0 or not 0.0 <= fraction < 1.0:
        raise TrainingError("warmup_steps must be ≥ 0 and warmup_fraction in [0, 1).", code="bad_config")
    if not 0.0 <= ratio <= 1.0:
        raise TrainingError("min_lr_ratio must be in [0, 1].", code="bad_config")
    if not 0.0 < decay <= 1.0 or every < 1:
        raise TrainingError("lr_decay must be in (0, 1] and lr_decay_every a whole number ≥ 1.", code="bad_config")


def settings(config: dict) -> dict:
    """The schedule's settings from a run config (defaults filled in)."""
    def value(key, cast, default):
        raw = config.get(key)
        return default if raw is None or raw == "" else cast(raw)

    return {"name": str(config.get("lr_schedule") or "constant"),
            "warmup_steps": value("warmup_steps", int, 0),
            "warmup_fraction": value("warmup_fraction", float, 0.0),
            "min_lr_ratio": value("min_lr_ratio", float, 0.0),
            "lr_decay": value("lr_decay", float, 1.0),
            "lr_decay_every": value("lr_decay_every", int, 1),
            "epochs": max(1, int(config.get("epochs") or 1)),
            # Where the warm-up ended, as training progress in epochs: the cosine starts from there.
            "warmup_end": None}


def is_constant(config: dict) -> bool:
    plan = settings(config)
    return plan["name"] == "constant" and not plan["warmup_steps"] and not plan["warmup_fraction"]


def start(optimizer, config: dict) -> None:
    """Record the plan in the optimizer once; a resumed optimizer keeps the one it was saved with."""
    groups = optimizer.param_groups
    if not groups or PLAN_KEY in groups[0]:
        return
    for group in groups:
        group[PLAN_KEY] = {"initial_lr": float(group["lr"])}
    groups[0][PLAN_KEY]["settings"] = settings(config)


def factor(plan: dict, step: int, progress: float, epoch: int) -> float:
    """The lr factor before optimizer step ``step`` (0-based, over the whole run) at ``progress`` epochs
    into the training (fractional) during epoch ``epoch`` (0-based). Updates plan["warmup_end"]."""
    warm = _warmup(plan, step, progress)
    if warm is not None:
        return warm
    if plan["warmup_end"] is None:
        plan["warmup_end"] = progress if (plan["warmup_steps"] or plan["warmup_fraction"]) else 0.0
    if plan["name"] == "cosine":
        begin, end = plan["warmup_end"], float(plan["epochs"])
        t = min(1.0, max(0.0, (progress - begin) / max(end - begin, 1e-9)))
        ratio = plan["min_lr_ratio"]
        return ratio + (1.0 - ratio) * 0.5 * (1.0 + math.cos(math.pi * t))
    if plan["name"] == "step":
        return plan["lr_decay"] ** (epoch // plan["lr_decay_every"])
    return 1.0


def _warmup(plan: dict, step: int, progress: float) -> float | None:
    """The warm-up factor while warming up, else None."""
    if plan["warmup_end"] is not None:
        return None
    if plan["warmup_steps"] and step < plan["warmup_steps"]:
        return (step + 1) / plan["warmup_steps"]
    fraction = plan["warmup_fraction"] * plan["epochs"]
    if fraction and progress < fraction:
        return max(progress / fraction, 1e-3)
    return None


def apply(optimizer, step: int, progress: float, epoch: int) -> float:
    """Set every group's lr for the coming optimizer step; returns group 0's (for the history)."""
    groups = optimizer.param_groups
    plan = groups[0].get(PLAN_KEY, {}).get("settings")
    if plan is None:
        return float(groups[0]["lr"])
    f = factor(plan, step, progress, epoch)
    for group in groups:
        group["lr"] = group[PLAN_KEY]["initial_lr"] * f
    return float(groups[0]["lr"])


def current_lr(optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"]) if optimizer.param_groups else 0.0
