"""What the run and registry pages draw from a run's history and metrics: server-side SVG charts (the
loss curve with its best epoch and early stop, the reliability diagram) and the small tables of a binary
classifier's evaluation (baselines, per class, confusion matrix, cross-validation).

Every text that comes from data is escaped; the functions return "" (or []) when there is nothing to
draw, so the templates can test them.
"""
from __future__ import annotations

import math

from django.utils.html import escape
from django.utils.safestring import mark_safe

PALETTE = ("#3b5bdb", "#2f9e66", "#e8590c", "#ae3ec9", "#1098ad", "#f08c00", "#c2255c", "#5c940d")
AXIS = "#a8b0bd"
BEST, STOP = "#2f9e66", "#c92a2a"
BASELINE_METRICS = ("precision", "recall", "f1", "accuracy")
BASELINE_LABELS = {"majority": "Majority class (one answer for everything)", "random_guess": "Random guess",
                   "length_rated": "Sentence length (rated text)", "length_source": "Sentence length (source text)"}
CV_KEYS = ("macro_f1", "accuracy", "f1", "f1_negative", "precision", "recall", "ece", "brier")


def fmt(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _svg_open(css: str, width: int, height: int, label: str, max_width: int | None = None) -> str:
    # The page's CSS stretches charts to their column; max_width keeps a small one's text small.
    style = f' style="max-width: {max_width}px"' if max_width else ""
    return (f'<svg class="{css}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}"{style} '
            f'xmlns="http://www.w3.org/2000/svg">')


# --- Loss curve ----------------------------------------------------------------------------------------


def loss_curve_svg(history: list[dict], width: int = 640, height: int = 220) -> str:
    """Training loss points (a line), epoch-end validation loss (dots), epoch ticks on the x axis, and
    dashed verticals at the best epoch (its weights are the ones kept) and where training stopped early."""
    points = [h for h in history or [] if _number(h.get("loss")) and not h.get("end")]
    ends = [h for h in history or [] if h.get("end")]
    points = points or [h for h in ends if _number(h.get("loss"))]
    values = [h["loss"] for h in points] + [h["val_loss"] for h in ends if _number(h.get("val_loss"))]
    if not values:
        return ""
    left, right, top, bottom = 52, 12, 12, 28
    x_max = max([float(h["epoch"]) for h in points + ends] + [1.0])
    y_min, y_max = min(values + [0.0]), max(values)
    y_max = y_max if y_max > y_min else y_min + 1
    sx = lambda e: left + (width - left - right) * float(e) / x_max  # noqa: E731
    sy = lambda v: top + (height - top - bottom) * (1 - (v - y_min) / (y_max - y_min))  # noqa: E731
    parts = [_svg_open("loss-curve", width, height, "Loss curve"),
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="{AXIS}"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="{AXIS}"/>']
    for frac in (0, 0.5, 1):
        v = y_min + frac * (y_max - y_min)
        parts.append(f'<text x="{left - 6}" y="{sy(v) + 4:.1f}" text-anchor="end" font-size="11">{escape(fmt(v))}</text>')
    step = max(1, int(math.ceil(x_max / 10)))
    for e in range(0, int(math.ceil(x_max)) + 1, step):
        parts.append(f'<text x="{sx(e):.1f}" y="{height - 10}" text-anchor="middle" font-size="11">{e}</text>')
    parts += _epoch_markers(ends, sx, top, height - bottom, left + (width - left - right) / 2)
    path = " ".join(f"{sx(h['epoch']):.1f},{sy(h['loss']):.1f}" for h in points)
    parts.append(f'<polyline fill="none" stroke="{PALETTE[0]}" stroke-width="2" points="{path}"><title>training loss'
                 f'</title></polyline>')
    for h in ends:
        if _number(h.get("val_loss")):
            colour, r = (BEST, 5) if h.get("best") else (PALETTE[2], 4)
            parts.append(f'<circle cx="{sx(h["epoch"]):.1f}" cy="{sy(h["val_loss"]):.1f}" r="{r}" fill="{colour}">'
                         f'<title>epoch {h["epoch"]}: validation loss {escape(fmt(h["val_loss"]))}'
                         f'{" (best)" if h.get("best") else ""}</title></circle>')
    parts.append(f'<text x="{width - right}" y="{top + 10}" text-anchor="end" font-size="11">'
                 f'<tspan fill="{PALETTE[0]}">— train</tspan> <tspan fill="{PALETTE[2]}">● validation</tspan></text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))


def lr_curve_svg(history: list[dict], width: int = 640, height: int = 110) -> str:
    """The learning rate over the epochs (the schedule's warm-up and decay), from the history's "lr";
    "" when the lr never changed (a constant schedule says nothing a chart would add)."""
    points = [h for h in history or [] if _number(h.get("lr")) and _number(h.get("epoch"))]
    values = [h["lr"] for h in points]
    if len(points) < 2 or max(values) == min(values):
        return ""
    left, right, top, bottom = 52, 12, 10, 24
    x_max = max([float(h["epoch"]) for h in points] + [1.0])
    y_max = max(values)
    sx = lambda e: left + (width - left - right) * float(e) / x_max  # noqa: E731
    sy = lambda v: top + (height - top - bottom) * (1 - v / y_max)  # noqa: E731
    path = " ".join(f"{sx(h['epoch']):.1f},{sy(h['lr']):.1f}" for h in sorted(points, key=lambda h: h["step"]))
    parts = [_svg_open("lr-curve", width, height, "Learning rate"),
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="{AXIS}"/>',
             f'<text x="{left - 6}" y="{top + 8}" text-anchor="end" font-size="11">{escape(fmt(y_max))}</text>',
             f'<text x="{left - 6}" y="{height - bottom}" text-anchor="end" font-size="11">0</text>',
             f'<text x="{width - right}" y="{height - 6}" text-anchor="end" font-size="11">epoch {escape(fmt(x_max))}'
             f'</text>',
             f'<polyline fill="none" stroke="{PALETTE[3]}" stroke-width="2" points="{path}"><title>learning rate'
             f'</title></polyline>',
             f'<text x="{left + 6}" y="{top + 8}" font-size="11" fill="{PALETTE[3]}">— learning rate</text></svg>']
    return mark_safe("".join(parts))


def _epoch_markers(ends: list[dict], sx, y_top: float, y_bottom: float, x_mid: float) -> list[str]:
    """Dashed verticals with a label: the best epoch, and the epoch after which training stopped early.
    Labels sit above the x axis (the legend is at the top), on the inner side of their line."""
    parts = []
    for h in ends:
        for flag, colour, label, dy in (("best", BEST, "best", 6), ("stopped_early", STOP, "stopped early", 20)):
            if h.get(flag):
                x = sx(h["epoch"])
                tx, anchor = (x - 4, "end") if x > x_mid else (x + 4, "start")
                parts.append(f'<g class="marker-{flag.replace("_", "-")}"><line x1="{x:.1f}" y1="{y_top}" '
                             f'x2="{x:.1f}" y2="{y_bottom}" stroke="{colour}" stroke-dasharray="4 3"/>'
                             f'<text x="{tx:.1f}" y="{y_bottom - dy}" text-anchor="{anchor}" font-size="11" '
                             f'fill="{colour}">{label} (epoch {escape(fmt(h["epoch"]))})</text></g>')
    return parts


# --- Reliability ---------------------------------------------------------------------------------------


def reliability_svg(bins: list[dict], ece, width: int = 320, height: int = 260) -> str:
    """A reliability diagram from evaluation.reliability(): per probability bin a bar up to the observed
    share of class 1 and a dot at the mean predicted probability; the diagonal is perfect calibration."""
    filled = [b for b in bins or [] if b.get("n")]
    if not filled:
        return ""
    left, right, top, bottom = 40, 10, 24, 34
    side_w, side_h = width - left - right, height - top - bottom
    sx = lambda p: left + side_w * float(p)  # noqa: E731
    sy = lambda p: top + side_h * (1 - float(p))  # noqa: E731
    parts = [_svg_open("reliability", width, height, "Reliability diagram", max_width=width + 80),
             f'<text x="{left}" y="14" font-size="12" font-weight="600">ECE {escape(fmt(ece))}</text>',
             f'<line x1="{left}" y1="{sy(0)}" x2="{sx(1)}" y2="{sy(0)}" stroke="{AXIS}"/>',
             f'<line x1="{left}" y1="{sy(0)}" x2="{left}" y2="{sy(1)}" stroke="{AXIS}"/>',
             f'<line x1="{sx(0)}" y1="{sy(0)}" x2="{sx(1)}" y2="{sy(1)}" stroke="{AXIS}" stroke-dasharray="4 3">'
             f'<title>perfect calibration</title></line>']
    for tick in (0, 0.5, 1):
        parts.append(f'<text x="{sx(tick):.1f}" y="{height - 18}" text-anchor="middle" font-size="11">{tick}</text>')
        parts.append(f'<text x="{left - 6}" y="{sy(tick) + 4:.1f}" text-anchor="end" font-size="11">{tick}</text>')
    parts.append(f'<text x="{left + side_w / 2:.1f}" y="{height - 4}" text-anchor="middle" font-size="11">'
                 f'predicted probability</text>')
    for b in filled:
        x0, x1, y = sx(b["lo"]), sx(b["hi"]), sy(b["frac_pos"])
        tip = (f'{escape(fmt(b["lo"]))}–{escape(fmt(b["hi"]))}: {b["n"]} items, mean predicted '
               f'{escape(fmt(b["mean_prob"]))}, observed {escape(fmt(b["frac_pos"]))}')
        parts.append(f'<rect x="{x0 + 1:.1f}" y="{y:.1f}" width="{x1 - x0 - 2:.1f}" height="{sy(0) - y:.1f}" '
                     f'fill="{PALETTE[0]}" fill-opacity="0.35"><title>{tip}</title></rect>')
        parts.append(f'<circle cx="{sx(b["mean_prob"]):.1f}" cy="{y:.1f}" r="3" fill="{PALETTE[2]}"><title>{tip}'
                     f'</title></circle>')
    parts.append("</svg>")
    return mark_safe("".join(parts))


# --- Tables --------------------------------------------------------------------------------------------


def baseline_table(metrics: dict) -> list[dict]:
    """Rows of precision, recall, F1 and accuracy on the same held-out split: this classifier first,
    then the majority class, then the other baselines; [] when the run has no baselines."""
    metrics = metrics or {}
    baselines = metrics.get("baselines")
    if not isinstance(baselines, dict) or not baselines:
        return []
    report = metrics.get("report") or {}
    rows = [{"label": "This classifier", "ours": True,
             "values": [metrics.get(k, report.get(k)) for k in BASELINE_METRICS]}]
    ordered = sorted(baselines.items(), key=lambda kv: kv[0] != "majority")  # stable: the rest keep their order
    for key, values in ordered:
        if isinstance(values, dict):
            rows.append({"key": key, "label": BASELINE_LABELS.get(key, key.replace("_", " ").capitalize()),
                         "values": [values.get(k) for k in BASELINE_METRICS], "ours": False})
    return rows


def class_rows(report: dict, names: dict) -> list[dict]:
    """Per class (1 first): name, precision, recall, F1, support, from binary_report()["classes"]."""
    classes = (report or {}).get("classes") or {}
    return [{"name": names.get(key, f"class {key}"), **classes[key]} for key in ("1", "0") if key in classes]


def confusion_rows(confusion: dict, names: dict) -> list[dict]:
    """The confusion matrix as two rows (actual 1, actual 0) of [predicted 1, predicted 0]."""
    if not isinstance(confusion, dict) or not {"tp", "fp", "fn", "tn"} <= set(confusion):
        return []
    return [{"actual": names.get("1", "class 1"), "cells": [confusion["tp"], confusion["fn"]]},
            {"actual": names.get("0", "class 0"), "cells": [confusion["fp"], confusion["tn"]]}]


def cv_rows(cv: dict) -> list[dict]:
    """Per metric: the model's and the majority class's mean and sd over the folds."""
    model, majority = (cv or {}).get("model") or {}, (cv or {}).get("majority") or {}
    return [{"key": key, "model": model[key], "majority": majority.get(key)} for key in CV_KEYS if key in model]


def evaluation_context(metrics: dict, names: dict) -> dict:
    """Everything the run page shows of a binary evaluation (empty values where the run has none)."""
    metrics = metrics or {}
    report, cv = metrics.get("report") or {}, metrics.get("cv") or {}
    return {
        "verdict": metrics.get("verdict"),
        "report": report,
        "majority_report": ((metrics.get("baselines") or {}).get("majority") or {}),
        "class_rows": class_rows(report, names),
        "confusion": confusion_rows(report.get("confusion"), names),
        "reliability": reliability_svg(report.get("reliability"), report.get("ece")),
        "cv": cv, "cv_rows": cv_rows(cv), "cv_confusion": confusion_rows(cv.get("confusion"), names),
        "class_names": names,
    }
