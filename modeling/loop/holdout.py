"""A learning loop's hold-out: the items versions are compared on, never trained on.

Either the campaign's gold items (their expected answers, set by the curator) or a fixed, seeded random
share of its real tasks chosen when the loop is made. Random hold-out tasks are labelled like any other
task: the priorities spread them evenly through the queue (``interleave``), so about that share of
every round's new labels lands in the hold-out and it grows with the campaign.
"""
from __future__ import annotations

import random

from ..trainers.fluency_data import labelled_items

LABELS = {"fluent": 1, "not_fluent": 0}


def choose(campaign, source: str, fraction: float, seed: int) -> list[int]:
    from annotation.models import GoldAnswer, Task

    if source == "gold":
        return sorted(GoldAnswer.objects.filter(task__campaign=campaign, task__role=Task.Role.GOLD)
                      .values_list("task_id", flat=True))
    real = sorted(Task.objects.filter(campaign=campaign, role=Task.Role.REAL).values_list("pk", flat=True))
    count = max(1, round(len(real) * fraction)) if real else 0
    return sorted(random.Random(f"holdout:{campaign.pk}:{seed}").sample(real, count))


def labelled(loop) -> list[dict]:
    """The hold-out items that have a label: [{task, text, source, label}]."""
    ids = set(loop.holdout_tasks or [])
    if loop.holdout_source == "gold":
        return _gold_items(ids)
    items, _ = labelled_items(loop.campaign)
    return [i for i in items if i["task"] in ids]


def _gold_items(ids) -> list[dict]:
    from annotation.models import GoldAnswer

    out = []
    for gold in GoldAnswer.objects.filter(task_id__in=ids).select_related("task__caption__parent").order_by("task_id"):
        value = gold.value.get("label") if isinstance(gold.value, dict) else gold.value
        caption = gold.task.caption
        if caption is None or value not in LABELS:
            continue
        source = (caption.metadata or {}).get("source_text") or (caption.parent.text if caption.parent_id else "")
        out.append({"task": gold.task_id, "text": caption.text, "source": source or "", "label": LABELS[value]})
    return out


def interleave(ranked_tasks: list[int], holdout_tasks: list[int], fraction: float) -> dict[int, float]:
    """Priorities (0 first) that serve ``ranked_tasks`` in their order with the hold-out tasks spread
    evenly among them, about ``fraction`` of every stretch of the queue."""
    out: dict[int, float] = {}
    ranked, held = list(ranked_tasks), list(holdout_tasks)
    fraction = min(max(fraction, 0.0), 0.9)
    position = placed = 0
    i = j = 0
    while i < len(ranked) or j < len(held):
        want_held = j < len(held) and (i >= len(ranked) or placed < (position + 1) * fraction)
        if want_held:
            out[held[j]] = float(position)
            j += 1
            placed += 1
        else:
            out[ranked[i]] = float(position)
            i += 1
        position += 1
    return out
