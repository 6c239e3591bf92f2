"""One step's decisions page: tabs by final outcome, reason chips, score range, a page of decisions and
the histogram above them."""
from __future__ import annotations

from urllib.parse import urlencode

from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.http import require_GET

from captionlab import roles
from captionlab.roles import role_required

from ..clusters import is_cluster_step
from ..models import FilterDecision, FilterRun
from ..pipeline import executor
from ..views import render_page
from .editor import filter_class
from .histogram import histogram_context
from .selectors import TABS, StepFilters, decisions_page, param_items, reason_chips, step_or_404, tab_counts


def tabs(run: FilterRun, step: int, filters: StepFilters) -> list[tuple]:
    """(value, label, count, query) per outcome tab; a tab keeps the score range, not the reason."""
    counts = tab_counts(run, step, filters)
    return [(value, label, counts[value], filters.query(tab=value, reason=None, page=None)) for value, label in TABS]


UNCERTAIN_REASON = "uncertain_rewrite"


def _verify_link(run: FilterRun, step: int, snapshot: dict) -> tuple[int, str]:
    """(uncertain rewrites of a hypernymize step, the campaign form pre-filled to send them to annotators)."""
    if snapshot.get("filter") != "hypernymize":
        return 0, ""
    n = (FilterDecision.objects.filter(run=run, step=step, reason=UNCERTAIN_REASON, caption__isnull=False)
         .exclude(text_after="").count())
    if not n:
        return 0, ""
    query = urlencode({"kind": "verify_rewrite", "collection": run.collection_id, "run": run.pk, "step": step,
                       "reason": UNCERTAIN_REASON, "name": f"Verify rewrites of run #{run.pk}"})
    return n, f"{reverse('campaign-create')}?{query}"


def step_context(run: FilterRun, step: int, filters: StepFilters, page_number) -> dict:
    snapshot = step_or_404(run, step)
    page = decisions_page(run, step, filters, page_number)
    reasons = [(reason, count, filters.query(reason=reason, page=None), reason == filters.reason)
               for reason, count in reason_chips(run, step, filters)]
    return {
        "run": run, "step": step, "snapshot": snapshot, "filter_class": filter_class(snapshot["filter"]),
        "has_clusters": is_cluster_step(snapshot),
        "params": param_items(snapshot.get("params")),
        "filters": filters, "tabs": tabs(run, step, filters),
        "reasons": reasons, "all_reasons_query": filters.query(reason=None, page=None),
        "clear_range_query": filters.query(min_score=None, max_score=None, page=None),
        "clear_search_query": filters.query(q=None, also=None, also_step=None, also_outcome=None, page=None),
        "page": page, "steps": list(enumerate(run.snapshot)), "outcome_choices": TABS, "return_query": filters.query(),
        "prev_query": filters.query(page=page.previous_page_number()) if page.has_previous() else "",
        "next_query": filters.query(page=page.next_page_number()) if page.has_next() else "",
        "verify": _verify_link(run, step, snapshot),
    }


@role_required(roles.CURATOR)
@require_GET
def run_step(request, pk, step):
    """One step's decisions: tabs by final outcome, reason chips, score range, 50 a page, each with
    its image, texts, score, details and override buttons; the score histogram above them."""
    run = get_object_or_404(FilterRun.objects.select_related("pipeline", "collection"), pk=pk)
    filters = StepFilters.parse(request.GET)
    context = step_context(run, step, filters, request.GET.get("page"))
    if not (request.htmx and not request.htmx.boosted):
        context.update(histogram_context(run, step, request.GET))
        context["step_warning"] = next((row["warning"] for row in executor.with_warnings(run.funnel)
                                        if row["step"] == step), "")
    return render_page(request, "runs/step.html", "runs/_decisions.html", context)
