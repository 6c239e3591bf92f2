"""The dashboard views: the campaign's detail page, its polled progress card, and the status and
recompute actions, which come back to the dashboard."""
from __future__ import annotations

import logging

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation import quality, services
from annotation.models import Campaign
from annotation.services import CampaignError
from captionlab import roles
from captionlab.roles import role_required

from ._common import campaign as _campaign
from .context import DEFAULT_PRECISION, dashboard_context

log = logging.getLogger(__name__)


def _precision(request) -> tuple[float, str]:
    raw = request.GET.get("precision", "")
    if raw in ("", None):
        return DEFAULT_PRECISION, ""
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_PRECISION, f"“{raw}” is not a number: the precision is a share such as 0.9."
    if not 0.0 < value <= 1.0:
        return DEFAULT_PRECISION, "The precision is a share above 0 and at most 1, such as 0.9."
    return value, ""


def _progress_context(campaign: Campaign) -> dict:
    return {"campaign": campaign, "progress": services.progress(campaign),
            "polling": campaign.status == Campaign.Status.RUNNING}


@role_required(roles.CURATOR)
@require_GET
def campaign_detail(request, pk):
    campaign = _campaign(pk)
    precision, precision_error = _precision(request)
    context = dashboard_context(campaign, precision)
    context["precision_error"] = precision_error
    context["precision_text"] = request.GET.get("precision", "") if precision_error else precision
    return render(request, "annotation/campaigns/detail.html", context, status=400 if precision_error else 200)


@role_required(roles.CURATOR)
@require_GET
def campaign_progress(request, pk):
    """The progress card alone, polled every 5 s while the campaign runs."""
    return render(request, "annotation/campaigns/_progress.html", _progress_context(_campaign(pk)))


@role_required(roles.CURATOR)
@require_POST
def campaign_status(request, pk):
    campaign = _campaign(pk)
    status = request.POST.get("status", "")
    try:
        services.set_status(campaign, status)
    except CampaignError as error:  # the dashboard again, with the reason next to the buttons
        precision, _ = _precision(request)
        context = dashboard_context(campaign, precision) | {"status_error": error.message,
                                                             "precision_text": precision}
        return render(request, "annotation/campaigns/detail.html", context, status=409)
    messages.success(request, f"Campaign “{campaign.name}” is now {campaign.get_status_display().lower()}.")
    return redirect(campaign)


@role_required(roles.CURATOR)
@require_POST
def campaign_aggregate(request, pk):
    """Recompute now: queue the aggregation (inline without a broker)."""
    from annotation.tasks import aggregate_campaign

    campaign = _campaign(pk)
    blocked = quality.enforce_gold_rules(campaign)  # the gold rule of every provider, in-house included
    if blocked:
        messages.warning(request, f"Blocked on gold accuracy: {', '.join(str(w) for w in blocked)}.")
    try:
        aggregate_campaign.delay(campaign.pk)
    except Exception as exc:
        log.exception("aggregation of campaign %s failed", campaign.pk)
        messages.error(request, f"The aggregation failed: {exc}")
    else:
        messages.success(request, "Aggregation queued: the figures below update when it finishes.")
    return redirect(campaign)


