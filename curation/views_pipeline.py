"""Curator review pages of the curation pipeline: pipelines and their editor, runs with a live
progress bar and the funnel, each step's decisions with overrides, and score histograms.

Views are thin: they parse, check the role, call one service (``pipeline_save``, ``run_create``,
``decision_override``, ``decisions_override``) or read through the selectors below, and render.
A view that htmx also calls answers with its fragment for htmx requests and the page otherwise
(``_render``). Every form works without JavaScript; htmx only saves the page reloads.
"""
from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Value
from django.db.models.functions import Coalesce, NullIf
from django.http import Http404, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from captionlab import roles
from captionlab.roles import role_required

from . import charts, services
from .errors import IngestError
from .models import Collection, FilterDecision, FilterRun, Pipeline, Review, RunChunk
from .pipeline import executor, registry
from .pipeline.presets import ensure_presets
from .views import _render

PIPELINES_PER_PAGE = 50
RUNS_PER_PAGE = 50
DECISIONS_PER_PAGE = 50
HISTOGRAM_BINS = 30
MAX_SHOWN_CHARS = 2000  # longer texts are cut on the page (a 1 MB caption stays readable)
MAX_DIFF_CHARS = 5000  # difflib is quadratic: longer texts are shown without a diff
TABS = (("keep", "Kept"), ("drop", "Dropped"), ("na", "Not applicable"))
STEP_QUERY_KEYS = ("tab", "reason", "min_score", "max_score", "page")


# --- The filter catalogue and the step editor -----------------------------------------------------


def _catalogue() -> list:
    """The filters a curator can add: every registered filter but the tests' own."""
    return sorted((cls for name, cls in registry.load_all().items() if not name.startswith("test_")),
                  key=lambda cls: (cls.target, cls.label or cls.name))


def _filter_class(name: str):
    try:
        return registry.get(name)
    except KeyError:
        return None


def _kind(default) -> str:
    """How a parameter is edited, from the type of its default value."""
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, str):
        return "text"
    if default is None:
        return "optional"
    if isinstance(default, (list, tuple)) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                  for v in default):
        return "lines"
    return "json"


def _display(kind: str, value):
    if kind == "bool":
        return bool(value)
    if value is None:
        return ""
    if kind in ("int", "float", "text") and isinstance(value, (str, int, float)):
        return str(value)
    if kind == "lines" and isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    if kind == "optional" and isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@dataclass
class ParamField:
    key: str
    kind: str
    default: object
    shown: object  # what the input shows: the submitted text, or the stored value formatted
    value: object = None
    error: str = ""
    name: str = ""

    @property
    def rows(self) -> int:
        return min(max(str(self.shown).count("\n") + 2, 2), 12)

    @property
    def default_text(self) -> str:
        if self.kind == "bool":
            return "on" if self.default else "off"
        if self.default is None or self.default == "" or self.default == [] or self.default == {}:
            return "empty"
        if self.kind == "lines":
            return ", ".join(str(v) for v in self.default)
        if self.kind == "json":
            return json.dumps(self.default, ensure_ascii=False)
        return str(self.default)


@dataclass
class EditorStep:
    filter: str
    cls: object  # the filter class, None when the filter is not installed
    enabled: bool = True
    fields: list[ParamField] = field(default_factory=list)
    raw: str = ""  # the parameters as JSON, for a filter that is not installed
    raw_error: str = ""
    prefix: str = ""

    @property
    def errors(self) -> bool:
        return bool(self.raw_error or any(f.error for f in self.fields))

    def as_step(self) -> dict:
        """The step as stored: only the parameters that differ from the filter's defaults."""
        if self.cls is None:
            try:
                params = json.loads(self.raw or "{}")
            except ValueError:
                params = {}
        else:
            params = {f.key: f.value for f in self.fields if f.value != f.default}
        step = {"filter": self.filter}
        if params:
            step["params"] = params
        if not self.enabled:
            step["enabled"] = False
        return step


