"""Duplicate clusters of a semantic-duplicates step as groups, each with keep-one / keep-all actions.

The page lists a step's clusters (``clusters.cluster_page``); the actions post to ``cluster_keep``, which
records overrides through ``services.decisions_override``. htmx swaps the one cluster with the answer; a plain
form goes back to the page.
"""
from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from captionlab import roles
from captionlab.roles import role_required

from . import clusters
from .errors import IngestError
from .models import FilterRun
from .views import render_page


def _run_step(pk: int, step: int) -> tuple[FilterRun, dict]:
    run = get_object_or_404(FilterRun.objects.select_related("pipeline", "collection"), pk=pk)
    if not 0 <= step < len(run.snapshot or []):
        raise Http404("This run has no such step.")
    return run, run.snapshot[step]


@role_required(roles.CURATOR)
@require_GET
def run_step_clusters(request, pk, step):
    """A page of the step's duplicate clusters, largest first."""
    run, snapshot = _run_step(pk, step)
    if not clusters.is_cluster_step(snapshot):
        raise Http404("This step does not group duplicates into clusters.")
    page = clusters.cluster_page(run, step, request.GET.get("page"))
    context = {"run": run, "step": step, "snapshot": snapshot, "page": page, "clusters": page.clusters,
               "target": clusters.member_target(snapshot), "pairs_campaign_url": clusters.pairs_campaign_url(run, step)}
    return render_page(request, "runs/clusters.html", "runs/_cluster_list.html", context)


@role_required(roles.CURATOR)
@require_POST
def cluster_keep(request, pk, step, cluster):
    """Keep one member (the chosen one) and drop the rest, or keep them all."""
    run, snapshot = _run_step(pk, step)
    member = request.POST.get("member", "")
    error = ""
    try:
        found = clusters.cluster_keep(run=run, step=step, cluster=cluster, keep=request.POST.get("keep", ""),
                                      member_id=int(member) if member.isdigit() else None,
                                      note=request.POST.get("note", "")[:2000], user=request.user)
    except IngestError as exc:
        if exc.code == "not_found":
            raise Http404(exc.message) from None
        error, found = exc.message, None
    if not request.htmx:
        (messages.error if error else messages.success)(request, error or f"Cluster {cluster}: saved.")
        return HttpResponseRedirect(reverse("run-step-clusters", args=[run.pk, step]) + f"#cluster-{cluster}")
    if found is None:
        found = next(iter(clusters.clusters_by_id(run, step, [cluster])), None)
    context = {"run": run, "step": step, "cluster": found, "target": clusters.member_target(snapshot),
               "cluster_error": error}
    return render(request, "runs/_cluster.html", context)
