"""Live progress: the run row's fields and log, written at most about once a second, and the check
that the run was cancelled meanwhile. ``Quiet`` stands in where there is no run row (fit_in_memory).

The run's ``heartbeat_at`` is written with every progress write and, from a thread (``heartbeat``), every
HEARTBEAT_EVERY_S while the worker lives, so phases without progress writes (data preparation, evaluation)
still beat; a running run without a beat for ``TRAINING_WORKER_LOST_AFTER_S`` lost its worker (``worker_lost``)."""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from ..models import TrainingRun

logger = logging.getLogger("modeling.engine")

PROGRESS_EVERY_S = 1.0


class Cancelled(Exception):
    """The run was cancelled from outside; the loop unwinds to the driver, which logs it."""


class Progress:
    """Buffers the run's live fields and writes them at most every PROGRESS_EVERY_S seconds."""

    def __init__(self, run: TrainingRun, echo=None):
        self.run = run
        self.echo = echo
        self.last = 0.0
        self.fields: dict = {}
        self.log_lines: list[str] = []

    def log(self, message: str) -> None:
        line = f"[{timezone.now():%Y-%m-%d %H:%M:%S}] {message}"
        self.log_lines.append(line)
        logger.info("run %s: %s", self.run.pk, message)
        if self.echo:
            self.echo(message)

    def set(self, **fields) -> None:
        self.fields.update(fields)
        for key, value in fields.items():
            setattr(self.run, key, value)

    def flush(self, force: bool = False) -> bool:
        """Write the buffered fields; return False when the run was cancelled meanwhile."""
        now = time.monotonic()
        if not force and now - self.last < PROGRESS_EVERY_S:
            return True
        self.last = now
        fields = dict(self.fields)
        if self.log_lines:
            self.run.log = (self.run.log + "\n" if self.run.log else "") + "\n".join(self.log_lines)
            self.log_lines = []
            fields["log"] = self.run.log
        self.fields = {}
        fields["heartbeat_at"] = timezone.now()
        TrainingRun.objects.filter(pk=self.run.pk).exclude(status=TrainingRun.Status.CANCELLED).update(**fields)
        return TrainingRun.objects.filter(pk=self.run.pk).values_list("status", flat=True).first() != \
            TrainingRun.Status.CANCELLED


HEARTBEAT_EVERY_S = 15.0
LIVE = (TrainingRun.Status.RUNNING, TrainingRun.Status.EVALUATING)


def lost_after() -> timedelta:
    return timedelta(seconds=float(settings.TRAINING_WORKER_LOST_AFTER_S))


def worker_lost(run: TrainingRun, now=None) -> bool:
    """True for a running (or evaluating) run whose worker has not beaten for ``lost_after()``."""
    last = run.heartbeat_at or run.started_at
    if run.status not in LIVE or last is None:
        return False
    return (now or timezone.now()) - last > lost_after()


@contextlib.contextmanager
def heartbeat(run_id: int, every: float = HEARTBEAT_EVERY_S):
    """Beat for the run from a thread while the block runs: the beat stops only when the process does."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(every):
                TrainingRun.objects.filter(pk=run_id, status__in=LIVE).update(heartbeat_at=timezone.now())
        except Exception:
            logger.warning("run %s: heartbeat stopped", run_id, exc_info=True)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"heartbeat-run-{run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class Quiet:
    """The progress interface without a database: fields are dropped, log lines go to ``echo`` (if any),
    and nothing can cancel it."""

    def __init__(self, echo=None):
        self.echo = echo

    def log(self, message: str) -> None:
        if self.echo:
            self.echo(message)

    def set(self, **fields) -> None:
        pass

    def flush(self, force: bool = False) -> bool:
        return True
