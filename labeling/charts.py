"""Server-rendered SVG charts: bar, stacked bar, line and step charts, with no JavaScript.

A chart is built in Python (:func:`bar_chart`, :func:`line_chart`) as a :class:`Chart`: the
geometry of every shape in a fixed ``viewBox`` plus a text alternative (a title, a description
and a data table). ``templates/labeling/charts/chart.html`` draws it::

    chart = bar_chart(
        chart_id="work", title="Items labelled per annotator", description="...",
        categories=["ann1", "ann2"], series=[Series("submitted", (4, 2))],
    )
    {% include "labeling/charts/chart.html" with chart=chart %}

or :func:`chart_render` returns the same HTML from Python. Colours come from the stylesheet:
shapes carry the classes ``chart-s0`` .. ``chart-s5`` (series), ``chart-axis`` and
``chart-grid``, which ``certlabel.css`` maps to ``var(--chart-1..6)`` with fallbacks, and text
uses ``currentColor``; no inline style is written (the pages' CSP forbids them). The data table
is visually hidden but read by screen readers, and each shape has a ``<title>`` (a tooltip).

Values may be None (missing): no bar or point is drawn and the table shows an em dash; an
infinite value is not drawn either (the table writes it). Negative values are drawn below a zero
baseline (e.g. an agreement coefficient below chance). A line chart may also draw dashed series,
series of marked points (rings or crosses, no line) and labelled reference lines (:class:`Rule`),
which the data table lists under the values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

ChartKind = Literal["bar", "stacked", "line", "step"]
#: How a line chart draws a series: a line with dots, a dashed line, or marked points only.
SeriesStyle = Literal["line", "dashed", "ring", "cross"]

#: Number of distinct series colours (``chart-s0`` .. ``chart-s5``); further series reuse them.
PALETTE_SIZE = 6
WIDTH = 640
HEIGHT = 280
MARGIN_LEFT = 56
MARGIN_RIGHT = 16
MARGIN_TOP = 32
MARGIN_BOTTOM = 48
#: At most this many category labels are written under the x axis (every k-th one otherwise).
MAX_X_LABELS = 12
#: Tick labels are cut to this many characters; a character is about CHAR_WIDTH units wide.
X_LABEL_CHARS = 14
CHAR_WIDTH = 6.5
#: Bars get their value written above them when a chart has at most this many bars.
MAX_VALUE_LABELS = 24
#: Height of a legend row; the plot area starts lower when the legend wraps.
LEGEND_ROW = 16


@dataclass(frozen=True)
class Series:
    """One named series of values, one per category (or x position); None is a missing value.

    ``style`` is how :func:`line_chart` draws it (bar charts ignore it).
    """

    name: str
    values: Sequence[float | None]
    style: SeriesStyle = "line"


@dataclass(frozen=True)
class Rule:
    """A labelled reference line of a line chart.

    Horizontal at value ``y``, or vertical at the x position of index ``x`` (into the chart's
    ``x_labels``); give exactly one of them.
    """

    label: str
    y: float | None = None
    x: int | None = None


@dataclass(frozen=True)
class RuleLine:
    """A reference line in viewBox units, with its label's anchor point."""

    x1: float
    y1: float
    x2: float
    y2: float
    label: str
    label_x: float
    label_y: float
    anchor: Literal["start", "end"]


@dataclass(frozen=True)
class Rect:
    """A bar in viewBox units; ``css`` is its series class and ``tip`` its tooltip text."""

    x: float
    y: float
    width: float
    height: float
    css: str
    tip: str
    value_label: str = ""
    negative: bool = False

    @property
    def label_y(self) -> float:
        """The value label's baseline: above a bar, or below one that hangs under zero."""
        return round(self.y + self.height + 12, 2) if self.negative else round(self.y - 3, 2)

    @property
    def centre(self) -> float:
        """The bar's horizontal middle (where its value label is centred)."""
        return round(self.x + self.width / 2, 2)


@dataclass(frozen=True)
class Line:
    """A polyline (``points`` in SVG syntax) of one series, dashed or solid."""

    points: str
    css: str
    dashed: bool = False


@dataclass(frozen=True)
class Dot:
    """A data point of a line chart, with its tooltip: a dot, or a ring or cross marking it."""

    x: float
    y: float
    css: str
    tip: str
    shape: Literal["dot", "ring", "cross"] = "dot"

    @property
    def cross_path(self) -> str:
        """The cross's two strokes in SVG path syntax."""
        x, y = self.x, self.y
        return f"M{x - 5:g} {y - 5:g}L{x + 5:g} {y + 5:g}M{x - 5:g} {y + 5:g}L{x + 5:g} {y - 5:g}"


@dataclass(frozen=True)
class Tick:
    """An axis tick at ``position`` (x for the x axis, y for the y axis) with its label."""

    position: float
    label: str


