"""Server-side SVG charts: bars along rows, bars on two axes (categories or histogram bins, grouped or
stacked), and lines with dots, error bars and marked values.

The apps turn their numbers into the series drawn here (curation: a run's funnel and a step's score
histogram; annotation: a campaign's votes; releases: counts per split; modeling: loss, reliability,
metric bars and the loop's learning curve); this module imports no app. No JavaScript and no library:
a chart is an inline ``<svg role="img">`` named by its ``aria-label`` and ``<title>`` (with a ``<desc>``
reading its numbers out where the caller gives one), and every mark carries a ``<title>`` tooltip, so it
reads without a mouse, prints, and renders inside an htmx fragment. Every text and attribute value is
escaped here: callers pass plain strings (worker names and labels come from people).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

PALETTE = ("#3b5bdb", "#2f9e66", "#e8590c", "#ae3ec9", "#1098ad", "#f08c00", "#c2255c", "#5c940d")
INK, MUTED, GRID, AXIS, TRACK = "#1c2330", "#5d6778", "#eef0f4", "#a8b0bd", "#eef0f4"
KEPT, NA, DROPPED = "#2f9e66", "#a8b0bd", "#d9534f"


# --- Numbers as text -------------------------------------------------------------------------------


def percent(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def fmt_pct(value: float) -> str:
    """One decimal; a tiny but non-zero share reads "<0.1" rather than a misleading "0.0"."""
    return "<0.1" if 0 < value < 0.05 else f"{value:.1f}"


def fmt_number(value) -> str:
    """A number for an axis or a label: short, and exact for whole numbers."""
    if value is None or math.isnan(value):
        return "—"
    if float(value).is_integer() and abs(value) < 1e9:
        return f"{int(value):,}"
    return f"{value:.3g}" if abs(value) >= 1e-3 else f"{value:.2e}"


def truncate(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


def nice_ticks(peak: float) -> list[float]:
    """From 0 to at least ``peak`` on round numbers, at most five ticks."""
    if peak <= 0:
        return [0]
    magnitude = 10 ** math.floor(math.log10(peak))
    step = next(m * magnitude for m in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10) if peak / (m * magnitude) <= 4)
    return [round(i * step, 10) for i in range(int(math.ceil(peak / step - 1e-9)) + 1)]


# --- Elements --------------------------------------------------------------------------------------


def _attrs(attrs: dict) -> str:
    """Attributes in the order given: ``cls`` is class, underscores are hyphens, floats get one decimal,
    None and "" are left out."""
    out = []
    for key, value in attrs.items():
        if value is None or value == "":
            continue
        if isinstance(value, float):
            value = f"{value:.1f}"
        out.append(f' {"class" if key == "cls" else key.replace("_", "-")}="{escape(value)}"')
    return "".join(out)


def el(tag: str, body: str = "", tip: str = "", **attrs) -> str:
    """One SVG element: ``body`` is SVG already built, ``tip`` a plain-text tooltip."""
    inner = (f"<title>{escape(tip)}</title>" if tip else "") + body
    return f"<{tag}{_attrs(attrs)}>{inner}</{tag}>" if inner else f"<{tag}{_attrs(attrs)}/>"


def text(x, y, content, *, anchor="start", size=11, fill=INK, weight=None, **attrs) -> str:
    return el("text", escape(content), x=float(x), y=float(y), text_anchor=anchor, font_size=size, fill=fill,
              font_weight=weight, **attrs)


def _head(css: str, title: str, width: int, height: int, desc: str = "", max_width: int | None = None) -> list[str]:
    style = f"max-width: {max_width}px" if max_width else None
    return [f"<svg{_attrs(dict(cls=css, xmlns='http://www.w3.org/2000/svg', viewBox=f'0 0 {width} {height}'))}"
            f"{_attrs(dict(width='100%', role='img', aria_label=title, style=style))}"
            f' font-family="system-ui, sans-serif" font-size="12">',
            el("title", escape(title)), el("desc", escape(desc)) if desc else ""]


def empty(css: str, title: str, message: str) -> SafeString:
    """A chart with nothing to draw yet: its frame and a sentence saying so."""
    return mark_safe("".join(_head(css, title, 600, 120) + [text(300, 64, message, anchor="middle", fill=MUTED)])  # noqa: S308
                     + "</svg>")


def _legend_places(labels: list[str], x0: float, x_end: float) -> list[tuple[float, int]]:
    """(x, row) of each legend entry, wrapping to a new row at ``x_end``; ~6 px a character at 11 px."""
    x, row, places = x0, 0, []
    for label in labels:
        advance = 37 + 6 * len(label)
        if x + advance > x_end and x > x0:
            x, row = x0, row + 1
        places.append((x, row))
        x += advance
    return places


def legend(items, x0: float, y0: float, x_end: float, *, swatch: bool = False) -> list[str]:
    """[(colour, dash, label)] as a line sample (a square ``swatch`` for bars) and its text, 16 px a row."""
    out = []
    for (colour, dash, label), (x, row) in zip(items, _legend_places([i[2] for i in items], x0, x_end)):
        y = y0 + 16 * row
        out.append(el("rect", x=float(x), y=float(y - 10), width=12, height=12, rx=2, fill=colour) if swatch else
                   el("line", x1=float(x), y1=float(y - 4), x2=float(x + 18), y2=float(y - 4), stroke=colour,
                      stroke_width=2, stroke_dasharray=dash))
        out.append(text(x + (17 if swatch else 23), y, label))
    return out


# --- Two axes --------------------------------------------------------------------------------------


class Plot:
    """A chart on two linear axes: ``box`` the margins (left, right, top, bottom) around the plot, ``x`` and
    ``y`` the ranges of data it spans. Marks take data units (clamped to the ranges); ``svg()`` ends it."""

    def __init__(self, css, title, width, height, box, x=(0.0, 1.0), y=(0.0, 1.0), *, desc="", max_width=None):
        self.width, self.height, (self.left, self.right, self.top, self.bottom) = width, height, box
        self.plot_w, self.plot_h = width - self.left - self.right, height - self.top - self.bottom
        self.x, self.y = x, y
        self.parts = _head(css, title, width, height, desc, max_width)
        self.slots: list[tuple[float, float, int]] = []  # (from x, to x, row) of the marker labels placed

    def sx(self, value) -> float:
        lo, hi = self.x
        return self.left + self.plot_w * (min(max(float(value), lo), hi) - lo) / ((hi - lo) or 1)

    def sy(self, value) -> float:
        lo, hi = self.y
        return self.top + self.plot_h * (1 - (min(max(float(value), lo), hi) - lo) / ((hi - lo) or 1))

    def add(self, *parts: str) -> Plot:
        self.parts.extend(parts)
        return self

    def frame(self, x_ticks=(), y_ticks=(), *, x_title="", y_title="", y_axis=False, fmt=fmt_number) -> Plot:
        """Grid lines and labels at ``y_ticks``, the x axis with labels at ``x_ticks`` (values, or (value,
        label) pairs), a y axis line when ``y_axis``, and the axis titles."""
        left, right, base = float(self.left), float(self.left + self.plot_w), float(self.top + self.plot_h)
        for tick in y_ticks:
            y = self.sy(tick)
            self.add(el("line", x1=left, y1=y, x2=right, y2=y, stroke=GRID),
                     text(left - 6, y + 4, fmt(tick), anchor="end", fill=MUTED))
        self.add(el("line", x1=left, y1=base, x2=right, y2=base, stroke=AXIS))
        if y_axis:
            self.add(el("line", x1=left, y1=float(self.top), x2=left, y2=base, stroke=AXIS))
        for tick in x_ticks:
            value, label = tick if isinstance(tick, tuple) else (tick, fmt(tick))
            self.add(text(self.sx(value), base + 15, label, anchor="middle", fill=MUTED))
        if x_title:
            self.add(text(left + self.plot_w / 2, self.height - 6, x_title, anchor="middle", fill=MUTED))
        if y_title:
            mid = self.top + self.plot_h / 2
            self.add(text(14, mid, y_title, anchor="middle", fill=MUTED, transform=f"rotate(-90 14 {mid:.1f})"))
        return self

    def bar(self, x0, x1, y0, y1, fill, tip="", *, gap=1.0, **attrs) -> Plot:
        """A rectangle from (x0, y0) to (x1, y1), ``gap`` pixels narrower than its slot."""
        left, top, bottom = self.sx(x0), self.sy(y1), self.sy(y0)
        return self.add(el("rect", tip=tip, **attrs, x=left + gap / 2, y=top, width=max(self.sx(x1) - left - gap, 0.5),
                           height=max(bottom - top, 0.5 if y1 != y0 else 0.0), fill=fill))

    def line(self, points, colour, *, dash="", width=2.0, tip="", **attrs) -> Plot:
        path = " ".join(f"{self.sx(x):.1f},{self.sy(y):.1f}" for x, y in points)
        return self.add(el("polyline", tip=tip, **attrs, fill="none", stroke=colour, stroke_width=width,
                           stroke_dasharray=dash, points=path))

    def dot(self, x, y, fill, *, r=4.0, tip="", **attrs) -> str:
        return el("circle", tip=tip, **attrs, cx=self.sx(x), cy=self.sy(y), r=r, fill=fill)

    def marker(self, value, label, colour, *, dash="4 3", rows=2, cls="marker", **attrs) -> Plot:
        """A vertical line at x = ``value``, its label above the plot on the inner side of the line, on the
        first of ``rows`` rows where it overlaps no other label (~6 px a character at 11 px)."""
        x = self.sx(value)
        anchor, nudge = ("end", -4) if x > self.left + 0.7 * self.plot_w else ("start", 4)
        span = sorted((x + nudge, x + nudge + (-1 if nudge < 0 else 1) * (6.5 * len(label) + 8)))
        row = next((r for r in range(rows) if all(pr != r or span[1] < a or b < span[0] for a, b, pr in self.slots)),
                   len(self.slots) % rows)
        self.slots.append((span[0], span[1], row))
        return self.add(el("line", cls=cls, **attrs, x1=x, y1=float(self.top - 4), x2=x, y2=float(self.top + self.plot_h),
                           stroke=colour, stroke_width=2, stroke_dasharray=dash),
                        text(x + nudge, self.top - 10 - 12 * (rows - 1 - row), label, anchor=anchor, fill=colour,
                             weight="600"))

    def svg(self) -> SafeString:
        return mark_safe("".join(self.parts) + "</svg>")  # noqa: S308


@dataclass
class Marker:
    """A value marked on the x axis by a vertical line; ``attrs`` go on the line (data-* for tests and tools)."""
    value: float
    label: str
    colour: str = INK
    dash: str = "4 3"
    cls: str = "marker"
    attrs: dict = field(default_factory=dict)


def _markers(plot: Plot, markers, rows: int) -> None:
    for m in markers:
        plot.marker(m.value, m.label, m.colour, dash=m.dash, rows=rows, cls=m.cls, **m.attrs)


def bar_chart(css: str, title: str, labels: list[str], series, *, x_title="", y_title="", width=520, height=240,
              fill=0.7, values=False, label_every=1, empty_text="Nothing to show yet") -> SafeString:
    """Bars on categories: a group per label and in it a bar per series [(name, values, colour or one colour
    per label)]; values that are None are not drawn. ``fill``: the share of its slot a group takes (1.0: the
    bars touch, as on a time axis); ``values``: each bar's value written on top; a label under every
    ``label_every``-th group; a legend under the plot when there are several series."""
    if not labels or not series:
        return empty(css, title, empty_text)
    several = len(series) > 1
    items = [(c if isinstance(c, str) else PALETTE[0], "", n) for n, _, c in series] if several else []
    rows = 1 + max((r for _, r in _legend_places([i[2] for i in items], 56, width - 12)), default=-1)
    height += 18 * rows
    measured = [v for _, vals, _ in series for v in vals if v is not None]
    ticks = nice_ticks(max(measured, default=0))
    plot = Plot(css, title, width, height, (56, 12, 22, 52 + 18 * rows), (0, len(labels)), (0, ticks[-1] or 1))
    plot.frame([(i + 0.5, truncate(str(label), max(int(plot.plot_w * label_every / len(labels) / 7), 4)))
                for i, label in enumerate(labels) if i % label_every == 0], ticks, y_title=y_title)
    bar = fill / len(series)
    for i, label in enumerate(labels):
        for j, (name, vals, colour) in enumerate(series):
            value = vals[i]
            if value is None:
                continue
            x0 = i + (1 - fill) / 2 + j * bar
            tip = f"{name} · {label}: {fmt_number(value)}" if several else f"{label}: {fmt_number(value)} {y_title}"
            plot.bar(x0, x0 + bar, 0, value, colour if isinstance(colour, str) else colour[i % len(colour)], tip,
                     cls="bar", data_series=name if several else None, data_label=str(label),
                     data_value=fmt_number(value))
            if values:
                plot.add(text(plot.sx(x0 + bar / 2), plot.sy(value) - 5, fmt_number(value), anchor="middle",
                              weight="600"))
    base = plot.top + plot.plot_h
    if x_title:
        plot.add(text(plot.left + plot.plot_w / 2, base + 32, x_title, anchor="middle", fill=MUTED))
    plot.add(*legend(items, plot.left, base + 52, width - 12, swatch=True))
    return plot.svg()


def histogram(css: str, title: str, bins, series, *, markers=(), marker_rows=2, x_ticks=None, x_title="",
              y_title="", width=560, height=230, empty_text="Nothing to show yet") -> SafeString:
    """Stacked bars over ``bins`` [(lo, hi)]: ``series`` [(key, counts, colour)] from the bottom up, each bar of
    class ``bin-<key>``; ``markers`` (Marker) as vertical lines with their labels in rows above the plot."""
    if not bins:
        return empty(css, title, empty_text)
    lo, hi = bins[0][0], bins[-1][1]
    ticks = nice_ticks(max(sum(counts[i] for _, counts, _ in series) for i in range(len(bins))))
    top = 16 + 12 * marker_rows if markers else 22
    plot = Plot(css, title, width, height, (52, 14, top, 46), (lo, hi), (0, ticks[-1] or 1))
    plot.frame((lo, (lo + hi) / 2, hi) if x_ticks is None else x_ticks, ticks, x_title=x_title, y_title=y_title)
    for i, (b_lo, b_hi) in enumerate(bins):
        base = 0
        for key, counts, colour in series:
            if counts[i]:
                plot.bar(b_lo, b_hi, base, base + counts[i], colour,
                         f"{fmt_number(b_lo)} to {fmt_number(b_hi)}: {counts[i]:,} {key}", cls=f"bin-{key}")
                base += counts[i]
    _markers(plot, markers, marker_rows)
    return plot.svg()


@dataclass
class Line:
    """A series of a line chart: ``points`` [(x, y)] joined by a line of ``width`` (0: none), a dot of radius
    ``dot`` at each (class ``cls``, tooltip ``tips[i]``, text ``labels[i]`` above it), and where ``errors``
    are given a bar of ± errors[i], or from errors[i][0] to errors[i][1] when it is an interval (clamped to
    the y range), grouped with the dot in a <g class=cls>."""
    name: str
    points: list
    colour: str
    dash: str = ""
    width: float = 2.0
    dot: float = 0.0
    hollow: bool = False
    cls: str = ""
    tips: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    title: str = ""


def error_span(y: float, error) -> tuple[float, float]:
    """(low, high) of an error bar: ``error`` is ± a number, or an interval (low, high) such as a bootstrap's."""
    if isinstance(error, (list, tuple)) and len(error) == 2:
        return float(error[0]), float(error[1])
    return y - float(error or 0.0), y + float(error or 0.0)


