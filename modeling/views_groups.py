"""Run groups on the pages: a group's page (its runs, mean ± sd of every metric) and the comparison of two
groups on the compare page (modeling/groups.py does the statistics; these views only parse and render)."""
from __future__ import annotations

from django.db.models import Count, Min
from django.http import Http404
from django.shortcuts import render

from captionlab.roles import role_required

from . import groups
from .models import TrainingRun

MAX_GROUPS_LISTED = 100


def group_choices():
    """Every run group, newest first: [{group, runs, done}] (done: its finished runs)."""
    rows = (TrainingRun.objects.exclude(group="").values("group")
            .annotate(runs=Count("pk"), first=Min("pk")).order_by("-first")[:MAX_GROUPS_LISTED])
    done = dict(TrainingRun.objects.exclude(group="").filter(status=TrainingRun.Status.DONE)
                .values("group").annotate(n=Count("pk")).values_list("group", "n"))
    return [{"group": r["group"], "runs": r["runs"], "done": done.get(r["group"], 0)} for r in rows]


@role_required("curator")
def group_detail(request, group):
    runs = list(groups.group_runs(group))
    if not runs:
        raise Http404("No such run group.")
    finished = [r for r in runs if r.status == TrainingRun.Status.DONE]
    return render(request, "modeling/group_detail.html", {
        "group": group, "runs": runs, "finished": len(finished), "summary": groups.group_summary(runs),
        "retrieval": groups.retrieval_summary(finished),
        "first": runs[0], "others": [g for g in group_choices() if g["group"] != group],
    })


def compare_context(params) -> dict:
    """The compare page's group part: the pick lists, and with ?group_a=&group_b= the comparison."""
    context = {"group_choices": group_choices(), "group_a": params.get("group_a", ""),
               "group_b": params.get("group_b", "")}
    a, b = context["group_a"], context["group_b"]
    if a and b:
        runs_a, runs_b = list(groups.group_runs(a)), list(groups.group_runs(b))
        if not runs_a or not runs_b:
            context["group_error"] = f"No run group {a if not runs_a else b!r}."
        else:
            context["group_comparison"] = groups.compare_groups(runs_a, runs_b)
    return context
