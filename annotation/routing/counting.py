"""A task's counters once a vote counts: votes, reserved slots, dynamic overlap and entropy
priority, always with the task row locked by the caller."""
from __future__ import annotations

import math

from django.utils import timezone

from ..models import Assignment, Campaign, Task, Vote


def count_vote(campaign: Campaign, kind, task: Task) -> None:
    """Counters and dynamic overlap, with the task row locked by the caller."""
    votes_count = task.votes_count + 1
    reserved = max(task.reserved_count - 1, 0)
    required = task.votes_required
    update = {"votes_count": votes_count, "reserved_count": reserved}
    labels = None
    if campaign.dynamic_overlap or campaign.priority == Campaign.Priority.ENTROPY:
        labels = [_dynamic_label(kind, v) for v in Vote.objects.filter(
            task=task, quarantined=False, worker__memberships__campaign=campaign, worker__memberships__blocked=False
        ).values_list("value", flat=True)]
        labels = [x for x in labels if x is not None]
    if campaign.dynamic_overlap and labels:
        top = max(labels.count(x) for x in set(labels)) / len(labels)
        floor = min(campaign.votes_per_item, required)
        if votes_count >= floor and top >= campaign.confidence_threshold:
            required = votes_count
        elif votes_count >= required and top < campaign.confidence_threshold:
            required = min(required + 1, max(campaign.max_votes_per_item, campaign.votes_per_item))
        update["votes_required"] = required
    if campaign.priority == Campaign.Priority.ENTROPY and labels:
        update["priority"] = -entropy(labels)
    if votes_count >= required:
        update["status"] = Task.Status.DONE
        update["done_at"] = timezone.now()
    Task.objects.filter(pk=task.pk).update(**update)


def _dynamic_label(kind, value):
    side = getattr(kind, "side", None)
    return side(value) if side else kind.label_of(value)


def entropy(labels) -> float:
    n = len(labels)
    if not n:
        return 0.0
    return -sum((c / n) * math.log2(c / n) for c in (labels.count(x) for x in set(labels)))


def held(task: Task) -> int:
    """Slots held by quarantined votes of assignments still waiting for the provider."""
    return (Vote.objects.filter(task=task, quarantined=True, assignment__confirmed=False)
            .exclude(assignment__state=Assignment.State.REJECTED).count())
