"""The rewrite of one parsed caption, in the paper's order (see the package's docstring)."""
from __future__ import annotations

from .coordination import Coordinations
from .detect import Mention, MentionFinder
from .lexicon import (
    ARGUMENT_DEPS,
    CLOSING,
    COMMA_LIKE,
    CONTENT_POS,
    DEICTIC_TIME,
    LOOSE_DEPS,
    MODIFIER_DEPS,
    NAMING_VERBS,
    NUMERIC_ENTS,
    OPENING,
    TIME_UNITS,
    indefinite_article,
)
from .mapping import MentionMapper
from .sanity import Gazetteer, TypeChecks
from .units import Unit


class Prepared:
    """A filter's parameters in the shapes the rewrite looks them up in (built once per filter)."""

    def __init__(self, params: dict):
        self.entity_words = {k.lower(): v for k, v in (params["entity_words"] or {}).items()}
        self.head_words = {k.lower(): v for k, v in (params["head_words"] or {}).items()}
        self.hypernyms = params["hypernyms"] or {}
        self.location_labels = frozenset(params["location_labels"])
        self.pp_labels = frozenset(params["drop_pp_labels"])
        self.location_preps = frozenset(w.lower() for w in params["location_prepositions"])
        self.units = frozenset(w.lower() for w in params["units"])
        self.kept_time_words = frozenset(w.lower() for w in params["kept_time_words"])
        self.gazetteer = Gazetteer(params.get("gazetteer"), params.get("names"))