def _step_from_stored(step: dict) -> EditorStep:
    name = step.get("filter", "") if isinstance(step, dict) else ""
    cls = _filter_class(name)
    params = (step.get("params") or {}) if isinstance(step, dict) else {}
    editor = EditorStep(filter=name, cls=cls, enabled=step.get("enabled", True) if isinstance(step, dict) else True)
    if cls is None:
        editor.raw = json.dumps(params, indent=2, ensure_ascii=False)
        return editor
    for key, default in cls.defaults.items():
        kind = _kind(default)
        value = params.get(key, default)
        editor.fields.append(ParamField(key=key, kind=kind, default=default, shown=_display(kind, value), value=value))
    return editor


def _parse(kind: str, default, text: str):
    """The value of one submitted parameter; raises ValueError with a message for the curator."""
    raw, text = text, text.strip()
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ValueError("Enter a whole number.") from None
    if kind == "float":
        try:
            value = float(text)
        except ValueError:
            raise ValueError("Enter a number.") from None
        if not math.isfinite(value):
            raise ValueError("Enter a finite number.")
        return value
    if kind == "text":
        return text
    if kind == "optional":
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text
    if kind == "lines":
        # Lines keep their spaces (a boilerplate pattern may end with one); blank lines go.
        lines = [line for line in raw.splitlines() if line.strip()]
        item_type = type(default[0]) if default else str
        if item_type in (int, float):
            try:
                return [item_type(line) for line in lines]
            except ValueError:
                raise ValueError(f"Each line must be a {'whole ' if item_type is int else ''}number.") from None
        return lines
    try:
        value = json.loads(text) if text else default
    except ValueError as exc:
        raise ValueError(f"Not valid JSON: {exc}") from None
    if isinstance(default, dict) and not isinstance(value, dict):
        raise ValueError("Enter a JSON object: {\"key\": value, …}.")
    if isinstance(default, list) and not isinstance(value, list):
        raise ValueError("Enter a JSON list: [value, …].")
    return value


def _steps_from_post(post) -> list[EditorStep]:
    """The editor's steps as submitted, each parameter parsed by the type of its default."""
    try:
        count = min(int(post.get("step-count", "0")), 200)
    except ValueError:
        count = 0
    steps = []
    for i in range(count):
        prefix = f"step-{i}-"
        name = post.get(prefix + "filter", "")
        if not name:
            continue
        cls = _filter_class(name)
        step = EditorStep(filter=name, cls=cls, enabled=post.get(prefix + "enabled") == "on")
        if cls is None:
            step.raw = post.get(prefix + "params", "")
            try:
                if not isinstance(json.loads(step.raw or "{}"), dict):
                    step.raw_error = "Enter a JSON object."
            except ValueError as exc:
                step.raw_error = f"Not valid JSON: {exc}"
        else:
            for key, default in cls.defaults.items():
                kind = _kind(default)
                if kind == "bool":
                    value = post.get(prefix + key) == "on"
                    step.fields.append(ParamField(key, kind, default, shown=value, value=value))
                    continue
                text = post.get(prefix + key, _display(kind, default))
                param = ParamField(key, kind, default, shown=text)
                try:
                    param.value = _parse(kind, default, text)
                except ValueError as exc:
                    param.error, param.value = str(exc), default
                step.fields.append(param)
        steps.append(step)
    return steps


def _number(steps: list[EditorStep]) -> list[EditorStep]:
    """Give every step and parameter the input names of its current position."""
    for i, step in enumerate(steps):
        step.prefix = f"step-{i}-"
        for param in step.fields:
            param.name = step.prefix + param.key
    return steps


