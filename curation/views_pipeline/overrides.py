"""Curator overrides from the decisions browser: one decision (htmx swaps its row) or the selected ones,
through ``services.decision_override`` / ``services.decisions_override``."""
from __future__ import annotations

from django.contrib import messages
from django.db.models import Prefetch
from django.http import HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_POST

from captionlab import roles
from captionlab.roles import role_required

from .. import services
from ..errors import IngestError
from ..models import FilterDecision, FilterRun, Review
from ..views import render_page
from .dressing import dress
from .selectors import StepFilters, final_outcome, step_or_404, texts_seen
from .steps import step_context, tabs


def _back_to_step(run: FilterRun, step: int, return_query: str, anchor: str = "") -> HttpResponseRedirect:
    filters = StepFilters.parse(QueryDict(return_query or ""))
    query = filters.query()
    url = reverse("run-step", args=[run.pk, step]) + (f"?{query}" if query else "") + (f"#{anchor}" if anchor else "")
    return HttpResponseRedirect(url)


@role_required(roles.CURATOR)
@require_POST
def decision_override(request, pk):
    """Keep or drop one decision with an optional note. htmx gets the row back, with the outcome
    tabs swapped out of band so their counts follow; a plain form goes back to the list."""
    decision = get_object_or_404(FilterDecision.objects.select_related("run"), pk=pk)
    outcome = request.POST.get("outcome", "")
    return_query = request.POST.get("return_query", "")
    try:
        services.decision_override(decision=decision, outcome=outcome, note=request.POST.get("note", "")[:2000],
                                   user=request.user)
    except IngestError as exc:
        if not request.htmx:
            messages.error(request, exc.message)
            return _back_to_step(decision.run, decision.step, return_query, f"decision-{decision.pk}")
        row_error = exc.message
    else:
        row_error = ""
        if not request.htmx:
            messages.success(request, f"Decision {decision.pk}: {outcome}.")
            return _back_to_step(decision.run, decision.step, return_query, f"decision-{decision.pk}")
    run = decision.run
    filters = StepFilters.parse(QueryDict(return_query))
    decision = (FilterDecision.objects.select_related("image", "caption")
                .prefetch_related(Prefetch("reviews", queryset=Review.objects.select_related("user")
                                           .order_by("-created_at", "-pk")))
                .annotate(final=final_outcome()).get(pk=decision.pk))
    seen = texts_seen(run, decision.step, [decision.caption_id] if decision.caption_id else [])
    dress(decision, bool(run.snapshot[decision.step].get("transform")), seen.get(decision.caption_id))
    context = {"run": run, "step": decision.step, "decision": decision, "row_error": row_error,
               "filters": filters, "return_query": filters.query(),
               "tabs": tabs(run, decision.step, filters), "oob": True}
    response = render(request, "runs/_decision_row.html", context)
    patch_vary_headers(response, ("HX-Request",))
    return response


@role_required(roles.CURATOR)
@require_POST
def step_overrides(request, pk, step):
    """Keep or drop the selected decisions of a step (or all on the page) with one note."""
    run = get_object_or_404(FilterRun, pk=pk)
    step_or_404(run, step)
    return_query = request.POST.get("return_query", "")
    chosen = request.POST.getlist("page_ids") if request.POST.get("all_on_page") else request.POST.getlist("ids")
    ids = {int(v) for v in chosen if v.isdigit()}
    decisions = list(FilterDecision.objects.filter(run=run, step=step, pk__in=ids).select_related("run"))
    outcome = request.POST.get("outcome", "")
    error = ""
    if not decisions:
        error = "Select some decisions first (or “select all on this page”)."
    else:
        try:
            count = services.decisions_override(decisions=decisions, outcome=outcome,
                                                note=request.POST.get("note", "")[:2000], user=request.user)
        except IngestError as exc:
            error = exc.message
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, f"{count} decision{'s' if count != 1 else ''} set to {outcome}.")
        return _back_to_step(run, step, return_query)
    filters = StepFilters.parse(QueryDict(return_query))
    context = step_context(run, step, filters, filters.raw.get("page"))
    context["bulk_error"] = error
    context["bulk_done"] = "" if error else f"{count} decision{'s' if count != 1 else ''} set to {outcome}."
    return render_page(request, "runs/step.html", "runs/_decisions.html", context)
