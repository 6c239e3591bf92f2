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

The threshold suggestion looks at the decisions' scores (``curation.pipeline.thresholds.suggest_threshold``,
also the calibrated alignment filter's search): the direction is the one the scores point (keep when
score >= t if positives score higher, i.e. the ROC AUC is above 0.5, else keep when score <= t; at
exactly 0.5 both are tried), and the threshold is the one with the highest recall whose precision
reaches the asked precision (null when none does).
"""
from __future__ import annotations

from django.db.models import Q

from curation.models import FilterDecision
from curation.pipeline.thresholds import suggest_threshold

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


CROWD_KINDS = ("quality", "good_common_bad")  # kinds whose positive label says "a good caption of this image"


def crowd_judgements(collection_ids: set[int], caption_ids: set[int]) -> dict[int, bool]:
    """{caption id: judged good} for ``caption_ids`` from the quality and good/common/bad campaigns of the
    collections (later campaigns override earlier ones): the crowd's word for the calibrated alignment
    filter, registered in ``curation.extensions`` by ``AnnotationConfig.ready()``."""
    judged: dict[int, bool] = {}
    if not caption_ids:
        return judged
    for campaign in Campaign.objects.filter(collection_id__in=collection_ids, kind__in=CROWD_KINDS).order_by("pk"):
        by_caption, by_decision = human_labels(campaign)
        positive = POSITIVE[campaign.kind]
        if by_decision:
            rows = FilterDecision.objects.filter(pk__in=list(by_decision)).values_list("pk", "caption_id")
            for pk, caption_id in rows:
                by_caption.setdefault(caption_id, by_decision[pk])
        for caption_id, label in by_caption.items():
            if caption_id in caption_ids:
                judged[caption_id] = label == positive
    return judged


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


__all__ = ["filter_vs_human", "suggest_threshold", "human_labels", "crowd_judgements", "POSITIVE", "CROWD_KINDS"]
