"""Boilerplate: cropping prefixes and suffixes ("stock photo", "photo by ...") and dropping texts that
begin or end with a pattern ("embedded image permalink")."""
from __future__ import annotations

import re
from functools import lru_cache

from ..base import KEEP, Decision, Filter, Item, drop, keep
from ..registry import register
from .common import TextFilter, blank

# Separators that surround boilerplate: "... gear down - Stock Image", "Stock Photo | ...", "(photo by X)".
SEP = r"\s\-–—|:•·,;.!?/\\~*()\[\]{}"
HARD_SEP = r"\-–—|:•·,;.!?/\\~()\[\]{}"
WINDOW = 400  # patterns are searched in the first/last characters only (1 MB texts stay fast)
WILDCARD_CHARS = 120  # "photo by ..." crops at most this many characters after the phrase


def _phrase_regex(phrase: str, bounded: bool = True) -> str:
    """The phrase's words joined by runs of separators; ``bounded``: not inside a longer word."""
    words = [re.escape(w) for w in re.split(r"[\s\-_]+", phrase) if w]
    left = r"(?<!\w)" if bounded and re.match(r"\w", phrase) else ""
    right = r"(?!\w)" if bounded and re.search(r"\w$", phrase) else ""
    return left + r"[\s\-_]+".join(words) + right


def _patterns(phrases) -> tuple[list[str], list[str], tuple[str, ...]]:
    """Plain and wildcard ("photo by ..." matches the phrase and what follows it) phrase regexes, and the
    keywords (the longest word of each phrase) whose absence from a text rules every phrase out cheaply."""
    plain, wild, keys = [], [], set()
    for phrase in sorted({str(p).strip().lower() for p in phrases if str(p).strip()}, key=len, reverse=True):
        body = phrase[:-3].strip() if phrase.endswith("...") else phrase
        if not body:
            continue
        (wild if body != phrase else plain).append(_phrase_regex(body))
        longest = max(re.findall(r"\w+", body) or [""], key=len)
        keys.add(longest if len(longest) >= 3 else body)  # "(c) ..." is keyed "(c)", not "c"
    return plain, wild, tuple(sorted(keys))


class _Phrases:
    """Whether some phrase occurs in part of a text: every occurrence the phrase regexes of ``_patterns`` find,
    and more (no word boundaries), so that where none occurs they need not be tried. Those try every branch at
    every position (50-90 µs a caption holding a keyword, such as "photographs"). So does Python's ``re`` with
    one IGNORECASE alternation; searched case-sensitively in lower-cased ASCII text, it jumps to the branches'
    first letters. The answer is the same there unless a phrase holds a non-ASCII letter that IGNORECASE
    equates with an ASCII one ("ſ", "K"): such phrases keep the IGNORECASE search."""

    def __init__(self, alternatives: list[str]):
        pattern = "|".join(alternatives)  # a phrase of separators only ("-") is an empty one: it occurs anywhere
        self.ignoring_case = re.compile(pattern, re.IGNORECASE)
        caseless = all(c.isascii() or c.lower() == c.upper() for c in pattern)
        self.lower_ascii = re.compile(pattern) if caseless else None

    def occur(self, text: str, start: int, end: int) -> bool:
        part = text[start:end]
        if self.lower_ascii is not None and part.isascii():
            return self.lower_ascii.search(part.lower()) is not None
        return self.ignoring_case.search(text, start, end) is not None


def _phrases(phrases) -> _Phrases | None:
    """The ``_Phrases`` of these phrases (as ``_patterns`` reads them); None when there are none."""
    alternatives = set()
    for phrase in {str(p).strip().lower() for p in phrases}:
        body = phrase[:-3].strip() if phrase.endswith("...") else phrase
        if body:
            alternatives.add(_phrase_regex(body, bounded=False))
    return _Phrases(sorted(alternatives)) if alternatives else None


