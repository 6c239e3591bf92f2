"""Celery tasks of the annotation app (queue ``default``): campaign aggregation, recomputed as
votes arrive (debounced), and the reservation sweep run by Celery beat."""
from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import transaction


def schedule_aggregation(campaign_id: int) -> bool:
    """Queue one aggregation of the campaign after the current transaction commits, at most once
    per ``ANNOTATION_AGGREGATE_DEBOUNCE`` seconds however many votes arrive. True when queued."""
    debounce = max(int(getattr(settings, "ANNOTATION_AGGREGATE_DEBOUNCE", 10)), 0)
    if debounce and not cache.add(f"annotation:aggregate:{campaign_id}", 1, timeout=debounce):
        return False
    countdown = 0 if settings.CELERY_TASK_ALWAYS_EAGER else debounce
    transaction.on_commit(lambda: aggregate_campaign.apply_async(args=[campaign_id], countdown=countdown))
    return True


@shared_task(name="annotation.aggregate_campaign")
def aggregate_campaign(campaign_id: int) -> dict:
    from .aggregation import aggregate_campaign as run

    result = run(campaign_id)
    # A learning loop set to run every N votes starts its round from here, after the votes are counted.
    from modeling.loop.services import maybe_auto_round

    maybe_auto_round(campaign_id)
    return result


@shared_task(name="annotation.sweep_reservations")
def sweep_reservations() -> int:
    from .routing import sweep_expired

    return sweep_expired()
from . import tasks_providers  # noqa: E402,F401 - registers the provider tasks with Celery