@dataclass(frozen=True)
class LegendEntry:
    """A legend swatch and name at (x, y)."""

    name: str
    css: str
    x: float
    y: float

    @property
    def text_x(self) -> float:
        """Where the name starts, right of the swatch."""
        return self.x + 16

    @property
    def swatch_y(self) -> float:
        """The top of the 12-unit swatch, so that it sits on the text's baseline."""
        return self.y - 10


@dataclass(frozen=True)
class Chart:
    """Everything ``labeling/charts/chart.html`` draws; build it with the functions below.

    Coordinates are viewBox units (``width`` × ``height``); the plot area spans ``left`` ..
    ``right`` and ``top`` .. ``bottom``, with the zero line at ``baseline``. ``table_head`` and
    ``table_rows`` are the text alternative (the values as displayed), followed by the labels of
    the reference lines ``rules``.
    """

    chart_id: str
    kind: ChartKind
    title: str
    description: str
    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    baseline: float
    x_label: str
    y_label: str
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    rects: tuple[Rect, ...]
    lines: tuple[Line, ...]
    dots: tuple[Dot, ...]
    legend: tuple[LegendEntry, ...]
    table_head: tuple[str, ...]
    table_rows: tuple[tuple[str, ...], ...]
    rules: tuple[RuleLine, ...] = ()

    @property
    def empty(self) -> bool:
        """True when there is no value to draw (the template then says so)."""
        return not (self.rects or self.dots)

    @property
    def y_label_y(self) -> float:
        """The vertical middle of the plot area, where the rotated y-axis label sits."""
        return (self.top + self.bottom) / 2

    @property
    def x_label_x(self) -> float:
        """The horizontal middle of the plot area, where the x-axis label sits."""
        return (self.left + self.right) / 2

    @property
    def x_label_y(self) -> float:
        """The baseline of the x-axis title, at the bottom of the chart."""
        return self.height - 6

    @property
    def x_tick_y(self) -> float:
        """The baseline of the x-axis tick labels, under the plot area."""
        return self.bottom + 16

    @property
    def y_tick_x(self) -> float:
        """Where the y-axis tick labels end, left of the plot area."""
        return self.left - 6


def default_format(value: float) -> str:
    """Format a value for labels: integers without decimals, others with up to 3 significant."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3g}"


def nice_ceiling(value: float) -> float:
    """Return the smallest of 1, 2, 2.5, 5 × 10^k that is >= ``value`` (``value`` > 0)."""
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        candidate = step * 10**exponent
        if candidate >= value * (1 - 1e-12):
            return float(candidate)
    return float(10 ** (exponent + 1))  # unreachable: 10 × 10^k >= value


def _scale(low: float, high: float, ticks: int = 5) -> tuple[float, float, float]:
    """Return (low, high, step) of a y axis covering [low, high] with about ``ticks`` steps."""
    span = high - low
    if span <= 0:
        span = abs(high) or 1.0
    step = nice_ceiling(span / ticks)
    return math.floor(low / step) * step, math.ceil(high / step) * step, step


def _css(index: int) -> str:
    return f"chart-s{index % PALETTE_SIZE}"


def _cell(value: float | None, fmt: Callable[[float], str]) -> str:
    return "—" if value is None else fmt(value)


def _drawable(value: float | None) -> float | None:
    """The value if it can be drawn: None for a missing or infinite value."""
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class _Frame:
    low: float
    high: float
    left: float
    right: float
    top: float
    bottom: float

    def y(self, value: float) -> float:
        span = self.high - self.low
        return round(self.bottom - (value - self.low) / span * (self.bottom - self.top), 2)


def _frame(
    values: Sequence[float], y_min: float | None, y_max: float | None, top: float
) -> tuple[_Frame, tuple[Tick, ...]]:
    low = min([0.0, *values]) if y_min is None else y_min
    high = max([0.0, *values]) if y_max is None else y_max
    low, high, step = _scale(low, high)
    if y_min is not None:
        low = y_min
    if y_max is not None:
        high = y_max
    if high <= low:
        high = low + 1
    frame = _Frame(low, high, MARGIN_LEFT, WIDTH - MARGIN_RIGHT, top, HEIGHT - MARGIN_BOTTOM)
    count = round((high - low) / step)
    ticks = tuple(
        Tick(position=frame.y(low + i * step), label=default_format(round(low + i * step, 10)))
        for i in range(count + 1)
    )
    return frame, ticks


def _legend(series: Sequence[Series]) -> tuple[tuple[LegendEntry, ...], float]:
    """The legend (wrapped to rows that fit the width) and the plot area's top under it."""
    if len(series) < 2:
        return (), MARGIN_TOP / 2
    entries, x, y = [], float(MARGIN_LEFT), MARGIN_TOP / 2 - 4
    for index, s in enumerate(series):
        width = 24 + 7 * len(s.name)
        if x > MARGIN_LEFT and x + width > WIDTH - MARGIN_RIGHT:
            x, y = float(MARGIN_LEFT), y + LEGEND_ROW
        entries.append(LegendEntry(name=s.name, css=_css(index), x=x, y=y))
        x += width
    return tuple(entries), y + 4 + MARGIN_TOP / 2