def _keys_regex(keys: tuple[str, ...]):
    """One regex that finds any of the keywords in lower-cased text (one scan instead of one per keyword),
    grouped by first character (the regex engine then tries one branch per position, not every keyword)."""
    if not keys:
        return None
    by_first: dict[str, list[str]] = {}
    for key in sorted(set(keys), key=len, reverse=True):
        by_first.setdefault(key[0], []).append(re.escape(key[1:]))
    return re.compile("|".join(f"{re.escape(first)}(?:{'|'.join(rests)})" for first, rests in by_first.items()))


@lru_cache(maxsize=32)
def _crop_patterns(prefixes: tuple, suffixes: tuple):
    flags = re.IGNORECASE
    pre_plain, pre_wild, pre_keys = _patterns(prefixes)
    suf_plain, suf_wild, suf_keys = _patterns(suffixes)
    alts = ["(?:" + "|".join(pre_plain) + ")"] if pre_plain else []
    if pre_wild:  # a wildcard prefix runs to the next hard separator, which must be there
        alts.append("(?:" + "|".join(pre_wild) + f")[^{HARD_SEP}\\n]{{0,{WILDCARD_CHARS}}}(?=[{HARD_SEP}])")
    prefix = re.compile(f"[{SEP}]*(?:{'|'.join(alts)})[{SEP}]*", flags) if alts else None
    suffix = re.compile(f"[{SEP}]*(?:{'|'.join(suf_plain)})[{SEP}]*$", flags) if suf_plain else None
    # A wildcard suffix must follow a hard separator (or start the text): "A dog. Photo by Ann Lee"
    # crops, "Children pose for a photo by the lake" does not.
    wild = (re.compile(f"(?P<lead>[{SEP}]*)(?:{'|'.join(suf_wild)})[^\\n]{{0,{WILDCARD_CHARS}}}$", flags)
            if suf_wild else None)
    return (prefix, suffix, wild, _keys_regex(pre_keys), _keys_regex(suf_keys), _keys_regex(pre_keys + suf_keys),
            _phrases(suffixes))


def _crop_bounds(text: str, patterns) -> tuple[int, int]:
    """(a, b): text[a:b] is what remains after repeatedly cropping boilerplate at both ends."""
    prefix, suffix, wild, pre_keys, suf_keys, any_keys, suf_phrases = patterns
    a, b = 0, len(text)
    if b <= WINDOW and (any_keys is None or not any_keys.search(text.lower())):
        return a, b  # a short text (head and tail are the whole text) without any keyword: nothing to crop
    for _ in range(10):  # "Stock Photo - Royalty Free: ..." needs two rounds
        start = (a, b)
        if prefix is not None and pre_keys.search(text[a:min(b, a + WINDOW)].lower()):
            m = prefix.match(text, a, min(b, a + WINDOW))
            if m and m.end() > a:
                a = m.end()
        window = max(a, b - WINDOW)
        # A suffix needs one of its phrases in the window: the keywords rule most texts out, the phrases
        # (a keyword inside another word, "photographs", is no phrase) most of the rest.
        if (suf_keys is None or not suf_keys.search(text[window:b].lower())
                or not suf_phrases.occur(text, window, b)):
            if (a, b) == start:
                break
            continue
        if suffix is not None and b > a:
            m = suffix.search(text, window, b)
            if m:
                b = m.start()
        pos = window
        while wild is not None and b > a:
            m = wild.search(text, pos, b)
            if not m:
                break
            if m.start() == a or re.search(f"[{HARD_SEP}]", m.group("lead")):
                b = m.start()
                break
            pos = m.start() + 1
        if (a, b) == start:
            break
    return a, b


