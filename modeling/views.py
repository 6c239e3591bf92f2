"""Curator pages of the modeling app: training runs (list, new, detail with a live loss curve), the
model registry with Activate buttons, and the comparison of runs side by side (whose human-evaluation
form posts to views_generation: generation jobs run on a worker).

Views are thin: they parse, check the role, call the engine/registry, and render. The run's progress
card polls itself with htmx (like the filter runs' card) and stops once the run is finished.
The charts (loss curve and reliability in modeling/charts.py, metric bars here) are server-side SVG drawn
by captionlab.charts, which escapes every text in them.
"""
from __future__ import annotations

import json
import math

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_POST

from captionlab import charts
from captionlab.roles import role_required

from . import captioner_report, engine, groups, registry, run_notes, verdicts, views_generation, views_groups
from .charts import baseline_table, evaluation_context, loss_curve_svg, lr_curve_svg
from .metric_keys import CAPTION_METRICS, CLASSIFIER_METRICS, flatten_metrics, natural_key
from .models import Kind, ModelVersion, TrainingRun
from .trainers import DEFAULT_TRAINERS, all_trainers
from .trainers.base import TrainingError

RUNS_PER_PAGE = 50
MAX_COMPARED = 8
DEVICES = (("auto", "Auto (GPU when the worker has one)"), ("cpu", "CPU"), ("cuda", "CUDA GPU"))
STRATEGIES = (("", "— trainer default —"), ("all", "All captions"), ("fluency_only", "Fluency-only"),
              ("rejection_sampling", "Rejection sampling"), ("weighted_loss", "Weighted loss"))


# --- Charts ----------------------------------------------------------------------------------------


def bars_svg(metric_names: list[str], series: list[tuple[str, list]], width: int = 720, height: int = 240) -> str:
    """Grouped bars: one group per metric, one bar per run (None = not measured)."""
    series = [(label, [v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in vals],
               charts.PALETTE[i % len(charts.PALETTE)]) for i, (label, vals) in enumerate(series)]
    if not metric_names or not any(v is not None for _, vals, _ in series for v in vals):
        return ""
    return charts.bar_chart("metric-bars", "Metrics by run", metric_names, series, width=width, height=height, fill=0.8)


# --- Runs ----------------------------------------------------------------------------------------------


@role_required("curator")
def run_list(request):
    runs = TrainingRun.objects.select_related("created_by", "release", "campaign", "model_version")
    kind = request.GET.get("kind", "")
    if kind in Kind.values:
        runs = runs.filter(kind=kind)
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    for run in page.object_list:
        if hasattr(run, "model_version"):
            run.verdict = verdicts.display(run.model_version.metrics)
    return render(request, "modeling/run_list.html", {"page": page, "kinds": Kind.choices, "kind": kind})


def _form_context(data=None, errors=None):
    from annotation.models import Campaign
    from releases.models import Release

    defaults = set(DEFAULT_TRAINERS.values())
    trainers = sorted(all_trainers().values(), key=lambda t: (t.kind, t.name not in defaults, t.name))
    data = data or {"trainer": DEFAULT_TRAINERS["fluency"]}
    return {
        "trainers": [{"name": t.name, "kind": t.kind, "kind_label": Kind(t.kind).label if t.kind in Kind.values else t.kind,
                      "default": t.name in defaults, "about": _about(t),
                      "defaults": json.dumps(t.default_config, indent=1, default=str)} for t in trainers],
        "campaigns": Campaign.objects.order_by("-pk")[:200],
        "releases": Release.objects.filter(status=Release.Status.FROZEN).order_by("-pk")[:200],
        "devices": DEVICES, "strategies": STRATEGIES, "data": data, "errors": errors or {},
    }


def _about(trainer) -> str:
    """The first line of the trainer module's docstring (what it is, in a sentence)."""
    import sys

    doc = (sys.modules[type(trainer).__module__].__doc__ or "").strip().splitlines()
    return doc[0] if doc else ""


