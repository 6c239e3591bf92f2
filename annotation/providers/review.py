"""Review rules: approve, reject or hold a submitted external assignment.

The curator sets the rules in ``campaign.provider_config["review"]``:

- ``min_gold_accuracy`` (0..1): share of the assignment's gold items answered right;
- ``min_seconds_per_task``: average time per task below which the work was rushed;
- ``min_agreement`` (0..1): share of the assignment's answers that agree with the other workers'
  majority on the same items (items nobody else answered yet are left out);
- ``approve_feedback`` / ``reject_feedback``: the text the worker gets with the decision;
- ``bonus_cents`` and ``bonus_min_gold_accuracy``: a bonus for approved work at least that good;
- ``block_below_gold_accuracy`` (0..1) with ``block_min_gold`` items seen: spammers to block;
- ``manual``, or ``auto_approve`` false: hold everything for the curator's own approve / reject
  buttons.

``block_below_gold_accuracy`` and ``block_min_gold`` also drive the campaign-wide rule of every
provider, in-house included (``annotation.quality.enforce_gold_rules``); the curator sets all of
these through ``annotation.providers.controls`` (form, API, CLI), which documents and validates them.

Every rule is optional; with none set, submitted work with at least one answer is approved. An
assignment that the provider has not confirmed, or that is not submitted, is held.
"""
from __future__ import annotations

from collections import Counter

from ..models import Assignment, Task, Vote

DEFAULT_APPROVE = "Thank you for your work."
DEFAULT_REJECT = "Your answers did not meet the quality requirements stated in the instructions."


def _float(rules: dict, key: str):
    value = rules.get(key)
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def figures(assignment: Assignment) -> dict:
    """Votes, gold accuracy, seconds per task and agreement of one assignment's answers."""
    votes = list(Vote.objects.filter(assignment=assignment, role__in=(Task.Role.REAL, Task.Role.GOLD))
                 .values("task_id", "role", "value", "correct", "seconds"))
    gold = [v for v in votes if v["role"] == Task.Role.GOLD and v["correct"] is not None]
    real = [v for v in votes if v["role"] == Task.Role.REAL]
    seconds = sum(v["seconds"] for v in votes) / len(votes) if votes else None
    agreement = None
    if real:
        kind = assignment.campaign.kind_spec
        others = {}
        for task_id, value in (Vote.objects.filter(task_id__in=[v["task_id"] for v in real], quarantined=False)
                               .exclude(assignment=assignment).exclude(worker_id=assignment.worker_id)
                               .values_list("task_id", "value")):
            label = _label(kind, value)
            if label is not None:
                others.setdefault(task_id, []).append(label)
        compared = agreed = 0
        for v in real:
            labels = others.get(v["task_id"])
            mine = _label(kind, v["value"])
            if not labels or mine is None:
                continue
            top = Counter(labels).most_common(1)[0][0]
            compared += 1
            agreed += mine == top
        agreement = agreed / compared if compared else None
    return {"votes": len(votes), "gold_seen": len(gold), "gold_correct": sum(1 for v in gold if v["correct"]),
            "gold_accuracy": (sum(1 for v in gold if v["correct"]) / len(gold)) if gold else None,
            "seconds_per_task": seconds, "agreement": agreement}


def _label(kind, value):
    side = getattr(kind, "side", None)  # a slider: agreement is on which side of the middle
    try:
        label = side(value) if side else kind.label_of(value)
    except Exception:  # a kind without one label per answer (captions, candidates)  # noqa: BLE001
        return None
    return label if isinstance(label, (str, int, float, bool)) else None


def decide(assignment: Assignment, rules: dict | None) -> tuple[str, str]:
    """("approve" | "reject" | "hold", feedback for the worker)."""
    rules = rules or {}
    manual = rules.get("manual") or rules.get("auto_approve") is False
    if not assignment.confirmed or assignment.state != Assignment.State.SUBMITTED or manual:
        return "hold", ""  # "manual": the curator approves and rejects on the provider page
    approve_text = str(rules.get("approve_feedback") or DEFAULT_APPROVE)
    reject_text = str(rules.get("reject_feedback") or DEFAULT_REJECT)
    f = figures(assignment)
    if f["votes"] == 0:
        return "reject", "No answers were recorded for this assignment on the task page."
    reasons = []
    min_gold = _float(rules, "min_gold_accuracy")
    if min_gold is not None and f["gold_accuracy"] is not None and f["gold_accuracy"] < min_gold:
        reasons.append(f"{f['gold_correct']} of {f['gold_seen']} check items right "
                       f"(at least {min_gold:.0%} needed)")
    min_seconds = _float(rules, "min_seconds_per_task")
    if min_seconds is not None and f["seconds_per_task"] is not None and f["seconds_per_task"] < min_seconds:
        reasons.append(f"{f['seconds_per_task']:.1f} s per item on average (at least {min_seconds:g} s expected)")
    min_agreement = _float(rules, "min_agreement")
    if min_agreement is not None and f["agreement"] is not None and f["agreement"] < min_agreement:
        reasons.append(f"{f['agreement']:.0%} agreement with other workers (at least {min_agreement:.0%} needed)")
    if reasons:
        return "reject", f"{reject_text} ({'; '.join(reasons)})"[:1024]
    return "approve", approve_text[:1024]


def bonus_for(assignment: Assignment, rules: dict | None) -> int:
    """Bonus cents an approved assignment earns by the rules (0 when none)."""
    rules = rules or {}
    try:
        cents = int(rules.get("bonus_cents") or 0)
    except (TypeError, ValueError):
        return 0
    if cents <= 0:
        return 0
    floor = _float(rules, "bonus_min_gold_accuracy")
    if floor is not None:
        accuracy = figures(assignment)["gold_accuracy"]
        if accuracy is None or accuracy < floor:
            return 0
    return cents


def should_block(assignment: Assignment, rules: dict | None) -> bool:
    rules = rules or {}
    floor = _float(rules, "block_below_gold_accuracy")
    if floor is None:
        return False
    f = figures(assignment)
    try:
        minimum = int(rules.get("block_min_gold") or 3)
    except (TypeError, ValueError):
        minimum = 3
    return f["gold_seen"] >= minimum and (f["gold_accuracy"] or 0.0) < floor
