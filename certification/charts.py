"""SVG charts of certification results, drawn with ``labeling.charts``.

The dashboard's agreement chart and a calibration run's charts, built from the stored figures on
each request.

Every text that comes from the data (an outcome, an evaluator's name in a score field) is
escaped by the chart template; an infinite threshold is written "∞", never drawn as a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from certification.certificates import from_num
from certification.selectors.agreement import AgreementView
from certification.selectors.derived import Freshness
from labeling.charts import Chart, Rule, Series, bar_chart, line_chart


def agreement_chart(agreement: AgreementView | None, freshness: Freshness | None) -> Chart | None:
    """Krippendorff's alpha, Fleiss' kappa and percent agreement per level, as a bar chart.

    The figures are the stored agreement report's (the panel's table, of the newest label
    policy version with votes); an undefined statistic
    is drawn as no bar and written as a dash in the data table. The description says whether
    newer votes are not counted yet (the panel's freshness marker says the same above it).

    Returns:
        The chart, or None before the first computation.
    """
    if agreement is None:
        return None
    levels = agreement.levels
    stale = freshness is not None and not freshness.current
    when = f"computed {agreement.computed_at:%Y-%m-%d %H:%M} UTC"
    # With votes under several policy versions the levels are the newest version's (versions
    # are never pooled); the title says which.
    version = (
        f" (label policy v{agreement.policy_version})"
        if agreement.policy_version is not None and len(agreement.versions) > 1
        else ""
    )
    return bar_chart(
        chart_id="agreement",
        title=f"Agreement per level{version}",
        description=(
            f"Krippendorff's alpha, Fleiss' kappa and percent agreement of the answer and claim "
            f"labels, {when}"
            + (
                f"; {freshness.newer_changes} newer change(s) not counted yet."
                if stale and freshness is not None
                else "."
            )
        ),
        categories=[level.title for level in levels],
        series=[
            Series("Krippendorff's α", [level.alpha.value for level in levels]),
            Series("Fleiss' κ", [level.fleiss_kappa.value for level in levels]),
            Series("percent agreement", [level.percent_agreement.value for level in levels]),
        ],
        x_label="level",
        y_max=1.0,
        value_format=lambda v: f"{v:.3f}",
    )


def _shown(value: Any) -> str:
    """A stored threshold or rank as a label: up to 6 significant digits, "∞" when infinite."""
    number = from_num(value)
    if number is None:
        return "undefined"
    return "∞" if math.isinf(number) else f"{number:g}"


def selective_risk_chart(section: Mapping[str, Any]) -> Chart | None:
    """Empirical selective risk and its upper bound per threshold, as a line chart.

    The certified thresholds are ringed; reference lines mark alpha and the chosen operating
    point. ``section`` is a run result's ``selective_risk``; None when it has no threshold row.
    """
    rows = sorted(section.get("rows") or (), key=lambda r: from_num(r["threshold"]) or 0.0)
    if not rows:
        return None
    alpha = float(section["alpha"])
    bounded = section.get("p_value_test") == "hoeffding_bentkus"
    bound_name = (
        f"{'Hoeffding–Bentkus ' if bounded else ''}upper bound "
        f"({float(section['bound_confidence']):.4g} one-sided)"
    )
    rules = [Rule(f"alpha = {alpha:g}", y=alpha)]
    chosen = next(
        (n for n, r in enumerate(rows) if r["index"] == section.get("chosen_index")), None
    )
    if chosen is not None:
        rules.append(Rule(f"operating point t = {_shown(rows[chosen]['threshold'])}", x=chosen))
    return line_chart(
        chart_id="selective-risk",
        title=f"Selective risk against the threshold: {section['outcome']}",
        description=(
            "Risk of the accepted answers and its upper bound at each threshold; the dashed "
            f"line is alpha = {alpha:g}, the rings mark the certified thresholds"
            + ("" if chosen is None else ", the vertical line the chosen operating point")
            + "."
        ),
        x_labels=[_shown(r["threshold"]) for r in rows],
        series=[
            Series(
                "mean loss: loss total/denominator" if bounded else "empirical risk k/denominator",
                [from_num(r["risk"]) for r in rows],
            ),
            Series(bound_name, [from_num(r["upper_bound"]) for r in rows]),
            Series(
                "certified (upper bound)",
                [from_num(r["upper_bound"]) if r["certified"] else None for r in rows],
                style="ring",
            ),
        ],
        rules=rules,
        x_label=f"threshold ({section['score_field']} {section['acceptance']} t)",
        y_label="risk",
        y_min=0.0,
        y_max=1.0,
        value_format=lambda v: f"{v:.4g}",
    )


def _spec_alpha_rule(section: Mapping[str, Any], alphas: list[str]) -> list[Rule]:
    spec = Decimal(str(section["alpha"]))
    at = next((n for n, a in enumerate(alphas) if Decimal(a) == spec), None)
    return [] if at is None else [Rule(f"spec alpha = {spec}", x=at)]


def conformal_coverage_chart(section: Mapping[str, Any]) -> Chart | None:
    """Conformal coverage against alpha, with the 1 - alpha target, as a line chart.

    Points where M* is infinite are crossed out: there every set is the whole answer space and
    every question counts as covered by convention (unsolvable ones included), so a coverage of
    1 there says nothing about the sets. ``section`` is a run result's ``conformal``; None when
    it has no curve.
    """
    curve = section.get("curve") or []
    if not curve:
        return None
    alphas = [str(p["alpha"]) for p in curve]
    coverage = [from_num(p["coverage"]) for p in curve]
    infinite = [
        c if p["threshold"] == "inf" else None for c, p in zip(coverage, curve, strict=True)
    ]
    unsolvable = (section.get("curve_infinite") or {}).get("covered_unsolvable")
    series = [Series("coverage", coverage)]
    if any(p["threshold"] == "inf" for p in curve):
        series.append(Series("M* = ∞ (covered by convention)", infinite, style="cross"))
    series.append(Series("target 1 − alpha", [1 - float(a) for a in alphas], style="dashed"))
    partition = section.get("curve_partition", "test")
    return line_chart(
        chart_id="conformal-coverage",
        title=f"Coverage against alpha, on the {partition} partition",
        description=(
            f"Coverage of the sets (M* from the calibration partition, evaluated on the "
            f"{partition} partition) at each alpha, with the target 1 − alpha dashed; crosses "
            "mark an infinite M*: every set is the whole answer space, covered by convention"
            + (f" ({unsolvable} unsolvable counted covered)" if unsolvable else "")
            + "."
        ),
        x_labels=alphas,
        series=series,
        rules=_spec_alpha_rule(section, alphas),
        x_label="alpha",
        y_label="coverage",
        y_min=0.0,
        y_max=1.0,
        value_format=lambda v: f"{v:.4g}",
    )


def conformal_set_size_chart(section: Mapping[str, Any]) -> Chart | None:
    """Mean conformal set size against alpha (no point where M* is infinite).

    ``section`` is a run result's ``conformal``; None when it has no curve.
    """
    curve = section.get("curve") or []
    if not curve:
        return None
    alphas = [str(p["alpha"]) for p in curve]
    partition = section.get("curve_partition", "test")
    return line_chart(
        chart_id="conformal-set-size",
        title=f"Mean set size against alpha, on the {partition} partition",
        description=(
            f"Mean size of the prediction sets on the {partition} partition at each alpha; "
            "where M* is infinite the sets are the whole answer space and no size is drawn."
        ),
        x_labels=alphas,
        series=[Series("mean set size", [from_num(p["mean_set_size"]) for p in curve])],
        rules=_spec_alpha_rule(section, alphas),
        x_label="alpha",
        y_label="mean set size",
        value_format=lambda v: f"{v:.4g}",
    )


def rank_histogram_chart(section: Mapping[str, Any]) -> Chart | None:
    """Histogram of the calibration rank scores (∞: no admissible answer was sampled).

    ``section`` is a run result's ``conformal``; None when it has no score counts.
    """
    counts = section.get("score_counts") or []
    if not counts:
        return None
    shown = _shown((section.get("threshold") or {}).get("value"))
    return bar_chart(
        chart_id="rank-histogram",
        title=f"Calibration rank scores (M* = {shown})",
        description=(
            "Calibration questions per rank of their best admissible answer; ∞: no admissible "
            "answer was sampled."
        ),
        categories=[_shown(score) for score, _ in counts],
        series=[Series("calibration questions", [count for _, count in counts])],
        x_label="rank of the best admissible answer",
        y_label="calibration questions",
    )


def run_charts(result: Mapping[str, Any]) -> dict[str, Chart]:
    """The charts of a done run's stored result, by name (a name is absent with nothing to draw).

    Names: ``selective_risk``, ``conformal_coverage``, ``conformal_set_size``,
    ``rank_histogram``; ``result`` is ``CalibrationRun.result`` (empty: no chart).
    """
    selective = result.get("selective_risk") or {}
    conformal = result.get("conformal") or {}
    charts = {
        "selective_risk": selective_risk_chart(selective) if selective else None,
        "conformal_coverage": conformal_coverage_chart(conformal) if conformal else None,
        "conformal_set_size": conformal_set_size_chart(conformal) if conformal else None,
        "rank_histogram": rank_histogram_chart(conformal) if conformal else None,
    }
    return {name: chart for name, chart in charts.items() if chart is not None}
