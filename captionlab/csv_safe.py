"""The one CSV writer of every export (campaign votes and aggregates, MTurk batch results, marketplace
files, the ``campaign export-votes`` command, release CSVs).

Against formula injection a text cell starting with =, +, -, @, a tab or a carriage return gets a
leading apostrophe, so a spreadsheet shows it as text instead of evaluating it (OWASP's advice). A cell
that is only a number ("-3", "+1.5") cannot be a formula and stays as it is, so scores and amounts
still sort as numbers. Line breaks inside a cell are kept: the csv module quotes them.
"""
from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator

RISKY = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?([eE][+-]?\d+)?")


def neutralise(value):
    """The value a spreadsheet will not run; anything but text passes unchanged."""
    if isinstance(value, str) and value.startswith(RISKY) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


class SafeWriter:
    """``csv.writer`` whose every cell goes through :func:`neutralise`."""

    def __init__(self, fh, **kwargs):
        self._writer = csv.writer(fh, **kwargs)

    def writerow(self, row: Iterable):
        return self._writer.writerow([neutralise(cell) for cell in row])

    def writerows(self, rows: Iterable[Iterable]) -> None:
        for row in rows:
            self.writerow(row)


def writer(fh, **kwargs) -> SafeWriter:
    return SafeWriter(fh, **kwargs)


def to_text(rows: Iterable[Iterable], **kwargs) -> str:
    out = io.StringIO()
    SafeWriter(out, **kwargs).writerows(rows)
    return out.getvalue()


class _Echo:
    """A file whose write returns the line, so rows can stream without a buffer."""

    def write(self, value):
        return value


def stream(rows: Iterable[Iterable], **kwargs) -> Iterator[str]:
    """One CSV line per row, for a ``StreamingHttpResponse`` over a large table."""
    safe = SafeWriter(_Echo(), **kwargs)
    return (safe.writerow(row) for row in rows)
