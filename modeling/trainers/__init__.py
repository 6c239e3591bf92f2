"""Trainer registry: ``register(trainer)`` and ``get_trainer(name)``.

Trainer modules register themselves at import time; the built-in ones are imported lazily so that
importing the engine does not pull in spaCy, torchvision and friends.
"""
from __future__ import annotations

import importlib
import logging

from .base import Prepared, Trainer, TrainingError

log = logging.getLogger(__name__)

_REGISTRY: dict[str, Trainer] = {}
BUILTIN_MODULES = ("fluency", "fluency_encoder", "fluency_detector", "fluency_finetune", "captioner", "topic_cnn")
# What a new run of each kind trains unless told otherwise (the train form, manage.py train). For fluency:
# the packaged sentence encoder fine-tuned end to end on the labels ("fluency-finetune"), which measured
# clearly above the frozen-encoder heads on dev set 1's hand-written MT errors at 200 labels
# (benchmarks/fluency_dev.py, docs/benchmarks.md: 0.711 ± 0.027 macro F1 against 0.669 ± 0.026 and
# 0.673 ± 0.033, above "fluency-encoder" on each of 5 splits, +0.041 on average) at the price of one to
# several minutes per fit on a CPU.
DEFAULT_TRAINERS = {"fluency": "fluency-finetune"}
# What a new learning loop trains: a loop retrains every round and refits its random arm several times per
# round size (modeling/loop/random_arm.py), so it keeps the head on the frozen encoder, which fits in under
# a second ("fluency-encoder": 0.669 ± 0.026 on the same benchmark); "fluency-finetune" is one choice away.
LOOP_DEFAULT_TRAINERS = {"fluency": "fluency-encoder"}
_loaded = False


def register(trainer):
    """Register a Trainer instance (or class, instantiated here). Returns it, so it works as a decorator."""
    instance = trainer() if isinstance(trainer, type) else trainer
    if not instance.name:
        raise ValueError("a trainer needs a name")
    _REGISTRY[instance.name] = instance
    return trainer


def _load_builtins():
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN_MODULES:
        try:
            importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{module}":
                raise
            log.debug("trainer module %s not present", module)


def get_trainer(name: str) -> Trainer:
    if name not in _REGISTRY:
        _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise TrainingError(f"Unknown trainer {name!r}; known: {', '.join(sorted(_REGISTRY)) or 'none'}",
                            code="bad_config") from None


def all_trainers() -> dict[str, Trainer]:
    _load_builtins()
    return dict(sorted(_REGISTRY.items()))


def trainers_for_kind(kind: str) -> list[Trainer]:
    return [t for t in all_trainers().values() if t.kind == kind]


__all__ = ["DEFAULT_TRAINERS", "LOOP_DEFAULT_TRAINERS", "Prepared", "Trainer", "TrainingError", "register", "get_trainer", "all_trainers", "trainers_for_kind"]