def line_chart(css: str, title: str, lines, *, x, y, x_ticks, y_ticks, x_title="", y_title="", markers=(),
               notes=(), width=640, height=240, left=52, max_width=None) -> SafeString:
    """``lines`` (Line) over the ranges ``x`` and ``y``, a legend of the named ones above the plot, ``markers``
    (Marker) as vertical lines, ``notes`` [(x, y, text, colour)] as small texts under a point."""
    rows = 2 if markers else 0
    plot = Plot(css, title, width, height, (left, 16, 28 + 12 * rows, 44 if x_title else 28), x, y,
                max_width=max_width)
    plot.frame(x_ticks, y_ticks, x_title=x_title, y_title=y_title, y_axis=True)
    _markers(plot, markers, rows)
    for s in lines:
        if s.width and s.points:
            plot.line(s.points, s.colour, dash=s.dash, width=s.width, tip=s.title)
        for i, (px, py) in enumerate(s.points if s.dot else ()):
            tip = s.tips[i] if i < len(s.tips) else ""
            paint = dict(fill="#fff", stroke=s.colour, stroke_width=2) if s.hollow else \
                dict(fill=s.colour, stroke="#fff" if s.cls else None, stroke_width=1.5 if s.cls else None)
            if i < len(s.errors):
                low, high = error_span(py, s.errors[i])
                bar = el("line", x1=plot.sx(px), y1=plot.sy(low), x2=plot.sx(px), y2=plot.sy(high),
                         stroke=s.colour, stroke_width=1.5)
                plot.add(el("g", bar + plot.dot(px, py, paint.pop("fill"), r=s.dot, **paint), tip, cls=s.cls))
            else:
                plot.add(plot.dot(px, py, paint.pop("fill"), r=s.dot, tip=tip, cls=s.cls, **paint))
            if i < len(s.labels):
                plot.add(text(plot.sx(px), plot.sy(py) - 9, s.labels[i], anchor="middle", fill=s.colour, weight="600"))
    for nx, ny, note, colour in notes:
        plot.add(text(plot.sx(nx), plot.sy(ny) + 16, note, anchor="middle", size=10, fill=colour))
    plot.add(*legend([(s.colour, s.dash, s.name) for s in lines if s.name], plot.left, 16, width - 16))
    return plot.svg()


