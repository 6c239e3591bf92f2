"""Part of speech: a determiner, a noun and a preposition present; not too many nouns."""
from __future__ import annotations

from ..base import drop, keep
from ..registry import register
from .common import TextFilter, no_parse, token_table


@register
class PosPresence(TextFilter):
    name = "pos_presence"
    label = "Determiner, noun, preposition"
    description = ("Drops candidates with no determiner, no noun or no preposition. Nouns include proper nouns: "
                   "the paper's annotator (Google Cloud NL) tags both NOUN and marks properness separately.")
    needs = frozenset({"pos"})
    defaults = {"require_determiner": True, "require_noun": True, "require_preposition": True,
                "proper_nouns_are_nouns": True}

    def prepare(self):
        nouns = {"NOUN", "PROPN"} if self.params["proper_nouns_are_nouns"] else {"NOUN"}
        self.checks = [(what, tags) for what, param, tags in (
            ("determiner", "require_determiner", {"DET"}), ("noun", "require_noun", nouns),
            ("preposition", "require_preposition", {"ADP"})) if self.params[param]]

    def decide(self, item):
        unparsed = no_parse(item)
        if unparsed:
            return unparsed
        found = set(token_table(item.doc)[1])
        missing = [what for what, tags in self.checks if not found & tags]
        return drop(f"no_{missing[0]}", missing=missing) if missing else keep()


@register
class NounRatio(TextFilter):
    name = "noun_ratio"
    label = "Noun ratio"
    description = "Drops candidates whose share of nouns among the tokens (punctuation excluded) is too high."
    needs = frozenset({"pos"})
    # 0.8: the alt-texts the paper keeps (Table 1, Figure 1) measure 0.42-0.74 with spaCy's tags (proper
    # nouns counted, as its annotator does; en_core_web_sm tags "adorn" and "derelict" in the McKellar
    # example as nouns), while title-like keyword strings ("Boston Red Sox Baseball Cap For Sale",
    # "DH89 Dragon Rapide ZK-AHS, MOTAT, Auckland") measure 0.83-1.0.
    defaults = {"max_ratio": 0.8, "proper_nouns_are_nouns": True}
    score_thresholds = ("max_ratio",)

    def decide(self, item):
        unparsed = no_parse(item)
        if unparsed:
            return unparsed
        _, all_tags, skip = token_table(item.doc)
        tags = [tag for tag, skipped in zip(all_tags, skip) if not skipped] if True in skip else all_tags
        if not tags:
            return drop("no_words")
        nouns = tags.count("NOUN") + (tags.count("PROPN") if self.params["proper_nouns_are_nouns"] else 0)
        ratio = round(nouns / len(tags), 4)
        if ratio > self.params["max_ratio"]:
            return drop("high_noun_ratio", score=ratio, nouns=nouns, tokens=len(tags))
        return keep(score=ratio, nouns=nouns, tokens=len(tags))