def _parse_run_form(post):  # noqa: PLR0915
    """-> (trainer_name, config, release, campaign, name, errors)."""
    from annotation.models import Campaign
    from releases.models import Release

    errors, config = {}, {}
    trainers = all_trainers()
    trainer = trainers.get(post.get("trainer", ""))
    if trainer is None:
        errors["trainer"] = "Choose a trainer."
    for key, cast in (("epochs", int), ("batch_size", int), ("seed", int), ("lr", float)):
        raw = (post.get(key) or "").strip()
        if not raw:
            continue
        try:
            value = cast(raw)
            if (cast is int and key != "seed" and value < 1) or (key == "lr" and not value > 0) or \
                    (key == "seed" and value < 0):
                raise ValueError
            config[key] = value
        except ValueError:
            errors[key] = {"epochs": "A whole number ≥ 1.", "batch_size": "A whole number ≥ 1.",
                           "seed": "A whole number ≥ 0.", "lr": "A positive number."}[key]
    device = post.get("device", "auto")
    if device not in dict(DEVICES):
        errors["device"] = "Choose auto, cpu or cuda."
    config["device"] = device
    strategy = post.get("strategy", "")
    if strategy not in dict(STRATEGIES):
        errors["strategy"] = "Unknown strategy."
    elif strategy:
        config["strategy"] = strategy
    extra = (post.get("extra") or "").strip()
    if extra:
        try:
            parsed = json.loads(extra)
            if not isinstance(parsed, dict):
                raise ValueError
            config = {**parsed, **config}
        except ValueError:
            errors["extra"] = 'Extra settings must be a JSON object, e.g. {"hidden": 128}.'
    release = campaign = None
    if post.get("release"):
        release = Release.objects.filter(pk=post.get("release") if str(post.get("release")).isdigit() else None).first()
        if release is None:
            errors["release"] = "That release does not exist."
        elif not release.frozen:
            errors["release"] = "That release is not frozen yet."
    if post.get("campaign"):
        campaign = Campaign.objects.filter(pk=post.get("campaign") if str(post.get("campaign")).isdigit() else None).first()
        if campaign is None:
            errors["campaign"] = "That campaign does not exist."
    if trainer is not None:
        if trainer.kind == Kind.FLUENCY and campaign is None and "campaign" not in errors:
            errors["campaign"] = "A fluency classifier trains on a campaign's aggregated votes: choose one."
        if trainer.kind in (Kind.CAPTIONER, Kind.TOPIC_CNN) and release is None and "release" not in errors:
            errors["release"] = "A captioner or topic CNN trains on a frozen release: choose one."
    name = (post.get("name") or "").strip()[:200]
    return (trainer.name if trainer else ""), config, release, campaign, name, errors


def _parse_repeats(post, errors) -> int:
    raw = (post.get("repeats") or "").strip()
    try:
        repeats = int(raw) if raw else 1
        if not 1 <= repeats <= groups.MAX_REPEATS:
            raise ValueError
    except ValueError:
        errors["repeats"] = f"A whole number from 1 to {groups.MAX_REPEATS}."
        return 1
    return repeats


@role_required("curator")
def run_create(request):
    if request.method != "POST":
        return render(request, "modeling/run_form.html", _form_context())
    trainer_name, config, release, campaign, name, errors = _parse_run_form(request.POST)
    repeats = _parse_repeats(request.POST, errors)
    if not errors:
        try:
            runs = groups.create_repeats(trainer_name, config, repeats, release=release, campaign=campaign,
                                         user=request.user, name=name)
        except TrainingError as exc:
            errors["form"] = str(exc)
        else:
            for run in runs:
                engine.enqueue(run)
            if len(runs) == 1:
                messages.success(request, f"{runs[0]} queued on the gpu queue.")
                return redirect(runs[0].get_absolute_url())
            messages.success(request, f"{len(runs)} runs (seeds {runs[0].config['seed']}–{runs[-1].config['seed']}) "
                                      f"queued on the gpu queue as group {runs[0].group}.")
            return redirect("training-group-detail", group=runs[0].group)
    return render(request, "modeling/run_form.html", _form_context(request.POST, errors), status=400)


LOG_TAIL_LINES = 300


def log_tail(log: str, lines: int = LOG_TAIL_LINES) -> dict:
    """The last ``lines`` lines of a run's log and how many came before them."""
    all_lines = (log or "").splitlines()
    return {"text": "\n".join(all_lines[-lines:]), "skipped": max(0, len(all_lines) - lines)}


def _run_context(run):
    return {"run": run, "curve": loss_curve_svg(run.history), "lr_curve": lr_curve_svg(run.history),
            "log_tail": log_tail(run.log),
            "percent": int(100 * run.epoch / run.epochs) if run.epochs else 0,
            "stopped_early": bool((run.metrics or {}).get("stopped_early")),
            "worker_lost": engine.worker_lost(run), "retryable": engine.retryable(run)}


CLASS_NAMES = {Kind.FLUENCY: {"1": "fluent", "0": "not fluent"}}
# Shown in their own sections of the run page, so left out of its flat metrics table.
SECTIONED = ("baselines.", "report.", "cv.", "verdict.")
NOT_SHOWN = ("eval_cap", "eval_images")  # said in a sentence above the metrics instead


