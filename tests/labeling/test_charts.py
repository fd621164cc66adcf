"""SVG charts (labeling.charts): geometry, text alternatives, no inline styles."""

from __future__ import annotations

import re

import pytest

from labeling.charts import Rule, Series, bar_chart, chart_render, line_chart, nice_ceiling


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.7, 1.0), (1.0, 1.0), (1.3, 2.0), (2.2, 2.5), (3.0, 5.0), (7.0, 10.0), (0.024, 0.025)],
)
def test_nice_ceiling(value, expected):
    assert nice_ceiling(value) == pytest.approx(expected)


def test_bar_heights_are_proportional_to_values():
    chart = bar_chart(
        chart_id="t",
        title="Work",
        description="Items per annotator.",
        categories=["ann1", "ann2", "ann3"],
        series=[Series("submitted", (4, 2, None))],
    )
    heights = [r.height for r in chart.rects]
    assert len(heights) == 2  # the missing value draws no bar
    assert heights[0] == pytest.approx(2 * heights[1])
    # the y axis ends at a nice number >= 4 and every bar rests on the baseline
    assert chart.y_ticks[-1].label == "4"
    assert all(r.y + r.height == pytest.approx(chart.baseline) for r in chart.rects)
    assert chart.table_rows == (("ann1", "4"), ("ann2", "2"), ("ann3", "—"))


def test_negative_values_hang_below_the_baseline():
    chart = bar_chart(
        chart_id="a",
        title="Agreement",
        description="Alpha per level.",
        categories=["answer", "claim"],
        series=[Series("alpha", (0.5, -0.25))],
    )
    positive, negative = chart.rects
    assert positive.y + positive.height == pytest.approx(chart.baseline)
    assert negative.y == pytest.approx(chart.baseline)
    assert positive.height == pytest.approx(2 * negative.height)


def test_stacked_bars_add_up_and_the_table_has_totals():
    chart = bar_chart(
        chart_id="s",
        title="Work",
        description="Submitted and skipped.",
        categories=["ann1", "ann2"],
        series=[Series("submitted", (3, 1)), Series("skipped", (1, 0))],
        stacked=True,
    )
    first = [r for r in chart.rects if r.tip.startswith("ann1")]
    assert len(first) == 2
    # the skipped bar sits on top of the submitted one, a third of its height
    assert first[1].y + first[1].height == pytest.approx(first[0].y)
    assert first[0].height == pytest.approx(3 * first[1].height)
    assert chart.table_head == ("", "submitted", "skipped", "total")
    assert chart.table_rows == (("ann1", "3", "1", "4"), ("ann2", "1", "0", "1"))
    assert len(chart.rects) == 3  # a zero adds no rectangle
    assert [e.name for e in chart.legend] == ["submitted", "skipped"]


def test_step_chart_holds_each_value_until_the_next_position():
    chart = line_chart(
        chart_id="p",
        title="Resolved",
        description="Cumulative.",
        x_labels=["d1", "d2", "d3"],
        series=[Series("resolved", (1, 3, 3))],
        step=True,
    )
    (line,) = chart.lines
    points = [tuple(map(float, p.split(","))) for p in line.points.split()]
    # d1, (d2 at d1's height), d2, (d3 at d2's height), d3
    assert len(points) == 5
    assert points[1][1] == points[0][1] and points[1][0] == points[2][0]
    assert len(chart.dots) == 3


def test_a_missing_value_breaks_the_line():
    chart = line_chart(
        chart_id="l",
        title="Per day",
        description="Labels per day.",
        x_labels=["a", "b", "c", "d"],
        series=[Series("labels", (1, None, 2, 3))],
    )
    assert len(chart.lines) == 2
    assert chart.table_rows[1] == ("b", "—")


def test_series_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="2 values for 3 categories"):
        bar_chart(
            chart_id="x",
            title="t",
            description="d",
            categories=["a", "b", "c"],
            series=[Series("s", (1, 2))],
        )


