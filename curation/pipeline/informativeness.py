"""AVA-Captions (seed 000, Section 3): comment cleaning, the informativeness score, and images left
without a kept comment.

Three filters, in the order of the "ava-captions" preset:

``comment_clean`` (needs nothing, so it runs before any parsing and spares the parser what it drops)
    the cleaning of DESIGN.md and the authors' public code. Reasons: ``too_long`` (a guard, not in
    the paper: more than ``max_chars`` characters), ``wrong_language`` (language identification,
    ``language`` "" turns it off), ``too_short`` (fewer than ``min_tokens`` words) and ``site_words``
    (challenge, vote, congrats, ribbon, score, ...: curator-editable). Lower-casing and squeezing
    letter runs ("woooow" -> "woow") and punctuation runs ("!!!!" -> "!") are pure functions below;
    the words are counted on the cleaned text. Language identification uses lingua only where the
    text is in doubt: a comment without accented or non-Latin letters whose words are at least
    ``english_stopword_share`` English stop words, or at least ``common_english_share`` among the
    25,000 commonest English words (wordfreq), is English without asking (30 of the 31 comments of
    the paper's Table 1), and one too short to keep is not asked about either (emoji-only text is
    too short, not foreign). The rest go to lingua (about 0.5 ms a text; the models load on first
    use), restricted to ``candidate_languages`` (all 75 languages make it several times slower), in
    one parallel batch per chunk. Lingua saying "don't know" never drops.

``informativeness`` (fits; needs POS; statistics in ``informativeness_stats``)
    ``fit`` counts, over the whole comment corpus it is given (DESIGN.md: "over the whole comment
    corpus of the collection"; the executor passes every comment of the collection), the unigram
    vocabulary (nouns, proper nouns included, since the tagger marks capitalised words such as
    "Photo Quality" PROPN) and the bigram vocabulary (first word noun/adjective/adverb, second
    noun/adjective), after removing NLTK's stop words and punctuation: bigrams are adjacent words
    of what is left, as the paper's topics show ("space left" from "space on the left"), never across
    punctuation or a line break ("Photo quality: awesome. Originality: great." has no "awesome
    originality"). Words are
    the tokens' lower-case forms with letter runs squeezed: the tagger reads the raw text, because
    the small cased model tags worse on lower-cased text ("nice shot" -> "nice" PROPN), and one
    parse serves every step. ``apply`` scores
    rho = -1/2 [sum_i ln P(u_i) + sum_j ln P(b_j)], P(w) = count(w) / total count of w's vocabulary
    (natural log; every occurrence counts, as in the product of Eq. 2). An n-gram the fitted corpus
    never saw counts as ``unseen_count`` occurrences (default 1: as rare as the rarest seen one),
    which keeps rho finite without changing P for seen n-grams.

    The threshold is relative to the fitted corpus. rho sums -1/2 ln(count / total) over a comment's
    n-grams, so every score grows with the log of the corpus size: the paper's fixed 20 (at AVA's scale,
    where it discarded 55% of the comments) keeps fewer and fewer informative comments as a collection
    shrinks. The fit records the quantiles of rho over the fitted comments, and a comment is kept when
    its rho reaches the ``min_rho_percentile``-th percentile (default 55: the paper's share), which puts
    the same comments on the same side at 500 and at 20,000 comments of the same kind. ``min_rho`` is an
    optional absolute floor on top (None by default; 20 is the paper's at web scale), ``max_rho`` the
    authors' ceiling (rho > 120 is too subjective). Reasons ``uninformative`` (below) and
    ``too_subjective`` (above), ``unparsed`` for an item without a parse; details give the comment's
    percentile in the corpus and the rho the percentile stands for.

``images_without_comments`` (run level, image target)
    "we remove the images which are left with no informative comments". It decides over image rows
    that carry ``captions_alive`` (how many of the image's captions no earlier step dropped); an
    image with none is dropped with ``no_kept_comment``. The executor must put that count in the
    image rows it passes to run-level image steps; without it the step fails loudly.

The fitted state is plain JSON (see ``state_from_counts``): counts grouped by value (most n-grams
occur once, so their counts are not repeated), the totals, the rho quantiles, and a fingerprint that
lets every chunk reuse the compiled log-probability tables. ``fit_from_texts`` fits from bare texts (a management
command), ``state_to_bytes``/``state_from_bytes`` save and load it.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from .base import Decision, Filter, Item, drop, keep

# The statistics live in informativeness_stats; their names are this module's too (callers import them here).
from .informativeness_stats import (  # noqa: F401
    NEEDS,
    QUANTILE_SAMPLE,
    STATE_FORMAT,
    STOP_WORDS,
    Scorer,
    check_state,
    counts_from_state,
    fit_docs,
    fit_from_texts,
    ngrams,
    percentile_of,
    quantiles,
    rho_at_percentile,
    scorer_for,
    squeeze_letters,
    state_from_bytes,
    state_from_counts,
    state_to_bytes,
)
from .registry import register

SITE_WORDS = ("challenge", "challenges", "vote", "votes", "voted", "voting", "congrats", "congratulations",
              "ribbon", "ribbons", "score", "scores", "scored", "dpc", "dpchallenge")
CANDIDATE_LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "sv", "pl", "ru", "tr", "ar", "zh", "ja", "ko")

_PUNCT_RUN = re.compile(r"([^\w\s])\1+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


# --- Cleaning: pure functions ------------------------------------------------------------------

def lower_case(text: str) -> str:
    return text.lower()


def squeeze_punctuation(text: str) -> str:
    """Runs of the same punctuation mark become one: "!!!!" -> "!", "...." -> "."."""
    return _PUNCT_RUN.sub(r"\1", text)


def clean_comment(text: str) -> str:
    """Lower-cased, letter and punctuation runs squeezed, whitespace collapsed."""
    return " ".join(squeeze_punctuation(squeeze_letters(lower_case(text or ""))).split())


def comment_words(text: str) -> list[str]:
    """The words of the cleaned comment (letters and digits, with inner apostrophes)."""
    return _WORD.findall(clean_comment(text))


def site_words_in(words: Iterable[str], site_words: Iterable[str]) -> list[str]:
    wanted = {w.lower() for w in site_words}
    return sorted({w for w in words if w in wanted})


@lru_cache(maxsize=1)
def common_english_words() -> frozenset[str]:
    from wordfreq import top_n_list

    return frozenset(top_n_list("en", 25000))


def english_stopword_share(words: list[str]) -> float:
    if not words:
        return 0.0
    return sum(1 for w in words if w in STOP_WORDS) / len(words)


def common_english_share(words: list[str]) -> float:
    """The share of words among the 25,000 most frequent English words (wordfreq)."""
    if not words:
        return 0.0
    common = common_english_words()
    return sum(1 for w in words if w in common) / len(words)


@lru_cache(maxsize=8)
def _detector(codes: tuple[str, ...], accuracy: str = "high"):
    from lingua import LanguageDetectorBuilder

    builder = LanguageDetectorBuilder.from_languages(*(lingua_language(c) for c in codes))
    if accuracy == "low":  # trigram models only: far less memory, less reliable on short texts
        builder = builder.with_low_accuracy_mode()
    return builder.build()


def lingua_language(code: str):
    from lingua import IsoCode639_1, Language

    try:
        return Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper()))
    except (AttributeError, ValueError):
        raise ValueError(f"unknown ISO 639-1 language code {code!r}") from None


def detect_languages(texts: list[str], candidates: Iterable[str], accuracy: str = "high") -> list[str | None]:
    """ISO 639-1 codes (None where lingua cannot tell). The models load on first use (high accuracy, 15
    languages: some seconds and about 350 MB per process). One text after another, on this process's
    core: lingua's parallel batch would spread over every core of the machine, which the other worker
    processes (and PostgreSQL) are using; workers scale by running more of them."""
    if not texts:
        return []
    detect = _detector(tuple(sorted(set(candidates))), accuracy).detect_language_of
    found = [detect(text) for text in texts]
    return [lang.iso_code_639_1.name.lower() if lang is not None else None for lang in found]


# --- comment_clean -------------------------------------------------------------------------------

@register
class CommentClean(Filter):
    name = "comment_clean"
    version = 1
    label = "Comment cleaning (AVA-Captions)"
    description = ("Drops comments in another language, with fewer than min_tokens words, or with "
                   "site-specific words (challenge, vote, ribbon...), after lower-casing and squeezing runs.")
    text_only = True  # the decision depends on the text alone
    per_item = True
    defaults = {
        "language": "en",  # the corpus language; "" turns language identification off
        "candidate_languages": list(CANDIDATE_LANGUAGES),  # what lingua chooses among
        "language_accuracy": "high",  # lingua's mode: "high" or "low" (less memory, weaker on short texts)
        "english_stopword_share": 0.2,  # ASCII texts with this share of English stop words skip lingua,
        "common_english_share": 0.9,  # and so do those with this share of common English words
        "min_tokens": 5,
        "site_words": list(SITE_WORDS),
        "max_chars": 10000,  # a guard: the longest AVA-Captions comment has 137 words
    }

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        language = self.params["language"]
        if self.params["language_accuracy"] not in ("high", "low"):
            raise ValueError("comment_clean: language_accuracy must be 'high' or 'low'")
        if language:
            lingua_language(language)
            for code in self.params["candidate_languages"]:
                lingua_language(code)
        self._candidates = sorted({*self.params["candidate_languages"], language} - {""})
        self._site_words = {w.lower() for w in self.params["site_words"]}

    def warm(self) -> None:
        if self.params["language"]:
            common_english_words()
            detect_languages(["Une maison près du vieux pont sur la rivière"], self._candidates,
                             self.params["language_accuracy"])

    def apply(self, items: list[Item]) -> list[Decision]:
        language, min_tokens = self.params["language"], int(self.params["min_tokens"])
        results: list[Decision | None] = [None] * len(items)
        words_of: dict[int, list[str]] = {}
        in_doubt: list[int] = []
        for i, item in enumerate(items):
            text = item.text or ""
            if len(text) > self.params["max_chars"]:
                results[i] = drop("too_long", chars=len(text), max_chars=self.params["max_chars"])
                continue
            words = comment_words(text)
            words_of[i] = words
            if language and not self._surely_target_language(text, words, min_tokens):
                in_doubt.append(i)
        detected = dict(zip(in_doubt, detect_languages([items[i].text for i in in_doubt], self._candidates,
                                                       self.params["language_accuracy"])))
        for i, words in words_of.items():
            found = detected.get(i)
            if found is not None and found != language:
                results[i] = drop("wrong_language", detected=found, expected=language)
            elif len(words) < min_tokens:
                results[i] = drop("too_short", tokens=len(words), min_tokens=min_tokens)
            elif hits := sorted({w for w in words if w in self._site_words}):
                results[i] = drop("site_words", words=hits)
            else:
                results[i] = keep(tokens=len(words), **({"language": found} if found else {}))
        return results

    def _surely_target_language(self, text: str, words: list[str], min_tokens: int) -> bool:
        if not text.isascii() and any(ch.isalpha() and not ch.isascii() for ch in text):
            return False  # letters of other alphabets or accents: ask (emoji alone are not letters)
        if len(words) < min_tokens:
            return True  # dropped as too short whatever its language: do not pay lingua for it
        if self.params["language"] != "en":
            return False
        letters = [w for w in words if not any(ch.isdigit() for ch in w)]
        return (english_stopword_share(letters) >= self.params["english_stopword_share"]
                or common_english_share(letters) >= self.params["common_english_share"])


# --- informativeness ---------------------------------------------------------------------------------

@register
class Informativeness(Filter):
    name = "informativeness"
    version = 2  # 2: n-grams stop at punctuation; the threshold is a percentile of the fitted corpus
    label = "Informativeness (AVA-Captions)"
    description = ("rho = -1/2 [sum log P(unigram) + sum log P(bigram)] over the collection's noun unigrams "
                   "and descriptor-object bigrams; keeps comments at or above the min_rho_percentile-th "
                   "percentile of the collection's comments (and min_rho <= rho <= max_rho when set).")
    text_only = True  # the decision depends on the text alone
    per_item = True
    needs = frozenset({"pos"})
    fits = True
    defaults = {
        # The paper's rho >= 20 discarded 55% of AVA's comments: the same share of any fitted corpus.
        "min_rho_percentile": 55.0,  # None turns it off
        "min_rho": None,  # an absolute floor as well (the paper's 20 assumes AVA's 3M comments)
        "max_rho": 120.0,  # the authors' code: higher is too subjective; None turns it off
        "unseen_count": 1.0,  # an n-gram the fitted corpus never saw counts as this many occurrences
        "max_details": 40,  # n-grams listed per decision
    }
    score_thresholds = ("min_rho", "max_rho")

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        if not float(self.params["unseen_count"]) > 0:
            raise ValueError("informativeness: unseen_count must be > 0")
        percentile = self.params["min_rho_percentile"]
        if percentile is not None and not 0 <= float(percentile) <= 100:
            raise ValueError("informativeness: min_rho_percentile must be between 0 and 100")
        if state is not None:
            check_state(state)
            if percentile is not None and not state.get("rho_quantiles"):
                raise ValueError("informativeness: these statistics were fitted without rho quantiles; fit them "
                                 "again or set min_rho_percentile to None")

    def fit(self, items: list[Item]) -> dict:
        return fit_docs(item.doc for item in items)

    def min_rho(self) -> float | None:
        """The rho a comment must reach: the fitted corpus's min_rho_percentile-th percentile, or min_rho,
        whichever is higher (None: no lower bound)."""
        floors = [] if self.params["min_rho"] is None else [float(self.params["min_rho"])]
        if self.params["min_rho_percentile"] is not None:
            floors.append(rho_at_percentile(self.params["min_rho_percentile"], self.state["rho_quantiles"]))
        return max(floors) if floors else None

    def warm(self) -> None:
        if self.state is not None:
            scorer_for(self.state, self.params["unseen_count"])

    def apply(self, items: list[Item]) -> list[Decision]:
        if self.state is None:
            raise ValueError("informativeness has no fitted statistics: fit it on the collection first")
        scorer = scorer_for(self.state, self.params["unseen_count"])
        low, high = self.min_rho(), self.params["max_rho"]
        ranks = self.state.get("rho_quantiles")
        limit = int(self.params["max_details"])
        out = []
        for item in items:
            if item.doc is None:
                out.append(drop("unparsed"))
                continue
            unigrams, bigrams = ngrams(item.doc)
            rho = round(scorer.rho(unigrams, bigrams), 4)
            details = {"unigrams": unigrams[:limit], "bigrams": bigrams[:limit]}
            if ranks:
                details["percentile"] = percentile_of(rho, ranks)
            if low is not None:
                details["min_rho_used"] = round(low, 4)
            if low is not None and (rho < low or (rho <= 0 and low <= 0)):  # no n-gram is never informative
                out.append(drop("uninformative", rho, **details))
            elif high is not None and rho > high:
                out.append(drop("too_subjective", rho, **details))
            else:
                out.append(keep("", rho, **details))
        return out


# --- images_without_comments -------------------------------------------------------------------------

@register
class ImagesWithoutComments(Filter):
    name = "images_without_comments"
    version = 1
    label = "Images left without comments"
    description = "Drops images none of whose comments survived the earlier steps (seed 000, Section 3)."
    target = "image"
    run_level = True
    defaults = {}

    def apply(self, items: list[Item]) -> list[Decision]:  # run level only: nothing to decide per chunk
        return [keep() for _ in items]

    def decide_run(self, rows: list[dict]) -> dict[int, Decision]:
        decisions = {}
        for row in rows:
            if "captions_alive" not in row:
                raise ValueError("images_without_comments needs 'captions_alive' (captions not dropped by "
                                 "earlier steps) in each image row passed to decide_run")
            if not row["captions_alive"]:
                decisions[row["image_id"]] = drop("no_kept_comment")
        return decisions
