"""The informativeness statistics (seed 000, Section 3): n-grams from a parse, the fitted state, the
compiled scorer and where a score stands in the fitted corpus.

N-grams never span punctuation or a line break: "Photo quality: awesome. Originality: great." gives the
bigram "photo quality" and not "awesome originality". Stop words are removed within a clause (the paper's
"space left" comes from "space on the left"), but a bigram's two words come from one stretch of text
between punctuation marks (a hyphen, apostrophe or slash inside a word, as in "well-lit", does not cut).

Where a score stands: rho is a sum of -1/2 ln P over a comment's n-grams with P = count / corpus total, so
every rho grows with the log of the corpus size, and a fixed threshold keeps more comments of a big corpus
than of a small one (the paper's 20 suits AVA's 3M comments). ``fit_docs`` therefore also records the
quantiles of rho over the fitted comments (``rho_quantiles``: the 0th to 100th percentile, from up to
QUANTILE_SAMPLE comments drawn with a fixed seed), and the filter can threshold a comment by its
percentile in its own corpus, which stays put as the corpus grows.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import math
import random
import re
from collections import Counter
from functools import lru_cache
from typing import Iterable

STATE_FORMAT = "captionlab.informativeness/1"
NEEDS = frozenset({"pos"})
QUANTILE_SAMPLE = 20_000  # comments whose rho gives the fitted corpus's quantiles
QUANTILE_SEED = 0

# NLTK's English stop words. The paper's n-grams keep "top", "front", "empty" and "much" ("space
# top", "empty space", "much negative": supplementary Table 3), which spaCy's longer list removes.
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom this
that that'll these those am is are was were be been being have has had having do does did doing a an the and but
if or because as until while of at by for with about against between into through during before after above below
to from up down in out on off over under again further then once here there when where why how all any both each
few more most other some such no nor not only own same so than too very s t can will just don don't should
should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't
haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
weren weren't won won't wouldn wouldn't
""".split())

_LETTER_RUN = re.compile(r"([^\W\d_])\1{2,}")
IN_WORD_MARKS = frozenset({"-", "'", "’", "/"})  # punctuation that joins a word's parts when unspaced


def squeeze_letters(text: str) -> str:
    """Runs of three or more of the same letter become two: "woooow" -> "woow", "sooo" -> "soo"."""
    return _LETTER_RUN.sub(r"\1\1", text)


# --- N-grams from a parse ---------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _attrs():
    from spacy.attrs import IS_PUNCT, IS_SPACE, LOWER, POS, SPACY
    from spacy.symbols import ADJ, ADV, NOUN, PROPN

    return {"columns": [LOWER, POS, IS_PUNCT, IS_SPACE, SPACY], "unigram": frozenset({NOUN, PROPN}),
            "first": frozenset({NOUN, PROPN, ADJ, ADV}), "second": frozenset({NOUN, PROPN, ADJ})}


_WORD_OF_HASH: dict[int, str] = {}  # lower-case form's hash -> squeezed word (hashes are global in spaCy)


def _word(lower_hash: int, strings) -> str:
    word = _WORD_OF_HASH.get(lower_hash)
    if word is None:
        if len(_WORD_OF_HASH) > 2_000_000:
            _WORD_OF_HASH.clear()
        word = _WORD_OF_HASH[lower_hash] = squeeze_letters(strings[lower_hash])
    return word


def ngrams(doc) -> tuple[list[str], list[str]]:
    """The comment's unigrams (nouns) and bigrams ("descriptor-object" pairs, "w1 w2"), in order,
    after stop words (``STOP_WORDS``) and punctuation are removed; a bigram's words come from the same
    stretch between punctuation marks and line breaks. Reads token attributes as one array: no Token
    objects are made."""
    a = _attrs()
    strings = doc.vocab.strings
    words, tags, stretches = [], [], []
    stretch, glued = 0, False  # glued: the previous token had no whitespace after it
    for lower, pos, punct, space, spaced in doc.to_array(a["columns"]).tolist():
        if punct:
            # "well-lit" stays one stretch: an unspaced in-word mark between two unspaced tokens.
            if not (glued and not spaced and strings[lower] in IN_WORD_MARKS):
                stretch += 1
        elif space:
            if "\n" in strings[lower]:
                stretch += 1
        else:
            word = _word(lower, strings)
            if word not in STOP_WORDS:
                words.append(word)
                tags.append(pos)
                stretches.append(stretch)
        glued = not spaced
    unigram, first, second = a["unigram"], a["first"], a["second"]
    unigrams = [w for w, t in zip(words, tags) if t in unigram]
    bigrams = [f"{words[i]} {words[i + 1]}" for i in range(len(words) - 1)
               if tags[i] in first and tags[i + 1] in second and stretches[i] == stretches[i + 1]]
    return unigrams, bigrams


# --- Fitted statistics: the state ---------------------------------------------------------------------

def _grouped(counts: Counter) -> dict[str, list[str]]:
    groups: dict[int, list[str]] = {}
    for word, count in counts.items():
        groups.setdefault(count, []).append(word)
    return {str(c): sorted(groups[c]) for c in sorted(groups, reverse=True)}


def _ungrouped(groups: dict[str, list[str]]) -> Counter:
    return Counter({word: int(count) for count, words in groups.items() for word in words})


def state_from_counts(unigrams: Counter, bigrams: Counter, *, comments: int) -> dict:
    """The JSON state: {"format", "unigrams": {count: [words]}, "bigrams": {count: ["w1 w2"]},
    "unigram_total", "bigram_total", "comments", "fingerprint"}."""
    body = {"unigrams": _grouped(unigrams), "bigrams": _grouped(bigrams)}
    fingerprint = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return {"format": STATE_FORMAT, **body, "unigram_total": sum(unigrams.values()),
            "bigram_total": sum(bigrams.values()), "comments": comments, "fingerprint": fingerprint}


