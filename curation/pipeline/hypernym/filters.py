"""The two filters: ``hypernymize`` (a per-caption transform) and ``rare_entity_types`` (run level)."""
from __future__ import annotations

from collections import Counter

from ..base import DROP, KEEP, Decision, Filter, Item, drop, keep
from ..registry import register
from .consistency import garbled, lost, names_left
from .lexicon import HEAD_WORDS, HYPERNYMS, KEPT_TIME_WORDS, LOCATION_PREPOSITIONS, UNITS
from .rewrite import Prepared, Rewrite
from .sanity import check_params

UNCERTAIN_CHOICES = ("guess", "review", "drop")
RECHECKS = ("noun", "determiner", "preposition")


def check_int(flt: Filter, key: str, minimum: int) -> None:
    """Refuse a parameter that would fail every chunk later: the curator sees it when saving."""
    value = flt.params[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{flt.name}: {key} must be an integer >= {minimum}, not {value!r}")


@register
class Hypernymize(Filter):
    name = "hypernymize"
    label = "Hypernymization"
    # 2: an entity of lower-case common words is no name, an adjective before a name no title.
    # 3: entity-type sanity checks (gazetteer, given names, context), titled coordinations, name_left,
    #    garbled and recheck drops, on_uncertain.
    version = 3
    description = ("Seed 002's text transformation: drops proper-noun, number and unit modifiers, dates, durations "
                   "and prepositional locations; replaces names with hypernyms (edit entity_words, head_words, "
                   "hypernyms and the gazetteer) after checking the recogniser's entity types; merges 'actor and "
                   "actor' into 'actors' and 'senator and governor' into 'politicians'; drops captions left too "
                   "short, garbled, or with a name left (name_left); on_uncertain says what happens to guesses.")
    is_transform = True
    per_item = True  # each caption on its own; parses what it lacks, no database
    # The rewrite depends on the working text alone; its removed spans are placed at raw_text.find(text):
    # a duplicate caption (30% of web alt-text) is neither parsed nor rewritten again.
    text_keyed = True
    text_determined = True
    needs = frozenset({"pos", "deps", "ents", "lemma"})
    defaults = {
        "hypernyms": HYPERNYMS,
        "entity_words": {},  # exact name -> hypernym, the Knowledge Graph's stand-in: {"Justin Timberlake": "pop artist"}
        "head_words": HEAD_WORDS,
        "titles_as_hypernyms": True,  # "Musician Justin Timberlake" -> "musician" (else the label's hypernym)
        "location_labels": ["GPE", "LOC", "FAC"],
        "location_prepositions": LOCATION_PREPOSITIONS,
        "drop_pp_labels": ["WORK_OF_ART"],  # "the premiere of 'Hollywood Homicide'" -> "the premiere"
        "locations": "drop",  # or "hypernym": "in Franklin, Tennessee" -> "in a city" (Figure 1)
        "units": UNITS,
        "kept_time_words": KEPT_TIME_WORDS,
        "lowercase": True,
        "min_tokens": 3,
        "max_chars": 1000,  # longer texts are not captions: dropped unparsed
        "concept_nouns": False,  # also count the remaining nouns as entity types (the paper's "concepts")
        # Extra gazetteer entries, merged over data/hypernym_gazetteer.json: {"landmarks": {"Old Mill": "mill"},
        # "products": {...}, "organisations": {...}, "person_names": [...], "breeds": [...], "title_groups": {...},
        # "person_verbs": [...]}
        "gazetteer": {},
        "names": [],  # names that must never survive a rewrite: a caption still holding one is dropped (name_left)
        # A rewrite whose entity type is a guess (sanity.py): "guess" keeps it (details["uncertain"] says why),
        # "review" keeps it with the reason uncertain_rewrite for a curator to check, "drop" drops it with that reason.
        "on_uncertain": "guess",
        # What the seed's text filters require and the rewrite must not take away (the caption had it, the
        # rewrite lost it: dropped as inconsistent). Any of "noun", "determiner", "preposition".
        "recheck": ["noun", "determiner", "preposition"],
        "drop_garbled": True,  # drop a rewrite whose structure broke (consistency.py) as inconsistent
    }

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        if self.params["locations"] not in ("drop", "hypernym"):
            raise ValueError(f"hypernymize: locations must be 'drop' or 'hypernym', not {self.params['locations']!r}")
        check_int(self, "min_tokens", 0)
        check_int(self, "max_chars", 1)
        if self.params["on_uncertain"] not in UNCERTAIN_CHOICES:
            raise ValueError(f"hypernymize: on_uncertain must be one of {', '.join(UNCERTAIN_CHOICES)}, "
                             f"not {self.params['on_uncertain']!r}")
        recheck = self.params["recheck"]
        if not isinstance(recheck, list) or any(r not in RECHECKS for r in recheck):
            raise ValueError(f"hypernymize: recheck must be a list of {', '.join(RECHECKS)}, not {recheck!r}")
        check_params(self.params["gazetteer"], self.params["names"])
        self.prepared = Prepared(self.params)

    def apply(self, items):
        self._parse_missing(items)
        return [self.transform(item) for item in items]

    def _parse_missing(self, items: list[Item]) -> None:
        stale = [it for it in items if len(it.text or "") <= self.params["max_chars"]
                 and (it.doc is None or it.doc.text != it.text or not it.doc.has_annotation("DEP"))]
        if stale:
            from .. import nlp

            docs = nlp.parse_unique([it.text for it in stale], self.needs)
            for it in stale:
                it.doc = docs[it.text]

    def transform(self, item: Item) -> Decision:
        text = item.text or ""
        if len(text) > self.params["max_chars"]:
            return drop("too_long", len(text), chars=len(text), max_chars=self.params["max_chars"])
        rw = Rewrite(item.doc, self.params, self.prepared)
        rw.run()
        steps = rw.what_happened()
        content_changed = bool(steps)
        if rw.text != text and not content_changed:
            steps = ["lower-cased"] if rw.text.lower() == text.lower() else ["tidied"]
        offset = item.raw_text.find(text) if text else -1
        if offset >= 0:
            item.removed_spans = [(s + offset, e + offset) for s, e in rw.char_spans()]
        item.entity_types = rw.entity_types
        details = {"entity_types": rw.entity_types, "steps": steps, "replaced": rw.replaced, "words": rw.words}
        new_text = rw.text if rw.text != text else None
        if rw.words < self.params["min_tokens"]:
            return Decision(DROP, "too_short", rw.words, {**details, "min_tokens": self.params["min_tokens"]}, new_text)
        # "Inconsistent" (the paper's other reason): the sentence lost its root, or nothing of what
        # it said is left but names turned into hypernyms ("organization, city, country").
        lost_roots = [s.root.text for s in item.doc.sents if s.root.i in rw.removed]
        if lost_roots or not rw.content_words:
            why = f"lost its root {lost_roots[0]!r}" if lost_roots else "only hypernyms and function words are left"
            return Decision(DROP, "inconsistent", rw.words, {**details, "why": why}, new_text)
        if rw.uncertain:
            details["uncertain"] = rw.uncertain
        left = names_left(rw, rw.units_out)
        if left:
            return Decision(DROP, "name_left", rw.words, {**details, "names": left}, new_text)
        if content_changed and self.params["drop_garbled"] and (why := garbled(rw, rw.units_out)):
            return Decision(DROP, "inconsistent", rw.words, {**details, "why": why}, new_text)
        if content_changed and (gone := lost(rw, rw.units_out, self.params["recheck"])):
            why = f"the rewrite lost its only {' and '.join(gone)}: it fails the text filters again"
            return Decision(DROP, "inconsistent", rw.words, {**details, "why": why, "lost": gone}, new_text)
        if rw.uncertain and self.params["on_uncertain"] != "guess":
            outcome = DROP if self.params["on_uncertain"] == "drop" else KEEP
            return Decision(outcome, "uncertain_rewrite", rw.words, details, new_text)
        if content_changed:
            reason = "hypernymized"
        else:  # only the case or the spacing changed (the paper lower-cases), or nothing did
            reason = ("lower_cased" if steps == ["lower-cased"] else "tidied") if new_text is not None else "unchanged"
        return Decision(KEEP, reason, rw.words, details, new_text)


@register
class RareEntityTypes(Filter):
    name = "rare_entity_types"
    label = "Rare entity types"
    description = ("Over the whole run, keeps only captions whose entity types (the hypernyms from hypernymize) all "
                   "occur in more than min_count surviving captions (100 in the paper). With min_share, the minimum "
                   "is that share of the run's surviving captions, capped at min_count, so that a small collection is "
                   "not emptied by a web-scale count. Score: the rarest type's count.")
    run_level = True
    # min_share (a fraction, e.g. 0.01; null: off): the minimum count becomes floor(min_share x the captions
    # that reach this step), and never more than min_count. The paper's 100 assumes 3.3M captions (0.003%);
    # on a first collection of 500 captions, 0.01 asks a type to occur in more than 5.
    defaults = {"min_count": 100, "min_share": None}

    def __init__(self, params=None, state=None):
        super().__init__(params, state)
        check_int(self, "min_count", 0)
        share = self.params["min_share"]
        if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1):
            raise ValueError(f"rare_entity_types: min_share must be a number from 0 to 1 or null, not {share!r}")

    def threshold(self, captions: int) -> int:
        """The minimum count for a run whose step sees ``captions`` captions."""
        share = self.params["min_share"]
        if share is None:
            return self.params["min_count"]
        return min(self.params["min_count"], int(share * captions))

    def apply(self, items):
        """This batch judged alone, as if it were the whole run (previews and tests)."""
        rows = [{"caption_id": i, "image_id": it.image_id, "entity_types": it.entity_types} for i, it in enumerate(items)]
        found = self.decide_run(rows)
        return [found[i] for i in range(len(items))]

    # Run-wide counts come from one streamed pass (prepare_run); each batch of survivors is then decided
    # against them (curation/pipeline/executor/runlevel.py), so the step's memory does not grow with the run.
    run_shard = "row"

    def prepare_run(self, rows) -> None:
        counts, total = Counter(), 0
        for row in rows:
            total += 1
            counts.update(set(row.get("entity_types") or []))
        self._run_counts = (counts, total)

    def decide_run(self, rows):
        prepared = getattr(self, "_run_counts", None)
        if prepared is not None:
            counts, total = prepared
        else:  # the rows are the whole run (apply, or a caller without prepare_run)
            counts, total = Counter(t for row in rows for t in set(row.get("entity_types") or [])), len(rows)
        min_count = self.threshold(total)
        out = {}
        for row in rows:
            types = sorted(set(row.get("entity_types") or []))
            if not types:
                out[row["caption_id"]] = keep("no_entity_types")
                continue
            rarest = min(counts[t] for t in types)
            rare = {t: counts[t] for t in types if counts[t] <= min_count}
            out[row["caption_id"]] = (drop("rare_entity_type", rarest, rare=rare, min_count=min_count) if rare
                                      else keep("common_types", rarest, counts={t: counts[t] for t in types}))
        return out
