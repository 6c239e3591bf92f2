"""Checks on a finished rewrite, before it is kept (seed 002 §3.4: "around 20% of samples are discarded during
this transformation because it can leave sentences too short or inconsistent").

- ``names_left``: no personal or organisation name survives. A word of the output that was a proper noun
  the rewrite did not map, a word capitalised in the middle of a sentence (in a caption that is not written
  in Title Case), a known given name written with a capital, or a word of the curator's ``names`` list
  means the caption is dropped with the reason ``name_left`` rather than released with the name.
- ``garbled``: the rewrite's structure broke: two hypernyms or a noun and a hypernym run together with
  nothing between them ("actor and actress person"), a word whose head was dropped left behind (an
  adjective, a possessive or a preposition without its noun), or the sentence ends on an article, a
  preposition or a conjunction.
- ``lost``: what the seed's text filters asked of the caption and the rewrite took away (``recheck``:
  "noun", "determiner", "preposition": "candidates with no determiner, no noun, or no preposition are
  discarded"): a caption that had one and lost it fails the text filters again.
"""
from __future__ import annotations

import re
from functools import lru_cache

from .units import Unit

# Words that are capitalised in the middle of an English sentence without being names.
ALWAYS_CAPITAL = frozenset(["i", "i'm", "i've", "i'd", "i'll", "tv", "ok", "okay", "dj", "diy", "usb", "uv",
                            "led", "ceo", "atm", "suv", "gps", "bbq", "a", "pm", "am", "3d", "4k", "hd", "ai"])
# A word this common (wordfreq's Zipf scale) written as a proper noun in a Title Case caption is taken
# for an ordinary word ("Young Woman Drinking Coffee"); one that rare is a name.
COMMON_ZIPF = 4.8
# A word left without the word it modified (a prepositional phrase with its object is whole on its own).
ORPHAN_DEPS = frozenset(["amod", "poss", "case", "nummod", "det", "predet", "compound", "acl", "relcl"])
WORD = re.compile(r"[\w'-]+")
DANGLING_END = frozenset(["DET", "ADP", "CCONJ", "SCONJ"])


@lru_cache(maxsize=20_000)
def common_word(word: str) -> bool:
    try:
        from wordfreq import zipf_frequency
    except ImportError:  # pragma: no cover - wordfreq is a pinned requirement
        return False
    return zipf_frequency(word, "en") >= COMMON_ZIPF


def title_case(doc) -> bool:
    """Whether the caption is written in Title Case (most of its words capitalised)."""
    words = [t for t in doc if t.is_alpha and len(t.text) > 3]
    return bool(words) and sum(t.is_title or t.is_upper for t in words) / len(words) > 0.6


def names_left(rw, units: list[Unit]) -> list[str]:
    """The words of the output that still look like names (see the module's docstring)."""
    g, doc = rw.g, rw.doc
    titled = title_case(doc)
    uncased = not any(ch.isupper() for ch in doc.text)
    starts = {s.start for s in doc.sents}
    found = []
    for k, u in enumerate(units):
        t = u.token
        if t is None or not t.is_alpha:
            continue
        lower = t.lower_
        if lower in ALWAYS_CAPITAL or lower in g.breeds:
            continue
        sentence_start = t.i in starts or (t.i > 0 and rw.tk[t.i - 1].text in (":", '"', "\u201c", "(", "-", "\u2014"))
        capital = t.is_title and not sentence_start
        if titled:
            # In Title Case every word has a capital: only a proper noun that is no common word is a name.
            if t.pos_ == "PROPN" and not common_word(lower):
                found.append(t.text)
            continue
        # A proper noun written in lower case is a tagger's slip ("the oven") unless the caption has no
        # capitals at all (lower-case alt-text: "tom hanks at the premiere"), where a rare one is a name.
        propn = t.pos_ == "PROPN" and (not t.is_lower or (uncased and not common_word(lower)))
        if (propn and not (sentence_start and common_word(lower))) or capital \
                or (t.is_title and lower in g.person_names):
            found.append(t.text)
    text = " " + " ".join(WORD.findall(rw.text.lower())) + " "
    found += [name for name in sorted(g.names) if f" {name} " in text]  # the curator's names, whole
    return list(dict.fromkeys(found))


def garbled(rw, units: list[Unit]) -> str | None:
    """Why the rewrite's structure broke, or None (see the module's docstring)."""
    words = [u for u in units if not u.is_punct]
    for a, b in zip(units, units[1:]):  # side by side, nothing between (a comma keeps them apart)
        if a.is_punct or b.is_punct or _common_noun(a) or _common_noun(b):
            continue
        if a.token is None and b.token is None and a.entity_type and b.entity_type:
            return f'two hypernyms run together: "{a.text} {b.text}"'
        if a.token is not None and (a.token.pos_ in ("NOUN", "PROPN") or a.token.lower_ in rw.g.title_groups) \
                and b.token is None and b.entity_type:
            return f'a noun and a hypernym run together: "{a.text} {b.text}"'
        if a.token is None and a.entity_type and b.token is not None and b.token.pos_ in ("NOUN", "PROPN") \
                and b.token.dep_ != "ROOT" and not _modifies(a, b.token):  # a ROOT "noun" is a verb mistagged
            return f'a hypernym and a noun run together: "{a.text} {b.text}"'
    removed, replaced = rw.removed, {i for u in units if u.token is None for i in range(u.first, u.last + 1)}
    for u in words:
        t = u.token
        if t is None or t.dep_ not in ORPHAN_DEPS:
            continue
        head = t.head
        if head.i != t.i and head.i in removed and head.i not in replaced:
            return f'"{t.text}" lost the word it belonged to ("{head.text}")'
    if words:
        last = words[-1]
        if last.token is not None and last.token.pos_ in DANGLING_END and last.token.dep_ != "prt":
            return f'the sentence ends on "{last.text}"'
    return None


def _common_noun(unit: Unit) -> bool:
    """A breed word kept as written ("a dalmatian") is a common noun of the caption, not a hypernym."""
    return unit.token is None and bool(unit.mentions) and all(m.source == "breed" for m in unit.mentions)


def _modifies(unit: Unit, token) -> bool:
    """Whether the name the hypernym ``unit`` stands for modified ``token`` ("the festival crowd")."""
    return any(token.i == t.head.i for m in unit.mentions for t in token.doc[m.start:m.end]
               if t.dep_ in ("compound", "nmod", "amod", "poss"))


def lost(rw, units: list[Unit], recheck: list[str]) -> list[str]:
    """What of ``recheck`` (noun, determiner, preposition) the caption had and its rewrite lost."""
    kept = [u.token for u in units if u.token is not None]
    has_hypernym = any(u.token is None and u.entity_type for u in units)
    tests = {
        "noun": (lambda t: t.pos_ in ("NOUN", "PROPN", "PRON"), has_hypernym),
        "determiner": (lambda t: t.pos_ == "DET" or t.tag_ in ("DT", "PRP$", "WDT"),
                       any(u.token is None and u.text.split()[0] in ("a", "an", "the") for u in units)),
        "preposition": (lambda t: t.pos_ == "ADP", False),
    }
    out = []
    for what in recheck:
        test, extra = tests[what]
        if any(test(t) for t in rw.tk) and not (extra or any(test(t) for t in kept)):
            out.append(what)
    return out
