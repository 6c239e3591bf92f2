"""The campaign list, the create form and its live instructions preview."""
from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.forms import CampaignForm, prefill
from annotation.models import Campaign, Task, Vote
from annotation.providers import controls
from annotation.services import CampaignError
from captionlab import roles
from captionlab.roles import role_required

CAMPAIGNS_PER_PAGE = 50


def _count(qs) -> Subquery:
    """A correlated COUNT per campaign (no join fan-out between tasks and votes)."""
    rows = qs.order_by().values("campaign").annotate(n=Count("pk")).values("n")[:1]
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


@role_required(roles.CURATOR)
@require_GET
def campaign_list(request):
    campaigns = Campaign.objects.select_related("collection").annotate(
        n_tasks=_count(Task.objects.filter(campaign=OuterRef("pk"), role=Task.Role.REAL)),
        n_done=_count(Task.objects.filter(campaign=OuterRef("pk"), role=Task.Role.REAL, status=Task.Status.DONE)),
        n_votes=_count(Vote.objects.filter(campaign=OuterRef("pk"), role=Task.Role.REAL)),
    ).order_by("-created_at")
    status = request.GET.get("status", "")
    if status in Campaign.Status.values:
        campaigns = campaigns.filter(status=status)
    else:
        status = ""
    page = Paginator(campaigns, CAMPAIGNS_PER_PAGE).get_page(request.GET.get("page"))
    for c in page:
        c.percent = int(100 * c.n_done / c.n_tasks) if c.n_tasks else 0
    return render(request, "annotation/campaigns/list.html",
                  {"page": page, "status": status, "statuses": Campaign.Status.choices})


@role_required(roles.CURATOR)
def campaign_create(request):
    initial = {"kind": "fluency", "seed": 0} | prefill(request.GET)
    form = CampaignForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            campaign = controls.create_campaign(
                controls=form.controls(), name=data["name"], kind=data["kind"], selection=form.selection(),
                user=request.user, members=list(data.get("members") or ()),
                status=Campaign.Status.RUNNING if data.get("start") else Campaign.Status.DRAFT, **form.settings())
        except CampaignError as error:
            if error.field in controls.CONTROL_FIELDS:
                form.add_control_error(error)
            else:
                form.add_error(error.field if error.field in form.fields else None, error.message)
        else:
            messages.success(request, f"Campaign “{campaign.name}” created with {campaign.tasks.count()} tasks.")
            return redirect(campaign)
    return render(request, "annotation/campaigns/create.html",
                  {"form": form, "kinds": form.kinds(), "run_steps": form.run_steps()},
                  status=400 if form.errors else 200)


@role_required(roles.CURATOR)
@require_POST
def instructions_preview(request):
    """The instructions as annotators will see them (htmx live preview of the create form)."""
    from annotation.markdown import render_markdown

    text = request.POST.get("instructions", "")[:50_000]
    return render(request, "annotation/campaigns/_preview.html", {"html": render_markdown(text)})
