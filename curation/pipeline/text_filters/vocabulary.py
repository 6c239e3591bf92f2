"""Vocabulary: every word known (wordfreq)."""
from __future__ import annotations

from functools import lru_cache

from ..base import drop, keep
from ..registry import register
from .common import HASHTAG_RE, LETTER_RE, MAX_LISTED, UNSEEN, TextFilter, remember, token_table, word_shape
from .common import words as _words
from .emoji import pictographs


@lru_cache(maxsize=200_000)
def _zipf(word: str, language: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, language)


def _name_like(token) -> bool:
    """A proper noun spelled as a name ("Balakot", "McKellar", "O'Neill"), not a code ("DSC_2481", "A319")."""
    return token.pos_ == "PROPN" and _name_text(token.text)


@lru_cache(maxsize=100_000)
def _name_text(text: str) -> bool:
    """Spelled as a name: a capital, then letters and the apostrophes, dots and hyphens of names."""
    return text[:1].isupper() and all(c.isalpha() or c in "'’.-" for c in text)


_KNOWN_WORDS: dict[tuple, dict] = {}  # (language, min_zipf, min_zipf_with_digits) -> {word: _look_up(word)}


@register
class UnknownTokens(TextFilter):
    name = "unknown_tokens"
    label = "Unknown tokens"
    version = 2  # 2: emoji and pictographs are unknown tokens (1: they were not words, so they passed)
    description = ("Every word must be in a vocabulary of known words: wordfreq's Zipf frequency >= min_zipf. "
                   "Hashtags, @handles, emoji and pictographs count as unknown. Score: the Zipf frequency of the "
                   "rarest word.")
    needs = frozenset({"pos"})
    defaults = {
        "language": "en",
        # wordfreq lists words down to Zipf 1.0. At 1.5, ordinary words ("floret" 1.76, "tessellated" 1.74)
        # pass, while camera file names ("DSC_2481", "IMG_4663" 0.0), rare misspellings ("photgraph",
        # "amazng" 0.0) and hashtag words ("instagood" 1.42) fail. Frequent misspellings ("definately"
        # 2.87) are in any web vocabulary, the paper's included.
        "min_zipf": 1.5,
        # wordfreq estimates words with digits from their shape ("a319" -> "a000"), a step below plain words:
        # "A319" (0.9) and "F16" (1.9) pass, "DH89", "WCIT2010", "IMG_4663" (0.0) do not.
        "min_zipf_with_digits": 0.5,
        # The paper's vocabulary (1B token types seen 5+ times in English Wikipedia) holds nearly every
        # name, and its text filters run before hypernymization, whose input is "a majority of captions
        # containing proper names". wordfreq holds only frequent names (Balakot 1.24, Oluwaseun 0.0), so
        # name-like proper nouns are skipped here and left to hypernymization; codes are still checked.
        "ignore_proper_nouns": True,
        # An emoji or pictograph ("🐶", "❤️", "✈") is no word of the paper's vocabulary: it is listed as an
        # unknown token (the ``emoji`` step, earlier in the presets, drops or strips them with its own reason).
        "pictographs_are_unknown": True,
    }

    def prepare(self):
        key = (self.params["language"], self.params["min_zipf"], self.params["min_zipf_with_digits"])
        self.known = _KNOWN_WORDS.setdefault(key, {})

    def warm(self):
        self.prepare()
        _zipf("the", self.params["language"])  # loads wordfreq's list

    def _look_up(self, word: str):
        """None for a word without a letter, else (Zipf frequency, below its threshold, lower-cased);
        remembered per word for these parameters."""
        lettered, lowered, digits = word_shape(word)
        found = None
        if lettered:
            z = _zipf(lowered, self.params["language"])
            found = (z, z < (self.params["min_zipf_with_digits"] if digits else self.params["min_zipf"]), lowered)
        return remember(self.known, word, found)

    def decide(self, item):
        text = item.text
        if item.doc is not None:
            texts, tags, _ = token_table(item.doc)
            if self.params["ignore_proper_nouns"]:
                words = [w for w, tag in zip(texts, tags) if not (tag == "PROPN" and _name_text(w))]
            else:
                words = texts
        else:  # unparsed (too long to parse): every word is checked
            words = _words(text)
        if "#" in text or "@" in text:
            unknown = list(dict.fromkeys(m.group() for m in HASHTAG_RE.finditer(text)))[:MAX_LISTED]
        else:
            unknown = []
        if self.params["pictographs_are_unknown"] and not text.isascii():
            unknown += [p for p in dict.fromkeys(pictographs(text)) if p not in unknown][:MAX_LISTED]
        tagged = {u[1:].lower() for u in unknown}  # "#instagood" is listed once, not again as "instagood"
        rarest, rarest_word, checked = None, "", 0
        memo = self.known
        for word in words:
            if len(unknown) >= MAX_LISTED:
                break  # enough to decide and to show; a 1 MB text of unknown words stops here
            found = memo.get(word, UNSEEN)
            if found is UNSEEN:
                found = self._look_up(word)
            if found is None:  # no letter
                continue
            checked += 1
            z, below, lowered = found
            if below and word not in unknown and lowered not in tagged:
                unknown.append(word)
            if rarest is None or z < rarest:
                rarest, rarest_word = z, word
        if unknown:
            return drop("unknown_tokens", score=rarest, unknown=[u[:100] for u in unknown])
        if not checked:  # names only (skipped) count as known; no letters at all is no text to judge
            return keep(checked=0) if LETTER_RE.search(text) else drop("no_words")
        return keep(score=rarest, rarest=rarest_word[:100], checked=checked)
