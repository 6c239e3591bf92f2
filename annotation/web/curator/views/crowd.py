"""The campaign's crowd: the curator's controls (provider, reward, budget, places, provider
settings, review rules) after creation, and the ledger of every payment with its idempotency
token and the provider's reference."""
from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from annotation.forms import CrowdForm
from annotation.models import LedgerEntry
from annotation.providers import controls, money
from annotation.services import CampaignError
from captionlab import roles
from captionlab.roles import role_required

from ._common import campaign as _campaign

LEDGER_PER_PAGE = 200


@role_required(roles.CURATOR)
def campaign_crowd(request, pk):
    campaign = _campaign(pk)
    if request.method == "POST":
        form = CrowdForm(request.POST)
        if form.is_valid():
            try:
                controls.update_controls(campaign, form.controls())
            except CampaignError as error:
                form.add_control_error(error)
            else:
                messages.success(request, "Crowd settings saved.")
                return redirect("campaign-crowd", campaign.pk)
    else:
        form = CrowdForm(initial=CrowdForm.initial_for(campaign))
    return render(request, "annotation/campaigns/crowd.html",
                  {"campaign": campaign, "form": form, "provider_note": controls.provider_note(campaign.backend),
                   "admitted": controls.admitted(campaign), "launched": campaign.provider_jobs.exists()},
                  status=400 if form.errors else 200)


def ledger_rows(campaign, entries) -> list[dict]:
    rows = []
    for entry in entries:
        reference = ""
        if entry.assignment_id and entry.assignment.provider_assignment_id:
            reference = entry.assignment.provider_assignment_id
        elif entry.job_id and entry.job.external_id:
            reference = entry.job.external_id
        rows.append({"e": entry, "amount": money.format_cents(entry.amount_cents), "reference": reference,
                     "job": entry.job.external_id if entry.job_id else "",
                     "worker": (entry.worker.external_id or str(entry.worker)) if entry.worker_id else ""})
    return rows


@role_required(roles.CURATOR)
@require_GET
def campaign_ledger(request, pk):
    """Every ledger entry of the campaign, oldest first, with the money summary above it."""
    campaign = _campaign(pk)
    entries = (LedgerEntry.objects.filter(campaign=campaign)
               .select_related("job", "assignment", "worker__user").order_by("created_at", "pk"))
    state = request.GET.get("state", "")
    if state in LedgerEntry.State.values:
        entries = entries.filter(state=state)
    else:
        state = ""
    page = Paginator(entries, LEDGER_PER_PAGE).get_page(request.GET.get("page"))
    summary = money.summary(campaign)
    return render(request, "annotation/campaigns/ledger.html",
                  {"campaign": campaign, "page": page, "rows": ledger_rows(campaign, page), "state": state,
                   "states": LedgerEntry.State.choices,
                   "summary": {k: money.format_cents(summary[k])
                               for k in ("budget", "spent", "committed", "remaining", "fees")},
                   "provider_note": controls.provider_note(campaign.backend)})


__all__ = ["campaign_crowd", "campaign_ledger", "ledger_rows", "LEDGER_PER_PAGE"]
