"""The learning loop's charts, drawn by the kernel's chart module (``captionlab.charts``).

``curve_numbers`` reads the finished rounds once (the page, the API-less terminal view of
``manage.py loop show`` and the SVG all draw from it); ``learning_curve_svg`` draws hold-out macro F1
against the labels each round trained on: the loop's sampler (one point per round), the latest round's
simulated random arm (mean ± sd over its repeats) and the majority class (dashed); ``quality_svg``
draws accuracy and expected calibration error per round. Both return "" when there is nothing to draw.
"""
from __future__ import annotations

import math

from captionlab import charts as draw
from captionlab.charts import PALETTE, Line

from ..charts import fmt

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


def _ticks(x_max: float) -> list[int]:
    """About five round numbers from 0 to x_max."""
    raw = max(x_max / 5, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return list(range(0, int(x_max) + 1, int(step)))


def learning_curve_svg(numbers: dict, sampler_name: str = "sampler", width: int = 720, height: int = 320) -> str:
    sampler, majority, random = numbers["sampler"], numbers["majority"], numbers["random"] or {}
    arm = random.get("points") or []
    if not sampler:
        return ""
    x_max = max([p["labels"] for p in sampler + arm] + [1]) * 1.08
    lines = [Line("chance", [(0, CHANCE_MACRO_F1), (x_max, CHANCE_MACRO_F1)], CHANCE, "2 3", 1.2,
                  title="chance: a guess with the class shares")]
    if majority:
        # Each round's hold-out is the one labelled by then, so the bar moves; flat before the first
        # round and after the last, so one round still draws a line.
        steps = [(0, majority[0]["macro_f1"])] + [(m["labels"], m["macro_f1"]) for m in majority] + \
            [(x_max, majority[-1]["macro_f1"])]
        lines.append(Line("majority class", steps, MAJORITY, "6 4", 1.6, title="majority class (one answer for everything)"))
    notes = []
    if arm:
        sds = [p["sd"] if _number(p.get("sd")) else 0.0 for p in arm]
        lines.append(Line(f"random arm (simulated at round {random.get('round')})",
                          [(p["labels"], p["macro_f1"]) for p in arm], RANDOM, width=1.8, dot=4, hollow=True,
                          cls="point-random", errors=sds,
                          tips=[f'random arm: {p["labels"]} random labels, macro F1 {fmt(p["macro_f1"])} ± {fmt(sd)} over '
                                f'{p.get("repeats", "?")} repeats, on round {random.get("round")}\'s hold-out'
                                for p, sd in zip(arm, sds)]))
        if arm[-1]["labels"] == random.get("labels"):
            # At the latest round the random subset is nearly the whole pool: say so where the eye lands.
            notes.append((arm[-1]["labels"], max(arm[-1]["macro_f1"] - sds[-1], 0), "same size", RANDOM))
    tips = []
    for p in sampler:
        split = f' ({p["trained_on"]} in its training split)' if p["trained_on"] not in (None, p["labels"]) else ""
        tips.append(f'round {p["round"]} ({p["sampler"]}): {p["labels"]} labels{split}, macro F1 {fmt(p["macro_f1"])} '
                    f'on {p["n"]} hold-out items{" (activated)" if p["activated"] else ""}')
    lines.append(Line(f"{sampler_name} (each round)", [(p["labels"], p["macro_f1"]) for p in sampler], SAMPLER,
                      width=2.4, dot=5, cls="point-sampler", tips=tips, labels=[f"R{p['round']}" for p in sampler]))
    return draw.line_chart("loop-curve", "Learning curve: hold-out macro F1 against labels", lines, x=(0, x_max),
                           y=(0, 1), x_ticks=_ticks(x_max), y_ticks=(0, 0.25, 0.5, 0.75, 1.0),
                           x_title="labelled items (hold-out left out)", y_title="hold-out macro F1", notes=notes,
                           width=width, height=height)


def quality_svg(numbers: dict, width: int = 360, height: int = 220) -> str:
    """Accuracy (solid) and ECE (red) of each round's new version on its hold-out, majority accuracy dashed."""
    sampler, majority = numbers["sampler"], numbers["majority"]
    if not sampler:
        return ""
    series = [("accuracy", SAMPLER, "", [(p["round"], p["accuracy"]) for p in sampler if p["accuracy"] is not None]),
              ("ECE", ECE, "", [(p["round"], p["ece"]) for p in sampler if p["ece"] is not None]),
              ("majority accuracy", MAJORITY, "6 4",
               [(m["round"], m["accuracy"]) for m in majority if m["accuracy"] is not None])]
    lines = [Line(name, points, colour, dash, 1.8, dot=3.5, tips=[f"round {x}: {name} {fmt(y)}" for x, y in points])
             for name, colour, dash, points in series]
    return draw.line_chart("loop-quality", "Accuracy and calibration error per round", lines,
                           x=(0, max(p["round"] for p in sampler) + 1), y=(0, 1),
                           x_ticks=[p["round"] for p in sampler], y_ticks=(0, 0.25, 0.5, 0.75, 1.0), x_title="round",
                           y_title="hold-out", width=width, height=height, left=44)