def test_rendered_chart_has_title_desc_table_and_no_inline_style():
    chart = bar_chart(
        chart_id="work",
        title="Items <labelled>",
        description="One bar per annotator.",
        categories=["ann<1>"],
        series=[Series("submitted", (2,))],
    )
    html = chart_render(chart)
    assert 'aria-labelledby="chart-work-title chart-work-desc"' in html
    assert '<title id="chart-work-title">Items &lt;labelled&gt;</title>' in html
    assert '<desc id="chart-work-desc">One bar per annotator.</desc>' in html
    assert '<th scope="row">ann&lt;1&gt;</th><td class="num">2</td>' in html
    assert "style=" not in html
    assert re.search(r'<rect class="chart-s0" [^>]*height="[\d.]+"', html)


def test_a_chart_without_values_says_so():
    chart = line_chart(chart_id="e", title="Empty", description="Nothing.", x_labels=[], series=[])
    assert chart.empty
    assert "No data yet." in chart_render(chart)


def test_line_chart_end_labels_fit_inside_the_chart():
    labels = ["2026-11-02", "2026-11-03", "2026-11-04"]
    chart = line_chart(
        chart_id="d",
        title="Days",
        description="Per day.",
        x_labels=labels,
        series=[Series("n", (1, 2, 3))],
    )
    half = len(labels[0]) * 6.5 / 2
    assert chart.x_ticks[0].position - half >= chart.left
    assert chart.x_ticks[-1].position + half <= chart.right


def test_styled_series_rules_and_infinite_values():
    chart = line_chart(
        chart_id="r",
        title="Risk",
        description="Risk per threshold.",
        x_labels=["0.5", "0.7", "0.9"],
        series=[
            Series("risk", (0.1, float("inf"), 0.3)),
            Series("target", (0.2, 0.2, 0.2), style="dashed"),
            Series("certified", (0.1, None, None), style="ring"),
            Series("infinite", (None, None, 0.3), style="cross"),
        ],
        rules=[Rule("alpha = 0.25", y=0.25), Rule("chosen", x=0)],
        y_min=0.0,
        y_max=1.0,
    )
    # the infinite value is a gap in the line, written in the table
    assert [len(line.points.split()) for line in chart.lines] == [1, 1, 3]
    assert chart.lines[2].dashed and not chart.lines[0].dashed
    assert chart.table_rows[1] == ("0.7", "inf", "0.2", "—", "—")
    # a dashed series has no dots; the marks are points without a line
    assert [d.shape for d in chart.dots] == ["dot", "dot", "ring", "cross"]
    ring, cross = chart.dots[2:]
    assert (ring.x, ring.y) == (chart.dots[0].x, chart.dots[0].y)
    horizontal, vertical = chart.rules
    assert (
        horizontal.y1
        == horizontal.y2
        == pytest.approx(chart.bottom - 0.25 * (chart.bottom - chart.top))
    )
    assert vertical.x1 == vertical.x2 == ring.x
    html = chart_render(chart)
    assert f'<path class="chart-cross chart-s3" d="{cross.cross_path}">' in html
    assert '<circle class="chart-ring chart-s2"' in html and 'r="6"' in html
    assert 'class="chart-line chart-dashed chart-s1"' in html
    assert 'text-anchor="end">alpha = 0.25</text>' in html
    assert '<td colspan="5">Reference line: chosen</td>' in html
    assert "style=" not in html


def test_a_rule_needs_exactly_one_position():
    with pytest.raises(ValueError, match="rule 'r' needs one of x"):
        line_chart(
            chart_id="x",
            title="t",
            description="d",
            x_labels=["a"],
            series=[Series("s", (1,))],
            rules=[Rule("r", x=1)],
        )


def test_a_long_legend_wraps_and_the_plot_starts_below_it():
    names = [
        "a rather long series name, number one",
        "another long series name, two",
        "a third one",
    ]
    chart = line_chart(
        chart_id="w",
        title="t",
        description="d",
        x_labels=["a", "b"],
        series=[Series(name, (1, 2)) for name in names],
    )
    rows = sorted({entry.y for entry in chart.legend})
    assert len(rows) == 2
    assert all(e.text_x + 7 * len(e.name) <= chart.width for e in chart.legend)
    assert chart.top > rows[-1]
