"""Server-side checks of a written caption: markup, gibberish and language.

Each check returns a message for the annotator (``None`` when the text passes); ``check_caption``
runs them in order and returns the first message, which ``WriteKind.validate`` raises as
``VoteInvalid`` so it reaches the annotator through the page's and the API's usual error path.

- Markup: a caption is plain text. HTML tags, Markdown links and images, and web addresses are
  refused (the captions go into datasets and pages; a tag or a link is never a description).
- Gibberish (wordfreq): the same word over and over ("asdf asdf asdf asdf"), or too few known
  words: a word is known when its Zipf frequency in the campaign's language is at least
  ``KNOWN_ZIPF`` (2.0: about once per 10 million words; keyboard runs such as "asdf" score 1.65,
  rare real words such as "sonnenuntergang" in German 3.9).
- Language: two independent opinions must both say another language before a caption is
  refused, so a proper name or a borrowed word does not get an English caption refused.
  wordfreq's unigram frequencies pick the language whose words the text uses most (the mean
  Zipf frequency of its words, on wordfreq's small lists), and lingua (low-accuracy mode over a few common languages: its
  trigram models, ~30 MB, instead of the ~300 MB and seconds of loading of the full models)
  must also rate that language above the campaign's. Texts of fewer than ``MIN_WORDS_FOR_LANGUAGE``
  words are too short for either to tell.
"""
from __future__ import annotations

import re
from functools import lru_cache

KNOWN_ZIPF = 2.0
MIN_KNOWN_SHARE = 0.5
MIN_WORDS_FOR_LANGUAGE = 3
MAX_SAME_WORD_RUN = 2  # a word three times in a row is a repetition
# Languages a caption written in the wrong language is most likely to be in (with the campaign's own).
COMMON_LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pt")

_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(\s[^<>]*)?/?\s*>|<!--")
_MD_LINK = re.compile(r"!?\[[^\]]*\]\([^)]*\)")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_LETTERS = re.compile(r"[^\W\d_]", re.UNICODE)


def markup_problem(text: str) -> str | None:
    if _TAG.search(text):
        return "Write plain text: HTML tags (such as <b> or <a>) are not allowed in a caption."
    if _MD_LINK.search(text):
        return "Write plain text: links and images in Markdown ([text](address)) are not allowed in a caption."
    if _URL.search(text):
        return "A caption describes the image in words: web addresses are not allowed."
    return None


def words(text: str, language: str) -> list[str]:
    """The text's words (wordfreq's tokenizer, lower-cased), without numbers."""
    from wordfreq import tokenize

    return [w for w in tokenize(text, language) if _LETTERS.search(w)]


@lru_cache(maxsize=1)
def _wordfreq_languages() -> frozenset[str]:
    from wordfreq import available_languages

    return frozenset(available_languages())


def _zipf(word: str, language: str, wordlist: str = "best") -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, language, wordlist=wordlist)


def repetition_problem(tokens: list[str]) -> str | None:
    run = 1
    for previous, word in zip(tokens, tokens[1:]):
        run = run + 1 if word == previous else 1
        if run > MAX_SAME_WORD_RUN:
            return f"The caption repeats “{word}”: describe the image in a sentence."
    if len(tokens) >= 4 and len(set(tokens)) * 2 < len(tokens):
        return "The caption repeats the same few words: describe the image in a sentence."
    return None


def gibberish_problem(text: str, language: str) -> str | None:
    """Repetition, then the share of known words (only where wordfreq knows the language)."""
    language = (language or "en").split("-")[0].lower()
    if language not in _wordfreq_languages():
        return None
    tokens = words(text, language)
    if not tokens:
        return None  # no words at all is the kind's own check
    problem = repetition_problem(tokens)
    if problem:
        return problem
    known = sum(1 for w in tokens if _zipf(w, language) >= KNOWN_ZIPF)
    if known / len(tokens) < MIN_KNOWN_SHARE:
        return ("Most of these words are not words we know: please describe the image in a sentence "
                "with real words.")
    return None


def _mean_zipf(tokens: list[str], language: str) -> float:
    """On wordfreq's small lists (words of Zipf 3 and above): the vote between languages needs the
    common words only, and seven small lists take ~20 MB where the full ones take ~250 MB."""
    return sum(_zipf(w, language, "small") for w in tokens) / len(tokens)


@lru_cache(maxsize=8)
def _detector(codes: tuple[str, ...]):
    from lingua import LanguageDetectorBuilder

    from curation.pipeline.informativeness import lingua_language

    return (LanguageDetectorBuilder.from_languages(*(lingua_language(c) for c in codes))
            .with_low_accuracy_mode().build())


def _lingua_codes(language: str) -> tuple[str, ...]:
    from curation.pipeline.informativeness import lingua_language

    codes = []
    for code in (language, *COMMON_LANGUAGES):
        try:
            lingua_language(code)
        except ValueError:
            continue
        if code not in codes:
            codes.append(code)
    return tuple(sorted(codes))


def language_name(code: str) -> str:
    from curation.pipeline.informativeness import lingua_language

    try:
        return lingua_language(code).name.title()
    except ValueError:
        return code


def detected_language(text: str, language: str) -> str | None:
    """The other language both opinions agree on, or None (the campaign's language, or unsure)."""
    language = (language or "en").split("-")[0].lower()
    known = _wordfreq_languages()
    codes = _lingua_codes(language)
    if language not in codes or language not in known:
        return None  # a language neither tool knows: nothing to compare against
    tokens = words(text, language)
    if len(tokens) < MIN_WORDS_FOR_LANGUAGE:
        return None
    candidates = [c for c in codes if c in known]
    by_words = max(candidates, key=lambda c: (_mean_zipf(tokens, c), c == language))
    if by_words == language:
        return None
    confidences = {c.language.iso_code_639_1.name.lower(): c.value
                   for c in _detector(codes).compute_language_confidence_values(text)}
    if confidences.get(by_words, 0.0) > confidences.get(language, 0.0):
        return by_words
    return None


def language_problem(text: str, language: str) -> str | None:
    other = detected_language(text, language)
    if other is None:
        return None
    return (f"This caption looks like {language_name(other)}; this campaign asks for captions in "
            f"{language_name((language or 'en').split('-')[0].lower())}.")


def check_caption(text: str, language: str) -> str | None:
    """The first problem of a written caption, as a message for the annotator, or None."""
    return markup_problem(text) or gibberish_problem(text, language) or language_problem(text, language)


__all__ = ["check_caption", "markup_problem", "gibberish_problem", "language_problem", "detected_language",
           "repetition_problem", "KNOWN_ZIPF"]
