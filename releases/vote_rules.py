"""Whether a caption meets the crowd's verdict, from one page's votes and aggregates
(``page_facts``): the captions whose votes count for it (``rated_ids``), a ``vote_rules`` /
``verified_by`` rule (``rule_holds``), and a passed rating campaign (``passed_rating``).
"""
from __future__ import annotations

from .config import GOOD_RULES


def rated_ids(released: dict, captions: dict) -> list[int]:
    """The released caption and the captions it was transformed from (votes on those count)."""
    ids, node = [], released
    while node is not None and len(ids) < 50:
        ids.append(node["pk"])
        if node["origin"] != "transformed" or not node["parent_id"]:
            break
        node = captions.get(node["parent_id"])
    return ids


def rule_holds(rule: dict, rated: list[int], good_votes, aggregates) -> bool:
    campaign = rule["campaign"]
    if rule["rule"] in GOOD_RULES:
        need = GOOD_RULES[rule["rule"]]
        return any(good_votes.get((campaign, cid), 0) >= need for cid in rated)
    want = "fluent" if rule["rule"] == "fluent" else rule["label"]
    dimension = rule.get("dimension", "")
    for cid in rated:
        for dim, a in aggregates.get(cid, ()):
            if (a["task__campaign_id"] == campaign and a["method"] == rule["method"]
                    and (dim == dimension or (not dimension and dim == "")) and str(a["label"]) == want):
                return True
    return False


def passed_rating(rated: list[int], aggregates, kinds: dict[int, str]) -> bool:
    """A positive consensus on one of ``rated`` in a rating campaign (``kinds``: campaign -> kind)."""
    for cid in rated:
        for _dim, a in aggregates.get(cid, ()):
            kind = kinds.get(a["task__campaign_id"], "")
            label, method = a["label"], a["method"]
            if kind in ("quality", "informativeness", "good_common_bad") and method == "dawid_skene" \
                    and label == "good":
                return True
            if kind == "fluency" and method == "consistent" and label == "fluent":
                return True
            if kind == "informativeness_score" and method == "mean" and isinstance(label, (int, float)) \
                    and label >= 50:
                return True
    return False


__all__ = ["rated_ids", "rule_holds", "passed_rating"]
