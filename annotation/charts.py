"""The charts of a campaign dashboard: votes over time, time per task, distributions.

The numbers are computed here (``throughput``, ``seconds_summary``) with as little loaded as possible;
the functions below turn them into the series the kernel's chart module (``captionlab.charts``) draws,
with axis labels, a tooltip per bar, and every text escaped (worker names and labels come from people).
"""
from __future__ import annotations

import math
from datetime import timedelta

from django.db.models import Count
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone
from django.utils.safestring import SafeString

from captionlab import charts as draw
from captionlab.charts import fmt_number

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


# --- Pictures: the series the kernel's chart module draws -----------------------------------------


def bar_chart(items: list[tuple[str, float]], *, title: str, x_label: str, y_label: str = "votes",
              cls: str = "bar-chart", colours: bool = True) -> SafeString:
    """Vertical bars, one per (label, value), labelled under the bar and with the value on top."""
    items = [(str(label), float(value or 0)) for label, value in items]
    return draw.bar_chart(f"chart {cls}", title, [label for label, _ in items],
                          [(y_label, [value for _, value in items], draw.PALETTE if colours else draw.PALETTE[0])],
                          x_title=x_label, y_title=y_label, values=True)


def grouped_bar_chart(labels: list[str], series: list[tuple[str, dict]], *, title: str, x_label: str,
                      y_label: str = "items", cls: str = "grouped-chart") -> SafeString:
    """One group of bars per label, one bar per series (e.g. per aggregation method), with a legend:
    the methods' label distributions side by side on one chart."""
    labels = [str(label) for label in labels]
    return draw.bar_chart(f"chart {cls}", title, labels,
                          [(name, [float(dist.get(label, 0) or 0) for label in labels], draw.PALETTE[j % len(draw.PALETTE)])
                           for j, (name, dist) in enumerate(series)], x_title=x_label, y_title=y_label, fill=0.8)


def throughput_svg(data: dict) -> SafeString:
    """Votes per hour (or day) as bars on a time axis."""
    buckets, unit = data["buckets"], data["unit"]
    fmt = "%d %b %H:%M" if unit == "hour" else "%d %b"
    return draw.bar_chart("chart throughput-chart", f"Votes per {unit}",
                          [timezone.localtime(b["at"]).strftime(fmt) for b in buckets],
                          [("votes", [b["n"] for b in buckets], draw.PALETTE[0])],
                          x_title="time" + (" (local)" if unit == "hour" else ""), y_title=f"votes per {unit}",
                          width=560, height=220, fill=1.0, label_every=max(1, math.ceil(len(buckets) / 4)),
                          empty_text="No votes yet")


def seconds_svg(summary: dict) -> SafeString:
    """Histogram of seconds per vote, with the median and p90 as vertical lines."""
    bins = summary["bins"]
    span = bins[-1]["hi"] if bins else 1.0
    markers = [draw.Marker(summary[key], f"{key} {fmt_number(round(summary[key], 1))} s", colour)
               for key, colour in (("median", draw.INK), ("p90", draw.DROPPED))] if bins else []
    return draw.histogram("chart seconds-chart", "Seconds per vote", [(b["lo"], b["hi"]) for b in bins],
                          [("votes", [b["n"] for b in bins], draw.PALETTE[4])], markers=markers,
                          x_ticks=[(value, fmt_number(round(value, 1))) for value in (0, span / 2, span)],
                          x_title="seconds per vote (the slowest 1 % in the last bar)", y_title="votes",
                          empty_text="No timed votes yet")


__all__ = ["throughput", "seconds_summary", "quantile", "bar_chart", "grouped_bar_chart", "throughput_svg", "seconds_svg"]
