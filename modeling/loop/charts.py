"""The learning loop's charts, server-side SVG in the house style of modeling/charts.py.

``curve_numbers`` reads the finished rounds once (the page, the API-less terminal view of
``manage.py loop show`` and the SVG all draw from it); ``learning_curve_svg`` draws hold-out macro F1
against the labels each round trained on: the loop's sampler (one point per round), the latest round's
simulated random arm (mean ± sd over its repeats) and the majority class (dashed); ``quality_svg``
draws accuracy and expected calibration error per round. Every text that comes from data is escaped;
both return "" when there is nothing to draw.
"""
from __future__ import annotations

import math

from django.utils.html import escape
from django.utils.safestring import mark_safe

from ..charts import AXIS, PALETTE, fmt

SAMPLER, RANDOM, MAJORITY, CHANCE, ECE = PALETTE[0], PALETTE[2], "#6b7280", "#c4cad4", "#c2255c"
CHANCE_MACRO_F1 = 0.5  # what a guess with the class shares scores on macro F1 (modeling.evaluation)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _metric(round_, who: str, key: str):
    value = ((round_.holdout or {}).get(who) or {}).get(key)
    return value if _number(value) else None


def trained_on(round_) -> int | None:
    """How many labels the round's version really trained on: its run keeps a test split of the
    labelled pool to score itself (fluency_data.split), so fewer than ``labels_used``."""
    run = round_.training_run if round_.training_run_id else None
    splits = ((run.data_summary or {}).get("splits") or {}) if run else {}
    parts = [splits.get(name) for name in ("train", "val")]
    return int(sum(sum(p.values()) for p in parts if isinstance(p, dict))) if any(parts) else None


def curve_numbers(rounds) -> dict:
    """What the learning curve shows, from the loop's rounds (any order, any status).

    sampler:  [{round, labels, trained_on, macro_f1, accuracy, ece, n, sampler, activated}] per finished round
              whose new version was scored on the hold-out;
    majority: [{round, labels, macro_f1, accuracy}] the majority class on the same hold-outs;
    random:   {"round", "simulated", "points": [{labels, macro_f1, sd, repeats}], "why", "n"} of the
              latest finished round, or None when no round has finished."""
    done = sorted((r for r in rounds if r.status == "done"), key=lambda r: r.number)
    sampler, majority = [], []
    for r in done:
        n = (r.holdout or {}).get("n") or 0
        if _metric(r, "new", "macro_f1") is not None:
            sampler.append({"round": r.number, "labels": r.labels_used, "macro_f1": _metric(r, "new", "macro_f1"),
                            "accuracy": _metric(r, "new", "accuracy"), "ece": _metric(r, "new", "ece"), "n": n,
                            "sampler": r.sampler, "activated": r.activated, "trained_on": trained_on(r),
                            "previous_macro_f1": _metric(r, "previous", "macro_f1")})
        if _metric(r, "majority", "macro_f1") is not None:
            majority.append({"round": r.number, "labels": r.labels_used,
                             "macro_f1": _metric(r, "majority", "macro_f1"),
                             "accuracy": _metric(r, "majority", "accuracy")})
    random = None
    if done:
        latest = done[-1]
        arm = (latest.holdout or {}).get("random_arm") or {}
        points = [p for p in arm.get("points") or [] if _number(p.get("labels")) and _number(p.get("macro_f1"))]
        random = {"round": latest.number, "simulated": bool(arm.get("simulated")),
                  "points": sorted(points, key=lambda p: p["labels"]), "n": (latest.holdout or {}).get("n") or 0,
                  "labels": latest.labels_used, "trained_on": trained_on(latest),
                  "why": arm.get("why") or ("the round stored no random arm" if not arm else "")}
    return {"sampler": sampler, "majority": majority, "random": random}


