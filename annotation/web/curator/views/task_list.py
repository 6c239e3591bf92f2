"""The campaign's tasks page: tasks filtered by role and status, with their aggregated labels."""
from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Count, Prefetch
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.models import Aggregate, Task
from captionlab import roles
from captionlab.roles import role_required

from ._common import campaign as _campaign

TASKS_PER_PAGE = 50


@role_required(roles.CURATOR)
@require_GET
def campaign_tasks(request, pk):
    campaign = _campaign(pk)
    role = request.GET.get("role", "")
    state = request.GET.get("status", "")
    tasks = (campaign.tasks.select_related("image", "caption").order_by("position", "pk")
             .annotate(n_votes=Count("votes"))
             .prefetch_related(Prefetch("aggregates", queryset=Aggregate.objects.order_by("part", "method"))))
    if role in Task.Role.values:
        tasks = tasks.filter(role=role)
    else:
        role = ""
    if state in Task.Status.values:
        tasks = tasks.filter(status=state)
    else:
        state = ""
    page = Paginator(tasks, TASKS_PER_PAGE).get_page(request.GET.get("page"))
    for task in page:
        aggregates = list(task.aggregates.all())
        task.main_aggregates = [a for a in aggregates if a.part == ""]
        task.part_aggregates = [a for a in aggregates if a.part != ""][:12]
        task.more_parts = max(len([a for a in aggregates if a.part != ""]) - 12, 0)
    return render(request, "annotation/campaigns/tasks.html", {
        "campaign": campaign, "page": page, "role": role, "state": state,
        "roles": Task.Role.choices, "statuses": Task.Status.choices})