def _apply_op(steps: list[EditorStep], op: str, new_filter: str) -> str:
    """Add, remove or move a step in place; returns an error message or ""."""
    action, _, index = op.partition(":")
    if action == "add":
        cls = _filter_class(new_filter)
        if cls is None:
            return "Choose a filter to add."
        steps.append(_step_from_stored({"filter": cls.name}))
        return ""
    try:
        i = int(index)
    except ValueError:
        return ""
    if not 0 <= i < len(steps):
        return ""
    if action == "remove":
        steps.pop(i)
    elif action == "up" and i > 0:
        steps[i - 1], steps[i] = steps[i], steps[i - 1]
    elif action == "down" and i < len(steps) - 1:
        steps[i + 1], steps[i] = steps[i], steps[i + 1]
    return ""


# --- Selectors ---------------------------------------------------------------------------------


def _final():
    """The decision as it stands: the curator's override, else the filter's outcome."""
    return Coalesce(NullIf("override", Value("")), "outcome")


def _step_or_404(run: FilterRun, step: int) -> dict:
    if not 0 <= step < len(run.snapshot or []):
        raise Http404("This run has no such step.")
    return run.snapshot[step]


def _number_text(value: float) -> str:
    """A threshold as an input shows it: 8 rather than 8.0, 0.1 rather than 0.1000000001."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def _param_items(params: dict) -> list[tuple[str, str]]:
    """Parameters for display: scalars as they are, lists and dicts as compact JSON."""
    return [(key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
            for key, value in sorted((params or {}).items())]


def _float_or_none(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


@dataclass
class StepFilters:
    """What the decisions browser shows: a tab (final outcome), a reason, a score range."""

    tab: str = "drop"
    reason: str | None = None
    min_score: float | None = None
    max_score: float | None = None
    raw: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, query) -> "StepFilters":
        tab = query.get("tab", "drop")
        if tab not in dict(TABS):
            tab = "drop"
        reason = query.get("reason")
        return cls(tab=tab, reason=reason if reason is not None and len(reason) <= 60 else None,
                   min_score=_float_or_none(query.get("min_score")), max_score=_float_or_none(query.get("max_score")),
                   raw={k: query.get(k) for k in STEP_QUERY_KEYS if query.get(k) not in (None, "")})

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


def _step_decisions(run: FilterRun, step: int):
    return FilterDecision.objects.filter(run=run, step=step)


def _tab_counts(run: FilterRun, step: int) -> dict[str, int]:
    counts = dict(_step_decisions(run, step).annotate(final=_final()).values("final")
                  .annotate(n=Count("pk")).values_list("final", "n"))
    return {value: counts.get(value, 0) for value, _ in TABS}


def _reason_chips(run: FilterRun, step: int, filters: StepFilters) -> list[tuple[str, int]]:
    rows = (filters.scores(_step_decisions(run, step)).annotate(final=_final()).filter(final=filters.tab)
            .values("reason").annotate(n=Count("pk")).order_by("-n", "reason"))
    return [(row["reason"], row["n"]) for row in rows]


def _decisions_page(run: FilterRun, step: int, filters: StepFilters, page_number):
    decisions = filters.scores(_step_decisions(run, step)).annotate(final=_final()).filter(final=filters.tab)
    if filters.reason is not None:
        decisions = decisions.filter(reason=filters.reason)
    decisions = decisions.select_related("image", "caption").prefetch_related(
        Prefetch("reviews", queryset=Review.objects.select_related("user").order_by("-created_at", "-pk"))
    ).order_by("pk")
    page = Paginator(decisions, DECISIONS_PER_PAGE).get_page(page_number)
    transform = bool(run.snapshot[step].get("transform"))
    seen = _texts_seen(run, step, [d.caption_id for d in page.object_list if d.caption_id])
    for decision in page.object_list:
        _dress(decision, transform, seen.get(decision.caption_id))
    return page


def _texts_seen(run: FilterRun, step: int, caption_ids: list[int]) -> dict[int, str]:
    """The text each caption had when it reached ``step``: the output of the last earlier transform
    that changed it (captions no transform changed are absent)."""
    if not caption_ids or step == 0:
        return {}
    rows = (FilterDecision.objects.filter(run=run, step__lt=step, caption_id__in=caption_ids)
            .exclude(text_after="").order_by("step").values_list("caption_id", "text_after", "text_before"))
    return {caption_id: after for caption_id, after, before in rows if after != before}


# --- Showing a decision ------------------------------------------------------------------------


def _cut(text: str) -> tuple[str, int]:
    return (text, 0) if len(text) <= MAX_SHOWN_CHARS else (text[:MAX_SHOWN_CHARS], len(text) - MAX_SHOWN_CHARS)


def _spans(spans, text: str) -> list[tuple[int, int]] | None:
    """Removed character spans, sorted and merged, or None where they do not fit the text."""
    try:
        pairs = sorted((int(a), int(b)) for a, b in spans)
    except (TypeError, ValueError):
        return None
    merged: list[tuple[int, int]] = []
    for start, end in pairs:
        if not 0 <= start < end <= len(text):
            return None
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged or None


def _struck(text: str, spans: list[tuple[int, int]]) -> list[tuple[str, str]]:
    parts, at = [], 0
    for start, end in spans:
        if start > at:
            parts.append((text[at:start], ""))
        parts.append((text[start:end], "del"))
        at = end
    if at < len(text):
        parts.append((text[at:], ""))
    return parts


def _word_diff(before: str, after: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Both texts cut into (text, "" | "del" | "ins") parts by a word-level diff."""
    a, b = re.findall(r"\s+|[^\s]+", before), re.findall(r"\s+|[^\s]+", after)
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            left.append(("".join(a[i1:i2]), ""))
            right.append(("".join(b[j1:j2]), ""))
            continue
        if i2 > i1:
            left.append(("".join(a[i1:i2]), "del"))
        if j2 > j1:
            right.append(("".join(b[j1:j2]), "ins"))
    return left, right


