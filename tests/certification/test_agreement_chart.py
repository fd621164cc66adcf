"""The agreement chart of the dashboard panel: the stored figures per level, honest freshness."""

from __future__ import annotations

from datetime import UTC, datetime

from certification.charts import agreement_chart
from certification.selectors.agreement import AgreementView, LevelView, StatisticView
from certification.selectors.derived import Freshness


def level(name, alpha, kappa, percent):
    return LevelView(
        level=name,
        title=name,
        n_units=4,
        n_pairable_units=4,
        n_votes=8,
        n_raters=2,
        label_counts=(),
        alpha=StatisticView(alpha, None if alpha is not None else "no variation"),
        fleiss_kappa=StatisticView(kappa, None),
        percent_agreement=StatisticView(percent, None),
        pairs=(),
        confidence=0.95,
    )


def freshness(newer):
    return Freshness(
        kind="agreement",
        covered_generation=3,
        generation=3 + newer,
        newer_changes=newer,
        computed_at=None,
        queued=False,
        running=False,
        last_error="",
    )


AGREEMENT = AgreementView(
    computed_at=datetime(2026, 11, 2, 9, 30, tzinfo=UTC),
    input_sha256="0" * 64,
    identities_shown=False,
    levels=(level("answer", 0.5, 0.4, 0.75), level("claim", None, -0.2, 0.5)),
)


def test_the_chart_holds_the_stored_figures_per_level():
    chart = agreement_chart(AGREEMENT, freshness(0))
    assert chart.table_head == ("level", "Krippendorff's α", "Fleiss' κ", "percent agreement")
    assert chart.table_rows == (
        ("answer", "0.500", "0.400", "0.750"),
        ("claim", "—", "-0.200", "0.500"),
    )
    assert len(chart.rects) == 5  # the undefined alpha draws no bar
    assert chart.description.endswith("computed 2026-11-02 09:30 UTC.")


def test_a_stale_report_says_how_many_changes_are_not_counted():
    chart = agreement_chart(AGREEMENT, freshness(2))
    assert chart.description.endswith("; 2 newer change(s) not counted yet.")


def test_no_chart_before_the_first_computation():
    assert agreement_chart(None, freshness(1)) is None