def _flat_metrics(metrics: dict) -> list[tuple[str, float, dict | None]]:
    """(key, value, its 95% interval or None) of the metrics not shown in a section of their own."""
    flat = {k: v for k, v in flatten_metrics(metrics).items()
            if not k.startswith(NOT_SHOWN + captioner_report.SECTIONED + ("caption_baselines.",))}
    if (metrics or {}).get("baselines") or (metrics or {}).get("report"):
        # A baseline's threshold is what its rule learned (the length cut); the others are all 0.5.
        flat = {k: v for k, v in flat.items() if not k.startswith(SECTIONED)
                or (k.startswith("baselines.") and k.endswith(".threshold") and not k.startswith("baselines.majority."))}
    intervals = (metrics or {}).get("intervals") or {}
    return [(k, v, intervals.get(k)) for k, v in sorted(flat.items(), key=lambda kv: natural_key(kv[0]))]


@role_required("curator")
def run_detail(request, pk):
    run = get_object_or_404(TrainingRun.objects.select_related("release", "campaign", "created_by"), pk=pk)
    context = _run_context(run)
    version = ModelVersion.objects.filter(run=run).first()
    context.update(evaluation_context(run.metrics, CLASS_NAMES.get(run.kind, {})))
    context.update(captioner_report.report(run.metrics))
    if version is not None:
        # The version's verdict is the one shown everywhere: a learning loop may have judged it again since.
        context["verdict"] = verdicts.display(version.metrics)
        version.below_retrieval = captioner_report.does_not_beat_retrieval(version.metrics)
        version.flagged = verdicts.flagged(version.metrics) or version.below_retrieval
    context["verdict_rule"] = verdicts.RULE
    context.update({
        "version": version,
        "metrics": _flat_metrics(run.metrics),
        "baselines": baseline_table(run.metrics), "classifier_metrics": CLASSIFIER_METRICS,
        "extras": (run.metrics or {}).get("extras"),
        "checkpoints": engine.list_checkpoints(run) if run.checkpoint else [],
        "config": json.dumps(run.config, indent=2, ensure_ascii=False, default=str),
        "summary": json.dumps(run.data_summary, indent=2, ensure_ascii=False, default=str),
        "fluency_version": (run.data_summary or {}).get("fluency_version"),
        "references": run_notes.reference_note(run), "eval_cap": run_notes.eval_cap_note(run.metrics),
    })
    return render(request, "modeling/run_detail.html", context)


@role_required("curator")
def run_log(request, pk):
    """The log card alone, for its htmx polling while the run goes on (the full page otherwise)."""
    run = get_object_or_404(TrainingRun, pk=pk)
    if not request.htmx:
        return redirect(run.get_absolute_url())
    response = render(request, "modeling/_log.html", {"run": run, "log_tail": log_tail(run.log)})
    patch_vary_headers(response, ("HX-Request",))
    return response


@role_required("curator")
def run_progress(request, pk):
    run = get_object_or_404(TrainingRun, pk=pk)
    if not request.htmx:
        return redirect(run.get_absolute_url())
    response = render(request, "modeling/_progress.html", _run_context(run))
    patch_vary_headers(response, ("HX-Request",))
    return response


@require_POST
@role_required("curator")
def run_cancel(request, pk):
    run = get_object_or_404(TrainingRun, pk=pk)
    if run.finished:
        messages.error(request, f"{run} has already finished.")
    else:
        engine.cancel(run)
        messages.success(request, f"{run} cancelled.")
    return redirect(run.get_absolute_url())


@require_POST
@role_required("curator")
def run_retry(request, pk):
    run = get_object_or_404(TrainingRun, pk=pk)
    if not engine.retryable(run):
        messages.error(request, "Only a failed or cancelled run, or one whose worker was lost, can be retried.")
    else:
        engine.retry(run)
        messages.success(request, f"{run} queued again; it continues from its last checkpoint.")
    return redirect(run.get_absolute_url())


# --- Registry ------------------------------------------------------------------------------------------


@role_required("curator")
def version_list(request):
    versions = ModelVersion.objects.select_related("run", "activated_by")
    groups = []
    for kind, label in Kind.choices:
        rows = [v for v in versions if v.kind == kind]
        for v in rows:
            flat = flatten_metrics(v.metrics)
            keys = [k for k in CAPTION_METRICS + CLASSIFIER_METRICS if k in flat][:6] or list(flat)[:4]
            v.headline = [(k, flat[k]) for k in keys]
            v.verdict = verdicts.display(v.metrics)
            v.below_retrieval = captioner_report.does_not_beat_retrieval(v.metrics)
            v.retrieval_verdict = (v.metrics or {}).get("retrieval_verdict")
            v.flagged = verdicts.flagged(v.metrics) or v.below_retrieval
        groups.append({"kind": kind, "label": label, "versions": rows})
    import pack
    from pack.models import PretrainedModel

    pack.ensure_packaged()  # trained versions and pretrained models are one registry
    return render(request, "modeling/versions.html", {"groups": groups, "pretrained": PretrainedModel.objects.all(),
                                                        "verdict_rule": verdicts.RULE})


