"""Who annotates a campaign: adding members, and the per-worker table with blocking."""
from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render

from annotation import routing, services
from annotation.forms import BlockForm, MembersForm
from annotation.models import Membership
from captionlab import roles
from captionlab.roles import role_required

from ._common import campaign as _campaign
from .context import worker_rows


@role_required(roles.CURATOR)
def campaign_members(request, pk):
    campaign = _campaign(pk)
    form = MembersForm(request.POST if request.method == "POST" else None, campaign=campaign)
    if request.method == "POST" and form.is_valid():
        added = services.members_set(campaign, list(form.cleaned_data["members"]))
        messages.success(request, f"{added} annotator{'s' if added != 1 else ''} added.")
        return redirect("campaign-members", campaign.pk)
    members = (Membership.objects.filter(campaign=campaign).select_related("worker", "worker__user")
               .order_by("worker__pk"))
    return render(request, "annotation/campaigns/members.html",
                  {"campaign": campaign, "form": form, "members": members}, status=400 if form.errors else 200)


@role_required(roles.CURATOR)
def campaign_workers(request, pk):
    """The per-worker table; POST blocks or unblocks one worker with a reason."""
    campaign = _campaign(pk)
    status = 200
    if request.method == "POST":
        form = BlockForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            membership = Membership.objects.filter(campaign=campaign, worker_id=data["worker"]).select_related(
                "worker", "worker__user").first()
            if membership is None:
                raise Http404("That worker is not in this campaign.")
            blocked = data["action"] == "block"
            reason = data.get("reason") or ""
            if blocked and not reason.strip():
                messages.error(request, "Give a reason to block a worker: it is kept with the block.")
                status = 400
            else:
                reopened = routing.block_worker(campaign, membership.worker, reason=reason.strip(), blocked=blocked)
                from annotation.tasks import schedule_aggregation

                schedule_aggregation(campaign.pk)
                if blocked:
                    plural = "s" if reopened != 1 else ""
                    messages.success(request, f"Blocked {membership.worker}: {reopened} task{plural} reopened.")
                else:
                    messages.success(request, f"Unblocked {membership.worker}: their votes count again.")
                return redirect("campaign-workers", campaign.pk)
        else:
            messages.error(request, "Choose a worker and block or unblock.")
            status = 400
    return render(request, "annotation/campaigns/workers.html",
                  {"campaign": campaign, "workers": worker_rows(campaign), "stats": campaign.stats or {}},
                  status=status)


