"""Emoji and pictographs: dropped with the caption or stripped from it.

Seed 002 keeps a caption only when every token is in a vocabulary of words seen in English Wikipedia; an
emoji is no such word, so the paper's rule drops "A happy dog 🐶❤️ running on the beach 🌊". ``emoji``
does that by default (``mode`` "drop", reason ``emoji``) and says so with its own reason, before the
vocabulary step, which would drop it too (``unknown_tokens`` counts pictographs as unknown tokens).
``mode`` "strip" is the friendlier choice for sources that decorate otherwise good descriptions (social
alt-text, the lower-case preset): the pictographs and their joiners, variation selectors, skin tones and
flag letters are removed, the spaces around them closed up, and the caption goes on ("A happy dog running
on the beach"); one left without a letter is dropped (``empty_after_strip``).

Pictographs are Unicode's Extended_Pictographic characters (emoji, ✈, ☀, ♥, ✔...) and regional indicator
letters (flags), except ©, ® and ™, which are ordinary typography in captions (and boilerplate, cropped
by ``boilerplate_crop``).
"""
from __future__ import annotations

import regex

from ..base import KEEP, Decision, Filter, Item, drop
from ..registry import register
from .common import LETTER_RE, MAX_LISTED, blank

# A pictograph with what clings to it: variation selectors, zero-width joiners, keycaps, skin-tone
# modifiers and tag characters (subdivision flags). One match is one run of them ("👩‍👩‍👧", "🇫🇷").
_PICTOGRAPH = r"[[\p{Extended_Pictographic}\p{Regional_Indicator}]--[\u00a9\u00ae\u2122]]"
_CLINGING = r"[\u200d\ufe0e\ufe0f\u20e3\p{Emoji_Modifier}\U000e0020-\U000e007f]"
PICTOGRAPH_RUN_RE = regex.compile(f"(?:{_PICTOGRAPH}{_CLINGING}*)+", regex.V1)
# For stripping: the run with the horizontal space before it, and joiners left on their own.
_STRIP_RE = regex.compile(f"[ \\t]*(?:(?:{_PICTOGRAPH}|{_CLINGING}){_CLINGING}*)+", regex.V1)
_QUICK = regex.compile(f"{_PICTOGRAPH}|{_CLINGING}", regex.V1)


def pictographs(text: str) -> list[str]:
    """The runs of pictographs in the text, in order (empty for plain ASCII text)."""
    if text.isascii():
        return []
    return PICTOGRAPH_RUN_RE.findall(text)


def strip_pictographs(text: str) -> tuple[str, list[tuple[int, int]]]:
    """(the text without pictographs, the removed (start, end) spans). A run between two words leaves one
    space; at the start, the end or before punctuation it leaves none."""
    if text.isascii() or not _QUICK.search(text):
        return text, []
    out, spans, last = [], [], 0
    for m in _STRIP_RE.finditer(text):
        start, end = m.span()
        out.append(text[last:start])
        after = text[end:end + 1]
        before = text[start - 1:start] if start > last else ""
        if before and not before.isspace() and after and LETTER_RE.match(after):
            out.append(" ")  # "dog🐶running" -> "dog running"
        spans.append((start, end))
        last = end
    out.append(text[last:])
    return "".join(out).strip(), spans


@register
class EmojiFilter(Filter):
    name = "emoji"
    label = "Emoji and pictographs"
    description = ("Emoji and pictographs (🐶 ❤️ ✈ 🇫🇷) are not words of the paper's vocabulary: mode \"drop\" "
                   "(default) drops the caption, mode \"strip\" removes them and keeps the rest.")
    is_transform = True
    text_only = False  # the removed spans are per item (relative to each item's raw text)
    text_determined = True  # ... but the same for every item whose text is its raw text
    per_item = True
    defaults = {"mode": "drop"}

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        if self.params["mode"] not in ("drop", "strip"):
            raise ValueError("emoji: mode must be 'drop' or 'strip'")

    def apply(self, items: list[Item]) -> list[Decision]:
        strip = self.params["mode"] == "strip"
        out = []
        for item in items:
            text = item.text or ""
            if blank(text):
                out.append(drop("empty"))
                continue
            found = pictographs(text)
            if not found:
                out.append(Decision(KEEP, "unchanged"))
            elif not strip:
                out.append(drop("emoji", emoji=found[:MAX_LISTED]))
            else:
                out.append(self._strip(item, text, found))
        return out

    @staticmethod
    def _strip(item: Item, text: str, found: list[str]) -> Decision:
        stripped, spans = strip_pictographs(text)
        # Spans are relative to raw_text: shifted when the working text is a piece of it, else left out.
        offset = 0 if text == item.raw_text else (item.raw_text or "").find(text)
        if offset >= 0:
            item.removed_spans.extend((s + offset, e + offset) for s, e in spans)
        if not LETTER_RE.search(stripped):
            return drop("empty_after_strip", emoji=found[:MAX_LISTED])
        return Decision(KEEP, "stripped", details={"removed": found[:MAX_LISTED]}, text=stripped)
