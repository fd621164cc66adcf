r"""Server-side plots of a calibration run, rendered with matplotlib to inline SVG.

No network and no JavaScript: each function takes a stored run result (JSON primitives from
``calibration_result_compute``) and returns an SVG document as a string, or None when the run
has nothing to plot. ``matplotlib.figure.Figure`` is used directly (no pyplot state), so
rendering is safe in threads; the SVG carries no date, so the same result gives the same SVG.

Every text is plain: names from the data (an evaluator's name in a score field, an outcome) may
hold ``$`` or ``\``, which matplotlib would otherwise read as mathtext (``$\cmd$`` raised
``ValueError``, a 500 for every viewer of the run). Each plot is drawn under
``text.parse_math = False``.
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from certification.certificates import from_num

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# matplotlib is imported by the drawing only: the run page reads stored plots by PLOTS_VERSION,
# and the web process must not load matplotlib until a plot is drawn.

#: The plotting code's version: bump it when a plot changes, so cached plots are re-rendered.
PLOTS_VERSION = 2
SVG_METADATA = {"Date": None, "Creator": None}
WIDTH, HEIGHT = 7.2, 3.6


def _y(value: Any) -> float:
    """A stored number as a plot coordinate: a missing value (None) is NaN, which is not drawn."""
    number = from_num(value)
    return math.nan if number is None else number


_STYLE_ATTRIBUTE = re.compile(r'\sstyle="([^"]*)"')
_STYLE_ELEMENT = re.compile(r"<style[^>]*>\*\{([^}]*)\}</style>\s*")


def _presentation_attributes(declarations: str) -> str:
    """CSS declarations (``"fill: none; stroke: #000"``) as SVG presentation attributes."""
    pairs = (d.split(":", 1) for d in declarations.split(";") if ":" in d)
    return "".join(f' {name.strip()}="{value.strip()}"' for name, value in pairs)


def _without_inline_styles(svg: str) -> str:
    """Rewrite matplotlib's SVG to draw the same without CSS (the pages' CSP forbids inline styles).

    Every ``style="..."`` attribute becomes the equivalent presentation attributes, and the one
    ``<style>`` rule matplotlib writes (``*{stroke-linejoin: round; stroke-linecap: butt}``)
    becomes attributes of the root ``<svg>``, inherited by every element that sets no other value.
    """
    root_attributes = ""
    match = _STYLE_ELEMENT.search(svg)
    if match:
        root_attributes = _presentation_attributes(match.group(1))
        svg = svg[: match.start()] + svg[match.end() :]
    svg = _STYLE_ATTRIBUTE.sub(lambda m: _presentation_attributes(m.group(1)), svg)
    return svg.replace("<svg", "<svg" + root_attributes, 1)


def _plain_text(
    plot: Callable[[Mapping[str, Any]], str | None],
) -> Callable[[Mapping[str, Any]], str | None]:
    """Draw ``plot`` with every text rendered as written: no mathtext, whatever the data say."""

    @functools.wraps(plot)
    def draw(result: Mapping[str, Any]) -> str | None:
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False}):
            return plot(result)

    return draw


def _figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(WIDTH, HEIGHT))


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata=SVG_METADATA, bbox_inches="tight")
    text = buffer.getvalue()
    # Drop the XML prolog and DOCTYPE: the SVG is embedded in an HTML page.
    start = text.find("<svg")
    return _without_inline_styles(text[start:] if start >= 0 else text)


@_plain_text
def selective_risk_svg(result: Mapping[str, Any]) -> str | None:
    """Empirical selective risk and its upper bound vs threshold, alpha line, certified marks."""
    section = result.get("selective_risk")
    if not section or not section.get("rows"):
        return None
    rows = sorted(section["rows"], key=lambda r: r["threshold"])
    x = [r["threshold"] for r in rows]
    risk = [_y(r["risk"]) for r in rows]
    bound = [_y(r["upper_bound"]) for r in rows]
    alpha = float(section["alpha"])
    figure = _figure()
    ax = figure.subplots()
    bounded = section.get("p_value_test") == "hoeffding_bentkus"
    risk_label = "mean loss: loss total/denominator" if bounded else "empirical risk k/denominator"
    ax.plot(x, risk, marker="o", markersize=3, label=risk_label)
    ax.plot(
        x,
        bound,
        marker="^",
        markersize=3,
        label=f"{'Hoeffding–Bentkus ' if bounded else ''}upper bound "
        f"({float(section['bound_confidence']):.4g} one-sided)",
    )
    ax.axhline(alpha, color="black", linestyle="--", linewidth=1, label=f"alpha = {alpha:g}")
    certified = [r for r in rows if r["certified"]]
    if certified:
        ax.scatter(
            [r["threshold"] for r in certified],
            [_y(r["upper_bound"]) for r in certified],
            s=40,
            facecolors="none",
            edgecolors="green",
            linewidths=1.5,
            label="certified",
            zorder=3,
        )
    chosen = section.get("chosen_threshold")
    if chosen is not None:
        ax.axvline(chosen, color="green", linewidth=1, label=f"operating point t = {chosen:g}")
    ax.set_xlabel(f"threshold ({section['score_field']} {section['acceptance']} t)")
    ax.set_ylabel("risk")
    ax.set_ylim(0, 1.02)
    ax.set_title(section["outcome"])
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    return _svg(figure)


@_plain_text
def conformal_curve_svg(result: Mapping[str, Any]) -> str | None:
    """Conformal coverage and mean set size vs alpha, with the 1 - alpha target.

    Points where M* is infinite are marked: there every set is the whole answer space and
    every question counts as covered by convention (unsolvable ones included), so their
    coverage of 1 says nothing about the sets.
    """
    section = result.get("conformal")
    if not section or not section.get("curve"):
        return None
    curve = section["curve"]
    alphas = [float(p["alpha"]) for p in curve]
    coverage = [_y(p["coverage"]) for p in curve]
    sizes = [_y(p["mean_set_size"]) for p in curve]
    figure = _figure()
    ax = figure.subplots()
    ax.plot(alphas, coverage, marker="o", markersize=3, color="tab:blue", label="coverage")
    infinite = [
        (a, c) for a, c, p in zip(alphas, coverage, curve, strict=True) if p["threshold"] == "inf"
    ]
    if infinite:
        # M* = inf: every set is the whole answer space, covering by convention (caveat).
        unsolvable = (section.get("curve_infinite") or {}).get("covered_unsolvable")
        extra = f", {unsolvable} unsolvable counted covered" if unsolvable else ""
        ax.scatter(
            [a for a, _ in infinite],
            [c for _, c in infinite],
            marker="x",
            s=40,
            color="tab:red",
            zorder=4,
            label=f"M* = ∞: whole answer space, covered by convention{extra}",
        )
    ax.plot(
        alphas,
        [1 - a for a in alphas],
        linestyle="--",
        color="black",
        linewidth=1,
        label="target 1 - alpha",
    )
    ax.axvline(
        float(section["alpha"]),
        color="gray",
        linewidth=1,
        linestyle=":",
        label=f"spec alpha = {float(section['alpha']):g}",
    )
    ax.set_xlabel("alpha")
    ax.set_ylabel("coverage")
    ax.set_ylim(0, 1.02)
    twin = ax.twinx()
    twin.plot(alphas, sizes, marker="s", markersize=3, color="tab:orange", label="mean set size")
    twin.set_ylabel("mean set size (infinite M*: not drawn)")
    twin.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=7, loc="lower left")
    ax.set_title(f"on the {section.get('curve_partition', 'test')} partition")
    ax.grid(alpha=0.3)
    return _svg(figure)


@_plain_text
def rank_histogram_svg(result: Mapping[str, Any]) -> str | None:
    """Histogram of the calibration rank scores (infinite = no admissible sample)."""
    section = result.get("conformal")
    if not section or not section.get("score_counts"):
        return None
    labels = []
    counts = []
    for score, count in section["score_counts"]:
        value = from_num(score)
        labels.append("∞" if value is not None and math.isinf(value) else str(int(value or 0)))
        counts.append(count)
    figure = _figure()
    ax = figure.subplots()
    bars = ax.bar(labels, counts, color="tab:blue")
    ax.bar_label(bars, fontsize=7)
    threshold = from_num((section.get("threshold") or {}).get("value"))
    shown = "undefined" if threshold is None else ("∞" if math.isinf(threshold) else int(threshold))
    ax.set_xlabel(f"rank of the best admissible answer (M* = {shown})")
    ax.set_ylabel("calibration questions")
    ax.grid(alpha=0.3, axis="y")
    return _svg(figure)


def run_plots(result: Mapping[str, Any]) -> dict[str, str]:
    """Every plot the run page shows, by name (absent names have nothing to plot)."""
    plots = {
        "selective_risk": selective_risk_svg(result),
        "conformal_curve": conformal_curve_svg(result),
        "rank_histogram": rank_histogram_svg(result),
    }
    return {name: svg for name, svg in plots.items() if svg}