def _dress(decision: FilterDecision, transform: bool, seen: str | None = None) -> None:
    """Attach what the row shows: texts cut into parts, compact details, the latest review.

    A transform's row pairs the raw text (removed spans struck through, or a word diff) with its
    output; another step's row pairs the raw text with the text the step saw, when an earlier
    transform changed it.
    """
    raw = decision.caption.text if decision.caption_id else ""
    decision.raw_text, decision.raw_more = _cut(raw)
    decision.before_parts = decision.after_parts = None
    decision.after_label = "Transformed"
    if not transform and seen is not None and seen != raw:
        decision.before_parts = [(decision.raw_text, "")]
        decision.after_parts = [(_cut(seen)[0], "")]
        decision.after_label = "As this step saw it"
    if transform and decision.caption_id and decision.text_after and decision.text_after != decision.text_before:
        spans = _spans((decision.details or {}).get("removed_spans") or [], raw)
        if spans and len(raw) <= MAX_SHOWN_CHARS * 4:
            decision.before_parts = _struck(raw, spans)
            decision.after_parts = [(decision.text_after[:MAX_SHOWN_CHARS], "")]
        elif len(decision.text_before) <= MAX_DIFF_CHARS and len(decision.text_after) <= MAX_DIFF_CHARS:
            decision.before_parts, decision.after_parts = _word_diff(decision.text_before, decision.text_after)
        else:
            decision.before_parts = [(_cut(decision.text_before)[0], "")]
            decision.after_parts = [(_cut(decision.text_after)[0], "")]
    details = {k: v for k, v in (decision.details or {}).items() if k != "removed_spans"}
    text = json.dumps(details, ensure_ascii=False, sort_keys=True, default=str) if details else ""
    decision.details_text = text if len(text) <= 300 else text[:299] + "…"
    reviews = list(decision.reviews.all())
    decision.last_review = reviews[0] if reviews else None


