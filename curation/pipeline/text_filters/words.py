"""Word statistics: the unique-word ratio and token repetition."""
from __future__ import annotations

from collections import Counter
from functools import lru_cache

from ..base import drop, keep
from ..registry import register
from .common import LETTER_RE, MEMO_SIZE, TextFilter
from .common import words as _words


@register
class UniqueWordRatio(TextFilter):
    name = "unique_word_ratio"
    label = "Unique-word ratio"
    description = "Drops candidates whose distinct (lower-cased) words are too small a share of their words."
    # 0.5: ordinary sentences with repeated function words ("A view of the city of London from the top of
    # the tower") stay above 0.65; keyword spam ("sale sale cheap sale") falls below.
    defaults = {"min_ratio": 0.5}
    score_thresholds = ("min_ratio",)

    def decide(self, item):
        words = _words(item.text)
        if not words:
            return drop("no_words")
        unique = len(set(map(str.lower, words)))
        ratio = round(unique / len(words), 4)
        if ratio < self.params["min_ratio"]:
            return drop("low_unique_ratio", score=ratio, unique=unique, words=len(words))
        return keep(score=ratio, unique=unique, words=len(words))


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


@lru_cache(maxsize=MEMO_SIZE)
def _content_word(word: str, stop: frozenset[str]) -> str | None:
    """The word lower-cased when a content word (not in ``stop``, with a letter), else None."""
    lowered = word.lower()
    return lowered if lowered not in stop and LETTER_RE.search(lowered) else None


@register
class TokenRepetition(TextFilter):
    name = "token_repetition"
    label = "Token repetition"
    description = ("Drops candidates where a content word (not a stop word, not a number) occurs more than "
                   "max_repeats times, or where repeated occurrences are too large a share of the content words.")
    # rate = 1 - distinct/total over content words. "A dog chases another dog" is 0.33 and stays;
    # "Red dress, red shoes: dress shoes" is 0.5 and goes.
    defaults = {"max_repeats": 2, "max_rate": 0.4}
    score_thresholds = ("max_rate",)

    def prepare(self):
        self.stop = _stop_words()

    def decide(self, item):
        words = _words(item.text)
        if not words:
            return drop("no_words")
        stop = self.stop
        contents = [content for content in (_content_word(word, stop) for word in words) if content is not None]
        total = len(contents)
        distinct = len(set(contents))
        rate = round(1 - distinct / total, 4) if total else 0.0
        if distinct == total:  # each once (or none): the first is a most frequent one
            token, most = (contents[0], 1) if total else ("", 0)
        else:  # the first of the most frequent, in order of first occurrence
            token, most = Counter(contents).most_common(1)[0]
        if most > self.params["max_repeats"]:
            return drop("repeated_token", score=rate, token=token[:100], count=most)
        if rate > self.params["max_rate"]:
            return drop("high_repetition", score=rate, token=token[:100], count=most)
        return keep(score=rate)
