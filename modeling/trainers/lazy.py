"""Trainers that load torch when a method first runs, not when they register: the web process lists trainers
(the new-run form) and must not load torch (benchmarks/web_memory.py)."""
from __future__ import annotations

import functools


def with_loader(load):
    """A class decorator: every method the class defines calls ``load()`` (idempotent) before it runs."""

    def decorate(cls):
        for name, member in list(vars(cls).items()):
            if name.startswith("__"):
                continue
            if isinstance(member, staticmethod):  # callable too: check it first
                setattr(cls, name, staticmethod(_wrap(member.__func__, load)))
            elif callable(member):
                setattr(cls, name, _wrap(member, load))
        return cls

    return decorate


def _wrap(function, load):
    @functools.wraps(function)
    def loaded(*args, **kwargs):
        load()
        return function(*args, **kwargs)

    return loaded
