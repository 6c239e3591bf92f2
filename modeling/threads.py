"""Torch's intra-op threads in the workers.

Torch starts as many intra-op threads as the machine has cores, in every process. A Celery worker
with the default concurrency runs one process per core, so each task's torch oversubscribes the
machine by a factor of its core count: a captioner measured 3-4 samples/s on a busy 16-core worker
and 44-134 with one thread per process.

The number a task uses (``default_threads``):

1. the ``TORCH_THREADS`` setting (env), when above 0;
2. else the worker's share of the cores: usable cores (``os.sched_getaffinity``) // the worker's
   concurrency, at least 1. A Celery worker records its concurrency at start-up
   (``remember_concurrency``, a ``celeryd_init`` handler); one started without ``--concurrency``
   runs a process per core, so its share is 1. Outside a worker (``manage.py train``) the share is
   every core.

A run's ``torch_threads`` config value overrides it (``run_threads``). The training task applies it
through the driver, the embedding and generation tasks through ``torch_threads(default_threads())``,
and prefork worker processes at start (``apply_in_worker_process``) so filters that use torch share too.

``torch_threads(n)`` runs a block with n threads (0: leave as is). A head of a few thousand weights
trained on a few hundred rows is faster on one thread than two (5-11 s per fit against 0.3 s on the
2-core build machine), which is why the fluency encoder's config asks for 1.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager

CONCURRENCY_ENV = "CAPTIONLAB_WORKER_CONCURRENCY"


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def worker_share() -> int:
    """Usable cores // the worker's concurrency (see the module docstring), at least 1."""
    cores = _cores()
    recorded = os.environ.get(CONCURRENCY_ENV)
    if recorded is None:  # not a Celery worker
        return cores
    concurrency = int(recorded or 0) or cores  # Celery's default concurrency: one process per core
    return max(1, cores // concurrency)


def default_threads() -> int:
    """``TORCH_THREADS`` when set above 0, else the worker's share of the cores."""
    from django.conf import settings

    configured = int(settings.TORCH_THREADS or 0)
    return configured if configured > 0 else worker_share()


def run_threads(config: dict) -> int:
    """The threads of one training run: its ``torch_threads`` config value, else ``default_threads``."""
    requested = int((config or {}).get("torch_threads") or 0)
    return requested if requested > 0 else default_threads()


def describe(config: dict) -> str:
    """Where a run's thread count comes from, for its log."""
    from django.conf import settings

    if int((config or {}).get("torch_threads") or 0) > 0:
        source = "the run's torch_threads"
    elif int(settings.TORCH_THREADS or 0) > 0:
        source = "TORCH_THREADS"
    else:
        source = f"the worker's share of {_cores()} cores"
    return f"{run_threads(config)} torch thread(s) ({source})"


def remember_concurrency(sender=None, conf=None, options=None, **_):
    """celeryd_init handler: record the worker's --concurrency (0: Celery's default) for its processes."""
    os.environ[CONCURRENCY_ENV] = str(int((options or {}).get("concurrency") or 0))


def apply_in_worker_process(**_):
    """worker_process_init handler: libraries a task imports later start with the worker's share
    (OpenMP reads the variable when torch or numpy loads); torch already loaded is set directly."""
    n = default_threads()
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)


@contextmanager
def torch_threads(n: int):
    import torch

    n = int(n or 0)
    before = torch.get_num_threads()
    if n > 0 and n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n > 0 and torch.get_num_threads() != before:
            torch.set_num_threads(before)