class Rewrite(MentionFinder, TypeChecks, MentionMapper, Coordinations):
    """The hypernymization of one parsed caption. ``run()`` fills ``text``, ``steps``,
    ``entity_types``, ``removed`` (token ids) and ``replaced`` (mentions replaced)."""

    def __init__(self, doc, params: dict, prepared: "Prepared | None" = None):
        self.doc = doc
        self.tk = list(doc)  # tokens made once: indexing a Doc builds a new Token each time
        self.p = params
        self.c = prepared or Prepared(params)
        self.removed: set[int] = set()
        self.location_removed: set[int] = set()
        self.replacements: dict[int, tuple[int, str, str, tuple]] = {}  # start -> (end, text, type, mentions)
        self.steps: list[tuple[int, str]] = []  # (token position, what happened)
        self.mapped_steps: dict[int, str] = {}  # mention start -> "X" mapped to "y"
        self.replaced: list[dict] = []
        self.entity_types: list[str] = []
        self.text = ""
        self.words = 0
        self.content_words = 0  # nouns, verbs, adjectives, adverbs of the original still there
        self.g = self.c.gazetteer
        self.uncertain: list[str] = []  # why some of the mapping is a guess (sanity.py)
        self.units_out: list[Unit] = []
        self.articles: set[int] = set()  # tokens that take "the" before them

    # -- helpers ---------------------------------------------------------------------------------
    def remove(self, ids, what: str | None = None, *, location: bool = False) -> None:
        ids = [i for i in ids if i not in self.removed]
        if not ids:
            return
        self.removed.update(ids)
        if location:
            self.location_removed.update(ids)
        if what:
            shown = " ".join(self.tk[i].text for i in sorted(ids) if not self.tk[i].is_punct or self.tk[i].text in "%&")
            self.steps.append((min(ids), f'{what} "{shown}" dropped'))

    @staticmethod
    def subtree(token) -> list[int]:
        return [t.i for t in token.subtree]

    def drop_name_clauses(self, at: dict) -> None:
        """"a Labrador named Max", "a café called Luna": the clause that only gives a name goes."""
        for t in self.tk:
            if t.dep_ not in ("acl", "relcl") or t.tag_ != "VBN" or t.lemma_.lower() not in NAMING_VERBS:
                continue
            # The name given: the object's own name tokens (the parser may hang the next verb on it:
            # "a puppy named [Daisy] chews" with "chews" as the object).
            names = [x for c in t.children if c.dep_ in ("oprd", "attr", "dobj", "xcomp")
                     for x in c.subtree if x.i in at or x.pos_ == "PROPN"]
            if names:
                ids = [t.i]
                for x in names:
                    ids += list(at[x.i].tokens()) if x.i in at else [x.i]
                if self.tk[ids[0] - 1].text == "," if ids[0] > 0 else False:
                    ids.append(ids[0] - 1)
                self.remove(ids, "name clause")

    def with_article(self, m: Mention, root) -> str:
        """The hypernym of a bare name that becomes a common noun takes an article: "in front of Big Ben"
        -> "in front of the clock tower", "on iPhone" -> "on a phone" (a person stays "person", as in the paper)."""
        hyp = m.hypernym
        before = self.tk[m.start - 1] if m.start > 0 else None
        if m.label in ("PERSON", "NORP") or m.source in ("title", "breed", "entity_words") or m.quoted \
                or root.dep_ in MODIFIER_DEPS or root.dep_ == "poss" or hyp.endswith("s"):
            return hyp
        if before is not None and (before.dep_ in ("det", "poss", "predet") or before.tag_ in ("DT", "PRP$", "POS")):
            return hyp
        if any(c.dep_ in ("det", "poss", "predet") and not m.start <= c.i < m.end for c in root.children) or (m.end - m.start == 1 and root.lower_ == hyp):
            return hyp  # "the 2017 French Open" -> "the open"; "Marathon runners" stays as written
        if m.label == "PRODUCT" and not hyp.endswith("s"):
            return f"{indefinite_article(hyp)} {hyp}"
        return f"the {hyp}"

    # -- the steps ---------------------------------------------------------------------------------
    def other_nested(self, prep, at: dict, time_tokens: set[int]) -> set[int]:
        """Tokens of phrases nested in ``prep``'s that hold something other than dates and places."""
        out: set[int] = set()
        for t in prep.subtree:
            if t.i == prep.i or t.dep_ != "prep" or t.i in out:
                continue
            inner = [x for x in t.subtree if x.i != t.i and not (x.is_punct or x.dep_ in ("det", "predet", "cc", "case", "prep"))]
            if any(x.i not in time_tokens and (x.i not in at or at[x.i].label not in self.c.location_labels) for x in inner):
                out.update(x.i for x in t.subtree)
        return out

    def droppable_time(self, ent) -> bool:
        kept = self.c.kept_time_words
        words = [t for t in ent if not t.is_punct]
        if any(t.like_num or t.pos_ == "PROPN" or t.lower_ in DEICTIC_TIME for t in words):
            return True
        if any(t.lower_ in TIME_UNITS for t in words):
            return True
        return not all(t.lower_ in kept for t in words)

    def run(self) -> None:  # noqa: PLR0915
        doc, p = self.doc, self.p
        mentions = self.find_mentions()
        self.label_mentions(mentions)
        at = {i: m for m in mentions for i in m.tokens()}
        self.drop_name_clauses(at)
        location_labels, pp_labels, location_preps = self.c.location_labels, self.c.pp_labels, self.c.location_preps
        times = [e for e in doc.ents if e.label_ in ("DATE", "TIME") and self.droppable_time(e)
                 and not any(i in at for i in range(e.start, e.end))]  # "his Thinkpad" is no date
        time_tokens = {i for e in times for i in range(e.start, e.end)}

        # Prepositional phrases holding only dates, locations or titles.
        for prep in self.tk:
            if prep.dep_ != "prep" or prep.i in self.removed or not any(c.dep_ in ("pobj", "pcomp") for c in prep.children):
                continue
            inner = [t for t in prep.subtree if t.i != prep.i]
            # A nested phrase that is neither date nor place stays where it is: "in Maui, Hawaii [at sunset]".
            kept_inside = self.other_nested(prep, at, time_tokens)
            inner = [t for t in inner if t.i not in kept_inside]
            if inner and inner[-1].i - inner[0].i + 1 != len(inner) and kept_inside and max(kept_inside) < inner[-1].i:
                continue  # what stays would sit inside what goes
            content = [t for t in inner if not (t.is_punct or t.is_space or t.dep_ in ("det", "predet", "cc", "case", "prep"))]
            kinds = set()
            for t in content:
                m = at.get(t.i)
                if t.i in time_tokens:
                    kinds.add("date")
                elif m is not None and m.label in location_labels:
                    kinds.add("location")
                elif m is not None and m.label in pp_labels:
                    kinds.add("name")
                else:
                    kinds.add("other")
            # A place after any preposition that hangs on a noun goes too: "the coast of Norway", "the border with Turkey".
            places = [at[t.i] for t in content if t.i in at]
            on_noun = (prep.head.pos_ in ("NOUN", "PROPN") and p["locations"] == "drop" and bool(places)
                       and all(m.label == "GPE" and m.source == "label" for m in places))
            if not content or "other" in kinds or ("location" in kinds and prep.lower_ not in location_preps and not on_noun):
                continue
            if "location" in kinds and len(kinds) > 1 and p["locations"] == "hypernym":
                continue  # "on April 12, 2015 in Indio": the date goes alone, the nested place becomes "in a city"
            if kinds == {"location"} and p["locations"] == "hypernym":
                first = next(at[t.i] for t in content)
                hyp = first.hypernym or "location"
                start, end = inner[0].i, inner[-1].i + 1
                text = f"{indefinite_article(hyp)} {hyp}"
                self.replacements[start] = (end, text, hyp, (first,))
                self.location_removed.update(range(start, end))  # what follows (", England") belongs to it
                self.mapped_steps[start] = f'location "{doc[start:end].text}" mapped to "{text}"'
                self.replaced.append({"text": doc[start:end].text, "label": first.label, "hypernym": hyp})
                for i in range(start, end):
                    at.pop(i, None)
                continue
            what = "location" if kinds == {"location"} else "date" if kinds == {"date"} else " and ".join(sorted(kinds))
            self.remove([prep.i] + [t.i for t in inner], what, location="location" in kinds)

        for ent in times:  # dates and durations outside prepositional phrases ("September 5, 2003")
            self.remove(range(ent.start, ent.end), "duration" if any(t.lower_ in TIME_UNITS for t in ent) else "date")

        for m in mentions:
            if self.replaced_at(m.start) is not None:
                continue  # inside a location already replaced ("in a city")
            if any(i in self.removed for i in m.tokens()):
                self.remove(m.tokens())
                continue
            root = self.root(m)
            # ", England" after a dropped "in London": the rest of the same location.
            if m.label in location_labels and root.dep_ not in ARGUMENT_DEPS:
                j = m.start - 1
                while j >= 0 and self.tk[j].is_punct and j not in self.removed:
                    j -= 1
                if j >= 0 and j in self.location_removed:
                    self.remove(range(j + 1, m.end), "location", location=True)
                    continue
                # ", Bangkok, 12 March 2008": a place set off by a comma, outside the sentence's frame.
                if j >= 0 and j < m.start - 1 and self.tk[m.start - 1].text == "," and root.dep_ in LOOSE_DEPS \
                        and p["locations"] == "drop":
                    self.remove(range(m.start - 1, m.end), "location", location=True)
                    continue
            head = root.head
            mistagged_verb = m.label == "PERSON" and head.dep_ == "ROOT" and head.tag_ in ("NNS", "VBZ") and m.start == head.sent.start
            if (root.dep_ in MODIFIER_DEPS and not (m.start <= head.i < m.end) and m.source not in ("head word", "breed")
                    and not mistagged_verb
                    and (head.pos_ in ("NOUN", "PROPN") or head.i in at) and head.i not in self.removed):
                what = "nationality modifier" if m.label == "NORP" else "proper-noun modifier"
                self.remove(sorted(set(self.subtree(root)) | set(m.tokens())), what)
                # "the roof of Notre-Dame cathedral" -> "the roof of the cathedral": a bare singular noun
                # that lost the name before it takes an article.
                if head.tag_ == "NN" and head.i not in at and head.dep_ not in MODIFIER_DEPS and not any(
                        c.dep_ in ("det", "poss", "predet", "nummod") and c.i not in self.removed for c in head.children):
                    self.articles.add(head.i)
                continue
            if m.hypernym is None:
                continue
            if m.hypernym == "":
                self.remove([*m.tokens(), *(c.i for i in m.tokens() for c in self.tk[i].children
                                             if c.dep_ in ("det", "case") or c.is_punct)], f"{m.label or 'name'}")
                continue
            text = self.with_article(m, root)
            self.replacements[m.start] = (m.end, text, m.hypernym, (m,))
            self.mapped_steps[m.start] = f'"{m.text}" mapped to "{text}"'
            if m.uncertain:
                self.uncertain.append(m.uncertain)
            self.replaced.append({"text": m.text, "label": m.label, "hypernym": m.hypernym, "source": m.source})

        replaced_ids = {i for s, (e, *_rest) in self.replacements.items() for i in range(s, e)}
        units = self.c.units
        for t in self.tk:  # numbers and units modifying a noun: "Two sculptures", "29th", "a 5 km race"
            if t.i in self.removed or t.i in replaced_ids or t.dep_ not in MODIFIER_DEPS:
                continue
            head = t.head
            if head.i == t.i or head.i in self.removed or not (head.pos_ in ("NOUN", "PROPN") or head.i in replaced_ids):
                continue
            number = t.like_num or t.pos_ == "NUM" or t.ent_type_ in NUMERIC_ENTS
            ordinal = t.ent_type_ == "ORDINAL" and any(ch.isdigit() for ch in t.text)
            unit = t.lower_ in units and any(c.like_num or c.pos_ == "NUM" for c in t.children)
            if number or ordinal or unit:
                ids = [i for i in self.subtree(t) if i not in replaced_ids]
                self.remove(ids, "unit" if unit else "object count" if t.dep_ == "nummod" and not ordinal else "number")

        self.tidy_tokens()
        units_out = self.build_units()
        units_out = self.merge_coordinations(units_out)
        units_out = self.tidy_units(units_out)
        self.units_out = units_out
        self.text = self.join(units_out)
        self.words = sum(1 for u in units_out for w in u.text.split() if any(ch.isalnum() for ch in w))
        self.content_words = sum(1 for u in units_out if u.token is not None and u.token.pos_ in CONTENT_POS)
        types = []
        for u in units_out:
            if u.entity_type:
                types.append(u.entity_type)
            elif p["concept_nouns"] and u.token is not None and u.token.pos_ == "NOUN":
                types.append(u.token.lemma_.lower())
        self.entity_types = sorted(set(types))

    def tidy_tokens(self) -> None:
        """Remove what lost its word: articles and case marks of removed heads, prepositions without
        objects, "and" without conjuncts, hyphens stuck to a removed number ("3-bedroom")."""
        n = len(self.tk)
        replaced_ids = {i for s, (e, *_r) in self.replacements.items() for i in range(s, e)}
        changed = True
        while changed:
            changed = False
            for t in self.tk:
                if t.i in self.removed or t.i in replaced_ids:
                    continue
                dep = t.dep_
                dangling = (t.head.i in self.removed and t.head.i != t.i
                            and (dep in ("det", "predet", "case", "cc", "nummod", "quantmod", "poss") or t.is_punct))
                lonely_prep = dep == "prep" and self._all_removed(t, ("pobj", "pcomp"))
                lonely_cc = dep == "cc" and self._all_removed(t.head, ("conj",))
                infix = t.tag_ == "HYPH" and ((t.i > 0 and t.i - 1 in self.removed and not self.tk[t.i - 1].whitespace_)
                                               or (t.i + 1 < n and t.i + 1 in self.removed and not t.whitespace_))
                if dangling or lonely_prep or lonely_cc or infix:
                    self.removed.add(t.i)
                    changed = True
        # Quotes and brackets go in pairs: one whose partner or whose content went, goes.
        pairs = self.quote_pairs()
        stack = []
        for t in self.tk:
            if t.text in OPENING:
                stack.append(t.i)
            elif t.text in (")", "]", "}") and stack:
                pairs.append((stack.pop(), t.i))
        for a, b in pairs:
            inside = [i for i in range(a + 1, b) if i not in self.removed]
            # quotes around a hypernym quote nothing any more: 'Hey Jude' -> artwork, not 'artwork'
            only_hypernym = bool(inside) and len({self.replaced_at(i) for i in inside} - {None}) == 1 \
                and all(self.replaced_at(i) is not None for i in inside)
            if a in self.removed or b in self.removed or not inside or only_hypernym:
                self.removed.update((a, b))

    def _all_removed(self, token, deps: tuple) -> bool:
        """Whether ``token`` has children with these deps and all of them were removed."""
        found = [c.i for c in token.children if c.dep_ in deps]
        return bool(found) and all(i in self.removed for i in found)

    def replaced_at(self, i: int) -> int | None:
        """The start of the replacement covering token i, if any."""
        return next((s for s, (e, *_r) in self.replacements.items() if s <= i < e), None)

    def build_units(self) -> list[Unit]:
        out, i, doc = [], 0, self.doc
        while i < len(doc):
            if i in self.replacements:
                end, text, etype, mentions = self.replacements[i]
                out.append(Unit(text, i, end - 1, None, etype, mentions))
                i = end
                continue
            if i not in self.removed:
                t = self.tk[i]
                if i in self.articles:
                    out.append(Unit("the", i, i, None))
                text = t.text
                if self.p["lowercase"] and not (t.is_upper and t.is_alpha and len(t.text) > 1) and t.text != "I":
                    text = text.lower()
                out.append(Unit(text, i, i, t))
            i += 1
        return out

    def tidy_units(self, units: list[Unit]) -> list[Unit]:
        changed = True
        while changed:
            changed = False
            for k, u in enumerate(units):
                if u.token is None or u.text not in COMMA_LIKE:
                    continue
                prev = units[k - 1] if k > 0 else None
                nxt = units[k + 1] if k + 1 < len(units) else None
                if u.text in ("-", "/") and prev and nxt and prev.last + 1 == u.first and u.last + 1 == nxt.first:
                    continue  # an infix hyphen or slash inside a word that stays
                if (prev is None or nxt is None or (prev.token is not None and prev.text in COMMA_LIKE | OPENING)
                        or (nxt.token is not None and (nxt.text in CLOSING or nxt.token.tag_ == "''"))):
                    del units[k]
                    changed = True
                    break
        # "a aircraft" -> "an aircraft" where what follows the article changed.
        for k, u in enumerate(units[:-1]):
            if u.token is not None and u.text.lower() in ("a", "an") and u.token.dep_ == "det":
                nxt = units[k + 1]
                if nxt.token is None or nxt.first != u.last + 1:
                    article = indefinite_article(nxt.text)
                    u.text = article if u.text.islower() else article.capitalize()
        return units

    def join(self, units: list[Unit]) -> str:
        parts = []
        for k, u in enumerate(units):
            if k:
                prev = units[k - 1]
                if u.first == prev.last + 1:
                    sep = self.tk[prev.last].whitespace_
                elif (u.token is not None and (u.text in CLOSING or u.token.tag_ == "''")) or \
                        (prev.token is not None and (prev.text in OPENING or prev.token.tag_ == "``")):
                    sep = ""
                else:
                    sep = " "
                parts.append(sep)
            parts.append(u.text)
        return "".join(parts).strip()

    def what_happened(self) -> list[str]:
        steps = list(self.steps) + list(self.mapped_steps.items())
        return [text for _, text in sorted(steps, key=lambda s: s[0])]

    def char_spans(self) -> list[tuple[int, int]]:
        """Character spans of the parsed text that the output no longer has as written."""
        ids = sorted(self.removed | {i for s, (e, *_r) in self.replacements.items() for i in range(s, e)})
        spans: list[list[int]] = []
        text = self.doc.text
        for i in ids:
            t = self.tk[i]
            start, end = t.idx, t.idx + len(t.text)
            if spans and not text[spans[-1][1]:start].strip():
                spans[-1][1] = end
            else:
                spans.append([start, end])
        return [(s, e) for s, e in spans]
