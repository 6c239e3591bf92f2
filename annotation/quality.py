"""Quality rules that hold for every crowd provider: in-house annotators, link-out participants
and Mechanical Turk workers alike.

The rule: a worker who has answered at least ``block_min_gold`` gold items of a campaign and got
fewer than ``block_below_gold_accuracy`` of them right is blocked in that campaign
(``routing.block_worker``: their votes leave the counts and the aggregation, their items go back to
the pool). Both numbers are the curator's, kept in ``campaign.provider_config["review"]`` (see
``annotation.providers.controls`` for every documented key); without a threshold nobody is blocked
automatically.

The figures are the membership's running counters (``gold_seen``, ``gold_correct``), which the vote
path updates with every gold answer, so the check is one query over the campaign's members and
costs nothing per vote. It runs

- in the provider sync (``annotation.providers.sync``), after the submitted work was reviewed;
- when a curator asks for a recomputation (dashboard, API ``aggregate``, ``manage.py campaign
  aggregate``);
- and before every aggregation pass of the campaign (``annotation.tasks.aggregate_campaign``, which
  each vote schedules, debounced), so in-house annotators are blocked as their votes come in.

A blocked worker is never paid while blocked: ``money.commit`` refuses rewards and bonuses for them
(``worker_blocked``), so approvals hold their payment until a curator unblocks the worker.
"""
from __future__ import annotations

from collections.abc import Callable

from django.db.models import F, Q

from .models import Campaign, Membership, Worker

DEFAULT_MIN_GOLD = 3


def gold_rule(campaign: Campaign) -> tuple[float | None, int]:
    """(threshold, minimum gold answered) of the campaign's blocking rule; threshold None: no rule."""
    rules = (campaign.provider_config or {}).get("review") or {}
    try:
        threshold = float(rules["block_below_gold_accuracy"])
    except (KeyError, TypeError, ValueError):
        threshold = None
    try:
        minimum = int(rules.get("block_min_gold") or DEFAULT_MIN_GOLD)
    except (TypeError, ValueError):
        minimum = DEFAULT_MIN_GOLD
    return threshold, max(minimum, 1)


def failing_members(campaign: Campaign):
    """Members not blocked yet whose gold accuracy is under the campaign's threshold."""
    threshold, minimum = gold_rule(campaign)
    if threshold is None:
        return Membership.objects.none()
    # gold_correct / gold_seen < threshold, without a division in SQL
    return (Membership.objects.filter(campaign=campaign, blocked=False, gold_seen__gte=minimum)
            .filter(gold_correct__lt=F("gold_seen") * threshold)
            .select_related("worker").order_by("worker_id"))


def block_reason(membership: Membership, threshold: float) -> str:
    return (f"Automatically blocked: {membership.gold_correct} of {membership.gold_seen} check items right "
            f"(at least {threshold:.0%} needed).")


def enforce_gold_rules(campaign: Campaign, *, block: Callable[[Worker, str], object] | None = None) -> list[Worker]:
    """Block every member of ``campaign`` whom the gold rule fails; returns the workers blocked now.

    ``block(worker, reason)`` does the blocking; by default ``routing.block_worker`` in this
    campaign. The provider sync passes its own, which also blocks the worker at the marketplace.
    Safe to run twice: a blocked member is not looked at again."""
    from annotation.routing import block_worker

    threshold, _ = gold_rule(campaign)
    blocked = []
    for membership in failing_members(campaign):
        reason = block_reason(membership, threshold)
        if block is None:
            block_worker(campaign, membership.worker, reason=reason)
        else:
            block(membership.worker, reason)
        blocked.append(membership.worker)
    return blocked


def worker_blocked(campaign_id: int, worker_id: int) -> bool:
    """Whether the worker is blocked in this campaign or everywhere."""
    return (Membership.objects.filter(campaign_id=campaign_id, worker_id=worker_id, blocked=True).exists()
            or Worker.objects.filter(pk=worker_id, blocked=True).exists())


def blocked_worker_ids(campaign: Campaign) -> set[int]:
    """Workers blocked in this campaign (membership) or everywhere (worker), among its members."""
    return set(Membership.objects.filter(campaign=campaign).filter(Q(blocked=True) | Q(worker__blocked=True))
               .values_list("worker_id", flat=True))


__all__ = ["enforce_gold_rules", "gold_rule", "failing_members", "worker_blocked", "blocked_worker_ids",
           "DEFAULT_MIN_GOLD"]
