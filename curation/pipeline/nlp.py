"""spaCy, loaded lazily in workers only (never in web processes), with only the needed components."""
from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

from django.conf import settings

ALL = ("tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "ner")
# What each component needs to run in en_core_web_sm.
_REQUIRES = {"tagger": {"tok2vec"}, "parser": {"tok2vec"}, "ner": set(),
             "attribute_ruler": {"tagger"}, "lemmatizer": {"attribute_ruler", "tagger"}}


# What filters ask for, in words: "pos" (token.pos_), "lemma", "deps" (dependency parse and
# sentences), "ents" (named entities); component names are accepted as well.
ALIASES = {"pos": {"tagger", "attribute_ruler"}, "lemma": {"lemmatizer"}, "deps": {"parser"}, "ents": {"ner"}}


def closure(needs: frozenset[str] | set[str]) -> frozenset[str]:
    wanted = set()
    for need in needs:
        if need not in ALIASES and need not in ALL:
            raise ValueError(f"unknown spaCy need {need!r}: use {sorted(ALIASES)} or a component name")
        wanted |= ALIASES.get(need, {need})
    changed = True
    while changed:
        changed = False
        for comp in list(wanted):
            for dep in _REQUIRES.get(comp, ()):
                if dep not in wanted:
                    wanted.add(dep)
                    changed = True
    return frozenset(wanted)


@lru_cache(maxsize=4)
def load(needs: frozenset[str]):
    import spacy

    wanted = closure(needs)
    nlp = spacy.load(settings.SPACY_MODEL, exclude=[c for c in ALL if c not in wanted])
    if settings.SPACY_COMPILED_RULER:
        from .ruler import install

        install(nlp)
    _freeze_heap()
    return nlp


GC_THRESHOLD0 = 10_000


def _freeze_heap() -> None:
    """Tune the cyclic garbage collector for a process that has loaded a model (a worker; web processes
    never load one). What is alive now (the model, its vocabulary, Django, the libraries: hundreds of
    thousands of objects that live as long as the worker) is frozen out of its reach: without that,
    every full collection walks all of them again. And it runs after GC_THRESHOLD0 net allocations
    rather than 700: parsing and filtering a batch allocates many short-lived objects, which would
    otherwise be scanned (and promoted, and scanned again) hundreds of times a second. Garbage is
    collected first, so none is frozen."""
    import gc

    gc.collect()
    gc.freeze()
    threshold0, threshold1, threshold2 = gc.get_threshold()
    if 0 < threshold0 < GC_THRESHOLD0:
        gc.set_threshold(GC_THRESHOLD0, threshold1, threshold2)


def model_version() -> str:
    import spacy

    nlp = load(frozenset())
    return f"spacy {spacy.__version__}; {nlp.meta.get('lang')}_{nlp.meta.get('name')} {nlp.meta.get('version')}"


# Docs of recently parsed texts, per worker process: identical alt-texts recur across chunks of a
# run (30% of web alt-text is exact duplicates), and a Doc is only read by the filters. (The executor
# keeps the decisions of text-only steps per distinct text, so it does not ask again for most of them:
# a small cache is enough, and a Doc with its tensor weighs some 10 kB.)
DOC_CACHE: "OrderedDict[tuple[frozenset[str], str], object]" = OrderedDict()
DOC_CACHE_SIZE = 1_000
DOC_CACHE_MAX_CHARS = 2_000


def parse_unique(texts: list[str], needs: frozenset[str], batch_size: int = 256) -> dict[str, object]:
    """Parse each distinct text once: {text: Doc}. Short texts parsed earlier in this process with
    the same components come from a bounded cache."""
    needs = frozenset(needs)
    nlp = load(needs)
    distinct = list(dict.fromkeys(texts))
    found = {}
    todo = []
    for text in distinct:
        doc = DOC_CACHE.get((needs, text))
        if doc is not None:
            DOC_CACHE.move_to_end((needs, text))
            found[text] = doc
        else:
            todo.append(text)
    # spaCy refuses texts over nlp.max_length (1,000,000 characters): those stay unparsed (None)
    # and the filters that need a parse drop them with the reason "unparsed".
    parseable = [t for t in todo if len(t) <= nlp.max_length]
    for text, doc in zip(parseable, nlp.pipe(parseable, batch_size=batch_size)):
        found[text] = doc
        if len(text) <= DOC_CACHE_MAX_CHARS:
            DOC_CACHE[(needs, text)] = doc
    while len(DOC_CACHE) > DOC_CACHE_SIZE:
        DOC_CACHE.popitem(last=False)
    return {t: found.get(t) for t in distinct}


def items_for_texts(texts: list[str], needs=frozenset(), **image_fields):
    """Items for bare texts (tests, previews): parsed when ``needs`` asks for it."""
    from .base import Item

    docs = parse_unique(texts, frozenset(needs)) if needs else {}
    return [Item(caption_id=i + 1, image_id=i + 1, raw_text=t, text=t, doc=docs.get(t), **image_fields)
            for i, t in enumerate(texts)]
