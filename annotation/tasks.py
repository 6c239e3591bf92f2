"""Celery tasks of the annotation app: campaign aggregation and the reservation sweep.

Aggregation runs in two queues:
- ``default``: the incremental pass (``mode="changes"``) that every vote schedules through
  ``schedule_aggregation`` (debounced): the per-task rules over the tasks whose votes changed.
  It ends by queueing the full pass when the model-based methods are due, or a later check when
  they will be (``annotation.aggregation.incremental.models_wait``);
- ``aggregate`` (low priority, route in settings): ``annotation.aggregate_campaign`` itself, the
  full pass with Dawid-Skene, GLAD, MACE and Bradley-Terry: on demand (button, API, CLI) or due.
"""
from __future__ import annotations

import logging
import math

from celery import shared_task
from celery.signals import worker_init
from django.conf import settings
from django.core.cache import cache
from django.db import transaction

log = logging.getLogger(__name__)


@worker_init.connect
def _preload_aggregation(sender=None, **kwargs) -> None:
    """Import what every aggregation pass uses (pandas, krippendorff, the per-task rules: about
    80 MiB) in the worker's main process before its pool forks, so the children share those pages
    instead of each importing a copy on its first pass, then freeze the garbage collector's view of
    them (``gc.freeze``). crowd-kit is not among them: the model-based fits run in a process of
    their own (``aggregation.methods.fit``). Only in a worker that consumes the ``aggregate``
    queue (not the GPU worker); the web processes never get here."""
    app = getattr(sender, "app", None)
    consumed = getattr(getattr(getattr(app, "amqp", None), "queues", None), "consume_from", None) or {}
    if "aggregate" not in consumed:
        return
    try:
        import krippendorff  # noqa: F401
        import pandas  # noqa: F401

        from .aggregation import full, incremental  # noqa: F401
    except Exception:
        log.exception("could not preload the aggregation libraries")
        return
    # Objects made so far (Django, the libraries) leave the garbage collector's view: its passes in
    # a child would otherwise write to every one of their pages and un-share them.
    import gc

    gc.freeze()


def _debounce() -> int:
    return max(int(settings.ANNOTATION_AGGREGATE_DEBOUNCE), 0)


def schedule_aggregation(campaign_id: int) -> bool:
    """Queue one incremental aggregation of the campaign (queue ``default``) after the current
    transaction commits, at most once per ``ANNOTATION_AGGREGATE_DEBOUNCE`` seconds however many
    votes arrive. True when queued."""
    debounce = _debounce()
    if debounce and not cache.add(f"annotation:aggregate:{campaign_id}", 1, timeout=debounce):
        return False
    countdown = 0 if settings.CELERY_TASK_ALWAYS_EAGER else debounce
    transaction.on_commit(lambda: aggregate_campaign.apply_async(
        args=[campaign_id], kwargs={"mode": "changes"}, countdown=countdown, queue="default"))
    return True


def _queue_models(campaign_id: int, wait: float) -> bool:
    """Queue the full pass (queue ``aggregate``) in ``wait`` seconds, once per window."""
    countdown = 0 if settings.CELERY_TASK_ALWAYS_EAGER else math.ceil(wait) + 1
    if not cache.add(f"annotation:aggregate-models:{campaign_id}", 1, timeout=max(countdown, 1) + 5):
        return False
    aggregate_campaign.apply_async(args=[campaign_id], kwargs={"mode": "due"}, countdown=countdown)
    return True


def _enforce_quality_rules(campaign_id: int) -> None:
    """The campaign's gold rule, for every provider (annotation/quality.py), before each pass: one
    query over the members' running gold counters, so in-house annotators below the threshold are
    blocked as the votes come in, and the pass that follows leaves their votes out."""
    from .models import Campaign
    from .quality import enforce_gold_rules

    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is not None:
        enforce_gold_rules(campaign)


@shared_task(name="annotation.aggregate_campaign")
def aggregate_campaign(campaign_id: int, mode: str = "full") -> dict:
    """``mode``: "full" (everything, now), "changes" (the incremental pass, then the full pass
    queued if due), "due" (the full pass if still due, else nothing)."""
    from .aggregation import aggregate_campaign as full
    from .aggregation import aggregate_changes, models_wait

    _enforce_quality_rules(campaign_id)
    if mode == "changes":
        result = aggregate_changes(campaign_id)
        if result is None:  # another pass holds the campaign: look again after it
            aggregate_campaign.apply_async(args=[campaign_id], kwargs={"mode": "changes"},
                                           countdown=max(_debounce(), 1), queue="default")
            return {}
        wait = models_wait(result)
        if wait is not None:
            _queue_models(campaign_id, wait)
    elif mode == "due":
        from .models import Campaign

        stats = Campaign.objects.filter(pk=campaign_id).values_list("stats", flat=True).first()
        wait = models_wait(stats or {})
        cache.delete(f"annotation:aggregate-models:{campaign_id}")
        if wait is None:
            return {}
        if wait > 0:  # not yet (a vote's changes moved the plan): look again then
            _queue_models(campaign_id, wait)
            return {}
        result = full(campaign_id)
    elif mode == "full":
        result = full(campaign_id)
    else:
        raise ValueError(f"unknown aggregation mode {mode!r}: full, changes or due")
    # A learning loop set to run every N votes starts its round from here, after the votes are counted
    # (modeling receives the signal: ModelingConfig.ready()).
    from .signals import aggregation_finished

    aggregation_finished.send(sender=aggregate_campaign, campaign_id=campaign_id)
    return result


@shared_task(name="annotation.sweep_reservations")
def sweep_reservations() -> int:
    from .routing import sweep_expired

    return sweep_expired()


from . import tasks_providers  # noqa: E402,F401 - registers the provider tasks with Celery
