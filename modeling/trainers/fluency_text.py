"""Sentences to tokens for the fluency classifiers: lower-cased words, and part-of-speech tags from
the installed spaCy pipeline of the sentence's language (seed 004's POS branches)."""
from __future__ import annotations

import re
from functools import lru_cache

# Words are letter/digit runs or single punctuation marks; CJK characters count one each (the seed
# segments Chinese with a service we do not have; characters are the usual stand-in).
_TOKEN_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+(?:['’-][^\W_]+)*|[^\w\s]")


def _spacy_languages() -> dict[str, str]:
    """{language code: installed spaCy package} with settings.SPACY_MODEL first for its language."""
    from django.conf import settings

    found: dict[str, str] = {}
    try:
        import spacy

        names = [settings.SPACY_MODEL] + sorted(spacy.util.get_installed_models())
        for name in names:
            if name in found.values():
                continue
            try:
                meta = spacy.util.get_package_meta(name) if name != settings.SPACY_MODEL else None
            except Exception:  # pragma: no cover - a broken package  # noqa: BLE001
                meta = None
            lang = (meta or {}).get("lang") or name.split("_", 1)[0]
            found.setdefault(lang, name)
    except ImportError:  # pragma: no cover - spaCy is a requirement
        pass
    return found


@lru_cache(maxsize=1)
def spacy_languages() -> dict[str, str]:
    return _spacy_languages()


def _base_language(language: str) -> str:
    return (language or "").split("-", 1)[0].split("_", 1)[0].lower()


def has_pipeline(language: str) -> bool:
    return _base_language(language) in spacy_languages()


@lru_cache(maxsize=4)
def _pipeline(language: str):
    """The tagging pipeline for a language: the platform's loader for settings.SPACY_MODEL, otherwise
    the installed package for that language (parser and NER excluded)."""
    from django.conf import settings

    name = spacy_languages()[_base_language(language)]
    if name == settings.SPACY_MODEL:
        from curation.pipeline import nlp

        return nlp.load(frozenset({"pos"}))
    import spacy

    return spacy.load(name, exclude=["parser", "ner", "lemmatizer"])


def words(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN_RE.findall(text or "")]


def tokenize(texts: list[str], language: str, with_pos: bool, max_tokens: int) -> list[tuple[list[str], list[str]]]:
    """[(lower-cased words, POS tags)] per text; POS tags only when ``with_pos`` (spaCy's tokens then
    give the words too, so both branches see the same tokens)."""
    out = []
    if with_pos:
        nlp = _pipeline(language)
        for doc in nlp.pipe([(t or "")[:5000] for t in texts], batch_size=256):
            toks = [(tok.text.lower(), tok.pos_ or tok.tag_ or "X") for tok in doc if not tok.is_space]
            toks = toks[:max_tokens]
            out.append(([w for w, _ in toks], [p for _, p in toks]))
    else:
        for text in texts:
            out.append((words(text)[:max_tokens], []))
    return out



# Universal POS tags (spaCy's pos_), with sentence start and end: the bigram table of a sentence.
UPOS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X", "BOS", "EOS")
_UPOS_INDEX = {tag: n for n, tag in enumerate(UPOS)}
SYNTAX_DIM = len(UPOS) * len(UPOS) + 2


def syntax_features(texts: list[str], language: str = "en"):
    """Per text: counts of its part-of-speech bigrams (sentence start and end included), the number of
    immediately repeated words and the length in tens of words; float32 [n, SYNTAX_DIM]. The seed's POS
    branches read the tag sequence with an LSTM; a few hundred labels cannot train that, but they can
    weigh these counts: swapped words, dropped articles and doubled tokens, the errors machine
    translation makes, show up as bigrams that fluent captions rarely have ("DET VERB", "NOUN DET")."""
    import numpy as np

    out = np.zeros((len(texts), SYNTAX_DIM), dtype=np.float32)
    width = len(UPOS)
    other = _UPOS_INDEX["X"]
    for n, (lowered, tags) in enumerate(tokenize(list(texts), language, True, 200)):
        sequence = [_UPOS_INDEX["BOS"]] + [_UPOS_INDEX.get(t, other) for t in tags] + [_UPOS_INDEX["EOS"]]
        for a, b in zip(sequence, sequence[1:]):
            out[n, a * width + b] += 1.0
        out[n, -2] = sum(1 for a, b in zip(lowered, lowered[1:]) if a == b)
        out[n, -1] = len(lowered) / 10.0
    return out