@register
class BoilerplateCrop(Filter):
    name = "boilerplate_crop"
    label = "Crop boilerplate"
    description = ("Crops predefined boiler-plate prefixes and suffixes (\"stock photo\", \"click to enlarge "
                   "picture\") with the punctuation around them; a phrase ending in \"...\" also crops what "
                   "follows it (\"photo by ...\"). Texts left empty are dropped.")
    is_transform = True
    text_only = False  # the removed spans are per item (relative to each item's raw text)
    text_determined = True  # ... but the same for every item whose text is its raw text
    per_item = True
    defaults = {
        "prefixes": ["stock photo", "stock image", "stock picture", "royalty free stock photo", "royalty free",
                     "click to enlarge picture", "click to enlarge", "image may contain", "free download",
                     "photo:", "image:", "picture:"],
        "suffixes": ["stock photo", "stock photos", "stock image", "stock picture", "stock photography",
                     "royalty free stock photo", "royalty free image", "royalty free", "click to enlarge picture",
                     "click to enlarge", "free download", "photo by ...", "photo credit ...",
                     "photo courtesy of ...", "image courtesy of ...", "image by ...", "© ...", "(c) ..."],
    }

    def apply(self, items: list[Item]) -> list[Decision]:
        patterns = _crop_patterns(tuple(self.params["prefixes"]), tuple(self.params["suffixes"]))
        bounds: dict[str, tuple[int, int]] = {}  # per distinct text; the spans are per item
        out = []
        for item in items:
            text = item.text or ""
            if blank(text):
                out.append(drop("empty"))
                continue
            if text not in bounds:
                bounds[text] = _crop_bounds(text, patterns)
            out.append(self._crop(item, text, *bounds[text]))
        return out

    @staticmethod
    def _crop(item: Item, text: str, a: int, b: int) -> Decision:
        if (a, b) == (0, len(text)):
            return Decision(KEEP, "unchanged")
        kept = text[a:b]
        a += len(kept) - len(kept.lstrip())
        b -= len(kept) - len(kept.rstrip())
        removed = [s[:200] for s in (text[:a], text[b:]) if s.strip()]
        spans = [(s, e) for s, e in ((0, a), (max(a, b), len(text))) if e > s]
        # Spans are relative to raw_text; after an earlier transform they are shifted when the working
        # text is still a piece of the raw text, and left out otherwise.
        offset = 0 if text == item.raw_text else (item.raw_text or "").find(text)
        if offset >= 0:
            item.removed_spans.extend((s + offset, e + offset) for s, e in spans)
        if a >= b:
            return drop("empty_after_crop", removed=removed)
        return Decision(KEEP, "cropped", details={"removed": removed}, text=text[a:b])


@lru_cache(maxsize=32)
def _drop_patterns(patterns: tuple):
    plain, wild, keys = _patterns(patterns)
    alts = "|".join(plain + wild)
    if not alts:
        return None, None, None, None
    start = re.compile(f"[{SEP}\"'“”‘’]*(?P<p>{alts})", re.IGNORECASE)
    end = re.compile(f"(?P<p>{alts})[{SEP}\"'“”‘’]*$", re.IGNORECASE)
    return start, end, _keys_regex(keys), _phrases(patterns)


@register
class BoilerplateDrop(TextFilter):
    name = "boilerplate_drop"
    label = "Drop boilerplate"
    description = ("Drops texts that begin or end with boilerplate patterns such as \"embedded image "
                   "permalink\" or \"profile photo\" (case-insensitive, curator-editable).")
    defaults = {
        "patterns": ["embedded image permalink", "profile photo", "profile picture", "see more", "view image",
                     "image result for", "click here", "read more", "no image available", "image not found",
                     "image unavailable", "placeholder image", "default avatar", "user avatar"],
    }

    def prepare(self):
        self.start, self.end, self.keys, self.phrases = _drop_patterns(tuple(self.params["patterns"]))

    def decide(self, item):
        text = item.text
        if self.keys is None:
            return keep()
        head = text[:WINDOW].lower()
        in_head = self.keys.search(head)
        if in_head:
            m = self.start.match(text, 0, WINDOW)
            if m:
                return drop("boilerplate", pattern=m.group("p"), where="start")
        tail = max(0, len(text) - WINDOW)
        if in_head if tail == 0 else self.keys.search(text[tail:].lower()):
            # "end" tries every pattern at every position: only where a phrase occurs at all (see _Phrases)
            m = self.end.search(text, tail) if self.phrases.occur(text, tail, len(text)) else None
            if m:
                return drop("boilerplate", pattern=m.group("p"), where="end")
        return keep()
