"""Entity-type sanity checks before mapping: the small spaCy model's labels are not mapped blindly.

Seed 002 (§3.4) matches names against the Knowledge Graph; offline, a packaged gazetteer
(``data/hypernym_gazetteer.json``, see its licence note) plus the curator's ``gazetteer`` and ``names``
parameters stand in for it. Before a mention is mapped:

- a name the gazetteer knows takes the gazetteer's hypernym whatever the label ("Big Ben" -> "clock
  tower", "MacBook Pro" -> "laptop", "Golden State Warriors" -> "team"), also in lower-case text the
  recogniser misses ("the golden state warriors" -> "the team");
- a breed word is a common noun of the caption, not a name ("a Labrador" -> "a labrador");
- a name that starts with a known given or stage name is a person whatever the label ("Rihanna" as a
  city, "Max" as a country);
- a place, product, event or unlabelled name that is the subject of a verb only people do ("X performs",
  "X smiles") is a person, and that guess is *uncertain*;
- a "person" with a product-like form ("Pro", "Max", digits) and no given name, or a "person" that is
  the object of a place preposition ("in front of X") and not a known name, is *uncertain*.

Uncertain mentions are listed in the decision (``details["uncertain"]``); the filter's ``on_uncertain``
says what happens to them (guess, review or drop).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from .lexicon import pluralize

GAZETTEER_FILE = Path(__file__).resolve().parent.parent / "data" / "hypernym_gazetteer.json"
SECTIONS = {"landmarks": "FAC", "products": "PRODUCT", "organisations": "ORG"}
LIST_KEYS = ("person_names", "breeds", "person_verbs")
MAP_KEYS = (*SECTIONS, "title_groups")
PRODUCT_WORDS = frozenset(["pro", "max", "mini", "air", "plus", "ultra", "lite", "xl", "se", "gt", "turbo"])
PLACE_PREPOSITIONS = frozenset(["in", "at", "near", "beside", "behind", "under", "past", "outside", "inside",
                                "atop", "across", "along", "toward", "towards", "above", "below", "opposite"])
PLACE_NOUNS = frozenset(["front", "top", "foot", "base", "steps", "shadow", "side"])
# A name retyped from context alone may stand for any of these labels; an ORG (a band, a team) may well
# "perform" or "celebrate", so it is left to the recogniser.
RETYPABLE = frozenset([None, "GPE", "LOC", "FAC", "PRODUCT", "EVENT", "WORK_OF_ART", "NORP", "LANGUAGE", "LAW"])


@lru_cache(maxsize=1)
def packaged() -> dict:
    with open(GAZETTEER_FILE, encoding="utf-8") as fh:
        return json.load(fh)


def check_params(gazetteer, names) -> None:
    """Refuse a ``gazetteer`` or ``names`` parameter of the wrong shape (the curator sees it on saving)."""
    if not isinstance(gazetteer, dict):
        raise ValueError("hypernymize: gazetteer must be an object of lists and mappings")
    unknown = set(gazetteer) - set(LIST_KEYS) - set(MAP_KEYS)
    if unknown:
        raise ValueError(f"hypernymize: unknown gazetteer section(s) {sorted(unknown)}; "
                         f"known: {sorted(LIST_KEYS + MAP_KEYS)}")
    for key, value in gazetteer.items():
        if key in LIST_KEYS and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ValueError(f"hypernymize: gazetteer {key} must be a list of words")
        if key in MAP_KEYS and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            raise ValueError(f"hypernymize: gazetteer {key} must map names to hypernyms")
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise ValueError("hypernymize: names must be a list of names")


class Gazetteer:
    """The packaged lists merged with the curator's additions (built once per filter)."""

    def __init__(self, extra: dict | None = None, names: list | None = None):
        base, extra = packaged(), extra or {}

        def words(key):
            return {w.strip().lower() for w in [*base.get(key, []), *extra.get(key, [])] if w.strip()}

        self.person_names = words("person_names")
        self.breeds = words("breeds")
        self.person_verbs = words("person_verbs")
        self.title_groups = {k.lower(): v for k, v in {**base["title_groups"], **extra.get("title_groups", {})}.items()}
        self.named: dict[str, tuple[str, str]] = {}  # "big ben" -> ("FAC", "clock tower")
        for section, label in SECTIONS.items():
            for name, hypernym in {**base.get(section, {}), **extra.get(section, {})}.items():
                self.named[name.strip().lower()] = (label, hypernym)
        self.max_words = max((len(k.split()) for k in self.named), default=1)
        self.first_words = {k.split()[0] for k in self.named}  # where a name can start
        # The curator's names: never let through a rewrite (whole names and their words).
        self.names = {" ".join(n.lower().split()) for n in names or []}

    def lookup(self, text: str, suffixes: bool = True) -> tuple[str, str] | None:
        """The (label, hypernym) of a name or of its last words ("the River Seine" -> "seine"); a plural
        takes the plural hypernym ("iPads" -> "tablets")."""
        words = text.lower().replace("\u2019", "'").split()
        if words and words[0] == "the":
            words = words[1:]
        for k in range(len(words) if suffixes else min(1, len(words))):
            key = " ".join(words[k:])
            found = self.named.get(key)
            if found is not None:
                return found
            if key.endswith("s") and (found := self.named.get(key[:-1])) is not None:
                return found[0], pluralize(found[1])
        return None


