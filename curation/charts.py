"""The charts of a filter run: the funnel, and each step's score histogram.

The numbers: ``funnel_rows`` turns a run's funnel into percentages of the starting count (as the
Conceptual Captions paper reports its stages), ``score_histogram`` and ``what_if`` count scores with
database aggregates (a run may hold millions of decisions: no row is loaded). ``funnel_svg`` and
``histogram_svg`` hand those numbers to the kernel's chart module (``captionlab.charts``), which draws
and escapes them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.db.models import Count, F, FloatField, Max, Min, Q, Value
from django.db.models.functions import Cast, Floor
from django.utils.safestring import SafeString

from captionlab.charts import DROPPED, INK, KEPT, PALETTE, Marker, fmt_number, fmt_pct, hbar_chart, percent, truncate
from captionlab.charts import NA as NA_COLOUR
from captionlab.charts import histogram as histogram_chart

KEEP, DROP, NA = "keep", "drop", "na"
UNITS = {"image": ("image", "images"), "caption": ("caption", "captions")}
CUTOFF = "#c2410c"
# (key, count, percentage, name, colour) of a funnel bar's segments, in their order along it.
SEGMENTS = (("kept", "kept", "pct_kept", "kept", KEPT), ("na", "not_applicable", "pct_na", "not applicable", NA_COLOUR),
            ("dropped", "dropped", "pct_dropped", "dropped", DROPPED))


def ordinal(value: float) -> str:
    """55 -> "55th", 1 -> "1st", 22 -> "22nd", 12.5 -> "12.5th"."""
    text = fmt_number(value)
    if not float(value).is_integer():
        return f"{text}th"
    whole = int(value)
    suffix = "th" if whole % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(whole % 10, "th")
    return f"{text}{suffix}"


# --- The funnel ----------------------------------------------------------------------------------


def funnel_rows(funnel: list[dict]) -> list[dict]:
    """Each step with its counts as percentages of the starting count of its own unit.

    Image steps count images and caption steps count captions, so each unit has its own start:
    what entered the first step of that unit. "left" is what went on to the next step (kept and
    not applicable: only a drop removes an item).
    """
    starts: dict[str, int] = {}
    rows = []
    for row in funnel:
        target = row.get("target") or "caption"
        start = starts.setdefault(target, row["entered"])
        left = row["kept"] + row["not_applicable"]
        rows.append({
            **row, "target": target, "start": start, "unit": UNITS.get(target, (target, target + "s"))[1],
            "left": left,
            "pct_entered": percent(row["entered"], start), "pct_kept": percent(row["kept"], start),
            "pct_dropped": percent(row["dropped"], start), "pct_na": percent(row["not_applicable"], start),
            "pct_left": percent(left, start),
            "pct_dropped_of_entered": percent(row["dropped"], row["entered"]),
        })
    return rows


def funnel_svg(rows: list[dict], links: list[str] | None = None) -> SafeString:
    """A horizontal bar per step: kept, not applicable and dropped side by side, the bar as long as
    the share of the starting count that entered the step. ``links`` (one URL per row) make each
    bar a link to that step's decisions."""
    drawn = []
    for i, row in enumerate(rows):
        segments = [(row[pct], colour, f"{name}: {row[count]:,} ({fmt_pct(row[pct])}% of the starting {row['unit']})",
                     f"seg-{key}") for key, count, pct, name, colour in SEGMENTS]
        # "−0 (0.0% of entered)" under a step that dropped nothing reads as noise: it says "none dropped".
        note = ((f"{fmt_pct(row['pct_left'])}% · −{row['dropped']:,}",
                 f"({fmt_pct(row['pct_dropped_of_entered'])}% of entered)") if row["dropped"]
                else (f"{fmt_pct(row['pct_left'])}%", "none dropped"))
        drawn.append({"label": truncate(f"{row['step'] + 1}. {row['label']}", 34),
                      "sub": f"{row['entered']:,} {row['unit']}", "bars": [segments], "notes": [note],
                      "href": links[i] if links and i < len(links) else "",
                      "attrs": {"cls": "funnel-row", "data_step": row["step"], "data_entered": row["entered"],
                                "data_kept": row["kept"], "data_dropped": row["dropped"],
                                "data_na": row["not_applicable"]}})
    desc = "; ".join(f"step {r['step'] + 1} {r['label']}: {r['entered']} {r['unit']} entered, {r['kept']} kept, "
                     f"{r['dropped']} dropped, {r['not_applicable']} not applicable" for r in rows)
    return hbar_chart("chart funnel-chart",
                      "Funnel of the run: what each step kept, dropped and found not applicable", drawn,
                      desc=desc, width=860, label_w=250, bar_w=330, ticks=(0, 25, 50, 75, 100), tick_suffix="%",
                      heading="left after the step · dropped",
                      legend_items=[(colour, name) for *_, name, colour in SEGMENTS])


