"""The learning loop's charts, drawn by the kernel's chart module (``captionlab.charts``).

``curve_numbers`` reads the finished rounds once (the page, the API-less terminal view of
``manage.py loop show`` and the SVG all draw from it); ``learning_curve_svg`` draws hold-out macro F1
against the labels each round trained on: every round's version re-scored by the latest round on the same
hold-out items with its bootstrap 95% interval, the latest round's simulated random arm on those items (its
interval), and the majority class, chance, the length rule and the word-frequency rule on them as flat
lines; ``quality_svg`` draws accuracy and expected calibration error per round. Both return "" when there
is nothing to draw.
"""
from __future__ import annotations

import math

from captionlab import charts as draw
from captionlab.charts import PALETTE, Line, error_span

from ..charts import fmt

SAMPLER, RANDOM, MAJORITY, CHANCE, ECE = PALETTE[0], PALETTE[2], "#6b7280", "#c4cad4", "#c2255c"
LENGTH, WORDFREQ = PALETTE[3], PALETTE[4]
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

    sampler:    [{round, labels, trained_on, macro_f1, interval, n, sampler, chosen_by, activated, accuracy, ece}]
                one point per finished round's version. From the latest round's ``curve`` (modeling.loop.judging):
                every version re-scored on the same hold-out items, with a bootstrap interval (``same_items``
                True); rounds stored before that read each round's own, smaller hold-out (``same_items`` False).
    baselines:  {name: macro F1} of the majority class, chance, the length rule and the word-frequency rule
                on those same items (empty for older rounds);
    majority:   [{round, labels, macro_f1, accuracy}] the majority class on each round's hold-out (the quality table);
    random:     {"round", "simulated", "points": [{labels, macro_f1, sd, interval, repeats}], "why", "n"} of the
                latest finished round, or None when no round has finished."""
    done = sorted((r for r in rounds if r.status == "done"), key=lambda r: r.number)
    by_number = {r.number: r for r in done}
    majority = [{"round": r.number, "labels": r.labels_used, "macro_f1": _metric(r, "majority", "macro_f1"),
                 "accuracy": _metric(r, "majority", "accuracy")} for r in done
                if _metric(r, "majority", "macro_f1") is not None]
    latest = (done[-1].holdout or {}) if done else {}
    sampler = []
    if latest.get("curve"):
        for p in latest["curve"]:
            r = by_number.get(p["round"])
            sampler.append({"round": p["round"], "labels": p["labels"], "macro_f1": p["macro_f1"],
                            "interval": p.get("interval"), "n": p["n"], "sampler": p.get("sampler"),
                            "chosen_by": p.get("chosen_by") or p.get("sampler"), "version": p.get("version"),
                            "activated": r.activated if r else bool(p.get("activated")),
                            "trained_on": trained_on(r) if r else None,
                            "accuracy": _metric(r, "new", "accuracy") if r else None,
                            "ece": _metric(r, "new", "ece") if r else None})
        baselines = {k: v["macro_f1"] for k, v in (latest.get("baselines") or {}).items() if _number(v.get("macro_f1"))}
        same_items, n = True, latest.get("n") or 0
    else:
        for r in done:
            if _metric(r, "new", "macro_f1") is not None:
                sampler.append({"round": r.number, "labels": r.labels_used, "macro_f1": _metric(r, "new", "macro_f1"),
                                "interval": None, "accuracy": _metric(r, "new", "accuracy"),
                                "ece": _metric(r, "new", "ece"), "n": (r.holdout or {}).get("n") or 0,
                                "sampler": r.sampler, "chosen_by": r.sampler, "activated": r.activated,
                                "trained_on": trained_on(r)})
        baselines, same_items, n = {}, False, None
    random = None
    if done:
        arm = latest.get("random_arm") or {}
        points = [p for p in arm.get("points") or [] if _number(p.get("labels")) and _number(p.get("macro_f1"))]
        random = {"round": done[-1].number, "simulated": bool(arm.get("simulated")),
                  "points": sorted(points, key=lambda p: p["labels"]), "n": latest.get("n") or 0,
                  "labels": done[-1].labels_used, "trained_on": trained_on(done[-1]),
                  "why": arm.get("why") or ("the round stored no random arm" if not arm else "")}
    return {"sampler": sampler, "majority": majority, "random": random, "baselines": baselines,
            "same_items": same_items, "n": n}


def _ticks(x_max: float) -> list[int]:
    """About five round numbers from 0 to x_max."""
    raw = max(x_max / 5, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return list(range(0, int(x_max) + 1, int(step)))


BASELINE_LINES = (("majority", "majority class", MAJORITY, "6 4"), ("chance", "chance", CHANCE, "2 3"),
                  ("length", "length rule (seed 004)", LENGTH, "8 3 2 3"),
                  ("wordfreq", "word-frequency rule", WORDFREQ, "1 3"))


def _interval_text(interval) -> str:
    return f" [95% interval {fmt(interval[0])}–{fmt(interval[1])}]" if interval else ""


def learning_curve_svg(numbers: dict, sampler_name: str = "sampler", width: int = 720, height: int = 320) -> str:
    sampler, majority, random = numbers["sampler"], numbers["majority"], numbers["random"] or {}
    arm = random.get("points") or []
    if not sampler:
        return ""
    x_max = max([p["labels"] for p in sampler + arm] + [1]) * 1.08
    same = numbers.get("same_items")
    where = f"the same {numbers.get('n')} hold-out items" if same else "each round's own hold-out"
    lines = []
    if same and numbers.get("baselines"):
        for key, name, colour, dash in BASELINE_LINES:
            value = numbers["baselines"].get(key)
            if _number(value):
                lines.append(Line(f"{name} {fmt(value)}", [(0, value), (x_max, value)], colour, dash, 1.4,
                                  title=f"{name}: macro F1 {fmt(value)} on {where}"))
    else:
        lines.append(Line("chance", [(0, CHANCE_MACRO_F1), (x_max, CHANCE_MACRO_F1)], CHANCE, "2 3", 1.2,
                          title="chance: a guess with the class shares"))
        if majority:
            # Each round's hold-out is the one labelled by then, so the bar moves; flat before the first
            # round and after the last, so one round still draws a line.
            steps = [(0, majority[0]["macro_f1"])] + [(m["labels"], m["macro_f1"]) for m in majority] + \
                [(x_max, majority[-1]["macro_f1"])]
            lines.append(Line("majority class", steps, MAJORITY, "6 4", 1.6,
                              title="majority class (one answer for everything)"))
    notes = []
    if arm:
        errors = [p["interval"] if p.get("interval") else (p["sd"] if _number(p.get("sd")) else 0.0) for p in arm]
        lines.append(Line(f"random arm (simulated at round {random.get('round')})",
                          [(p["labels"], p["macro_f1"]) for p in arm], RANDOM, width=1.8, dot=4, hollow=True,
                          cls="point-random", errors=errors,
                          tips=[f'random arm: {p["labels"]} random labels, macro F1 {fmt(p["macro_f1"])} '
                                f'(mean of {p.get("repeats", "?")} repeats, sd {fmt(p.get("sd"))})'
                                f'{_interval_text(p.get("interval"))} on {where}' for p in arm]))
        if arm[-1]["labels"] == random.get("labels"):
            # At the latest round the random subset is nearly the whole pool: say so where the eye lands.
            low = error_span(arm[-1]["macro_f1"], errors[-1])[0]
            notes.append((arm[-1]["labels"], max(low, 0), "same size", RANDOM))
    tips = []
    for p in sampler:
        split = f' ({p["trained_on"]} in its training split)' if p["trained_on"] not in (None, p["labels"]) else ""
        tips.append(f'round {p["round"]} (labels chosen by {p["chosen_by"]}): {p["labels"]} labels{split}, macro F1 '
                    f'{fmt(p["macro_f1"])}{_interval_text(p.get("interval"))} on {p["n"] if not same else where}'
                    f'{" hold-out items" if not same else ""}{" (activated)" if p["activated"] else ""}')
    lines.append(Line(f"{sampler_name} (each round)", [(p["labels"], p["macro_f1"]) for p in sampler], SAMPLER,
                      width=2.4, dot=5, cls="point-sampler", tips=tips, labels=[f"R{p['round']}" for p in sampler],
                      errors=[p["interval"] or 0.0 for p in sampler] if same else []))
    return draw.line_chart("loop-curve", f"Learning curve: macro F1 on {where} against labels", lines,
                           x=(0, x_max), y=(0, 1), x_ticks=_ticks(x_max), y_ticks=(0, 0.25, 0.5, 0.75, 1.0),
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
