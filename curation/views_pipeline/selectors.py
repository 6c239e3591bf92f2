"""What the decisions browser reads: the final outcome (override, else the filter's), the tab, reason and
score-range filters of a step's page, counts per tab and reason, and a page of decisions dressed for display."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Value
from django.db.models.functions import Coalesce, NullIf
from django.http import Http404

from ..models import FilterDecision, FilterRun, Review
from .dressing import dress
from .text_search import MAX_QUERY_CHARS, decisions_also, decisions_matching, parse_also

DECISIONS_PER_PAGE = 50
TABS = (("keep", "Kept"), ("drop", "Dropped"), ("na", "Not applicable"))
STEP_QUERY_KEYS = ("tab", "reason", "min_score", "max_score", "q", "also", "also_step", "also_outcome", "page")


def final_outcome():
    """The decision as it stands: the curator's override, else the filter's outcome."""
    return Coalesce(NullIf("override", Value("")), "outcome")


def step_or_404(run: FilterRun, step: int) -> dict:
    if not 0 <= step < len(run.snapshot or []):
        raise Http404("This run has no such step.")
    return run.snapshot[step]


def number_text(value: float) -> str:
    """A threshold as an input shows it: 8 rather than 8.0, 0.1 rather than 0.1000000001."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def param_items(params: dict) -> list[tuple[str, str]]:
    """Parameters for display: scalars as they are, lists and dicts as compact JSON."""
    return [(key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            for key, value in sorted((params or {}).items())]


def float_or_none(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


@dataclass
class StepFilters:
    """What the decisions browser shows: a tab (final outcome), a reason, a score range, a caption search
    (``q``) and outcomes at other steps (``also``: "5:keep,2:drop", or ``also_step`` and ``also_outcome``)."""

    tab: str = "drop"
    reason: str | None = None
    min_score: float | None = None
    max_score: float | None = None
    raw: dict = field(default_factory=dict)
    q: str = ""
    also: list = field(default_factory=list)  # [(step, outcome)], 0-based steps
    errors: list = field(default_factory=list)

    @classmethod
    def parse(cls, query) -> "StepFilters":
        tab = query.get("tab", "drop")
        if tab not in dict(TABS):
            tab = "drop"
        reason = query.get("reason")
        q = " ".join((query.get("q") or "").split())
        errors = []
        if len(q) > MAX_QUERY_CHARS:
            errors.append(f"The search is limited to {MAX_QUERY_CHARS} characters; it was cut there.")
            q = q[:MAX_QUERY_CHARS]
        also, also_errors = parse_also(query.get("also") or "", (query.get("also_step"), query.get("also_outcome")))
        return cls(tab=tab, reason=reason if reason is not None and len(reason) <= 60 else None,
                   min_score=float_or_none(query.get("min_score")), max_score=float_or_none(query.get("max_score")),
                   raw={k: query.get(k) for k in STEP_QUERY_KEYS if query.get(k) not in (None, "")},
                   q=q, also=also, errors=errors + also_errors)

    def narrow(self, run: FilterRun, step: int, decisions):
        """The search and the other steps' outcomes applied (not the tab, reason or score range)."""
        if self.also:
            valid = [(other, outcome) for other, outcome in self.also if other < len(run.snapshot) and other != step]
            for other, _ in self.also:
                if (other, _) not in valid:
                    message = (f"Step {other + 1} is this step." if other == step
                               else f"This run has no step {other + 1}.")
                    if message not in self.errors:
                        self.errors.append(message)
            decisions = decisions_also(decisions, run, step, valid)
        if self.q:
            decisions = decisions_matching(decisions, run, self.q)
        return decisions

    def scores(self, decisions):
        if self.min_score is not None:
            decisions = decisions.filter(score__gte=self.min_score)
        if self.max_score is not None:
            decisions = decisions.filter(score__lte=self.max_score)
        return decisions

    def query(self, **changes) -> str:
        """The query string of these filters with some changed (None removes a key)."""
        values = {**self.raw, **changes}
        return urlencode({k: v for k, v in values.items() if v is not None and v != ""})


def step_decisions(run: FilterRun, step: int):
    return FilterDecision.objects.filter(run=run, step=step)


def tab_counts(run: FilterRun, step: int, filters: StepFilters | None = None) -> dict[str, int]:
    decisions = step_decisions(run, step)
    if filters is not None:
        decisions = filters.narrow(run, step, decisions)
    counts = dict(decisions.annotate(final=final_outcome()).values("final")
                  .annotate(n=Count("pk")).values_list("final", "n"))
    return {value: counts.get(value, 0) for value, _ in TABS}


def reason_chips(run: FilterRun, step: int, filters: StepFilters) -> list[tuple[str, int]]:
    rows = (filters.scores(filters.narrow(run, step, step_decisions(run, step))).annotate(final=final_outcome())
            .filter(final=filters.tab)
            .values("reason").annotate(n=Count("pk")).order_by("-n", "reason"))
    return [(row["reason"], row["n"]) for row in rows]


def decisions_page(run: FilterRun, step: int, filters: StepFilters, page_number):
    decisions = filters.narrow(run, step, step_decisions(run, step))
    decisions = filters.scores(decisions).annotate(final=final_outcome()).filter(final=filters.tab)
    if filters.reason is not None:
        decisions = decisions.filter(reason=filters.reason)
    decisions = decisions.select_related("image", "caption").prefetch_related(
        Prefetch("reviews", queryset=Review.objects.select_related("user").order_by("-created_at", "-pk"))
    ).order_by("pk")
    page = Paginator(decisions, DECISIONS_PER_PAGE).get_page(page_number)
    transform = bool(run.snapshot[step].get("transform"))
    seen = texts_seen(run, step, [d.caption_id for d in page.object_list if d.caption_id])
    for decision in page.object_list:
        dress(decision, transform, seen.get(decision.caption_id))
    return page


def texts_seen(run: FilterRun, step: int, caption_ids: list[int]) -> dict[int, str]:
    """The text each caption had when it reached ``step``: the output of the last earlier transform
    that changed it (captions no transform changed are absent)."""
    if not caption_ids or step == 0:
        return {}
    rows = (FilterDecision.objects.filter(run=run, step__lt=step, caption_id__in=caption_ids)
            .exclude(text_after="").order_by("step").values_list("caption_id", "text_after", "text_before"))
    return {caption_id: after for caption_id, after, before in rows if after != before}
