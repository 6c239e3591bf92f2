"""Finding the names of a caption: quoted titles, the recogniser's entities (trimmed of articles, quotes and
case marks; a common-noun title before a person's name kept with it) and proper-noun runs it missed."""
from __future__ import annotations

from dataclasses import dataclass

from .lexicon import COUNTRIES, HONORIFICS, NAME_LABELS, QUOTES, TITLE_FUNCTION_WORDS, US_STATES


@dataclass
class Mention:
    """A name in the caption: tokens [start, end), its entity label and the hypernym it becomes
    (None: leave it as written; "": drop it)."""

    start: int
    end: int
    label: str | None
    text: str
    quoted: bool = False
    title: str | None = None
    hypernym: str | None = None
    source: str = ""  # where the hypernym came from: entity_words, gazetteer, breed, head word, title, label
    retyped: str = ""  # why the sanity checks changed the recogniser's label
    uncertain: str = ""  # why the type is a guess (see sanity.py)

    def tokens(self) -> range:
        return range(self.start, self.end)


class MentionFinder:
    """The mention-finding part of a ``Rewrite`` (it reads ``self.doc``, ``self.tk`` and ``self.g``)."""

    # -- mentions ----------------------------------------------------------------------------------
    def quote_pairs(self) -> list[tuple[int, int]]:
        quotes = [t.i for t in self.tk if t.text in QUOTES and t.is_punct and t.tag_ != "POS"]
        return list(zip(quotes[0::2], quotes[1::2]))

    def find_mentions(self) -> list[Mention]:  # noqa: PLR0915
        doc = self.doc
        mentions: list[Mention] = []
        taken: set[int] = set()
        # A quoted run of capitalised words is a title: 'Hollywood Homicide', 'Ocean's Eleven'.
        for a, b in self.quote_pairs():
            inside = self.tk[a + 1:b]
            words = [t for t in inside if t.is_alpha]
            if (0 < len(inside) <= 10 and words and any(t.pos_ == "PROPN" for t in inside)
                    and all(t.is_title or t.is_upper or t.lower_ in TITLE_FUNCTION_WORDS for t in words)):
                mentions.append(Mention(a + 1, b, "WORK_OF_ART", doc[a + 1:b].text, quoted=True))
                taken.update(range(a + 1, b))
        # Names of several words the gazetteer knows, before the recogniser's pieces of them: "the los
        # angeles lakers" is a team, not "the city lakers".
        for start, end, _label, _hypernym in self.gazetteer_spans(taken, min_words=2):
            if any(e.label_ in NAME_LABELS and e.start < end and start < e.end and (e.start < start or e.end > end)
                   for e in doc.ents if not (e.end - e.start == 1 and self.tk[e.start].dep_ == "det")):
                continue  # part of a longer name: "the [Taj Mahal] Hotel" is a hotel
            mentions.append(Mention(start, end, None, doc[start:end].text))
            taken.update(range(start, end))
        for ent in doc.ents:
            if ent.label_ not in NAME_LABELS or any(i in taken for i in range(ent.start, ent.end)):
                continue
            if not any(t.pos_ == "PROPN" or not t.is_lower for t in self.tk[ent.start:ent.end] if not t.is_punct):
                continue  # common words taken for a name: "a grey, dusty lunar surface" as a PERSON
            if self.common_words_at_start(ent):
                continue  # "Commuters walk ...", "Businesswoman talking ...": a capital only because it opens the sentence
            start, end = ent.start, ent.end
            while start < end and (self.tk[start].text in QUOTES or self.tk[start].dep_ in ("det", "predet")):
                start += 1
            while end > start and (self.tk[end - 1].is_punct or self.tk[end - 1].dep_ == "case"):
                end -= 1
            # "[Buddy catches]": a lower-case word after a capitalised name is no part of it.
            if any(not t.is_lower for t in self.tk[start:end]):
                while end - 1 > start and self.tk[end - 1].is_lower and self.tk[end - 1].is_alpha \
                        and self.tk[end - 1].pos_ != "PROPN" and self.tk[end - 1].lower_ not in TITLE_FUNCTION_WORDS:
                    end -= 1
            if start >= end:
                continue
            split = self.split_of_place(start, end)
            if split is not None:  # "Novak Djokovic of Serbia": a name, then "of" and a country
                end = split
            m = Mention(start, end, ent.label_, doc[start:end].text)
            # A common-noun title written before a person's name: "Musician Justin Timberlake".
            t = self.tk[start - 1] if start > 0 else None
            if (ent.label_ == "PERSON" and t is not None and t.i not in taken and t.ent_type_ == ""
                    and t.is_alpha and len(t.text) >= 3 and t.lower_ not in HONORIFICS
                    and (t.pos_ == "NOUN" or t.lower_ in self.g.title_groups)
                    and t.dep_ in ("compound", "amod", "nmod") and start <= t.head.i < end):
                m.start, m.title, m.text = start - 1, t.lower_, doc[start - 1:end].text
            elif ent.label_ == "PERSON" and end - start >= 2 and self.tk[start].lower_ in self.g.title_groups:
                m.title = self.tk[start].lower_  # the recogniser took the title in: "[Senator Mark Warner]"
            mentions.append(m)
            taken.update(m.tokens())
            if split is not None and split + 1 < ent.end:
                mentions.append(Mention(split + 1, ent.end, "GPE", doc[split + 1:ent.end].text))
                taken.update(range(split + 1, ent.end))
        # Proper-noun runs the entity recogniser missed ("Cannes Film Festival"): no label yet.
        i = 0
        while i < len(doc):
            if self.tk[i].pos_ == "PROPN" and i not in taken and not self.tk[i].ent_type_:
                j = i
                while j < len(doc) and self.tk[j].pos_ == "PROPN" and j not in taken and not self.tk[j].ent_type_:
                    j += 1
                mentions.append(Mention(i, j, None, doc[i:j].text))
                taken.update(range(i, j))
                i = j
            else:
                i += 1
        # Gazetteer names in lower-case text that neither found ("the golden state warriors").
        for start, end, _label, _hypernym in self.gazetteer_spans(taken):
            mentions.append(Mention(start, end, None, doc[start:end].text))
            taken.update(range(start, end))
        mentions.sort(key=lambda m: m.start)
        mentions = self.join_possessives(mentions)
        for m in mentions:
            before, after = m.start - 1, m.end
            m.quoted = m.quoted or (before >= 0 and self.tk[before].text in QUOTES
                                    and after < len(doc) and self.tk[after].text in QUOTES)
        return mentions

    def root(self, m: Mention):
        inside = [self.tk[i] for i in m.tokens() if not (m.start <= self.tk[i].head.i < m.end) or self.tk[i].head.i == i]
        return inside[-1] if inside else self.tk[m.end - 1]

    def common_words_at_start(self, ent) -> bool:
        """An entity of common nouns and adjectives whose only capital opens the sentence."""
        words = [t for t in self.tk[ent.start:ent.end] if not t.is_punct]
        return bool(words) and ent.start == ent.sent.start and all(t.pos_ in ("NOUN", "ADJ") for t in words) \
            and all(t.is_lower for t in words[1:]) and not any(t.lower_ in self.g.person_names for t in words)

    def split_of_place(self, start: int, end: int) -> int | None:
        """The position of "of" in an entity "<name> of <country or state>", else None."""
        for k in range(start + 1, end - 1):
            if self.tk[k].lower_ == "of":
                place = " ".join(t.lower_ for t in self.tk[k + 1:end])
                if place in COUNTRIES or place in US_STATES:
                    return k
        return None

    def join_possessives(self, mentions: list[Mention]) -> list[Mention]:
        """"[St. Peter]'s [Basilica]": a name in the possessive right before another name is part of it
        (the recogniser cut it in two); the whole takes the second name's label."""
        out: list[Mention] = []
        for m in mentions:
            prev = out[-1] if out else None
            if (prev is not None and not prev.quoted and m.start == prev.end + 1 and self.tk[prev.end].tag_ == "POS"
                    and m.label not in ("PERSON", None) and prev.label != "PERSON"):
                out[-1] = Mention(prev.start, m.end, m.label, self.doc[prev.start:m.end].text)
            else:
                out.append(m)
        return out
