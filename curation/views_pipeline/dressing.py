"""Showing a decision: texts cut to a readable length, removed spans struck through or a word diff, compact
details and the latest review, attached to the decision for the row template."""
from __future__ import annotations

import difflib
import json
import re

from ..models import FilterDecision

MAX_SHOWN_CHARS = 2000  # longer texts are cut on the page (a 1 MB caption stays readable)
MAX_DIFF_CHARS = 5000  # difflib is quadratic: longer texts are shown without a diff


def _cut(text: str) -> tuple[str, int]:
    return (text, 0) if len(text) <= MAX_SHOWN_CHARS else (text[:MAX_SHOWN_CHARS], len(text) - MAX_SHOWN_CHARS)


def _spans(spans, text: str) -> list[tuple[int, int]] | None:
    """Removed character spans, sorted and merged, or None where they do not fit the text."""
    try:
        pairs = sorted((int(a), int(b)) for a, b in spans)
    except (TypeError, ValueError):
        return None
    merged: list[tuple[int, int]] = []
    for start, end in pairs:
        if not 0 <= start < end <= len(text):
            return None
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged or None


def _struck(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, str]]:
    parts, at = [], 0
    for start, end in spans:
        if start > at:
            parts.append((text[at:start], ""))
        parts.append((text[start:end], "del"))
        at = end
    if at < len(text):
        parts.append((text[at:], ""))
    return parts


def _word_diff(before: str, after: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Both texts cut into (text, "" | "del" | "ins") parts by a word-level diff."""
    a, b = re.findall(r"\s+|[^\s]+", before), re.findall(r"\s+|[^\s]+", after)
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            left.append(("".join(a[i1:i2]), ""))
            right.append(("".join(b[j1:j2]), ""))
            continue
        if i2 > i1:
            left.append(("".join(a[i1:i2]), "del"))
        if j2 > j1:
            right.append(("".join(b[j1:j2]), "ins"))
    return left, right


def dress(decision: FilterDecision, transform: bool, seen: str | None = None) -> None:
    """Attach what the row shows: texts cut into parts, compact details, the latest review.

    A transform's row pairs the raw text (removed spans struck through, or a word diff) with its
    output; another step's row pairs the raw text with the text the step saw, when an earlier
    transform changed it.
    """
    raw = decision.caption.text if decision.caption_id else ""
    decision.raw_text, decision.raw_more = _cut(raw)
    decision.before_parts = decision.after_parts = None
    decision.after_label = "Transformed"
    if not transform and seen is not None and seen != raw:
        decision.before_parts = [(decision.raw_text, "")]
        decision.after_parts = [(_cut(seen)[0], "")]
        decision.after_label = "As this step saw it"
    if transform and decision.caption_id and decision.text_after and decision.text_after != decision.text_before:
        spans = _spans((decision.details or {}).get("removed_spans") or [], raw)
        if spans and len(raw) <= MAX_SHOWN_CHARS * 4:
            decision.before_parts = _struck(raw, spans)
            decision.after_parts = [(decision.text_after[:MAX_SHOWN_CHARS], "")]
        elif len(decision.text_before) <= MAX_DIFF_CHARS and len(decision.text_after) <= MAX_DIFF_CHARS:
            decision.before_parts, decision.after_parts = _word_diff(decision.text_before, decision.text_after)
        else:
            decision.before_parts = [(_cut(decision.text_before)[0], "")]
            decision.after_parts = [(_cut(decision.text_after)[0], "")]
    details = {k: v for k, v in (decision.details or {}).items() if k != "removed_spans"}
    text = json.dumps(details, ensure_ascii=False, sort_keys=True, default=str) if details else ""
    decision.details_text = text if len(text) <= 300 else text[:299] + "…"
    reviews = list(decision.reviews.all())
    decision.last_review = reviews[0] if reviews else None
