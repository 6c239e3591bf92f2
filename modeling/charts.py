"""What the run and registry pages draw from a run's history and metrics: the loss curve with its best
epoch and early stop, the learning rate and the reliability diagram (as series the kernel's chart module,
``captionlab.charts``, draws and escapes), and the small tables of a binary classifier's evaluation
(baselines, per class, confusion matrix, cross-validation).

The chart functions return "" (and the tables []) when there is nothing to draw, so the templates can test them.
"""
from __future__ import annotations

import math

from captionlab import charts as draw
from captionlab.charts import AXIS, PALETTE, Line, Marker

from . import verdicts

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


# --- Charts -------------------------------------------------------------------------------------------


def loss_curve_svg(history: list[dict], width: int = 640, height: int = 250) -> str:
    """Training loss points (a line), epoch-end validation loss (dots), epoch ticks on the x axis, and
    dashed verticals at the best epoch (its weights are the ones kept) and where training stopped early."""
    points = [h for h in history or [] if _number(h.get("loss")) and not h.get("end")]
    ends = [h for h in history or [] if h.get("end")]
    points = points or [h for h in ends if _number(h.get("loss"))]
    val = [h for h in ends if _number(h.get("val_loss"))]
    values = [h["loss"] for h in points] + [h["val_loss"] for h in val]
    if not values:
        return ""
    x_max = max([float(h["epoch"]) for h in points + ends] + [1.0])
    y_min, y_max = min(values + [0.0]), max(values)
    y_max = y_max if y_max > y_min else y_min + 1

    def dots(name, chosen, colour, r):
        return Line(name, [(h["epoch"], h["val_loss"]) for h in chosen], colour, width=0, dot=r,
                    tips=[f'epoch {h["epoch"]}: validation loss {fmt(h["val_loss"])}{" (best)" if h.get("best") else ""}'
                          for h in chosen])

    lines = [Line("train", [(h["epoch"], h["loss"]) for h in points], PALETTE[0], title="training loss"),
             dots("validation", [h for h in val if not h.get("best")], PALETTE[2], 4),
             dots("", [h for h in val if h.get("best")], BEST, 5)]
    markers = [Marker(h["epoch"], f'{label} (epoch {fmt(h["epoch"])})', colour, cls=f"marker-{flag.replace('_', '-')}")
               for h in ends for flag, colour, label in (("best", BEST, "best"), ("stopped_early", STOP, "stopped early"))
               if h.get(flag)]
    step = max(1, int(math.ceil(x_max / 10)))
    return draw.line_chart("loss-curve", "Loss curve", lines, x=(0, x_max), y=(y_min, y_max),
                           x_ticks=range(0, int(math.ceil(x_max)) + 1, step),
                           y_ticks=[y_min + frac * (y_max - y_min) for frac in (0, 0.5, 1)], markers=markers,
                           width=width, height=height)


def lr_curve_svg(history: list[dict], width: int = 640, height: int = 140) -> str:
    """The learning rate over the epochs (the schedule's warm-up and decay), from the history's "lr";
    "" when the lr never changed (a constant schedule says nothing a chart would add)."""
    points = sorted((h for h in history or [] if _number(h.get("lr")) and _number(h.get("epoch"))),
                    key=lambda h: h["step"])
    values = [h["lr"] for h in points]
    if len(points) < 2 or max(values) == min(values):
        return ""
    x_max = max([float(h["epoch"]) for h in points] + [1.0])
    return draw.line_chart("lr-curve", "Learning rate",
                           [Line("learning rate", [(h["epoch"], h["lr"]) for h in points], PALETTE[3],
                                 title="learning rate")],
                           x=(0, x_max), y=(0, max(values)), x_ticks=(0, x_max), x_title="epoch",
                           y_ticks=(0, max(values)), width=width, height=height, left=60)


def reliability_svg(bins: list[dict], ece, width: int = 320, height: int = 260) -> str:
    """A reliability diagram from evaluation.reliability(): per probability bin a bar up to the observed
    share of class 1 and a dot at the mean predicted probability; the diagonal is perfect calibration."""
    filled = [b for b in bins or [] if b.get("n")]
    if not filled:
        return ""
    plot = draw.Plot("reliability", "Reliability diagram", width, height, (40, 10, 24, 34), max_width=width + 80)
    plot.frame((0, 0.5, 1), (0, 0.5, 1), x_title="predicted probability", y_axis=True)
    plot.add(draw.text(40, 14, f"ECE {fmt(ece)}", size=12, weight="600"))
    plot.line([(0, 0), (1, 1)], AXIS, dash="4 3", width=1, tip="perfect calibration")
    for b in filled:
        tip = (f'{fmt(b["lo"])}–{fmt(b["hi"])}: {b["n"]} items, mean predicted {fmt(b["mean_prob"])}, '
               f'observed {fmt(b["frac_pos"])}')
        plot.bar(b["lo"], b["hi"], 0, b["frac_pos"], PALETTE[0], tip, gap=2, fill_opacity="0.35")
        plot.add(plot.dot(b["mean_prob"], b["frac_pos"], PALETTE[2], r=3, tip=tip))
    return plot.svg()


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
        "verdict": verdicts.display(metrics),
        "report": report,
        "majority_report": ((metrics.get("baselines") or {}).get("majority") or {}),
        "class_rows": class_rows(report, names),
        "confusion": confusion_rows(report.get("confusion"), names),
        "reliability": reliability_svg(report.get("reliability"), report.get("ece")),
        "cv": cv, "cv_rows": cv_rows(cv), "cv_confusion": confusion_rows(cv.get("confusion"), names),
        "class_names": names,
    }
