"""Server-side SVG charts of a campaign dashboard: votes over time, time per task, distributions.

Same approach as ``curation.charts``: the numbers are computed first (``throughput``,
``seconds_summary``) with as little loaded as possible, the pictures are plain inline SVG with
axis labels and a <title> per bar, and every text that reaches the SVG is escaped (worker names
and labels come from people).
"""
from __future__ import annotations

import math
from datetime import timedelta

from django.db.models import Count
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from curation.charts import _text, _truncate, fmt_number

BAR = "#3b5bdb"
MUTED = "#5d6778"
GRID = "#eef0f4"
PALETTE = ("#3b5bdb", "#2f9e66", "#d9534f", "#e8a317", "#7048e8", "#1098ad", "#a8b0bd", "#c2255c")
MIN_HOURS = 12  # the hourly chart shows at least this many hours, so one busy hour is not one wide bar
MAX_SECONDS_LOADED = 100_000  # the time-per-task figures read at most the latest this many votes


# --- Numbers -------------------------------------------------------------------------------------


def throughput(votes) -> dict:
    """Votes per hour (per day when the campaign spans more than three days), oldest first, with
    empty buckets filled in so the gaps show. One grouped query."""
    votes = votes.order_by()
    first = votes.order_by("created_at").values_list("created_at", flat=True).first()
    if first is None:
        return {"unit": "hour", "buckets": []}
    last = votes.order_by("-created_at").values_list("created_at", flat=True).first()
    daily = last - first > timedelta(days=3)
    trunc, step, unit = (TruncDay, timedelta(days=1), "day") if daily else (TruncHour, timedelta(hours=1), "hour")
    tz = timezone.get_current_timezone()
    rows = dict(votes.annotate(bucket=trunc("created_at", tzinfo=tz)).values("bucket")
                .annotate(n=Count("pk")).values_list("bucket", "n"))
    start = min(rows)
    end = max(rows)
    if not daily and end - start < timedelta(hours=MIN_HOURS - 1):  # a short campaign: show the last hours too
        start = end - timedelta(hours=MIN_HOURS - 1)
    buckets = []
    at = start
    while at <= end and len(buckets) < 500:
        buckets.append({"at": at, "n": rows.get(at, 0)})
        at = timezone.localtime(at + step, tz).replace(minute=0, second=0, microsecond=0)
        if daily:
            at = at.replace(hour=0)
    return {"unit": unit, "buckets": buckets}


def quantile(sorted_values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def seconds_summary(votes, bins: int = 20) -> dict:
    """Median and 90th percentile of the time taken per vote, and a histogram (the top 1 % are
    folded into the last bin so one forgotten tab does not squash the chart)."""
    values = sorted(v for v in votes.order_by("-pk").values_list("seconds", flat=True)[:MAX_SECONDS_LOADED]
                    if v is not None and v > 0)
    if not values:
        return {"n": 0, "median": None, "p90": None, "bins": []}
    top = quantile(values, 0.99) or values[-1]
    top = max(top, 1.0)
    width = top / bins
    counts = [0] * bins
    for v in values:
        counts[min(int(v / width), bins - 1)] += 1
    return {"n": len(values), "median": quantile(values, 0.5), "p90": quantile(values, 0.9),
            "bins": [{"lo": i * width, "hi": (i + 1) * width, "n": c} for i, c in enumerate(counts)]}


# --- Pictures ------------------------------------------------------------------------------------


def _open(cls: str, width: int, height: int, title: str) -> list[str]:
    return [f'<svg class="chart {cls}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="100%" role="img" font-family="system-ui, sans-serif" font-size="12">',
            f"<title>{escape(title)}</title>"]


def _empty(cls: str, title: str, message: str) -> SafeString:
    out = _open(cls, 600, 120, title)
    out.append(_text(300, 64, message, anchor="middle", fill=MUTED))
    out.append("</svg>")
    return mark_safe("".join(out))


def _nice_ticks(peak: float) -> list[float]:
    """0, a middle and a top tick on round numbers."""
    if peak <= 0:
        return [0]
    magnitude = 10 ** math.floor(math.log10(peak))
    step = next(m * magnitude for m in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10) if peak / (m * magnitude) <= 4)
    ticks, t = [], 0.0
    while t < peak + step * 0.999:
        ticks.append(round(t, 10))
        t += step
    return ticks


