"""Per-row errors and the import report they end up in."""
from __future__ import annotations

from django.db.models import F

from ..models import ImportIssue, ImportJob

_CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in list(range(32)) + [127] if c != 9}


def printable(value: str, limit: int = 500) -> str:
    """A report-safe excerpt: control characters (NUL cannot be stored in PostgreSQL) escaped."""
    return str(value)[:limit].translate(_CONTROL_ESCAPES)[:limit]


class RowError(Exception):
    """A row (line, archive member, annotation) that cannot be imported, and why."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class Report:
    """Collects issues and counter increments, and writes them in bulk with ``flush``.

    Counters are added with F() expressions so that several download tasks of one job can report
    at the same time without overwriting each other.
    """

    def __init__(self, job: ImportJob):
        self.job = job
        self.issues: list[ImportIssue] = []
        self.counts: dict[str, int] = {}

    def skip(self, line: int | None, item: str, error: RowError, counter: str = "rows_skipped"):
        """Report a row that did not land, counting it under ``counter``."""
        self.issues.append(
            ImportIssue(job=self.job, line=line, item=printable(item), code=error.code, message=error.message)
        )
        self.add(**{counter: 1})

    def warn(self, line: int | None, item: str, code: str, message: str):
        self.issues.append(
            ImportIssue(job=self.job, line=line, item=printable(item), code=code, message=message,
                        severity=ImportIssue.Severity.WARNING)
        )

    def add(self, **counts: int):
        for key, value in counts.items():
            self.counts[key] = self.counts.get(key, 0) + value

    def flush(self, **fields):
        if self.issues:
            ImportIssue.objects.bulk_create(self.issues, batch_size=1000)
            self.issues = []
        updates = {key: F(key) + value for key, value in self.counts.items() if value}
        updates.update(fields)
        if updates:
            ImportJob.objects.filter(pk=self.job.pk).update(**updates)
        self.counts = {}
