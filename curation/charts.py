"""Server-side SVG charts of a filter run: the funnel, and each step's score histogram.

Two halves. The numbers: ``funnel_rows`` turns a run's funnel into percentages of the starting
count (as the Conceptual Captions paper reports its stages), ``score_histogram`` and ``what_if``
count scores with database aggregates (a run may hold millions of decisions: no row is loaded).
The pictures: ``funnel_svg`` and ``histogram_svg`` draw those numbers as inline SVG, no JavaScript
and no library; every text in them is escaped.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.db.models import Count, F, FloatField, Max, Min, Q, Value
from django.db.models.functions import Cast, Floor
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

KEEP, DROP, NA = "keep", "drop", "na"
UNITS = {"image": ("image", "images"), "caption": ("caption", "captions")}
COLOURS = {"kept": "#2f9e66", "na": "#a8b0bd", "dropped": "#d9534f", "track": "#eef0f4", "cutoff": "#c2410c"}


def percent(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def fmt_pct(value: float) -> str:
    """One decimal; a tiny but non-zero share reads "<0.1" rather than a misleading "0.0"."""
    if 0 < value < 0.05:
        return "<0.1"
    return f"{value:.1f}"


def fmt_number(value: float) -> str:
    """A score for an axis or a label: short, and exact for whole numbers."""
    if value is None or math.isnan(value):
        return "—"
    if float(value).is_integer() and abs(value) < 1e9:
        return f"{int(value):,}"
    return f"{value:.3g}" if abs(value) >= 1e-3 else f"{value:.2e}"


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


def _text(x, y, content, *, anchor="start", cls="", size=None, weight=None, fill=None) -> str:
    attrs = [f'x="{x:.1f}"', f'y="{y:.1f}"', f'text-anchor="{anchor}"']
    if cls:
        attrs.append(f'class="{cls}"')
    if size:
        attrs.append(f'font-size="{size}"')
    if weight:
        attrs.append(f'font-weight="{weight}"')
    if fill:
        attrs.append(f'fill="{fill}"')
    return f"<text {' '.join(attrs)}>{escape(content)}</text>"


def _truncate(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


def funnel_svg(rows: list[dict], links: list[str] | None = None) -> SafeString:
    """A horizontal bar per step: kept, not applicable and dropped side by side, the bar as long as
    the share of the starting count that entered the step. ``links`` (one URL per row) make each
    bar a link to that step's decisions."""
    label_w, bar_x, bar_w, width = 250, 262, 330, 860
    value_x = bar_x + bar_w + 26
    top, row_h, bar_h = 34, 34, 18
    height = top + row_h * len(rows) + 34
    out = [
        f'<svg class="chart funnel-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="100%" role="img" aria-labelledby="funnel-title funnel-desc" font-family="system-ui, sans-serif" font-size="13">',
        '<title id="funnel-title">Funnel of the run: what each step kept, dropped and found not applicable</title>',
        '<desc id="funnel-desc">'
        + escape("; ".join(
            f"step {r['step'] + 1} {r['label']}: {r['entered']} {r['unit']} entered, {r['kept']} kept, "
            f"{r['dropped']} dropped, {r['not_applicable']} not applicable" for r in rows))
        + "</desc>",
    ]
    # Axis: 0-100 % of the starting count.
    for tick in (0, 25, 50, 75, 100):
        x = bar_x + bar_w * tick / 100
        out.append(f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" y2="{top + row_h * len(rows) - 6}" '
                   f'stroke="#e2e6ec" stroke-width="1"/>')
        out.append(_text(x, top - 14, f"{tick}%", anchor="middle", size=11, fill="#5d6778"))
    out.append(_text(value_x, top - 14, "left after the step · dropped", size=11, fill="#5d6778"))
    for i, row in enumerate(rows):
        y = top + i * row_h
        label = _truncate(f"{row['step'] + 1}. {row['label']}", 34)
        group = [f'<g class="funnel-row" data-step="{row["step"]}" data-entered="{row["entered"]}" '
                 f'data-kept="{row["kept"]}" data-dropped="{row["dropped"]}" data-na="{row["not_applicable"]}">']
        group.append(_text(label_w, y + bar_h - 4, label, anchor="end", fill="#1c2330"))
        group.append(_text(label_w, y + bar_h + 9, f"{row['entered']:,} {row['unit']}", anchor="end",
                           size=10, fill="#5d6778"))
        group.append(f'<rect x="{bar_x}" y="{y}" width="{bar_w}" height="{bar_h}" rx="3" fill="{COLOURS["track"]}"/>')
        x = float(bar_x)
        for key, count, pct, name in (("kept", row["kept"], row["pct_kept"], "kept"),
                                      ("na", row["not_applicable"], row["pct_na"], "not applicable"),
                                      ("dropped", row["dropped"], row["pct_dropped"], "dropped")):
            w = bar_w * min(pct, 100.0) / 100
            if count and w < 1:
                w = 1.0  # a non-zero count stays visible
            if not count:
                continue
            tip = f"{name}: {count:,} ({fmt_pct(pct)}% of the starting {row['unit']})"
            group.append(
                f'<rect class="seg-{key}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{COLOURS[key]}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            x += w
        # "−0 (0.0% of entered)" under a step that dropped nothing reads as noise: it says "none dropped".
        if row["dropped"]:
            summary = f"{fmt_pct(row['pct_left'])}% · −{row['dropped']:,}"
            share = f"({fmt_pct(row['pct_dropped_of_entered'])}% of entered)"
        else:
            summary, share = f"{fmt_pct(row['pct_left'])}%", "none dropped"
        group.append(
            f'<text x="{value_x}" y="{y + bar_h - 4}"><tspan font-weight="600" fill="#1c2330">{escape(summary)}</tspan>'
            f'<tspan dx="6" font-size="11" fill="#5d6778">{escape(share)}</tspan></text>')
        group.append("</g>")
        if links and i < len(links) and links[i]:
            group = [f'<a href="{escape(links[i])}">'] + group + ["</a>"]
        out.extend(group)
    # Legend.
    ly = top + row_h * len(rows) + 14
    lx = bar_x
    for key, name in (("kept", "kept"), ("na", "not applicable"), ("dropped", "dropped")):
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" rx="2" fill="{COLOURS[key]}"/>')
        out.append(_text(lx + 17, ly, name, size=12, fill="#1c2330"))
        lx += 40 + 7 * len(name)
    out.append("</svg>")
    return mark_safe("".join(out))


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
    """Stacked bars (kept, dropped, other) per bin, current thresholds as solid lines and proposed
    ones, where they differ, as dashed lines; ``cutoffs`` ({label: score}, other cut-offs a step
    computed, such as alignment's top-k% and calibrated ones) as dotted lines of their own colour."""
    width, height = 680, 262
    left, right, top, bottom = 48, 16, 46, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    out = [f'<svg class="chart histogram-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="100%" role="img" aria-labelledby="hist-title" font-family="system-ui, sans-serif" font-size="12">',
           f'<title id="hist-title">{escape(f"Histogram of {histogram.scored:,} scores")}</title>']
    if not histogram.bins:
        out.append(_text(width / 2, height / 2, "No scores to show", anchor="middle", fill="#5d6778"))
        out.append("</svg>")
        return mark_safe("".join(out))
    peak = histogram.peak or 1
    span = histogram.hi - histogram.lo

    def sx(value: float) -> float:
        return left + plot_w * (min(max(value, histogram.lo), histogram.hi) - histogram.lo) / span

    def sy(count: float) -> float:
        return top + plot_h - plot_h * count / peak

    for tick in sorted({0, peak // 2, peak}):  # counts: whole numbers, drawn where they are
        y = sy(tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eef0f4"/>')
        out.append(_text(left - 6, y + 4, fmt_number(tick), anchor="end", size=11, fill="#5d6778"))
    bar_w = plot_w / len(histogram.bins)
    for index, b in enumerate(histogram.bins):
        x = left + bar_w * index
        base = 0
        for key, colour in (("kept", COLOURS["kept"]), ("other", COLOURS["na"]), ("dropped", COLOURS["dropped"])):
            count = b[key]
            if not count:
                continue
            y0, y1 = sy(base + count), sy(base)
            tip = f"{fmt_number(b['lo'])} to {fmt_number(b['hi'])}: {count:,} {key}"
            out.append(
                f'<rect class="bin-{key}" x="{x + 0.5:.1f}" y="{y0:.1f}" width="{max(bar_w - 1, 0.5):.1f}" '
                f'height="{max(y1 - y0, 0.5):.1f}" fill="{colour}">'
                f"<title>{escape(tip)}</title></rect>")
            base += count
    axis_y = top + plot_h
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" stroke="#5d6778"/>')
    ticks = (histogram.lo, (histogram.lo + histogram.hi) / 2, histogram.hi)
    if histogram.integer:
        ticks = sorted({histogram.lo + 0.5, float(round((histogram.lo + histogram.hi) / 2)), histogram.hi - 0.5})
    for value in ticks:
        out.append(_text(sx(value), axis_y + 16, fmt_number(value), anchor="middle", size=11, fill="#5d6778"))
    out.append(_text(left + plot_w / 2, axis_y + 33, "score", anchor="middle", size=11, fill="#5d6778"))
    proposed = proposed or {}
    label_slots: list[tuple[float, int]] = []
    for name, value in sorted(histogram.thresholds.items()):
        out.extend(_threshold_line(name, value, sx, top, axis_y, label_slots, dashed=False,
                                   off=not histogram.lo <= value <= histogram.hi, note=histogram.notes.get(name, "")))
        new = proposed.get(name)
        if new is not None and new != value:
            out.extend(_threshold_line(name, new, sx, top, axis_y, label_slots, dashed=True,
                                       off=not histogram.lo <= new <= histogram.hi))
    for name, value in sorted((cutoffs or {}).items()):
        out.extend(_threshold_line(name, value, sx, top, axis_y, label_slots, dashed=False, cutoff=True,
                                   off=not histogram.lo <= value <= histogram.hi))
    out.append("</svg>")
    return mark_safe("".join(out))


def _threshold_line(name, value, sx, top, bottom, slots, *, dashed: bool, off: bool, cutoff: bool = False,
                    note: str = "") -> list[str]:
    x = sx(value)
    colour = COLOURS["cutoff"] if cutoff else "#3b5bdb" if dashed else "#1c2330"
    dash = ' stroke-dasharray="2 3"' if cutoff else ' stroke-dasharray="5 4"' if dashed else ""
    remarks = ", ".join(r for r in (note, "off the chart" if off else "") if r)
    label = f"{'new ' if dashed else ''}{name} = {fmt_number(value)}{f' ({remarks})' if remarks else ''}"
    # Labels of lines close together go on separate rows of text (three rows above the plot).
    level = next((row for row in range(3) if all(abs(sx_ - x) >= 150 or r != row for sx_, r in slots)), len(slots) % 3)
    slots.append((x, level))
    anchor = "end" if x > 480 else "start"
    nudge = -4 if anchor == "end" else 4
    kind = "cutoff" if cutoff else "threshold proposed" if dashed else "threshold"
    note_attr = f' data-note="{escape(note)}"' if note else ""
    return [
        f'<line class="{kind}" data-name="{escape(name)}" data-value="{value}"{note_attr} '
        f'x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{bottom}" stroke="{colour}" stroke-width="2"{dash}/>',
        _text(x + nudge, top - 34 + 12 * level, label, anchor=anchor, size=11, fill=colour, weight="600"),
    ]
