"""Celery tasks of the crowd providers: publishing a campaign (with progress) and the periodic
sync of providers with an API (Celery beat, every few minutes)."""
from __future__ import annotations

from celery import shared_task
from django.db import transaction
from django.utils import timezone

from .models import Campaign


def _progress(campaign_id: int, **values) -> None:
    with transaction.atomic():
        campaign = Campaign.objects.select_for_update().get(pk=campaign_id)
        config = dict(campaign.provider_config or {})
        config["publish_progress"] = {**(config.get("publish_progress") or {}), **values,
                                      "updated_at": timezone.now().isoformat()}
        Campaign.objects.filter(pk=campaign_id).update(provider_config=config)


@shared_task(name="annotation.provider_publish")
def provider_publish(campaign_id: int) -> dict:
    """Publish the campaign on its provider. Progress (done / total, state, error) goes to
    ``campaign.provider_config["publish_progress"]`` and the ProviderJob rows; a refusal is
    stored there with its message instead of raising, so the page can show it."""
    from .providers.base import ProviderError, get_provider

    campaign = Campaign.objects.get(pk=campaign_id)
    provider = get_provider(campaign.backend)
    _progress(campaign_id, state="running", done=0, total=0, error="")
    try:
        jobs = provider.publish(campaign, progress=lambda done, total: _progress(campaign_id, done=done, total=total))
    except ProviderError as exc:
        _progress(campaign_id, state="failed", error=exc.message, code=exc.code, retryable=exc.retryable)
        return {"state": "failed", "error": exc.message, "code": exc.code}
    _progress(campaign_id, state="done")
    return {"state": "done", "jobs": [job.pk for job in jobs]}


@shared_task(name="annotation.provider_sync")
def provider_sync(campaign_id: int | None = None) -> dict:
    """Sync one campaign, or (from Celery beat) every campaign of a provider with an API."""
    from .providers.sync import sync_all, sync_campaign

    if campaign_id is not None:
        return sync_campaign(Campaign.objects.get(pk=campaign_id))
    return {str(k): v for k, v in sync_all().items()}