# --- Score histograms ----------------------------------------------------------------------------


def thresholds_of(params: dict, names=()) -> dict[str, float]:
    """The bounds a score is compared with: the parameters ``names`` (a filter's ``score_thresholds``,
    each named min_* or max_*) that are set to a number. Other numeric parameters (a character limit, how
    many n-grams a decision lists) are not bounds on the score."""
    found = {}
    for name, value in (params or {}).items():
        if name in names and (name.startswith("min_") or name.startswith("max_")) and isinstance(value, (int, float)) \
                and not isinstance(value, bool) and math.isfinite(value):
            found[name] = float(value)
    return found


def thresholds_used(params: dict, names, decisions) -> tuple[dict[str, float], dict[str, str]]:
    """The bounds a step's decisions were actually cut at, and a note per bound that was not its parameter.

    A filter may compute a bound when it runs and record it in each decision's details as ``<name>_used``
    (informativeness keeps the ``min_rho_percentile``-th percentile of its fitted corpus, so ``min_rho`` is
    empty by default and ``min_rho_used`` says where the cut fell). The recorded value wins over the
    parameter (it is the higher of the two when both are set); when a ``<name>_percentile`` parameter is
    set, the note says which percentile it stands for. ``decisions``: the step's decisions (a queryset)."""
    found = thresholds_of(params, names)
    notes: dict[str, str] = {}
    # One row: a filter that computes a bound records it on every decision it scored.
    details = decisions.filter(score__isnull=False).order_by("pk").values_list("details", flat=True).first()
    details = details if isinstance(details, dict) else {}
    for name in names or ():
        if not (name.startswith("min_") or name.startswith("max_")):
            continue
        value = details.get(f"{name}_used")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        value = float(value)
        percentile = (params or {}).get(f"{name}_percentile")
        if isinstance(percentile, (int, float)) and not isinstance(percentile, bool) and found.get(name) != value:
            notes[name] = f"{ordinal(float(percentile))} percentile cut"
        elif name not in found:
            notes[name] = "computed when run"
        found[name] = value
    return found, notes


def passes(thresholds: dict[str, float]) -> Q:
    """The condition "the score is within every bound" (min_* inclusive below, max_* above)."""
    condition = Q()
    for name, value in thresholds.items():
        condition &= Q(score__gte=value) if name.startswith("min_") else Q(score__lte=value)
    return condition


@dataclass
class Histogram:
    lo: float
    hi: float
    bins: list[dict]  # {"lo", "hi", "kept", "dropped", "other"}
    scored: int  # decisions with a score
    unscored: int
    thresholds: dict[str, float] = field(default_factory=dict)
    integer: bool = False  # whole-number scores, one bin per value
    notes: dict[str, str] = field(default_factory=dict)  # threshold name -> what it is ("55th percentile cut")

    @property
    def peak(self) -> int:
        return max((b["kept"] + b["dropped"] + b["other"] for b in self.bins), default=0)


