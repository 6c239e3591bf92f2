"""Live progress: the run row's fields and log, written at most about once a second, and the check
that the run was cancelled meanwhile. ``Quiet`` stands in where there is no run row (fit_in_memory)."""
from __future__ import annotations

import logging
import time

from django.utils import timezone

from ..models import TrainingRun

logger = logging.getLogger("modeling.engine")

PROGRESS_EVERY_S = 1.0


class _Cancelled(Exception):
    """The run was cancelled from outside; the loop unwinds to the driver, which logs it."""


class _Progress:
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
        if fields:
            TrainingRun.objects.filter(pk=self.run.pk).exclude(status=TrainingRun.Status.CANCELLED).update(**fields)
        return TrainingRun.objects.filter(pk=self.run.pk).values_list("status", flat=True).first() != \
            TrainingRun.Status.CANCELLED


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
