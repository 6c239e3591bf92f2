"""The incremental pass: the per-task rules over the tasks whose votes changed since the last
pass, merged into the stored aggregates and figures; and when the model-based methods are due.

Changed tasks are found from a watermark kept in ``Campaign.stats["incremental"]``:
- votes created or edited since the watermark (less ``ANNOTATION_AGGREGATE_WATERMARK_SLACK``
  seconds, for vote transactions that were still open when the last pass read). A vote can be
  edited only within its campaign's edit window, so the search is a range of the
  (campaign, role, created_at) index, not a scan of the campaign's votes;
- every task voted on by a worker who was blocked or unblocked since (the stored blocked set).
Votes that leave the counts another way (an assignment rejected, a quarantine lifted) are picked
up by the next full pass, which runs on the bounded schedule below and rebuilds everything.

The campaign figures are kept as a tally (``aggregation.tally``): the changed tasks' old rows are
subtracted and their new rows added, so a pass costs what the changed tasks cost.

The model-based methods (``methods``) are due when new votes arrived, at least
``ANNOTATION_MODELS_MIN_INTERVAL`` seconds (default 300) passed since they last ran, and either
``ANNOTATION_MODELS_AFTER_VOTES`` votes (default 500) changed since or
``ANNOTATION_MODELS_MAX_DELAY`` seconds (default 1800) passed.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..models import Aggregate, Campaign, Task, Vote
from .frames import Results, blocked_workers, load_votes
from .full import STATE_VERSION, vote_counts
from .per_task import PER_TASK_METHODS, per_task_rows, tie_break_rule
from .store import campaign_lock, merge_stats, per_task_scope, replace_rows
from .tally import apply, contributions, figures

log = logging.getLogger(__name__)


def changed_votes(campaign: Campaign, since) -> list[tuple[int, int, object]]:
    """(vote id, task id, updated_at) of the campaign's real votes created or edited at or after
    ``since``."""
    created_from = since - timedelta(seconds=campaign.edit_window_seconds + 60)
    return list(Vote.objects.filter(campaign=campaign, role=Task.Role.REAL, created_at__gte=created_from,
                                    updated_at__gte=since).values_list("pk", "task_id", "updated_at"))


def aggregate_changes(campaign_id: int) -> dict | None:
    """Recompute the per-task rules of the tasks whose votes changed; returns the stats, {} when
    the campaign is gone, None when another pass holds the campaign (try again later). A campaign
    without incremental state yet gets a per-task pass over all its tasks (no models)."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return {}
    with campaign_lock(campaign.pk, wait=False) as got:
        if not got:
            return None
        campaign.refresh_from_db(fields=["stats", "provider_config", "votes_per_item"])
        stats = campaign.stats or {}
        state = stats.get("incremental") or {}
        started = timezone.now()
        kind = campaign.kind_spec
        blocked = blocked_workers(campaign)
        fresh = state.get("version") != STATE_VERSION or not parse_datetime(state.get("watermark") or "")
        if fresh:
            task_ids, n_changed = None, None
        else:
            slack = timedelta(seconds=int(settings.ANNOTATION_AGGREGATE_WATERMARK_SLACK))
            watermark = parse_datetime(state["watermark"])
            changed = changed_votes(campaign, watermark - slack)
            task_ids = {t for _, t, _ in changed}
            n_changed = sum(1 for _, _, updated in changed if updated >= watermark)  # the slack's re-reads once
            flipped = blocked ^ set(state.get("blocked") or [])
            if flipped:
                task_ids |= set(Vote.objects.filter(campaign=campaign, worker_id__in=flipped)
                                .values_list("task_id", flat=True))
            if not task_ids and not flipped:
                return stats
        rule, _note = tie_break_rule(campaign)
        votes = load_votes(campaign, task_ids)
        results = Results()
        per_task_rows(campaign, kind, votes, results, rule)
        scope = Aggregate.objects.filter(task__campaign=campaign, method__in=PER_TASK_METHODS) if fresh \
            else per_task_scope(task_ids, PER_TASK_METHODS)
        old = {(a.task_id, a.part, a.method): (a.label, a.confidence, a.n_votes, a.details)
               for a in scope.only("task_id", "part", "method", "label", "confidence", "n_votes", "details")}
        tally = apply({} if fresh else state.get("tally") or {}, contributions(kind, old),
                      contributions(kind, results.rows))
        replace_rows(results.rows, scope)
        counts = vote_counts(campaign, blocked)
        new_state = {**state, "version": STATE_VERSION, "watermark": started.isoformat(), "blocked": sorted(blocked),
                     "tally": tally,
                     "pending_votes": int(state.get("pending_votes", 0)) + (counts["n_votes"] if n_changed is None
                                                                            else n_changed)}
        new_state.setdefault("models_at", None)
        top = {k: v for k, v in figures(kind, tally, rule).items() if k != "label_distribution"}
        top.update(counts, computed_at=started.isoformat(), incremental=new_state)
        if fresh:
            top["n_tasks"] = Task.objects.filter(campaign=campaign, role=Task.Role.REAL).count()
        labels = figures(kind, tally, rule)["label_distribution"]
        merge_stats(campaign.pk, top, labels, PER_TASK_METHODS)
    campaign.refresh_from_db(fields=["stats"])
    return campaign.stats


def models_wait(stats: dict, now=None) -> float | None:
    """Seconds until the model-based methods are due (0: now), or None while nothing new needs them."""
    state = (stats or {}).get("incremental") or {}
    pending = int(state.get("pending_votes") or 0)
    if pending <= 0:
        return None
    now = now or timezone.now()
    last = parse_datetime(state.get("models_at") or "")
    if last is None:
        return 0.0
    elapsed = (now - last).total_seconds()
    min_interval = int(settings.ANNOTATION_MODELS_MIN_INTERVAL)
    after_votes = int(settings.ANNOTATION_MODELS_AFTER_VOTES)
    max_delay = int(settings.ANNOTATION_MODELS_MAX_DELAY)
    due_at = min_interval if pending >= after_votes else max(min_interval, max_delay)
    return max(due_at - elapsed, 0.0)


def models_due(stats: dict, now=None) -> bool:
    return models_wait(stats, now) == 0.0
