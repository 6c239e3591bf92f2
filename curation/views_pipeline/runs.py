"""Run pages: the list, the run with its live progress bar, funnel, failed chunks and snapshot, and the
progress card that htmx polls until the run finishes."""
from __future__ import annotations

from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from captionlab import roles
from captionlab.roles import role_required

from .. import charts
from ..models import Collection, FilterRun, RunChunk
from ..pipeline import executor
from ..views import render_page
from .selectors import param_items

RUNS_PER_PAGE = 50


@role_required(roles.CURATOR)
@require_GET
def run_list(request):
    runs = FilterRun.objects.select_related("pipeline", "collection", "created_by").order_by("-created_at")
    pipeline_id = request.GET.get("pipeline", "")
    if pipeline_id.isdigit():
        runs = runs.filter(pipeline_id=pipeline_id)
    collection = None
    collection_id = request.GET.get("collection", "")
    if collection_id.isdigit():  # the collection page's "Runs" link
        collection = Collection.objects.filter(pk=collection_id).first()
        runs = runs.filter(collection_id=collection_id)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "runs/list.html", {"page": page, "collection": collection})


def _duration(seconds) -> str:
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _progress_context(run: FilterRun) -> dict:
    progress = executor.progress(run)
    return {"run": run, "progress": {**progress, "eta": _duration(progress["eta_seconds"])}}


def _results_context(run: FilterRun) -> dict:
    rows = charts.funnel_rows(executor.with_warnings(run.funnel))
    links = [reverse("run-step", args=[run.pk, row["step"]]) for row in rows]
    return {
        "run": run, "funnel": rows, "warnings": [row for row in rows if row.get("warning")], "funnel_svg": charts.funnel_svg(rows, links) if rows else "",
        "failed_chunks": run.chunks.filter(status=RunChunk.Status.FAILED).order_by("index"),
        "versions": sorted((run.versions or {}).items()),
        "snapshot": [(position, step, param_items(step.get("params"))) for position, step in enumerate(run.snapshot or [])],
    }


@role_required(roles.CURATOR)
@require_GET
def run_detail(request, pk):
    """The run: live progress, then the funnel as a chart and a table, failed chunks, snapshot.
    htmx reloads the results section (funnel and failed chunks) when the progress bar says done."""
    run = get_object_or_404(FilterRun.objects.select_related("pipeline", "collection", "created_by"), pk=pk)
    context = {**_progress_context(run), **_results_context(run)}
    return render_page(request, "runs/detail.html", "runs/_results.html", context)


@role_required(roles.CURATOR)
@require_GET
def run_progress(request, pk):
    """The progress card alone, polled every second while the run is going; once finished it is
    rendered without its trigger, so the polling stops, and tells the page to load the results."""
    run = get_object_or_404(FilterRun, pk=pk)
    response = render(request, "runs/_progress.html", _progress_context(run))
    if run.finished and request.htmx:
        response["HX-Trigger"] = "run-finished"
    return response