@require_POST
@role_required("curator")
def version_activate(request, pk):
    """Activate a version; one that does not beat the majority class needs the "activate anyway" box
    (force=1), else an error message and nothing changes."""
    version = get_object_or_404(ModelVersion, pk=pk)
    try:
        registry.activate(version, request.user, force=request.POST.get("force") in ("1", "on", "true"))
    except TrainingError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{version} is now the active {version.get_kind_display().lower()}.")
    return redirect(reverse("model-list"))


# --- Comparison ----------------------------------------------------------------------------------------


def _selected_runs(values):
    ids = []
    for value in values:
        if not str(value).isdigit():
            return None, f"{value!r} is not a run number."
        ids.append(int(value))
    ids = list(dict.fromkeys(ids))[:MAX_COMPARED]
    runs = {r.pk: r for r in TrainingRun.objects.filter(pk__in=ids).select_related("model_version", "release", "campaign")}
    missing = [i for i in ids if i not in runs]
    if missing:
        return None, f"No training run #{missing[0]}."
    return [runs[i] for i in ids], ""


@role_required("curator")
def compare(request):
    chosen, error = _selected_runs(request.GET.getlist("runs"))
    if chosen is None:
        return render(request, "modeling/compare.html", {"error": error, "candidates": _candidates(),
                                                         **views_groups.compare_context(request.GET)}, status=400)
    for run in chosen:
        run_notes.annotate(run)
    # Only results: no bookkeeping, and no losses side by side when several runs (so several models) are shown.
    flats = [{k: v for k, v in flatten_metrics(r.metrics).items() if not k.startswith(NOT_SHOWN)
              and groups.is_metric(k) and (len(chosen) == 1 or groups.is_compared(k))} for r in chosen]
    keys = []
    for flat in flats:
        keys.extend(k for k in flat if k not in keys)
    priority = {name: i for i, name in enumerate(CAPTION_METRICS + CLASSIFIER_METRICS)}
    keys.sort(key=lambda k: (k.count("."), priority.get(k, 100), natural_key(k)))
    rows = []
    for key in keys:
        values = [f.get(key) for f in flats]
        numeric = [v for v in values if v is not None]
        best = max(numeric) if numeric and not groups.lower_is_better(key) else (min(numeric) if numeric else None)
        differ = len(set(numeric)) > 1  # nothing is "best" when every run has the same value
        rows.append({"key": key, "cells": [{"value": v, "best": differ and v is not None and v == best}
                                           for v in values]})
    chart_keys = [k for k in CAPTION_METRICS if any(k in f for f in flats)] or \
        [k for k in CLASSIFIER_METRICS if any(k in f for f in flats)]
    baseline_keys = sorted({k.rsplit(".", 1)[0] for f in flats for k in f if k.startswith("baselines.")})
    series = [(f"#{r.pk} {r.name or r.config.get('strategy', '')}".strip(), [f.get(k) for k in chart_keys])
              for r, f in zip(chosen, flats)]
    if not any(k in CAPTION_METRICS for k in chart_keys) and baseline_keys and len(chosen) == 1:
        series += [(b.split(".", 1)[1], [flats[0].get(f"{b}.{k}") for k in chart_keys]) for b in baseline_keys]
    captioners = [r for r in chosen if r.kind == Kind.CAPTIONER and r.status == TrainingRun.Status.DONE]
    for r in chosen:
        r.retrieval_verdict = (r.metrics or {}).get("retrieval_verdict")
        r.cider_against_first = captioner_report.paired_cider(r, chosen[0]) if r is not chosen[0] else None
    return render(request, "modeling/compare.html", {
        "runs": chosen, "rows": rows, "chart": bars_svg(chart_keys, series) if chosen else "",
        "candidates": _candidates(), "selected": {r.pk for r in chosen}, "captioners": captioners,
        "any_references": any(r.references for r in chosen), "any_cap": any(r.eval_cap for r in chosen),
        "any_retrieval": any(r.retrieval_verdict for r in chosen),
        "any_paired": any(r.cider_against_first for r in chosen),
        **views_generation.compare_context(), **views_groups.compare_context(request.GET),
    })


def _candidates():
    return TrainingRun.objects.filter(status=TrainingRun.Status.DONE).order_by("-pk")[:100]
