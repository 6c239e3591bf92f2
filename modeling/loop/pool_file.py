"""A labelled pool file: the format of tests/modeling/data/fluency_dev.tsv, read for simulations
(benchmarks/loop.py --pool) with a clear error for anything else.

The format: UTF-8 text, tab-separated; lines starting with "#" are comments; the first other line is the
header ``label  error  source  text`` (in that order); then one row per sentence: ``label`` 1 (fluent) or
0 (not fluent), ``error`` the error class ("none" for a fluent row), ``source`` where the caption comes
from, ``text`` the caption. A pool needs both classes, each at least ``MIN_PER_CLASS`` times.
"""
from __future__ import annotations

from pathlib import Path

COLUMNS = ("label", "error", "source", "text")
MIN_PER_CLASS = 5


class PoolFileError(ValueError):
    """A pool file that cannot be used; ``code`` names the problem, ``line`` the line (1-based) where known."""

    def __init__(self, message: str, code: str = "bad_pool", line: int | None = None):
        super().__init__(message)
        self.message, self.code, self.line = message, code, line

    def __str__(self):
        return self.message


def read_pool(path) -> list[dict]:
    """[{"label": 0 | 1, "error", "source", "text", "line"}] of the file at ``path``; PoolFileError otherwise."""
    path = Path(path)
    try:
        content = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise PoolFileError(f"No pool file at {path}.", code="missing") from None
    except IsADirectoryError:
        raise PoolFileError(f"{path} is a directory, not a pool file.", code="missing") from None
    except UnicodeDecodeError as exc:
        raise PoolFileError(f"{path} is not UTF-8 text (byte {exc.start}).", code="encoding") from None
    return parse_pool(content, str(path))


def parse_pool(content: str, name: str = "the pool") -> list[dict]:
    rows, header_seen = [], False
    for number, raw in enumerate(content.splitlines(), 1):
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        if not header_seen:
            if tuple(f.strip().lower() for f in fields) != COLUMNS:
                raise PoolFileError(
                    f"{name}, line {number}: the header must be the tab-separated columns "
                    f"{' / '.join(COLUMNS)}; found {' / '.join(f.strip() for f in fields)[:120]!r}"
                    f"{' (no tabs: is it comma-separated?)' if len(fields) == 1 else ''}.", code="bad_header", line=number)
            header_seen = True
            continue
        if len(fields) != len(COLUMNS):
            raise PoolFileError(f"{name}, line {number}: {len(fields)} tab-separated field(s), expected "
                                f"{len(COLUMNS)} ({', '.join(COLUMNS)}).", code="bad_row", line=number)
        label, error, source, text = (f.strip() for f in fields)
        if label not in ("0", "1"):
            raise PoolFileError(f"{name}, line {number}: the label is {label[:20]!r}; it must be 1 (fluent) or 0 "
                                f"(not fluent).", code="bad_label", line=number)
        if not text:
            raise PoolFileError(f"{name}, line {number}: the text is empty.", code="bad_row", line=number)
        rows.append({"label": int(label), "error": error, "source": source, "text": text, "line": number})
    if not header_seen:
        raise PoolFileError(f"{name} holds no header and no rows.", code="empty")
    fluent = sum(r["label"] for r in rows)
    counts = {"fluent (1)": fluent, "not fluent (0)": len(rows) - fluent}
    if min(counts.values()) == 0:
        present = next(k for k, v in counts.items() if v)  if rows else "none"
        raise PoolFileError(f"{name} has one class only: {len(rows)} rows, all {present}. A pool needs both "
                            f"classes to train and judge a classifier.", code="one_class")
    if min(counts.values()) < MIN_PER_CLASS:
        raise PoolFileError(f"{name} has too few rows of a class: {counts}; each needs at least {MIN_PER_CLASS}.",
                            code="too_few")
    return rows
