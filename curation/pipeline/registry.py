"""Filters by name. Modules register their classes with ``@register``; ``load_all`` imports them. A step of an
app above curation is a plug-in its AppConfig.ready() registers with ``register`` (modeling's fluency filter)."""
from __future__ import annotations

import importlib

from .base import Filter

FILTERS: dict[str, type[Filter]] = {}
MODULES = ("image_filters", "text_filters", "overlap", "hypernym", "informativeness", "seeds", "topics",
           "unsafe", "zero_shot", "alignment", "semantic_dups")


def register(cls: type[Filter]) -> type[Filter]:
    if not cls.name or cls.name in FILTERS:
        raise ValueError(f"filter name {cls.name!r} is empty or taken")
    FILTERS[cls.name] = cls
    return cls


def load_all() -> dict[str, type[Filter]]:
    for module in MODULES:
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{module}":
                raise
    return FILTERS


def get(name: str) -> type[Filter]:
    load_all()
    try:
        return FILTERS[name]
    except KeyError:
        raise KeyError(f"unknown filter {name!r}; known: {', '.join(sorted(FILTERS))}") from None
