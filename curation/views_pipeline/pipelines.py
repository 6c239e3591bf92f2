"""Pipeline pages: the list (presets created on the first visit) with a form for a new one, the editor
that saves through ``services.pipeline_save``, and starting a run through ``services.run_create``."""
from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from captionlab import roles
from captionlab.roles import role_required

from .. import services
from ..errors import IngestError
from ..models import Collection, Pipeline
from ..pipeline.presets import ensure_presets
from ..views import render_page
from .editor import apply_op, catalogue, number, step_from_stored, steps_from_post

PIPELINES_PER_PAGE = 50


@role_required(roles.CURATOR)
def pipeline_list(request):
    """The pipelines (the seeds' presets are created on the first visit) and a form for a new one."""
    ensure_presets()
    error, status = "", 200
    if request.method == "POST":
        name, first = request.POST.get("name", ""), request.POST.get("filter", "")
        try:
            pipeline = services.pipeline_save(name=name, steps=[{"filter": first}] if first else [], user=request.user)
        except IngestError as exc:
            error, status = exc.message, 400
        else:
            messages.success(request, f"Pipeline “{pipeline.name}” created: add its steps.")
            return redirect(pipeline)
    pipelines = Pipeline.objects.annotate(run_count=Count("runs")).order_by("name")
    context = {"page": Paginator(pipelines, PIPELINES_PER_PAGE).get_page(request.GET.get("page")),
               "catalogue": catalogue(), "error": error, "posted": request.POST}
    return render(request, "pipelines/list.html", context, status=status)


def _editor_context(pipeline, steps, **extra) -> dict:
    return {"pipeline": pipeline, "steps": number(steps), "catalogue": catalogue(),
            "collections": Collection.objects.order_by("name").only("pk", "name"),
            "runs": pipeline.runs.select_related("collection").order_by("-created_at")[:8],
            "name": pipeline.name, "description": pipeline.description, "new_name": f"{pipeline.name} (copy)",
            "error": "", "dirty": False, "run_error": "", **extra}


@role_required(roles.CURATOR)
def pipeline_detail(request, pk):
    """The editor: the steps with their parameters; add, remove, move, save, save as new.

    Every button posts the whole form. Moving, adding and removing answer with the edited (unsaved)
    steps; saving calls ``pipeline_save`` and shows its errors next to the steps.
    """
    pipeline = get_object_or_404(Pipeline, pk=pk)
    if request.method != "POST":
        steps = [step_from_stored(step) for step in pipeline.steps or []]
        return render_page(request, "pipelines/detail.html", "pipelines/_editor.html", _editor_context(pipeline, steps))
    steps = steps_from_post(request.POST)
    op = request.POST.get("op", "save")
    name = request.POST.get("name", pipeline.name).strip()
    description = request.POST.get("description", pipeline.description)
    new_name = request.POST.get("new_name", "").strip() or f"{name} (copy)"
    error = "" if op in ("save", "save_new") else apply_op(steps, op, request.POST.get("new_filter", ""))
    context = _editor_context(pipeline, steps, name=name, description=description, new_name=new_name, dirty=True,
                              error=error)
    if op in ("save", "save_new"):
        if any(step.errors for step in steps):
            context["error"] = "Some parameters are not valid: see the marked fields."
        else:
            try:
                saved = services.pipeline_save(
                    name=new_name if op == "save_new" else name, steps=[step.as_step() for step in steps],
                    description=description, pipeline=None if op == "save_new" else pipeline, user=request.user)
            except IngestError as exc:
                context["error"] = exc.message
            else:
                messages.success(request, f"Saved “{saved.name}”." if op == "save" else f"Saved as the new pipeline “{saved.name}”.")
                if request.htmx:
                    return HttpResponseClientRedirect(saved.get_absolute_url())
                return redirect(saved)
    failed = bool(context["error"]) and not request.htmx  # htmx swaps only 2xx answers
    return render_page(request, "pipelines/detail.html", "pipelines/_editor.html", context, status=400 if failed else 200)


@role_required(roles.CURATOR)
@require_POST
def pipeline_run(request, pk):
    """Start a run of the saved pipeline on a collection, then show its page."""
    pipeline = get_object_or_404(Pipeline, pk=pk)
    chosen = request.POST.get("collection", "")
    collection = Collection.objects.filter(pk=chosen).first() if chosen.isdigit() else None
    error = "Choose a collection to run the pipeline on." if collection is None else ""
    if collection is not None:
        try:
            run = services.run_create(collection=collection, pipeline=pipeline, user=request.user)
        except IngestError as exc:
            error = exc.message
        else:
            return redirect(run)
    steps = [step_from_stored(step) for step in pipeline.steps or []]
    return render(request, "pipelines/detail.html", _editor_context(pipeline, steps, run_error=error), status=400)
