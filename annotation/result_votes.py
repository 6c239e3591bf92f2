"""The votes a campaign's results count and their counts per label: the part of the results
(``annotation.results``) that the best caption of a write campaign (``annotation.best_caption``) and
the verify-rewrite verdicts (``annotation.verify_rewrites``) read as well."""
from __future__ import annotations

from collections import Counter, defaultdict

from django.db.models import Count, Q
from django.db.models.fields.json import KT

from .models import Assignment, Campaign, Membership, Task, Vote


def counted_votes(campaign: Campaign):
    """The votes the aggregation counts: on real tasks, not quarantined, not of a rejected
    assignment, not of a worker blocked in the campaign or everywhere."""
    blocked = Membership.objects.filter(campaign=campaign, blocked=True).values("worker_id")
    return (Vote.objects.filter(campaign=campaign, role=Task.Role.REAL, task__role=Task.Role.REAL, quarantined=False)
            .exclude(assignment__state=Assignment.State.REJECTED)
            .exclude(Q(worker__blocked=True) | Q(worker_id__in=blocked)))


def _category(kind, label):
    """The label a vote counts for in vote_counts and ties (a slider's good/bad side)."""
    side = getattr(kind, "side", None)
    if side is not None:
        return side({"score": label})
    return str(label)


def vote_counts(campaign: Campaign, task_ids=None) -> dict[tuple[int, str], Counter]:
    """{(task, part): Counter(label)} over the counted votes. The database counts equal values per
    task (a few rows per task instead of one per vote), Python splits them into parts."""
    kind = campaign.kind_spec
    counts: dict[tuple[int, str], Counter] = defaultdict(Counter)
    votes = counted_votes(campaign).order_by()
    if task_ids is not None:
        votes = votes.filter(task_id__in=task_ids)
    key = kind.label_field
    if kind.target == "caption":  # one part per vote: the label as text, no JSON to decode
        for task_id, label, n in votes.values_list("task_id", KT(f"value__{key}")).annotate(n=Count("id")):
            if label is not None:
                counts[(task_id, "")][_category(kind, float(label) if key == "score" else label)] += n
        return counts
    for task_id, value, n in votes.values_list("task_id", "value").annotate(n=Count("id")):
        for part, label in kind.parts(value).items():
            if label is not None:
                counts[(task_id, part)][_category(kind, label)] += n
    return counts


def is_tie(counter: Counter) -> bool:
    top = counter.most_common(2)
    return len(top) == 2 and top[0][1] == top[1][1]
