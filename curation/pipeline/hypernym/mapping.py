"""Mapping each name to its hypernym: the curator's names first, a quoted title, the name's own head word,
a title before a person's name, then the entity label's hypernym (countries and states refined)."""
from __future__ import annotations

from .detect import Mention
from .lexicon import COUNTRIES, PREFIX_HEADS, US_STATES


class MentionMapper:
    """The mapping part of a ``Rewrite``."""

    def label_mentions(self, mentions: list[Mention]) -> None:
        doc, p = self.doc, self.p
        entity_words, head_words, hypernyms = self.c.entity_words, self.c.head_words, self.c.hypernyms
        at = {i: m for m in mentions for i in m.tokens()}
        for m in mentions:
            name = doc[m.start + (1 if m.title else 0):m.end].text
            key = name.lower()
            root = self.root(m)
            heads = [root.lower_, self.tk[m.end - 1].lower_, self.tk[m.end - 1].lemma_.lower()]
            head = next((h for h in heads if h in head_words), None)
            # The curator's names, also at the end of a longer mention ("Rapper Kanye West").
            words = m.text.lower().split()
            known = next((" ".join(words[k:]) for k in range(len(words)) if " ".join(words[k:]) in entity_words), None)
            if known is not None:
                m.hypernym = entity_words[known]
                m.label = m.label or (head_words[head] if head else "ENTITY")
                m.source = "entity_words"
                continue
            found = None if m.quoted else self.g.lookup(name)
            if found is not None:  # the gazetteer knows it, whatever the label: "Big Ben", "MacBook Pro"
                m.label, m.hypernym = found
                m.source = "gazetteer"
                continue
            if not m.quoted and all(w in self.g.breeds for w in key.split()):
                m.label, m.hypernym, m.source = None, key, "breed"  # a common noun: "a Labrador"
                continue
            prefix = self.tk[m.start].lower_
            if not m.quoted and m.end - m.start >= 2 and prefix in PREFIX_HEADS and m.label != "PERSON":
                m.label, m.hypernym, m.source = "LOC", PREFIX_HEADS[prefix], "head word"  # "River Seine", "Mount Rainier"
                continue
            if not m.quoted:
                self.check_type(m)
            if m.quoted:  # a quoted name is a title: 'Hollywood Homicide'
                m.label = "WORK_OF_ART"
            elif head and m.label not in ("PERSON", "NORP"):
                m.label = head_words[head]
                m.hypernym = root.lower_ if head == root.lower_ else self.tk[m.end - 1].lower_
                m.source = "head word"
                continue
            elif m.label in (None, "ORG") and self.coordinated_with_person(m, at):
                m.label = "PERSON"
            if m.label == "PERSON" and m.title and p["titles_as_hypernyms"]:
                m.hypernym, m.source = m.title, "title"
                continue
            if m.label == "GPE":
                refined = "GPE:country" if key in COUNTRIES else "GPE:state" if key in US_STATES else "GPE"
                m.hypernym = hypernyms.get(refined, hypernyms.get("GPE"))
            elif m.label == "NORP" and m.label in hypernyms:
                plural = root.tag_ in ("NNPS", "NNS") or root.text.endswith("s")
                m.hypernym = hypernyms["NORP"] if plural else hypernyms.get("NORP:singular", hypernyms["NORP"])
            elif m.label:
                m.hypernym = hypernyms.get(m.label)
            m.source = "label"

    def coordinated_with_person(self, m: Mention, at: dict) -> bool:
        """"Harrison Ford and Calista Flockhart": a two- or three-word name coordinated with a person
        is a person, whatever the small model's entity recogniser says."""
        words = [self.tk[i] for i in m.tokens()]
        if not 2 <= len(words) <= 3 or not all(w.is_alpha and w.is_title for w in words):
            return False
        root = self.root(m)
        partners = [root.head] if root.dep_ == "conj" else []
        partners += [c for c in root.children if c.dep_ == "conj"]
        return any(at.get(t.i) is not None and at[t.i] is not m and at[t.i].label == "PERSON" for t in partners)