def score_histogram(decisions, thresholds: dict[str, float], bins: int = 30) -> Histogram:
    """Counts of scores in ``bins`` equal bins, split by the filter's own outcome, in two queries.

    The range covers the scores and the current thresholds (when they are not far off), so the
    threshold lines fall on the chart.
    """
    scored = decisions.filter(score__isnull=False)
    stats = scored.aggregate(lo=Min("score"), hi=Max("score"), n=Count("pk"),
                             fractional=Count("pk", filter=~Q(score=Floor("score"))))
    unscored = decisions.filter(score__isnull=True).count()
    if not stats["n"]:
        return Histogram(0.0, 1.0, [], 0, unscored, thresholds)
    lo, hi = float(stats["lo"]), float(stats["hi"])
    span = hi - lo
    for value in thresholds.values():
        if lo - span <= value <= hi + span or span == 0:
            lo, hi = min(lo, value), max(hi, value)
    integer = not stats["fractional"] and math.floor(hi) - math.ceil(lo) < bins
    if integer:
        # Whole-number scores (word counts, pixels): one bin per value, centred on it.
        lo, hi = math.ceil(lo) - 0.5, math.floor(hi) + 0.5
        bins = int(hi - lo)
    else:
        if hi - lo <= 0:
            lo, hi = lo - 0.5, hi + 0.5
        pad = (hi - lo) * 0.02
        lo, hi = lo - pad, hi + pad
    width = (hi - lo) / bins
    rows = (scored.annotate(bin=Floor((Cast(F("score"), FloatField()) - Value(lo)) / Value(width)))
            .values("bin", "outcome").annotate(n=Count("pk")).order_by())
    table = [{"lo": lo + i * width, "hi": lo + (i + 1) * width, "kept": 0, "dropped": 0, "other": 0}
             for i in range(bins)]
    for row in rows:
        index = min(max(int(row["bin"]), 0), bins - 1)
        key = {KEEP: "kept", DROP: "dropped"}.get(row["outcome"], "other")
        table[index][key] += row["n"]
    return Histogram(lo, hi, table, stats["n"], unscored, thresholds, integer)


def what_if(decisions, current: dict[str, float], proposed: dict[str, float]) -> dict[str, int]:
    """How many decisions other thresholds would change, in one aggregate query.

    A kept item within the current bounds but outside the proposed ones would be dropped; a dropped
    item outside the current bounds (dropped by the threshold) but within the proposed ones would
    be kept. Decisions a curator overrode keep their override; items without a score are left out.
    """
    now, then = passes(current), passes(proposed)
    counts = (decisions.filter(score__isnull=False, override="")
              .aggregate(to_drop=Count("pk", filter=Q(outcome=KEEP) & now & ~then),
                         to_keep=Count("pk", filter=Q(outcome=DROP) & ~now & then)))
    return {"to_drop": counts["to_drop"] or 0, "to_keep": counts["to_keep"] or 0}


def histogram_svg(histogram: Histogram, proposed: dict[str, float] | None = None,
                  cutoffs: dict[str, float] | None = None) -> SafeString:
    """Stacked bars (kept, other, dropped) per bin, current thresholds as solid lines and proposed
    ones, where they differ, as dashed lines; ``cutoffs`` ({label: score}, other cut-offs a step
    computed, such as alignment's top-k% and calibrated ones) as dotted lines of their own colour."""
    h, proposed = histogram, proposed or {}

    def marker(name, value, kind, colour, dash, note=""):
        remarks = ", ".join(r for r in (note, "" if h.lo <= value <= h.hi else "off the chart") if r)
        label = f"{'new ' if kind == 'threshold proposed' else ''}{name} = {fmt_number(value)}"
        return Marker(value, label + (f" ({remarks})" if remarks else ""), colour, dash, kind,
                      {"data_name": name, "data_value": str(value), "data_note": note})

    markers = []
    for name, value in sorted(h.thresholds.items()):
        markers.append(marker(name, value, "threshold", INK, "", h.notes.get(name, "")))
        if proposed.get(name) is not None and proposed[name] != value:
            markers.append(marker(name, proposed[name], "threshold proposed", PALETTE[0], "5 4"))
    markers += [marker(name, value, "cutoff", CUTOFF, "2 3") for name, value in sorted((cutoffs or {}).items())]
    ticks = (h.lo, (h.lo + h.hi) / 2, h.hi)
    if h.integer:
        ticks = sorted({h.lo + 0.5, float(round((h.lo + h.hi) / 2)), h.hi - 0.5})
    return histogram_chart("chart histogram-chart", f"Histogram of {h.scored:,} scores",
                           [(b["lo"], b["hi"]) for b in h.bins],
                           [(key, [b[key] for b in h.bins], colour) for key, colour in
                            (("kept", KEPT), ("other", NA_COLOUR), ("dropped", DROPPED))],
                           markers=markers, marker_rows=3, x_ticks=ticks, x_title="score", width=680, height=262,
                           empty_text="No scores to show")
