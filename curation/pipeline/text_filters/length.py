"""Caption length in words and characters."""
from __future__ import annotations

from ..base import drop, keep
from ..registry import register
from .common import TextFilter, words


@register
class CaptionLength(TextFilter):
    name = "caption_length"
    label = "Caption length"
    description = "Drops captions with too few or too many words, or too many characters. Score: the word count."
    # Conceptual Captions alt-text: 3 to 50 words. max_chars guards against pathological input (a 1 MB
    # caption, a data: URI) before counting words; at 5000 it leaves room for museum descriptions, whose
    # preset raises max_tokens.
    defaults = {"min_tokens": 3, "max_tokens": 50, "max_chars": 5000}
    score_thresholds = ("min_tokens", "max_tokens")

    def decide(self, item):
        if len(item.text) > self.params["max_chars"]:
            return drop("too_many_chars", chars=len(item.text))
        n = len(words(item.text))
        if n < self.params["min_tokens"]:
            return drop("too_short", score=n, tokens=n)
        if n > self.params["max_tokens"]:
            return drop("too_long", score=n, tokens=n)
        return keep(score=n, tokens=n)