# --- Pipelines -----------------------------------------------------------------------------------


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
               "catalogue": _catalogue(), "error": error, "posted": request.POST}
    return render(request, "pipelines/list.html", context, status=status)


def _editor_context(pipeline, steps, **extra) -> dict:
    return {"pipeline": pipeline, "steps": _number(steps), "catalogue": _catalogue(),
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
        steps = [_step_from_stored(step) for step in pipeline.steps or []]
        return _render(request, "pipelines/detail.html", "pipelines/_editor.html", _editor_context(pipeline, steps))
    steps = _steps_from_post(request.POST)
    op = request.POST.get("op", "save")
    name = request.POST.get("name", pipeline.name).strip()
    description = request.POST.get("description", pipeline.description)
    new_name = request.POST.get("new_name", "").strip() or f"{name} (copy)"
    error = "" if op in ("save", "save_new") else _apply_op(steps, op, request.POST.get("new_filter", ""))
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
    return _render(request, "pipelines/detail.html", "pipelines/_editor.html", context, status=400 if failed else 200)


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
    steps = [_step_from_stored(step) for step in pipeline.steps or []]
    return render(request, "pipelines/detail.html", _editor_context(pipeline, steps, run_error=error), status=400)


# --- Runs ----------------------------------------------------------------------------------------


@role_required(roles.CURATOR)
@require_GET
def run_list(request):
    runs = FilterRun.objects.select_related("pipeline", "collection", "created_by").order_by("-created_at")
    pipeline_id = request.GET.get("pipeline", "")
    if pipeline_id.isdigit():
        runs = runs.filter(pipeline_id=pipeline_id)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "runs/list.html", {"page": page})


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
    rows = charts.funnel_rows(run.funnel or [])
    links = [reverse("run-step", args=[run.pk, row["step"]]) for row in rows]
    return {
        "run": run, "funnel": rows, "funnel_svg": charts.funnel_svg(rows, links) if rows else "",
        "failed_chunks": run.chunks.filter(status=RunChunk.Status.FAILED).order_by("index"),
        "versions": sorted((run.versions or {}).items()),
        "snapshot": [(position, step, _param_items(step.get("params"))) for position, step in enumerate(run.snapshot or [])],
    }


@role_required(roles.CURATOR)
@require_GET
def run_detail(request, pk):
    """The run: live progress, then the funnel as a chart and a table, failed chunks, snapshot.
    htmx reloads the results section (funnel and failed chunks) when the progress bar says done."""
    run = get_object_or_404(FilterRun.objects.select_related("pipeline", "collection", "created_by"), pk=pk)
    context = {**_progress_context(run), **_results_context(run)}
    return _render(request, "runs/detail.html", "runs/_results.html", context)


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


# --- A step's decisions --------------------------------------------------------------------------


def _tabs(run: FilterRun, step: int, filters: StepFilters) -> list[tuple]:
    """(value, label, count, query) per outcome tab; a tab keeps the score range, not the reason."""
    counts = _tab_counts(run, step)
    return [(value, label, counts[value], filters.query(tab=value, reason=None, page=None)) for value, label in TABS]


def _step_context(run: FilterRun, step: int, filters: StepFilters, page_number) -> dict:
    snapshot = _step_or_404(run, step)
    page = _decisions_page(run, step, filters, page_number)
    reasons = [(reason, count, filters.query(reason=reason, page=None), reason == filters.reason)
               for reason, count in _reason_chips(run, step, filters)]
    return {
        "run": run, "step": step, "snapshot": snapshot, "filter_class": _filter_class(snapshot["filter"]),
        "params": _param_items(snapshot.get("params")),
        "filters": filters, "tabs": _tabs(run, step, filters),
        "reasons": reasons, "all_reasons_query": filters.query(reason=None, page=None),
        "clear_range_query": filters.query(min_score=None, max_score=None, page=None),
        "page": page, "steps": list(enumerate(run.snapshot)), "return_query": filters.query(),
        "prev_query": filters.query(page=page.previous_page_number()) if page.has_previous() else "",
        "next_query": filters.query(page=page.next_page_number()) if page.has_next() else "",
    }


