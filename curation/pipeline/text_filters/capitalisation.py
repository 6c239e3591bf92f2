"""Capitalisation: the first word capitalised, not too many capitalised words."""
from __future__ import annotations

from functools import lru_cache

from ..base import drop, keep
from ..registry import register
from .common import LETTER_RE, MEMO_SIZE, TextFilter
from .common import words as _words

_NOT_LETTERED, _LOWER, _CAPITALISED = 1, 2, 3


@lru_cache(maxsize=MEMO_SIZE)
def _case(word: str) -> int:
    """Whether the word starts with a letter, and a capital one."""
    return (_CAPITALISED if word[0].isupper() else _LOWER) if LETTER_RE.match(word) else _NOT_LETTERED


@register
class Capitalisation(TextFilter):
    name = "capitalisation"
    label = "Capitalisation"
    description = ("Drops candidates whose first word is not capitalised, or with too high a share of capitalised "
                   "words (title-case SEO strings), as seed 002 states it. Words starting with a digit count as "
                   "neither. For sources written in lower case, require_first_capitalised: false (the "
                   "conceptual-captions-lowercase preset).")
    # 0.8: the alt-texts the paper keeps are full of names yet measure 0.6-0.73 ("Musician Justin Timberlake
    # performs at the 2017 Pilgrimage Music & Cultural Festival ..." is 0.67; "Actor Tom Hanks arrives at
    # the Academy Awards in Los Angeles" 0.73), while title-case strings measure 0.85-1.0.
    defaults = {"require_first_capitalised": True, "max_capitalised_ratio": 0.8}
    score_thresholds = ("max_capitalised_ratio",)

    def decide(self, item):
        words = _words(item.text)
        if not words:
            return drop("no_words")
        cases = [_case(w) for w in words]
        capitalised = cases.count(_CAPITALISED)
        lettered = capitalised + cases.count(_LOWER)
        ratio = round(capitalised / lettered, 4) if lettered else 0.0
        first = words[0]
        if self.params["require_first_capitalised"] and cases[0] == _LOWER:
            return drop("first_not_capitalised", score=ratio, first_word=first[:100])
        if ratio > self.params["max_capitalised_ratio"]:
            return drop("too_many_capitalised", score=ratio, capitalised=capitalised, words=lettered)
        return keep(score=ratio)