def counts_from_state(state: dict) -> tuple[Counter, Counter]:
    check_state(state)
    return _ungrouped(state["unigrams"]), _ungrouped(state["bigrams"])


def state_to_bytes(state: dict) -> bytes:
    """The bytes of the artifact file (the executor's ``save_artifact`` writes the same JSON)."""
    return json.dumps(state, sort_keys=True, separators=(",", ":")).encode()


def state_from_bytes(data: bytes) -> dict:
    state = json.loads(data)
    check_state(state)
    return state


def check_state(state) -> None:
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"not informativeness statistics (format {found!r}, expected {STATE_FORMAT!r})")


def fit_docs(docs: Iterable) -> dict:
    """Count the n-grams of every comment, and the quantiles of rho over (a fixed-seed sample of up to
    QUANTILE_SAMPLE of) the comments."""
    unigrams, bigrams, comments = Counter(), Counter(), 0
    sample: list[tuple[list[str], list[str]]] = []
    draw = random.Random(QUANTILE_SEED)
    for doc in docs:
        comments += 1
        if doc is None:
            continue
        u, b = ngrams(doc)
        unigrams.update(u)
        bigrams.update(b)
        if len(sample) < QUANTILE_SAMPLE:  # reservoir sampling: each comment equally likely to be kept
            sample.append((u, b))
        else:
            slot = draw.randrange(comments)
            if slot < QUANTILE_SAMPLE:
                sample[slot] = (u, b)
    state = state_from_counts(unigrams, bigrams, comments=comments)
    if sample:
        scorer = Scorer(state, 1.0)  # every sampled n-gram was counted: the unseen count plays no part
        state["rho_quantiles"] = quantiles(sorted(scorer.rho(u, b) for u, b in sample))
    return state


def quantiles(ordered: list[float], points: int = 101) -> list[float]:
    """The 0th, 1st, ... 100th percentiles of sorted values (linear interpolation)."""
    out, last = [], len(ordered) - 1
    for k in range(points):
        position = last * k / (points - 1)
        low = int(position)
        high = min(low + 1, last)
        out.append(round(ordered[low] + (ordered[high] - ordered[low]) * (position - low), 4))
    return out


def percentile_of(rho: float, rho_quantiles: list[float]) -> float:
    """Where rho stands among the fitted comments, 0-100 (the share scoring at most as much, interpolated
    between the stored quantiles)."""
    if not rho_quantiles:
        raise ValueError("these informativeness statistics have no rho quantiles: fit them again")
    step = 100 / (len(rho_quantiles) - 1)
    above = bisect.bisect_right(rho_quantiles, rho)
    if above == 0:
        return 0.0
    if above == len(rho_quantiles):
        return 100.0
    low, high = rho_quantiles[above - 1], rho_quantiles[above]
    share = (rho - low) / (high - low) if high > low else 1.0
    return round((above - 1 + share) * step, 2)


def rho_at_percentile(percentile: float, rho_quantiles: list[float]) -> float:
    """The rho of the fitted corpus's given percentile (0-100)."""
    if not rho_quantiles:
        raise ValueError("these informativeness statistics have no rho quantiles: fit them again")
    position = (len(rho_quantiles) - 1) * min(max(float(percentile), 0.0), 100.0) / 100
    low = int(position)
    high = min(low + 1, len(rho_quantiles) - 1)
    return rho_quantiles[low] + (rho_quantiles[high] - rho_quantiles[low]) * (position - low)


def fit_from_texts(texts: Iterable[str], *, batch_size: int = 256) -> dict:
    """Fit from bare comment texts (each distinct text parsed once, counted as often as it occurs)."""
    from . import nlp

    texts = list(texts)
    docs = nlp.parse_unique(texts, NEEDS, batch_size=batch_size)
    return fit_docs(docs[t] for t in texts)


class Scorer:
    """Log-probabilities compiled from a state; shared by every filter built on the same statistics."""

    def __init__(self, state: dict, unseen_count: float):
        unigrams, bigrams = counts_from_state(state)
        self.unigram_total, self.bigram_total = state["unigram_total"], state["bigram_total"]
        self.log_u = self._logs(unigrams, self.unigram_total)
        self.log_b = self._logs(bigrams, self.bigram_total)
        self.unseen_u = math.log(unseen_count / max(self.unigram_total, unseen_count))
        self.unseen_b = math.log(unseen_count / max(self.bigram_total, unseen_count))

    @staticmethod
    def _logs(counts: Counter, total: int) -> dict[str, float]:
        log_total = math.log(total) if total else 0.0
        return {w: math.log(c) - log_total for w, c in counts.items()}

    def rho(self, unigrams: list[str], bigrams: list[str]) -> float:
        log_u, log_b, unseen_u, unseen_b = self.log_u, self.log_b, self.unseen_u, self.unseen_b
        total = sum(log_u.get(u, unseen_u) for u in unigrams) + sum(log_b.get(b, unseen_b) for b in bigrams)
        return -0.5 * total


_SCORERS: dict[tuple[str, float], Scorer] = {}


def scorer_for(state: dict, unseen_count: float = 1.0) -> Scorer:
    """The compiled scorer for a state, built once per process per fingerprint (every chunk of a run
    gets the state afresh; compiling it again each time would cost more than scoring)."""
    check_state(state)
    key = (state.get("fingerprint") or "", float(unseen_count))
    found = _SCORERS.get(key) if key[0] else None
    if found is None:
        found = Scorer(state, float(unseen_count))
        if key[0]:
            if len(_SCORERS) >= 4:
                _SCORERS.pop(next(iter(_SCORERS)))
            _SCORERS[key] = found
    return found
