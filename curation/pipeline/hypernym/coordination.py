"""Coordinations of the same hypernym resolved into one plural: "actor and actor" -> "actors" (seed 002 §3.4)."""
from __future__ import annotations

from .lexicon import pluralize
from .units import Unit


class Coordinations:
    """The coordination part of a ``Rewrite``: works on its output units."""

    def merge_coordinations(self, units: list[Unit]) -> list[Unit]:
        """"actor and actor" -> "actors"; "person, person and person" -> "people"."""
        out, k = [], 0
        while k < len(units):
            u = units[k]
            word = u.entity_type or (u.text if u.token is not None and u.token.pos_ == "NOUN" else None)
            members, j, joined = [k], k + 1, False
            while word:
                seps = []
                while j < len(units) and (units[j].text in (",", "and", "&") and units[j].token is not None):
                    seps.append(units[j].text)
                    j += 1
                nxt = units[j] if j < len(units) else None
                same = (nxt is not None and (nxt.entity_type or nxt.text) == word
                        and (nxt.entity_type or nxt.token.pos_ == "NOUN"))
                same = same or (nxt is not None and self.is_person_unit(u) and self.is_person_unit(nxt))
                if seps and same and all(s in (",", "and", "&") for s in seps):
                    joined = joined or any(s in ("and", "&") for s in seps)
                    members.append(j)
                    j += 1
                else:
                    break
            if len(members) > 1 and joined:
                last = units[members[-1]]
                mentions = tuple(m for idx in members for m in units[idx].mentions)
                singular = self.common_word([units[idx] for idx in members]) or word
                merged = Unit(pluralize(singular), u.first, last.last, None, singular if u.entity_type else None, mentions)
                for m in mentions:
                    self.mapped_steps.pop(m.start, None)
                self.mapped_steps[u.first] = f'"{self.doc[u.first:last.last + 1].text}" mapped to "{merged.text}"'
                out.append(merged)
                k = members[-1] + 1
            else:
                out.append(u)
                k += 1
        return out

    @staticmethod
    def is_person_unit(unit: Unit) -> bool:
        """A hypernym standing for people the filter named itself (from a title or the label; a curator's
        ``entity_words`` choice, "actor" next to "actress", is left as written)."""
        return bool(unit.entity_type and unit.mentions) and all(
            m.label == "PERSON" and m.source in ("title", "label") for m in unit.mentions)

    def common_word(self, members: list[Unit]) -> str | None:
        """The singular the plural of coordinated people takes: their hypernym when they share it
        ("senator and senator" -> "senators"), the group of their titles ("senator and governor" ->
        "politicians"), else "person" ("people")."""
        words = {u.entity_type or u.text for u in members}
        if len(words) == 1:
            return words.pop()
        if not all(self.is_person_unit(u) for u in members):
            return None
        groups = {self.g.title_groups.get(w) for w in words}
        if len(groups) == 1 and None not in groups:
            return groups.pop()
        return self.c.hypernyms.get("PERSON") or "person"
