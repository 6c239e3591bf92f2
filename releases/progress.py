"""Progress of a long release job (freezing, an export) written to its row at a bounded pace."""
from __future__ import annotations

import time

PROGRESS_EVERY_S = 0.5  # progress is written to the database at most this often


class Throttled:
    """A progress callback that writes ``done`` and ``total`` to one row at most every half second
    (and always at the end), so a million-row export does not issue a million updates."""

    def __init__(self, model, pk: int, done_field: str, total_field: str, echo=None):
        self.model, self.pk, self.done_field, self.total_field = model, pk, done_field, total_field
        self.echo = echo  # also told, at the same pace (the command prints a progress line)
        self.last = 0.0

    def __call__(self, done: int, total: int | None = None) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S and not (total and done >= total):
            return
        self.last = now
        values = {self.done_field: max(int(done), 0)}
        if total is not None:
            values[self.total_field] = max(int(total), 0)
        self.model.objects.filter(pk=self.pk).update(**values)
        if self.echo is not None:
            self.echo(int(done), total)