def _frame(css: str, label: str, width: int, height: int, box, x_max: float, x_title: str, y_title: str,
           y_ticks=(0, 0.25, 0.5, 0.75, 1.0), x_ticks=None):
    """The SVG head, grid, axes, ticks and axis titles; returns (parts, sx, sy)."""
    left, right, top, bottom = box
    sx = lambda v: left + (width - left - right) * float(v) / x_max  # noqa: E731
    sy = lambda v: top + (height - top - bottom) * (1 - float(v))  # noqa: E731
    parts = [f'<svg class="{css}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}" '
             f'xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif">']
    for t in y_ticks:
        parts.append(f'<line x1="{left}" y1="{sy(t):.1f}" x2="{width - right}" y2="{sy(t):.1f}" stroke="#eef0f4"/>')
        parts.append(f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" font-size="11" fill="#4b5563">'
                     f'{t:g}</text>')
    parts.append(f'<line x1="{left}" y1="{sy(0):.1f}" x2="{width - right}" y2="{sy(0):.1f}" stroke="{AXIS}"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{sy(0):.1f}" stroke="{AXIS}"/>')
    for t in x_ticks if x_ticks is not None else _ticks(x_max):
        parts.append(f'<text x="{sx(t):.1f}" y="{height - bottom + 15}" text-anchor="middle" font-size="11" '
                     f'fill="#4b5563">{escape(fmt(t))}</text>')
    parts.append(f'<text x="{left + (width - left - right) / 2:.1f}" y="{height - 4}" text-anchor="middle" '
                 f'font-size="12" fill="#1c2330">{escape(x_title)}</text>')
    parts.append(f'<text transform="translate(13 {top + (height - top - bottom) / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle" font-size="12" fill="#1c2330">{escape(y_title)}</text>')
    return parts, sx, sy


def _ticks(x_max: float) -> list[int]:
    """About five round numbers from 0 to x_max."""
    raw = max(x_max / 5, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return list(range(0, int(x_max) + 1, int(step)))


def _legend(items: list[tuple[str, str, str]], x: float, y: float) -> list[str]:
    """[(colour, dash, text)] in one row; ~6 px a character at 11 px (measured in chromium: 5.6)."""
    parts = []
    for colour, dash, text in items:
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<line x1="{x:.0f}" y1="{y - 4}" x2="{x + 18:.0f}" y2="{y - 4}" stroke="{colour}" '
                     f'stroke-width="2"{dashed}/><text x="{x + 23:.0f}" y="{y}" font-size="11" fill="#1c2330">'
                     f'{escape(text)}</text>')
        x += 23 + 6 * len(text) + 14
    return parts


def _polyline(points, sx, sy, colour: str, dash: str = "", width: float = 2.0, title: str = "") -> str:
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    tip = f"<title>{escape(title)}</title>" if title else ""
    return f'<polyline fill="none" stroke="{colour}" stroke-width="{width}"{dashed} points="{path}">{tip}</polyline>'


def learning_curve_svg(numbers: dict, sampler_name: str = "sampler", width: int = 720, height: int = 320) -> str:
    sampler, majority, random = numbers["sampler"], numbers["majority"], numbers["random"] or {}
    arm = random.get("points") or []
    if not sampler:
        return ""
    x_max = max([p["labels"] for p in sampler + arm] + [1]) * 1.08
    box = (52, 16, 34, 44)
    parts, sx, sy = _frame("loop-curve", "Learning curve: hold-out macro F1 against labels", width, height, box,
                           x_max, "labelled items (hold-out left out)", "hold-out macro F1")
    parts.append(_polyline([(0, CHANCE_MACRO_F1), (x_max, CHANCE_MACRO_F1)], sx, sy, CHANCE, "2 3", 1.2,
                           "chance: a guess with the class shares"))
    if majority:
        # Each round's hold-out is the one labelled by then, so the bar moves; flat before the first
        # round and after the last, so one round still draws a line.
        steps = [(0, majority[0]["macro_f1"])] + [(m["labels"], m["macro_f1"]) for m in majority] + \
            [(x_max, majority[-1]["macro_f1"])]
        parts.append(_polyline(steps, sx, sy, MAJORITY, "6 4", 1.6, "majority class (one answer for everything)"))
    parts += _random_arm(arm, random, sx, sy)
    parts += _sampler_points(sampler, sx, sy)
    legend = [(SAMPLER, "", f"{sampler_name} (each round)")]
    if arm:
        legend.append((RANDOM, "", f"random arm (simulated at round {random.get('round')})"))
    legend += [(MAJORITY, "6 4", "majority class"), (CHANCE, "2 3", "chance")]
    parts += _legend(legend, box[0], 16)
    parts.append("</svg>")
    return mark_safe("".join(parts))


