"""SVG charts of certification results drawn with ``labeling.charts`` (no matplotlib)."""

from __future__ import annotations

from certification.selectors.agreement import AgreementView
from certification.selectors.derived import Freshness
from labeling.charts import Chart, Series, bar_chart


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
