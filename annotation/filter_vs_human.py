"""Filter against human: how a filter's decisions on captions compare with what the crowd said.

For every ``FilterDecision`` on a caption that a campaign rated (the task's caption, a candidate
caption of a Good/Common/Bad task, or the decision a task was drawn from), this builds, per
(run, step, filter), the confusion matrix of the filter's final outcome (the curator's override
where there is one, else the filter's outcome; "not applicable" decisions are left out) against
the aggregated human label, as seed 000 Figure 6 does for its informativeness filter.

The human label is the Dawid-Skene label where there is one, else the majority vote; sliders
aggregate on the good/bad side of 50 (see ``annotation.aggregation``). "Keep" is judged against
the positive human label of the kind (``POSITIVE``):

    fluency -> "fluent"; quality, informativeness, informativeness_score (slider side),
    good_common_bad -> "good".

Anything else ("not_fluent", "difficult", "bad", "common") counts as negative. Kinds without a
positive label (free-text writing, 1-5 relevance/fluency) give no rows.

precision = kept and positive / kept; recall = kept and positive / positive.

The threshold suggestion looks at the decisions' scores: the direction is the one the scores
point (keep when score >= t if positives score higher, i.e. the ROC AUC is above 0.5, else keep
when score <= t; at exactly 0.5 both are tried), and the threshold is the one with the highest
recall whose precision reaches the asked precision (null when none does).
"""
from __future__ import annotations

import numpy as np
from django.db.models import Q

from curation.models import FilterDecision

from .models import Aggregate, Campaign, Task

POSITIVE = {
    "fluency": "fluent",
    "quality": "good",
    "informativeness": "good",
    "informativeness_score": "good",
    "good_common_bad": "good",
}
HUMAN_METHODS = ("dawid_skene", "majority")  # in order of preference


def human_labels(campaign: Campaign) -> tuple[dict[int, object], dict[int, object]]:
    """({caption id: label}, {decision id: label}) from the campaign's aggregates."""
    kind = campaign.kind_spec
    rows = (Aggregate.objects.filter(task__campaign=campaign, task__role=Task.Role.REAL, method__in=HUMAN_METHODS)
            .values_list("task_id", "part", "method", "label", "task__caption_id", "task__source_decision"))
    best: dict[tuple, tuple[int, object, object, object]] = {}
    for task_id, part, method, label, caption_id, decision_id in rows:
        rank = HUMAN_METHODS.index(method)
        key = (task_id, part)
        if key not in best or rank < best[key][0]:
            best[key] = (rank, label, caption_id, decision_id)
    by_caption: dict[int, object] = {}
    by_decision: dict[int, object] = {}
    for (task_id, part), (_, label, caption_id, decision_id) in best.items():
        if label is None:
            continue
        if kind.target == "candidates":
            cid, _, dim = part.partition(":")
            if dim == "label" and cid.isdigit():
                by_caption[int(cid)] = label
        elif part == "":
            if caption_id is not None:
                by_caption[caption_id] = label
            if decision_id is not None:
                by_decision[decision_id] = label
    return by_caption, by_decision


def _auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """ROC AUC by the Mann-Whitney rank sum (ties count half); None with one class only."""
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return None
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _best_threshold(scores: np.ndarray, positive: np.ndarray, precision: float, direction: str) -> dict | None:
    """Highest-recall threshold reaching ``precision`` for one direction, or None."""
    signed = scores if direction == ">=" else -scores
    order = np.argsort(-signed, kind="stable")
    s, pos = signed[order], positive[order]
    tp = np.cumsum(pos)
    kept = np.arange(1, len(s) + 1)
    last = np.r_[s[1:] != s[:-1], True]  # keep every item scoring at least this well
    tp, kept, thresholds = tp[last], kept[last], s[last]
    total = int(positive.sum())
    prec = tp / kept
    rec = tp / total
    ok = prec >= precision - 1e-12
    if not ok.any():
        return None
    candidates = np.flatnonzero(ok)
    i = max(candidates, key=lambda j: (rec[j], prec[j]))
    threshold = float(thresholds[i]) if direction == ">=" else float(-thresholds[i])
    return {"threshold": threshold, "direction": direction, "precision": round(float(prec[i]), 4),
            "recall": round(float(rec[i]), 4), "kept": int(kept[i])}


def suggest_threshold(scores, positive, precision: float) -> dict | None:
    """The threshold (and direction) with the highest recall whose precision reaches ``precision``."""
    scores = np.asarray(scores, dtype=float)
    positive = np.asarray(positive, dtype=bool)
    if not len(scores) or not positive.any():
        return None
    auc = _auc(scores, positive)
    if auc is None or auc == 0.5:
        options = [_best_threshold(scores, positive, precision, d) for d in (">=", "<=")]
        options = [o for o in options if o]
        best = max(options, key=lambda o: (o["recall"], o["precision"]), default=None)
    else:
        best = _best_threshold(scores, positive, precision, ">=" if auc > 0.5 else "<=")
    if best is not None:
        best["auc"] = None if auc is None else round(auc, 4)
    return best


def filter_vs_human(campaign: Campaign, precision: float = 0.9) -> list[dict]:
    """Per (run, step, filter): the confusion matrix of the filter's final outcome against the
    aggregated human label, precision and recall of "keep", and a threshold suggestion."""
    precision = float(precision)
    if not 0 < precision <= 1:
        raise ValueError("The precision to reach must be above 0 and at most 1.")
    positive_label = POSITIVE.get(campaign.kind)
    if positive_label is None:
        return []
    by_caption, by_decision = human_labels(campaign)
    if not by_caption and not by_decision:
        return []
    decisions = (FilterDecision.objects
                 .filter(Q(caption_id__in=list(by_caption)) | Q(pk__in=list(by_decision)))
                 .exclude(FilterDecision.final_is("na"))
                 .order_by("run_id", "step", "pk")
                 .values_list("pk", "run_id", "step", "filter_name", "caption_id", "outcome", "override", "score"))
    groups: dict[tuple, list] = {}
    for pk, run_id, step, name, caption_id, outcome, override, score in decisions:
        label = by_caption.get(caption_id) if caption_id is not None else None
        if label is None:
            label = by_decision.get(pk)
        if label is None:
            continue
        groups.setdefault((run_id, step, name), []).append((override or outcome, label, score))
    out = []
    for (run_id, step, name), items in groups.items():
        matrix: dict[str, dict[str, int]] = {"keep": {}, "drop": {}}
        tp = kept = positives = 0
        for outcome, label, _ in items:
            key = str(label)
            matrix[outcome][key] = matrix[outcome].get(key, 0) + 1
            is_pos = label == positive_label
            kept += outcome == "keep"
            positives += is_pos
            tp += outcome == "keep" and is_pos
        scored = [(score, label == positive_label) for _, label, score in items if score is not None]
        out.append({
            "run": run_id, "step": step, "filter": name,
            "matrix": {k: dict(sorted(v.items())) for k, v in matrix.items()},
            "positive": positive_label,
            "precision": round(tp / kept, 4) if kept else None,
            "recall": round(tp / positives, 4) if positives else None,
            "n": len(items),
            "suggestion": suggest_threshold([s for s, _ in scored], [p for _, p in scored], precision)
            if scored else None,
            "target_precision": precision,
        })
    return out


__all__ = ["filter_vs_human", "suggest_threshold", "human_labels", "POSITIVE"]
