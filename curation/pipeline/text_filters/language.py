"""Language (not in the paper): two vocabulary checks that settle English, then lingua.

lingua reads letter n-grams, so English captions with common loanwords read as their source language
("A barista pours latte art into a cappuccino at the espresso bar" is Italian at 0.73, "A croissant and
café au lait on a bistro table" French at 0.86). Before its verdict, when English is accepted:

1. the fast path: a plain-ASCII sample whose words are at least 20% English stop words and 90% among the
   25,000 commonest English words is English (most captions end here, without lingua);
2. the vocabulary share (wordfreq): a sample whose words are at least ``english_vocabulary_share`` (80%)
   English words (Zipf >= ``english_min_zipf`` in English, which loanwords are: "cappuccino" 2.9,
   "croissant" 2.8, "piñata" 2.6, "bruschetta" 2.1) and at least ``english_marker_share`` (10%) English
   marker words is English. Markers are English stop words at least 0.8 Zipf more frequent in English than
   in every other Latin-script candidate language ("the", "of", "and", "with", "at", "from", not "a", "in"
   or "on", which French, Italian or Portuguese share): foreign words pass the vocabulary share ("Il y a un
   chat sur le toit" has 90% words wordfreq also knows in English) but foreign sentences have no markers.

Only what neither settles goes to lingua.
"""
from __future__ import annotations

from functools import lru_cache

from ..base import drop, keep
from ..registry import register
from .common import LETTER_RE, MEMO_SIZE, TextFilter, word_shape
from .common import words as _words

# wordfreq's lists of languages written in other scripts (and Chinese and Japanese need extra tokenisers):
# a Latin-script word is compared with the Latin-script candidates only.
NON_LATIN = frozenset({"zh", "ja", "ko", "ru", "uk", "bg", "ar", "fa", "he", "el", "hi", "bn", "th", "ta", "ur",
                       "mk", "sr"})
MARKER_MARGIN = 0.8  # Zipf by which a marker's English frequency exceeds its frequency in the others


@lru_cache(maxsize=8)
def english_markers(others: tuple[str, ...]) -> frozenset[str]:
    """English stop words at least MARKER_MARGIN Zipf more frequent in English than in each of ``others``."""
    from wordfreq import zipf_frequency

    from ..informativeness import STOP_WORDS

    found = set()
    for word in STOP_WORDS:
        if "'" in word:
            continue
        english = zipf_frequency(word, "en")
        if all(english - zipf_frequency(word, lang) >= MARKER_MARGIN for lang in others):
            found.add(word)
    return frozenset(found)


@lru_cache(maxsize=8)
def _language_detector(codes: tuple):
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages = []
    for code in codes:
        iso = getattr(IsoCode639_1, code.upper(), None)
        if iso is None:
            raise ValueError(f"language: unknown ISO 639-1 code {code!r}")
        languages.append(Language.from_iso_code_639_1(iso))
    if len(languages) < 2:
        raise ValueError("language: the detector needs at least two candidate languages")
    return LanguageDetectorBuilder.from_languages(*languages).build()


