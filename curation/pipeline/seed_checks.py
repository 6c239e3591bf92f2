"""What ``caption_seeds`` (seeds.py, seed 001 §2) checks and adds around its extraction:

- ``participle_pairs``: recall on participial and appositive phrases. "X, mounted on a horse, slays Y" and
  "X, seated on a throne, holds Y": a participle that is not itself a relation ("mounted", "seated",
  "clad", "enthroned") still says where its subject is, through its preposition: "person on horse".
- ``confirmed``: a part-of-speech sanity check of each seed against the parse of the original sentence
  (the segment is parsed again, out of context, and a tagger slip there must not make a seed): the
  relation's verb is a verb there (not a noun or an adjective: "the altar holding candles" read as an
  adjective), its class words are nouns there, and where the verb had a subject there, that subject is
  the seed's subject ("The Virgin, enthroned on a throne, holds the child" gives no "throne holds child").
- ``Translator``: the hook for descriptions in other languages. ``translation_model`` names a local model
  directory (a Hugging Face translation model, loaded with ``local_files_only``: nothing is downloaded);
  without one, a description whose language is not English is read as it is and its decision says
  "translation: not run: no model configured".
"""
from __future__ import annotations

import os
from functools import lru_cache

from .seed_words import noun_forms

NOT_CONFIGURED = "not run: no model configured"
ENGLISH = frozenset(["", "en", "eng", "english"])
VERB_DEPS_REFUSED = frozenset(["amod", "compound", "nmod", "npadvmod", "pobj", "dobj", "nsubj", "nsubjpass", "attr",
                               "poss", "appos"])


def participle_like(verb) -> bool:
    """A past participle, or a past form the parser took for the main verb right after a comma
    ("Saint Martin, mounted on a horse, cuts ...")."""
    if verb.tag_ == "VBN":
        return True
    return verb.tag_ == "VBD" and verb.i > 0 and verb.doc[verb.i - 1].text == ","


def participle_pairs(flt, verb) -> list[tuple[str, str]]:
    """(preposition, object class) of a participle that is no relation of its own: "mounted on a horse"."""
    pairs = []
    for child in verb.children:
        if child.dep_ == "prep" and child.lower_ in flt.relations and child.i > verb.i:
            pairs += [(child.lower_, c) for c in flt._objects_of(child)]
    return pairs


class SentenceFacts:
    """The original sentence's parse as the seed check reads it: the class of each token (person where a
    name or a pronoun stood), the verbs by their form, and their subjects."""

    def __init__(self, flt, sent):
        replaced = flt._person_spans(sent)
        self.person_tokens = {i for start, end in replaced.items() for i in range(start, end)}
        self.classes: dict[int, str] = {}
        for t in sent:
            if t.i in self.person_tokens or (t.pos_ == "PRON" and t.lower_ in flt.pronouns and t.tag_ != "PRP$"):
                self.classes[t.i] = flt.person
            elif (c := flt.class_of(t)) is not None:
                self.classes[t.i] = c
        self.nouns = set(self.classes.values())
        self.tokens = list(sent)
        # Classes whose noun has another class word hanging on it as a modifier ("the altar holding candles"
        # parsed as "candles" modified by "altar"): the parse around them is not to be trusted.
        self.shadowed = {self.classes[t.i] for t in sent if t.i in self.classes and t.i not in self.person_tokens
                         and self._class_modifier(flt, t)}

    @staticmethod
    def _class_modifier(flt, token, depth: int = 0) -> bool:
        """Whether a class word modifies ``token``, directly or through other modifiers."""
        for c in token.children:
            if c.dep_ in ("compound", "amod", "npadvmod") and depth < 4:
                if any(f in flt.classes for f in noun_forms(c.text)) or SentenceFacts._class_modifier(flt, c, depth + 1):
                    return True
        return False

    def verb_ok(self, word: str, subject: str) -> bool:
        """Whether a token written ``word`` is a verb in the original sentence whose subject there (if it
        has one) is ``subject``."""
        found = [t for t in self.tokens if t.lower_ == word]
        if not found:
            return True  # a form the tuning made ("is holding"): the segment's parse is all there is
        for t in found:
            before = self.tokens[t.i - self.tokens[0].i - 1] if t.i > self.tokens[0].i else None
            if t.dep_ in VERB_DEPS_REFUSED or (before is not None and before.tag_ in ("DT", "PRP$", "POS")):
                continue  # a noun or an adjective use: "the altar holding candles" (amod), "his walking stick"
            if t.pos_ not in ("VERB", "AUX"):
                return True  # a verb the tagger took for a plural noun next to a name ("Charles V kneels")
            subjects = [c for c in t.children if c.dep_ in ("nsubj", "nsubjpass")]
            if not subjects:
                return True
            for s in subjects:
                if any(self.classes.get(x.i) == subject for x in (s, *s.conjuncts)):
                    return True
        return False


def confirmed(flt, seed: tuple[str, str, str], facts: SentenceFacts) -> bool:
    subject, relation, obj = seed
    if subject not in facts.nouns or obj not in facts.nouns:
        return False  # a class word the original sentence does not have as a noun ("altar" as an adjective)
    if obj in facts.shadowed or (subject in facts.shadowed and subject != flt.person):
        return False
    first = relation.split()[0]
    if first in flt.prepositions:
        return True
    return facts.verb_ok(first, subject)


# --- translation ----------------------------------------------------------------------------------------

def check_model(path: str) -> None:
    if not isinstance(path, str):
        raise ValueError("caption_seeds: translation_model must be the path of a local model directory or empty")
    if path and not os.path.isdir(path):
        raise ValueError(f"caption_seeds: translation_model {path!r} is not a local model directory "
                         "(models are never downloaded)")


@lru_cache(maxsize=2)
def load_translator(path: str):
    """A function from a list of texts to their English translations, from a local model directory."""
    from transformers import pipeline

    translate = pipeline("translation", model=path, tokenizer=path, device=-1,
                         model_kwargs={"local_files_only": True})

    def run(texts: list[str]) -> list[str]:
        return [out["translation_text"] for out in translate(texts, truncation=True)]

    return run


class Translator:
    """Translates the non-English descriptions of a batch, or says why it did not."""

    def __init__(self, model: str):
        self.model = model

    def needed(self, item) -> bool:
        return (item.language or "").lower() not in ENGLISH

    def translate(self, texts: list[str]) -> dict[str, str]:
        if not self.model or not texts:
            return {}
        return dict(zip(texts, load_translator(self.model)(texts)))
