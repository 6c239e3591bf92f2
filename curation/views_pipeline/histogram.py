"""A step's score histogram with its thresholds, and what other thresholds would change (what-if)."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from captionlab import roles
from captionlab.roles import role_required

from .. import charts
from ..models import FilterRun
from ..pipeline import registry
from ..views import render_page
from .selectors import float_or_none, number_text, step_decisions, step_or_404

HISTOGRAM_BINS = 30


def _score_thresholds(filter_name: str) -> tuple[str, ...]:
    try:
        return registry.get(filter_name).score_thresholds
    except KeyError:  # a filter no longer installed: its histogram has no thresholds to move
        return ()


def _cutoffs(run: FilterRun, step: int, snapshot: dict, current: dict[str, float]) -> dict[str, float]:
    """{label: score} of the cut-offs an alignment step computed besides its threshold (the run's top-k% and
    the one calibrated on judged captions), as its decisions recorded them; the threshold itself when the
    chart does not draw it already. Other steps have none."""
    if snapshot.get("filter") != "alignment":
        return {}
    recorded = (step_decisions(run, step).filter(details__cutoffs__isnull=False).order_by("pk")
                .values_list("details__cutoffs", flat=True).first())
    if not isinstance(recorded, dict):
        return {}
    params = snapshot.get("params") or {}
    labels = {"top_percent": f"top {number_text(params.get('top_percent', 0))}%", "calibrated": "calibrated"}
    if "min_score" not in current:
        labels["threshold"] = "threshold"
    return {label: float(recorded[key]) for key, label in labels.items()
            if isinstance(recorded.get(key), (int, float)) and not isinstance(recorded.get(key), bool)}


def histogram_context(run: FilterRun, step: int, query) -> dict:
    """The step's score histogram with its thresholds, and what other thresholds would change."""
    snapshot = step_or_404(run, step)
    decisions = step_decisions(run, step)
    # The bounds the decisions were cut at: a bound computed when the step ran (informativeness's
    # percentile of its fitted corpus) is read from the decisions' details, with a note saying so.
    current, notes = charts.thresholds_used(snapshot.get("params") or {}, _score_thresholds(snapshot["filter"]),
                                            decisions)
    proposed, errors = {}, {}
    for name, value in current.items():
        text = query.get(f"th_{name}")
        if text in (None, ""):
            proposed[name] = value
        elif (number := float_or_none(text)) is None:
            proposed[name], errors[name] = value, "Enter a number."
        else:
            proposed[name] = number
    histogram = charts.score_histogram(decisions, current, bins=HISTOGRAM_BINS)
    histogram.notes = notes
    changed = proposed != current
    cutoffs = _cutoffs(run, step, snapshot, current)
    return {
        "run": run, "step": step, "histogram": histogram, "cutoffs": sorted(cutoffs.items()),
        "histogram_svg": charts.histogram_svg(histogram, proposed, cutoffs=cutoffs),
        "thresholds": [(name, number_text(value), query.get(f"th_{name}") if name in errors else number_text(proposed[name]),
                        errors.get(name, "")) for name, value in sorted(current.items())],
        "what_if": charts.what_if(decisions, current, proposed) if changed else None,
    }


@role_required(roles.CURATOR)
@require_GET
def run_step_histogram(request, pk, step):
    """The histogram alone, re-rendered as the what-if thresholds move."""
    run = get_object_or_404(FilterRun.objects.select_related("pipeline", "collection"), pk=pk)
    context = histogram_context(run, step, request.GET)
    context["snapshot"] = run.snapshot[step]
    return render_page(request, "runs/histogram.html", "runs/_histogram_chart.html", context)