class TypeChecks:
    """The sanity-check part of a ``Rewrite``: ``self.g`` is its Gazetteer."""

    def gazetteer_spans(self, taken: set[int], min_words: int = 1) -> list[tuple[int, int, str, str]]:
        """Gazetteer names in tokens no other mention took, longest first: [(start, end, label, hypernym)].
        A one-word name must have a capital or be a proper noun ("apple" in "a red apple" is fruit)."""
        found, n, tk = [], len(self.tk), self.tk
        i = 0
        while i < n:
            hit = None
            lower = tk[i].lower_
            if lower == "the" or (lower not in self.g.first_words and lower[:-1] not in self.g.first_words):
                i += 1  # an article is no part of a name; most words start none
                continue
            for size in range(min(self.g.max_words, n - i), min_words - 1, -1):
                span = range(i, i + size)
                if any(j in taken for j in span):
                    continue
                found_here = self.g.lookup(" ".join(tk[j].lower_ for j in span), suffixes=False)
                if found_here and (size > 1 or tk[i].pos_ == "PROPN" or not tk[i].is_lower):
                    hit = (i, i + size, *found_here)
                    break
            if hit:
                found.append(hit)
                i = hit[1]
            else:
                i += 1
        return found

    def check_type(self, m) -> None:
        """Correct or flag ``m.label`` before mapping; sets ``m.uncertain`` with the reason of a guess."""
        tk, g = self.tk, self.g
        name_start = m.start + (1 if m.title and tk[m.start].lower_ == m.title else 0)
        words = [t for t in tk[name_start:m.end] if not t.is_punct]
        if not words:
            return
        first = words[0]
        capitalised = first.is_title or first.pos_ == "PROPN"
        known_person = capitalised and first.lower_ in g.person_names and not m.quoted and len(words) <= 3
        root = self.root(m)
        verb = root.head if root.dep_ in ("nsubj", "nsubjpass") and root.head.i != root.i else None
        person_verb = verb is not None and verb.pos_ in ("VERB", "AUX") and (
            verb.lemma_.lower() in g.person_verbs or verb.lower_.rstrip("s") in g.person_verbs)
        if m.label != "PERSON" and known_person:
            m.label, m.retyped = "PERSON", f"{first.text!r} is a known given name"
        elif m.label in RETYPABLE and person_verb and not m.quoted:
            m.label, m.retyped = "PERSON", f"subject of {verb.text!r}"
            m.uncertain = f"{m.text!r} taken for a person: subject of {verb.text!r}"
        elif m.label == "PERSON" and not known_person:
            productish = len(words) >= 2 and (any(any(ch.isdigit() for ch in t.text) for t in words[1:])
                                              or words[-1].lower_ in PRODUCT_WORDS)
            prep = root.head if root.dep_ == "pobj" else None
            placeish = prep is not None and (prep.lower_ in PLACE_PREPOSITIONS or (
                prep.lower_ == "of" and prep.head.lower_ in PLACE_NOUNS))
            if productish:
                m.label, m.retyped = "PRODUCT", "a product-like name"
                m.uncertain = f"{m.text!r} labelled a person, but reads like a product"
            elif placeish and not m.title:
                m.uncertain = f"{m.text!r} labelled a person after {prep.text!r}"
            elif len(words) == 1 and prep is not None and not m.title and words[0].lower_ not in g.person_names:
                m.uncertain = f"{m.text!r}, one unknown word after {prep.text!r}, labelled a person"