# --- Rows ------------------------------------------------------------------------------------------


def hbar_chart(css: str, title: str, rows, *, desc="", width=640, label_w=90, bar_w=400, scale=100.0, ticks=(),
               tick_suffix="", heading="", legend_items=(), bar_h=18) -> SafeString:
    """Horizontal bars, one row per item: ``rows`` [{"label", "sub" (a second line), "bars": [[(value,
    colour, tip, cls), …] per bar], "notes": [(strong, plain)] per bar, "attrs": {…} of the row's <g>,
    "href"}]. Each bar is a track as long as ``scale`` with its segments side by side (a non-zero one at
    least 1 px); ``ticks`` draw a scale above; ``legend_items`` [(colour, name)] go under the rows."""
    bar_x, note_x, top = label_w + 12, label_w + 12 + bar_w + 26, 34 if ticks or heading else 16
    per_row = [len(row["bars"]) * (bar_h + 4) + 12 for row in rows]
    bottom = top + sum(per_row)
    out = _head(css, title, width, bottom + 34, desc)
    for tick in ticks:
        x = bar_x + bar_w * tick / scale
        out += [el("line", x1=x, y1=float(top - 8), x2=x, y2=float(bottom - 6), stroke="#e2e6ec"),
                text(x, top - 14, f"{tick}{tick_suffix}", anchor="middle", fill=MUTED)]
    if heading:
        out.append(text(note_x, top - 14, heading, fill=MUTED))
    y = top
    for row, row_h in zip(rows, per_row):
        label_y = y + bar_h - 4 if row.get("sub") else y + (row_h - 12) / 2 + 4
        group = [text(label_w, label_y, row["label"], anchor="end", size=13, weight=None if row.get("sub") else "600")]
        if row.get("sub"):
            group.append(text(label_w, y + bar_h + 9, row["sub"], anchor="end", size=10, fill=MUTED))
        for j, (segments, (strong, plain)) in enumerate(zip(row["bars"], row["notes"])):
            by, x = y + j * (bar_h + 4), float(bar_x)
            group.append(el("rect", x=bar_x, y=by, width=bar_w, height=bar_h, rx=3, fill=TRACK))
            for value, colour, tip, cls in segments:
                if value:
                    w = max(bar_w * min(value, scale) / scale, 1.0)
                    group.append(el("rect", tip=tip, cls=cls, x=x, y=by, width=w, height=bar_h, fill=colour))
                    x += w
            group.append(el("text", el("tspan", escape(strong), font_weight="600", fill=INK)
                            + el("tspan", escape(plain), dx=6 if strong else None, font_size=11, fill=MUTED),
                            x=note_x, y=by + bar_h - 4, font_size=13))
        svg = el("g", "".join(group), **row.get("attrs", {}))
        out.append(el("a", svg, href=row["href"]) if row.get("href") else svg)
        y += row_h
    out += legend([(colour, "", name) for colour, name in legend_items], bar_x, bottom + 14, width, swatch=True)
    return mark_safe("".join(out) + "</svg>")  # noqa: S308