def _sampler_points(sampler, sx, sy) -> list[str]:
    parts = [_polyline([(p["labels"], p["macro_f1"]) for p in sampler], sx, sy, SAMPLER, "", 2.4)]
    for p in sampler:
        split = f' ({p["trained_on"]} in its training split)' if p["trained_on"] not in (None, p["labels"]) else ""
        tip = (f'round {p["round"]} ({p["sampler"]}): {p["labels"]} labels{split}, macro F1 {fmt(p["macro_f1"])} '
               f'on {p["n"]} hold-out items{" (activated)" if p["activated"] else ""}')
        parts.append(f'<circle class="point-sampler" cx="{sx(p["labels"]):.1f}" cy="{sy(p["macro_f1"]):.1f}" r="5" '
                     f'fill="{SAMPLER}" stroke="#fff" stroke-width="1.5"><title>{escape(tip)}</title></circle>')
        parts.append(f'<text x="{sx(p["labels"]):.1f}" y="{sy(p["macro_f1"]) - 9:.1f}" text-anchor="middle" '
                     f'font-size="11" font-weight="600" fill="{SAMPLER}">R{p["round"]}</text>')
    return parts


def _random_arm(arm, random, sx, sy) -> list[str]:
    if not arm:
        return []
    parts = [_polyline([(p["labels"], p["macro_f1"]) for p in arm], sx, sy, RANDOM, "", 1.8)]
    for p in arm:
        x, y, sd = sx(p["labels"]), p["macro_f1"], p.get("sd") if _number(p.get("sd")) else 0.0
        lo, hi = sy(max(y - sd, 0.0)), sy(min(y + sd, 1.0))
        tip = (f'random arm: {p["labels"]} random labels, macro F1 {fmt(y)} ± {fmt(sd)} over '
               f'{p.get("repeats", "?")} repeats, on round {random.get("round")}\'s hold-out')
        parts.append(f'<g class="point-random"><line x1="{x:.1f}" y1="{lo:.1f}" x2="{x:.1f}" y2="{hi:.1f}" '
                     f'stroke="{RANDOM}" stroke-width="1.5"/><circle cx="{x:.1f}" cy="{sy(y):.1f}" r="4" fill="#fff" '
                     f'stroke="{RANDOM}" stroke-width="2"/><title>{escape(tip)}</title></g>')
    last = arm[-1]
    if last["labels"] == random.get("labels"):
        # At the latest round the random subset is nearly the whole pool: say so where the eye lands.
        parts.append(f'<text x="{sx(last["labels"]):.1f}" y="{sy(max(last["macro_f1"] - (last.get("sd") or 0), 0)) + 16:.1f}" '
                     f'text-anchor="middle" font-size="10" fill="{RANDOM}">same size</text>')
    return parts


def quality_svg(numbers: dict, width: int = 360, height: int = 220) -> str:
    """Accuracy (solid) and ECE (red) of each round's new version on its hold-out, majority accuracy dashed."""
    sampler, majority = numbers["sampler"], numbers["majority"]
    if not sampler:
        return ""
    last = max(p["round"] for p in sampler)
    x_max = last + 1
    box = (44, 12, 28, 40)
    parts, sx, sy = _frame("loop-quality", "Accuracy and calibration error per round", width, height, box, x_max,
                           "round", "hold-out", x_ticks=[p["round"] for p in sampler])
    series = [("accuracy", SAMPLER, "", [(p["round"], p["accuracy"]) for p in sampler if p["accuracy"] is not None]),
              ("ECE", ECE, "", [(p["round"], p["ece"]) for p in sampler if p["ece"] is not None]),
              ("majority accuracy", MAJORITY, "6 4",
               [(m["round"], m["accuracy"]) for m in majority if m["accuracy"] is not None])]
    for name, colour, dash, points in series:
        if not points:
            continue
        if len(points) > 1:
            parts.append(_polyline(points, sx, sy, colour, dash, 1.8))
        for x, y in points:
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{colour}"><title>'
                         f'{escape(f"round {x}: {name} {fmt(y)}")}</title></circle>')
    parts += _legend([(SAMPLER, "", "accuracy"), (ECE, "", "ECE"), (MAJORITY, "6 4", "majority acc.")], box[0], 10)
    parts.append("</svg>")
    return mark_safe("".join(parts))
