"""Gold, training and qualification items: the page that marks tasks with their expected answer."""
from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render

from annotation import services
from annotation.forms import GOLD_ROLES, GoldForm
from annotation.kinds import VoteInvalid
from annotation.models import Campaign, GoldAnswer, Task
from annotation.services import CampaignError
from captionlab import roles
from captionlab.roles import role_required

from ._common import campaign as _campaign

GOLD_PER_PAGE = 30


def _gold_value(kind, raw: str):
    """The expected answer as the kind takes it (``Kind.gold_from_form``: JSON for candidate kinds)."""
    try:
        return kind.gold_from_form(raw)
    except VoteInvalid as exc:
        raise CampaignError(str(exc), field="value") from None


def _gold_rows(campaign: Campaign, page) -> list[dict]:
    kind = campaign.kind_spec
    rows = []
    for task in page:
        gold = getattr(task, "gold_answer", None)
        rows.append({"task": task, "gold": gold, "value": kind.gold_form_text(gold, task),
                     "role": task.role if task.role != Task.Role.REAL else Task.Role.GOLD,
                     "feedback": gold.feedback if gold else "", "tolerance": gold.tolerance if gold else "",
                     "error": ""})
    return rows


@role_required(roles.CURATOR)
def campaign_gold(request, pk):
    """Make tasks gold, training or qualification items with their expected answer."""
    campaign = _campaign(pk)
    kind = campaign.kind_spec
    role_filter = request.GET.get("role", "")
    if role_filter not in Task.Role.values:
        role_filter = ""
    tasks = (campaign.tasks.select_related("image", "caption").order_by("position", "pk")
             .annotate(n_votes=Count("votes")))
    if role_filter:
        tasks = tasks.filter(role=role_filter)
    error_task, error, status = None, "", 200
    posted = {}
    if request.method == "POST":
        form = GoldForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            task = get_object_or_404(Task, pk=data["task"], campaign=campaign)
            try:
                services.set_gold(task, role=data["role"], value=_gold_value(kind, data["value"]),
                                  feedback=data["feedback"], tolerance=data.get("tolerance") or 0.0)
            except CampaignError as exc:
                error_task, error, status = task.pk, exc.message, 400
            else:
                messages.success(request, f"Task {task.pk} is now a {task.get_role_display().lower()}.")
                return redirect(request.get_full_path())
        else:
            error_task, status = request.POST.get("task"), 400
            error = " ".join(e for errs in form.errors.values() for e in errs)
        posted = {k: request.POST.get(k, "") for k in ("role", "value", "feedback", "tolerance")}
    page = Paginator(tasks, GOLD_PER_PAGE).get_page(request.GET.get("page"))
    golds = {g.task_id: g for g in GoldAnswer.objects.filter(task__in=[t.pk for t in page])}
    for task in page:
        task.gold_answer = golds.get(task.pk)
    rows = _gold_rows(campaign, page)
    for row in rows:
        if error_task is not None and str(row["task"].pk) == str(error_task):
            row.update(posted, error=error)
    if error and not any(row["error"] for row in rows):
        messages.error(request, error)
    counts = dict(campaign.tasks.order_by().values_list("role").annotate(n=Count("pk")).values_list("role", "n"))
    return render(request, "annotation/campaigns/gold.html", {
        "campaign": campaign, "kind": kind, "page": page, "rows": rows, "roles": GOLD_ROLES,
        "role_filter": role_filter, "role_tabs": [("", "All", sum(counts.values()))]
        + [(v, label, counts.get(v, 0)) for v, label in Task.Role.choices],
    }, status=status)