def _score_thresholds(filter_name: str) -> tuple[str, ...]:
    from .pipeline import registry

    try:
        return registry.get(filter_name).score_thresholds
    except KeyError:  # a filter no longer installed: its histogram has no thresholds to move
        return ()


def _histogram_context(run: FilterRun, step: int, query) -> dict:
    """The step's score histogram with its thresholds, and what other thresholds would change."""
    snapshot = _step_or_404(run, step)
    current = charts.thresholds_of(snapshot.get("params") or {}, _score_thresholds(snapshot["filter"]))
    proposed, errors = {}, {}
    for name, value in current.items():
        text = query.get(f"th_{name}")
        if text in (None, ""):
            proposed[name] = value
        elif (number := _float_or_none(text)) is None:
            proposed[name], errors[name] = value, "Enter a number."
        else:
            proposed[name] = number
    decisions = _step_decisions(run, step)
    histogram = charts.score_histogram(decisions, current, bins=HISTOGRAM_BINS)
    changed = proposed != current
    return {
        "run": run, "step": step, "histogram": histogram, "histogram_svg": charts.histogram_svg(histogram, proposed),
        "thresholds": [(name, _number_text(value), query.get(f"th_{name}") if name in errors else _number_text(proposed[name]),
                        errors.get(name, "")) for name, value in sorted(current.items())],
        "what_if": charts.what_if(decisions, current, proposed) if changed else None,
    }


@role_required(roles.CURATOR)
@require_GET
def run_step(request, pk, step):
    """One step's decisions: tabs by final outcome, reason chips, score range, 50 a page, each with
    its image, texts, score, details and override buttons; the score histogram above them."""
    run = get_object_or_404(FilterRun.objects.select_related("pipeline", "collection"), pk=pk)
    filters = StepFilters.parse(request.GET)
    context = _step_context(run, step, filters, request.GET.get("page"))
    if not (request.htmx and not request.htmx.boosted):
        context.update(_histogram_context(run, step, request.GET))
    return _render(request, "runs/step.html", "runs/_decisions.html", context)


@role_required(roles.CURATOR)
@require_GET
def run_step_histogram(request, pk, step):
    """The histogram alone, re-rendered as the what-if thresholds move."""
    run = get_object_or_404(FilterRun.objects.select_related("pipeline", "collection"), pk=pk)
    context = _histogram_context(run, step, request.GET)
    context["snapshot"] = run.snapshot[step]
    return _render(request, "runs/histogram.html", "runs/_histogram_chart.html", context)


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
                .annotate(final=_final()).get(pk=decision.pk))
    seen = _texts_seen(run, decision.step, [decision.caption_id] if decision.caption_id else [])
    _dress(decision, bool(run.snapshot[decision.step].get("transform")), seen.get(decision.caption_id))
    context = {"run": run, "step": decision.step, "decision": decision, "row_error": row_error,
               "filters": filters, "return_query": filters.query(),
               "tabs": _tabs(run, decision.step, filters), "oob": True}
    response = render(request, "runs/_decision_row.html", context)
    patch_vary_headers(response, ("HX-Request",))
    return response


@role_required(roles.CURATOR)
@require_POST
def step_overrides(request, pk, step):
    """Keep or drop the selected decisions of a step (or all on the page) with one note."""
    run = get_object_or_404(FilterRun, pk=pk)
    _step_or_404(run, step)
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
    context = _step_context(run, step, filters, filters.raw.get("page"))
    context["bulk_error"] = error
    context["bulk_done"] = "" if error else f"{count} decision{'s' if count != 1 else ''} set to {outcome}."
    return _render(request, "runs/step.html", "runs/_decisions.html", context)