def _x_ticks(positions: Sequence[float], labels: Sequence[str]) -> tuple[Tick, ...]:
    """Ticks for every k-th label, k chosen so that labels of this length do not overlap."""
    longest = max((min(len(label), X_LABEL_CHARS) for label in labels), default=1)
    fits = max(1, int((WIDTH - MARGIN_LEFT - MARGIN_RIGHT) // (longest * CHAR_WIDTH + 12)))
    every = max(1, math.ceil(len(labels) / min(fits, MAX_X_LABELS)))
    return tuple(
        Tick(position=round(p, 2), label=label)
        for n, (p, label) in enumerate(zip(positions, labels, strict=True))
        if n % every == 0
    )


def _table(
    categories: Sequence[str],
    series: Sequence[Series],
    fmt: Callable[[float], str],
    x_label: str,
    total: bool,
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    head = (x_label or "", *(s.name for s in series), *(("total",) if total else ()))
    rows = []
    for n, category in enumerate(categories):
        values = [s.values[n] for s in series]
        row = [category, *(_cell(v, fmt) for v in values)]
        if total:
            row.append(fmt(sum(v for v in values if v is not None)))
        rows.append(tuple(row))
    return head, tuple(rows)


def _check(categories: Sequence[str], series: Sequence[Series]) -> None:
    for s in series:
        if len(s.values) != len(categories):
            raise ValueError(
                f"series {s.name!r} has {len(s.values)} values for {len(categories)} categories"
            )


def bar_chart(
    *,
    chart_id: str,
    title: str,
    description: str,
    categories: Sequence[str],
    series: Sequence[Series],
    stacked: bool = False,
    x_label: str = "",
    y_label: str = "",
    y_min: float | None = None,
    y_max: float | None = None,
    value_format: Callable[[float], str] = default_format,
) -> Chart:
    """Build a bar chart: one group of bars per category, one bar per series (or stacked).

    ``series`` hold one value per category (None: missing); ``stacked`` stacks the series of a
    category in one bar and adds a "total" column to the data table; ``y_min`` and ``y_max`` default
    to the data's range, including 0; ``chart_id`` is unique in the page.

    Raises:
        ValueError: a series does not have one value per category.
    """
    _check(categories, series)
    if stacked:
        extent = [
            sum(v for s in series if (v := _drawable(s.values[n])) is not None and v > 0)
            for n in range(len(categories))
        ]
    else:
        extent = [v for s in series for v in map(_drawable, s.values) if v is not None]
    legend, top = _legend(series)
    frame, y_ticks = _frame(extent, y_min, y_max, top)
    zero = frame.y(min(max(0.0, frame.low), frame.high))
    slot = (frame.right - frame.left) / max(1, len(categories))
    group = slot * 0.8
    bar = group if stacked else group / max(1, len(series))
    many = len(categories) * (1 if stacked else len(series)) > MAX_VALUE_LABELS
    rects: list[Rect] = []
    centres = []
    for n, category in enumerate(categories):
        x0 = frame.left + n * slot + (slot - group) / 2
        centres.append(frame.left + (n + 0.5) * slot)
        stack_top = 0.0
        for index, s in enumerate(series):
            value = _drawable(s.values[n])
            if value is None:
                continue
            tip = f"{category} · {s.name}: {value_format(value)}"
            if stacked:
                if value <= 0:
                    continue
                y_high, y_low = frame.y(stack_top + value), frame.y(stack_top)
                stack_top += value
                x = x0
            else:
                y_high, y_low = sorted((frame.y(value), zero))
                x = x0 + index * bar
            label = "" if many or stacked else value_format(value)
            rects.append(
                Rect(
                    x=round(x, 2),
                    y=y_high,
                    width=round(bar * 0.92, 2),
                    height=round(max(y_low - y_high, 0.5), 2),
                    css=_css(index),
                    tip=tip,
                    value_label=label,
                    negative=value < 0 and not stacked,
                )
            )
    head, rows = _table(categories, series, value_format, x_label, total=stacked)
    return Chart(
        chart_id=chart_id,
        kind="stacked" if stacked else "bar",
        title=title,
        description=description,
        width=WIDTH,
        height=HEIGHT,
        left=frame.left,
        right=frame.right,
        top=frame.top,
        bottom=frame.bottom,
        baseline=zero,
        x_label=x_label,
        y_label=y_label,
        x_ticks=_x_ticks(centres, categories),
        y_ticks=y_ticks,
        rects=tuple(rects),
        lines=(),
        dots=(),
        legend=legend,
        table_head=head,
        table_rows=rows,
    )


def line_chart(
    *,
    chart_id: str,
    title: str,
    description: str,
    x_labels: Sequence[str],
    series: Sequence[Series],
    step: bool = False,
    rules: Sequence[Rule] = (),
    x_label: str = "",
    y_label: str = "",
    y_min: float | None = None,
    y_max: float | None = None,
    value_format: Callable[[float], str] = default_format,
) -> Chart:
    """Build a line chart (or a step chart) over evenly spaced x positions (e.g. days).

    A missing or infinite value breaks the line. With ``step`` each value holds until the next x
    position (a cumulative count, for example). Each series is drawn as its ``style`` says; the
    ``rules`` are labelled reference lines (their y values widen the y axis as data do). Other
    arguments as :func:`bar_chart`; ``x_labels`` are the positions' labels in order.

    Raises:
        ValueError: a series does not have one value per x position, or a rule has not exactly
            one of ``x`` (a valid index) and ``y``.
    """
    _check(x_labels, series)
    count = len(x_labels)
    for rule in rules:
        if (rule.x is None) == (rule.y is None) or not (rule.x is None or 0 <= rule.x < count):
            raise ValueError(f"rule {rule.label!r} needs one of x (an index) or y")
    values = [v for s in series for v in map(_drawable, s.values) if v is not None]
    values += [rule.y for rule in rules if rule.y is not None]
    legend, top = _legend(series)
    frame, y_ticks = _frame(values, y_min, y_max, top)
    # The first and last positions sit inside the plot by half a label, so their labels fit.
    longest = max((min(len(label), X_LABEL_CHARS) for label in x_labels), default=0)
    inset = min(longest * CHAR_WIDTH / 2 + 2, (frame.right - frame.left) / 4)
    start, width = frame.left + inset, frame.right - frame.left - 2 * inset
    xs = [start + (width / 2 if count == 1 else n * width / (count - 1)) for n in range(count)]
    lines: list[Line] = []
    dots: list[Dot] = []
    for index, s in enumerate(series):
        css = _css(index)
        run: list[tuple[float, float]] = []
        runs = [run]
        for n, raw in enumerate(s.values):
            value = _drawable(raw)
            if value is None:
                run = []
                runs.append(run)
                continue
            point = (round(xs[n], 2), frame.y(value))
            run.append(point)
            if s.style != "dashed":
                tip = f"{x_labels[n]} · {s.name}: {value_format(value)}"
                shape = "dot" if s.style == "line" else s.style
                dots.append(Dot(x=point[0], y=point[1], css=css, tip=tip, shape=shape))
        if s.style in ("line", "dashed"):
            dashed = s.style == "dashed"
            lines += [Line(_points(r, step), css, dashed) for r in runs if r]
    head, rows = _table(x_labels, series, value_format, x_label, total=False)
    return Chart(
        chart_id=chart_id,
        kind="step" if step else "line",
        title=title,
        description=description,
        width=WIDTH,
        height=HEIGHT,
        left=frame.left,
        right=frame.right,
        top=frame.top,
        bottom=frame.bottom,
        baseline=frame.y(min(max(0.0, frame.low), frame.high)),
        x_label=x_label,
        y_label=y_label,
        x_ticks=_x_ticks(xs, x_labels),
        y_ticks=y_ticks,
        rects=(),
        lines=tuple(lines),
        dots=tuple(dots),
        legend=legend,
        table_head=head,
        table_rows=rows,
        rules=tuple(_rule_line(rule, frame, xs) for rule in rules),
    )


def _rule_line(rule: Rule, frame: _Frame, xs: Sequence[float]) -> RuleLine:
    """A horizontal rule labelled above its right end, a vertical one right of its top."""
    if rule.x is not None:
        x = round(xs[rule.x], 2)
        return RuleLine(x, frame.top, x, frame.bottom, rule.label, x + 4, frame.top + 10, "start")
    y = frame.y(min(max(rule.y or 0.0, frame.low), frame.high))
    return RuleLine(frame.left, y, frame.right, y, rule.label, frame.right - 4, y - 4, "end")


def _points(run: Sequence[tuple[float, float]], step: bool) -> str:
    if step:
        stepped: list[tuple[float, float]] = []
        for n, (x, y) in enumerate(run):
            if n:
                stepped.append((x, run[n - 1][1]))
            stepped.append((x, y))
        run = stepped
    return " ".join(f"{x:g},{y:g}" for x, y in run)


def chart_render(chart: Chart) -> SafeString:
    """Return the chart's HTML (a ``<figure>`` with the SVG and its data table)."""
    return SafeString(render_to_string("labeling/charts/chart.html", {"chart": chart}))
