"""Line-oriented sources (Conceptual Captions TSV, comment dumps): streamed, one row at a time."""
from __future__ import annotations

import unicodedata
from typing import BinaryIO, Iterator

from django.conf import settings

from .report import RowError

# Control characters other than tab are refused: NUL cannot be stored in PostgreSQL text, and the
# others are never part of a real caption.
_CONTROL = {c for c in range(32) if c not in (9,)} | {127}
_CONTROL_TABLE = {c: None for c in _CONTROL}


def _visible(ch: str) -> bool:
    """A character that shows: not whitespace, not a format mark (zero-width space, joiners, BOM)."""
    return not ch.isspace() and unicodedata.category(ch) not in ("Cf", "Cc", "Zs", "Zl", "Zp")


def clean_caption(text: str) -> str:
    """Strip a caption and check it: not empty, no control characters, within the length limit."""
    text = text.strip()
    if not text or not any(_visible(ch) for ch in text):
        raise RowError("empty_caption", "the caption is empty" if not text else
                       "the caption has no visible characters (only spaces or zero-width marks)")
    if len(text) > settings.INGEST_MAX_CAPTION_CHARS:
        raise RowError(
            "caption_too_long",
            f"caption has {len(text)} characters; the limit is {settings.INGEST_MAX_CAPTION_CHARS}",
        )
    if text.translate(_CONTROL_TABLE) != text:
        raise RowError("invalid_characters", "caption contains control characters (e.g. NUL)")
    return text


def max_line_bytes() -> int:
    # A UTF-8 character is at most 4 bytes; leave room for the URL or id column.
    return settings.INGEST_MAX_CAPTION_CHARS * 4 + 8192


def iter_lines(fh: BinaryIO) -> Iterator[tuple[int, str | RowError]]:
    """(line number, decoded line without its newline, or the RowError that line raised).

    Reads with a per-line byte cap so a file without newlines cannot exhaust memory; a line over
    the cap is consumed to its end and reported once.
    """
    limit = max_line_bytes()
    lineno = 0
    while True:
        raw = fh.readline(limit + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            while True:  # swallow the rest of the overlong line
                rest = fh.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield lineno, RowError("line_too_long", f"line is longer than {limit} bytes")
            continue
        raw = raw.rstrip(b"\r\n")
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield lineno, RowError("invalid_utf8", f"line is not valid UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})")
            continue
        if not text.strip():
            yield lineno, RowError("empty_line", "empty line")
            continue
        yield lineno, text


def count_lines(fh: BinaryIO) -> int:
    """Number of lines, for the progress bar (a fast pass over the bytes; rewinds the file)."""
    count, last = 0, b"\n"
    while chunk := fh.read(1 << 20):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    fh.seek(0)
    return count + (0 if last == b"\n" else 1)


def split_columns(text: str, expected: tuple[str, ...], sep: str = "\t") -> list[str]:
    parts = text.split(sep)
    if len(parts) < len(expected):
        raise RowError(
            "missing_column",
            f"expected {len(expected)} tab-separated columns ({', '.join(expected)}), found {len(parts)}",
        )
    if len(parts) > len(expected):
        raise RowError(
            "extra_column",
            f"expected {len(expected)} tab-separated columns ({', '.join(expected)}), found {len(parts)}",
        )
    return parts