def _frame(out: list[str], left, top, plot_w, plot_h, ticks, y_label, x_label, width, height):
    top_tick = ticks[-1] or 1
    for tick in ticks:
        y = top + plot_h - plot_h * tick / top_tick
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="{GRID}"/>')
        out.append(_text(left - 6, y + 4, fmt_number(tick), anchor="end", size=11, fill=MUTED))
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="{MUTED}"/>')
    out.append(f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" font-size="11" fill="{MUTED}" '
               f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{escape(y_label)}</text>')
    out.append(_text(left + plot_w / 2, height - 6, x_label, anchor="middle", size=11, fill=MUTED))


def bar_chart(items: list[tuple[str, float]], *, title: str, x_label: str, y_label: str = "votes",
              cls: str = "bar-chart", colours: bool = True) -> SafeString:
    """Vertical bars, one per (label, value), labelled under the bar and with the value on top."""
    items = [(str(label), float(value or 0)) for label, value in items]
    if not items:
        return _empty(cls, title, "Nothing to show yet")
    width = 520  # one width for every chart of a card, so their text reads at one size
    height, left, right, top, bottom = 240, 56, 12, 22, 52
    plot_w, plot_h = width - left - right, height - top - bottom
    ticks = _nice_ticks(max(v for _, v in items))
    out = _open(cls, width, height, title)
    _frame(out, left, top, plot_w, plot_h, ticks, y_label, x_label, width, height)
    top_tick = ticks[-1] or 1
    slot = plot_w / len(items)
    bar_w = min(slot * 0.7, 80)
    total = sum(v for _, v in items) or 1
    for i, (label, value) in enumerate(items):
        x = left + slot * i + (slot - bar_w) / 2
        h = plot_h * value / top_tick
        y = top + plot_h - h
        colour = PALETTE[i % len(PALETTE)] if colours else BAR
        tip = f"{label}: {fmt_number(value)} ({100 * value / total:.1f}%)"
        out.append(f'<rect class="bar" data-label="{escape(label)}" data-value="{fmt_number(value)}" '
                   f'x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{max(h, 0.5 if value else 0):.1f}" '
                   f'rx="2" fill="{colour}"><title>{escape(tip)}</title></rect>')
        out.append(_text(x + bar_w / 2, y - 5, fmt_number(value), anchor="middle", size=11, weight="600"))
        out.append(_text(x + bar_w / 2, top + plot_h + 15, _truncate(label, max(int(slot / 7), 4)),
                         anchor="middle", size=11))
    out.append("</svg>")
    return mark_safe("".join(out))


def grouped_bar_chart(labels: list[str], series: list[tuple[str, dict]], *, title: str, x_label: str,
                      y_label: str = "items", cls: str = "grouped-chart") -> SafeString:
    """One group of bars per label, one bar per series (e.g. per aggregation method), with a legend:
    the methods' label distributions side by side on one chart."""
    labels = [str(label) for label in labels]
    if not labels or not series:
        return _empty(cls, title, "Nothing to show yet")
    values = [[float(dist.get(label, 0) or 0) for label in labels] for _, dist in series]
    width = 520
    legend_rows = math.ceil(len(series) / 4)
    height, left, right, top, bottom = 230 + 18 * legend_rows, 52, 12, 22, 52 + 18 * legend_rows
    plot_w, plot_h = width - left - right, height - top - bottom
    ticks = _nice_ticks(max(max(row) for row in values))
    out = _open(cls, width, height, title)
    _frame(out, left, top, plot_w, plot_h, ticks, y_label, "", width, height)
    top_tick = ticks[-1] or 1
    slot = plot_w / len(labels)
    bar_w = min(slot * 0.8 / len(series), 40)
    for i, label in enumerate(labels):
        x0 = left + slot * i + (slot - bar_w * len(series)) / 2
        for j, (name, _) in enumerate(series):
            value = values[j][i]
            h = plot_h * value / top_tick
            tip = f"{name}, {label}: {fmt_number(value)}"
            out.append(f'<rect class="bar" data-series="{escape(name)}" data-label="{escape(label)}" '
                       f'data-value="{fmt_number(value)}" x="{x0 + bar_w * j:.1f}" y="{top + plot_h - h:.1f}" '
                       f'width="{max(bar_w - 1, 0.5):.1f}" height="{h:.1f}" fill="{PALETTE[j % len(PALETTE)]}">'
                       f"<title>{escape(tip)}</title></rect>")
        out.append(_text(left + slot * (i + 0.5), top + plot_h + 15, _truncate(label, max(int(slot / 7), 4)),
                         anchor="middle", size=11))
    out.append(_text(left + plot_w / 2, top + plot_h + 32, x_label, anchor="middle", size=11, fill=MUTED))
    for j, (name, _) in enumerate(series):
        lx = left + (j % 4) * (plot_w / 4)
        ly = top + plot_h + 52 + 18 * (j // 4)
        out.append(f'<rect x="{lx:.1f}" y="{ly - 10}" width="12" height="12" rx="2" fill="{PALETTE[j % len(PALETTE)]}"/>')
        out.append(_text(lx + 17, ly, _truncate(name, 18), size=11))
    out.append("</svg>")
    return mark_safe("".join(out))


def throughput_svg(data: dict) -> SafeString:
    """Votes per hour (or day) as bars on a time axis."""
    buckets, unit = data["buckets"], data["unit"]
    title = f"Votes per {unit}"
    if not buckets:
        return _empty("throughput-chart", title, "No votes yet")
    width, height, left, right, top, bottom = 560, 220, 52, 14, 18, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    ticks = _nice_ticks(max(b["n"] for b in buckets))
    out = _open("throughput-chart", width, height, title)
    _frame(out, left, top, plot_w, plot_h, ticks, f"votes per {unit}", "time" + (" (local)" if unit == "hour" else ""),
           width, height)
    top_tick = ticks[-1] or 1
    slot = plot_w / len(buckets)
    fmt = "%d %b %H:%M" if unit == "hour" else "%d %b"
    for i, b in enumerate(buckets):
        h = plot_h * b["n"] / top_tick
        x = left + slot * i
        label = timezone.localtime(b["at"]).strftime(fmt)
        out.append(f'<rect class="bar" x="{x + 0.5:.1f}" y="{top + plot_h - h:.1f}" width="{max(slot - 1, 0.5):.1f}" '
                   f'height="{h:.1f}" fill="{BAR}"><title>{escape(label + ": " + str(b["n"]) + " votes")}</title></rect>')
    label_every = max(1, math.ceil(len(buckets) / 4))
    for i in range(0, len(buckets), label_every):
        label = timezone.localtime(buckets[i]["at"]).strftime(fmt)
        out.append(_text(left + slot * (i + 0.5), top + plot_h + 15, label, anchor="middle", size=10, fill=MUTED))
    out.append("</svg>")
    return mark_safe("".join(out))


def seconds_svg(summary: dict) -> SafeString:
    """Histogram of seconds per vote, with the median and p90 as vertical lines."""
    title = "Seconds per vote"
    if not summary["bins"]:
        return _empty("seconds-chart", title, "No timed votes yet")
    width, height, left, right, top, bottom = 560, 230, 52, 14, 40, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    bins = summary["bins"]
    ticks = _nice_ticks(max(b["n"] for b in bins))
    out = _open("seconds-chart", width, height, title)
    _frame(out, left, top, plot_w, plot_h, ticks, "votes", "seconds per vote (the slowest 1 % in the last bar)",
           width, height)
    top_tick = ticks[-1] or 1
    span = bins[-1]["hi"]
    slot = plot_w / len(bins)
    for i, b in enumerate(bins):
        h = plot_h * b["n"] / top_tick
        tip = f"{fmt_number(b['lo'])} to {fmt_number(b['hi'])} s: {b['n']} votes"
        out.append(f'<rect class="bar" x="{left + slot * i + 0.5:.1f}" y="{top + plot_h - h:.1f}" '
                   f'width="{max(slot - 1, 0.5):.1f}" height="{h:.1f}" fill="#1098ad"><title>{escape(tip)}</title></rect>')
    for value in (0, span / 2, span):
        out.append(_text(left + plot_w * value / span, top + plot_h + 15, fmt_number(round(value, 1)),
                         anchor="middle", size=11, fill=MUTED))
    for row, (name, value, colour) in enumerate((("median", summary["median"], "#1c2330"),
                                                  ("p90", summary["p90"], "#d9534f"))):
        x = left + plot_w * min(value, span) / span
        y = top - 26 + 13 * row  # two rows of labels above the plot: close lines do not overlap
        out.append(f'<line class="marker" x1="{x:.1f}" y1="{y + 3}" x2="{x:.1f}" y2="{top + plot_h}" '
                   f'stroke="{colour}" stroke-width="2" stroke-dasharray="4 3"/>')
        anchor, nudge = ("end", -4) if x > left + plot_w * 0.7 else ("start", 4)
        out.append(_text(x + nudge, y, f"{name} {fmt_number(round(value, 1))} s", anchor=anchor, size=11,
                         fill=colour, weight="600"))
    out.append("</svg>")
    return mark_safe("".join(out))


__all__ = ["throughput", "seconds_summary", "quantile", "bar_chart", "grouped_bar_chart", "throughput_svg", "seconds_svg"]