@register
class LanguageFilter(TextFilter):
    name = "language"
    version = 2  # 2: the vocabulary share settles English with loanwords before lingua
    label = "Language"
    description = ("Keeps texts in the accepted languages. English settles by its vocabulary first (wordfreq: most "
                   "words English, loanwords such as \"cappuccino\" included, and some English-only function words); "
                   "the rest goes to lingua, whose threshold is relative: the accepted language's confidence over the "
                   "most likely one's (short texts spread it over related languages).")
    defaults = {
        "languages": ["en"],  # accepted ISO 639-1 codes
        "candidates": ["en", "fr", "de", "es", "it", "pt", "nl", "tr", "zh", "ja", "ru", "ar"],
        # Keep when (best accepted language's confidence) / (top language's confidence) >= this;
        # 1.0 means an accepted language is the most likely one. Measured on lingua 2.1: short English
        # captions sit at 0.52-1.0, French, German, Spanish, Italian, Dutch, Turkish sentences at 0.0-0.17.
        "min_relative_confidence": 0.5,
        # Names carry their own language's letter n-grams: lingua calls the paper's Harrison Ford alt-text
        # ("... in Deauville, France.") French at 0.999. Detection therefore reads the words that do not
        # start with a capital (after the first word) when there are at least this many; else the whole text
        # (with three, "Café le fil du Rasoir #1" reads as "le fil du", too little to tell French).
        "min_lowercase_words": 4,
        "max_chars": 1000,  # detection reads the first characters only
        # English fast path: when English is accepted and the sample is plain ASCII with at least this
        # share of English stop words AND of the 25,000 most common English words (wordfreq), it is
        # English without asking lingua (~0.5 ms a text). French, Spanish or German sentences fail the
        # stop-word share and still go to lingua. 0 turns the fast path off.
        "fast_english_stopword_share": 0.2,
        "fast_english_common_share": 0.9,
        # The vocabulary share (see the module): English when at least this share of the sample's words
        # are English words and at least english_marker_share are English markers. 0 turns it off.
        "english_vocabulary_share": 0.8,
        "english_min_zipf": 2.0,
        "english_marker_share": 0.1,
    }
    score_thresholds = ("min_relative_confidence",)

    def __init__(self, params: dict | None = None, state=None):
        super().__init__(params, state)
        from lingua import IsoCode639_1  # a compiled module: cheap enough to check a curator's edit early

        codes = [*self.params["languages"], *self.params["candidates"]]
        unknown = [c for c in codes if not isinstance(c, str) or not hasattr(IsoCode639_1, c.upper())]
        if unknown:
            raise ValueError(f"language: unknown ISO 639-1 code(s) {unknown}")

    def prepare(self):
        self.accepted = {c.lower() for c in self.params["languages"]}
        self.others = tuple(sorted({c.lower() for c in self.params["candidates"]} - {"en"} - NON_LATIN))
        self.detector = _language_detector(tuple(sorted({c.lower() for c in self.params["candidates"]}
                                                        | self.accepted)))

    def warm(self):
        self.prepare()
        from ..informativeness import common_english_words

        common_english_words()
        english_markers(self.others)
        # lingua loads a language's models when a text first needs them: load those of Latin-script text.
        self.detector.compute_language_confidence_values("Une maison près du vieux pont sur la rivière")

    def decide(self, item):
        text = item.text[: self.params["max_chars"]]
        if not LETTER_RE.search(text):
            return drop("no_letters")
        if self._fast_english(text):
            return keep(score=1.0, language="en", method="vocabulary")
        sample = self._sample(text)
        shares = self._english_vocabulary(sample)
        if shares is not None:
            return keep(score=1.0, language="en", method="vocabulary_share", english_share=shares[0],
                        marker_share=shares[1])
        values = self.detector.compute_language_confidence_values(sample)
        if not values or values[0].value <= 0:
            return drop("unknown_language")
        top = values[0]
        best = max((v.value for v in values if v.language.iso_code_639_1.name.lower() in self.accepted), default=0.0)
        relative = round(best / top.value, 4)
        details = {"language": top.language.iso_code_639_1.name.lower(), "confidence": round(top.value, 4)}
        if relative < self.params["min_relative_confidence"]:
            return drop("wrong_language", score=relative, **details)
        return keep(score=relative, **details)

    def _english_vocabulary(self, sample: str) -> tuple[float, float] | None:
        """(English-word share, marker share) when they make the sample English, else None."""
        p = self.params
        if "en" not in self.accepted or not p["english_vocabulary_share"]:
            return None
        words = [w.lower() for w in _words(sample) if w.isalpha()]
        if len(words) < 3:
            return None
        markers = english_markers(self.others)
        english = sum(1 for w in words if _english_zipf(w) >= p["english_min_zipf"]) / len(words)
        marked = sum(1 for w in words if w in markers) / len(words)
        if english >= p["english_vocabulary_share"] and marked >= p["english_marker_share"] and marked > 0:
            return round(english, 4), round(marked, 4)
        return None

    def _surely_english(self, sample: str) -> bool:
        """Whether a plain-ASCII sample is English by its words alone (see the fast_english_* parameters)."""
        if "en" not in self.accepted or not self.params["fast_english_stopword_share"] or not sample.isascii():
            return False
        # (stop word, common word) for each alphabetic word (lower-cased, punctuation stripped); the
        # shares are those of informativeness.english_stopword_share and common_english_share.
        words = stops = commons = 0
        for token in sample.split():
            flags = _english_word(token)
            if flags is not None:
                words += 1
                stops += flags[0]
                commons += flags[1]
        return self._english_shares(words, stops, commons)

    def _english_shares(self, words: int, stops: int, commons: int) -> bool:
        """Enough alphabetic words, and enough of them stop words and common English words."""
        if not words or words < self.params["min_lowercase_words"]:
            return False
        return (stops / words >= self.params["fast_english_stopword_share"]
                and commons / words >= self.params["fast_english_common_share"])

    def _fast_english(self, text: str) -> bool:
        """``_surely_english`` of the text's sample (``_sample``), in one pass over its words with one
        memo lookup each (most captions pass here, and each of the two in turn costs twice this)."""
        if "en" not in self.accepted or not self.params["fast_english_stopword_share"]:
            return False
        words = _words(text)
        lettered = alphabetic = stops = commons = 0
        plain = True
        for index in range(1, len(words)):
            lower, has_letter, ascii_word, flags = _language_word(words[index])
            if lower:
                lettered += has_letter
                plain = plain and ascii_word
                if flags is not None:
                    alphabetic += 1
                    stops += flags[0]
                    commons += flags[1]
        if lettered < self.params["min_lowercase_words"]:  # the sample is the whole text
            return self._surely_english(text)
        return plain and self._english_shares(alphabetic, stops, commons)

    def _sample(self, text: str) -> str:
        """The text detection reads: its words after the first that do not start with a capital, when there
        are enough of them with a letter; else the whole text."""
        lower = [w for w in _words(text)[1:] if not w[0].isupper()]
        if sum(1 for w in lower if word_shape(w)[0]) >= self.params["min_lowercase_words"]:
            return " ".join(lower)
        return text


# A word of ``_words`` -> (not capitalised, has a letter, plain ASCII, ``_english_word`` of it)


@lru_cache(maxsize=200_000)
def _english_zipf(word: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "en")


@lru_cache(maxsize=MEMO_SIZE)
def _language_word(word: str) -> tuple:
    return (not word[0].isupper(), word_shape(word)[0], word.isascii(), _english_word(word))


@lru_cache(maxsize=MEMO_SIZE)
def _english_word(token: str) -> tuple[int, int] | None:
    """For a whitespace-separated token: None unless it is alphabetic once lower-cased and stripped of
    punctuation, else (1 if an English stop word, 1 if one of the 25,000 most common English words)."""
    from ..informativeness import STOP_WORDS, common_english_words

    word = token.lower().strip(".,;:!?'\"()")
    if word and word.isalpha():
        return (int(word in STOP_WORDS), int(word in common_english_words()))
    return None
