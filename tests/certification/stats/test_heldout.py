"""Held-out report: two synthetic counterexamples for its denominators, with exact intervals."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest
from statsmodels.stats.proportion import proportion_confint

from certification.stats.conformal import (
    conformal_threshold,
    frequency_profile,
    nonconformity_score,
    prediction_set,
)
from certification.stats.errors import StatsError
from certification.stats.heldout import (
    HeldoutQuestion,
    heldout_report,
    proportion_metric,
)


def assert_exact_interval(metric, k, n, confidence=0.95):
    sm_low, sm_high = proportion_confint(k, n, alpha=1 - confidence, method="beta")
    scipy_ci = binomtest(k, n).proportion_ci(confidence, method="exact")
    assert metric.interval.lower == pytest.approx(sm_low, rel=1e-9, abs=1e-15)
    assert metric.interval.upper == pytest.approx(sm_high, rel=1e-9, abs=1e-15)
    # scipy root-finds the limits (brentq, xtol 2e-12); statsmodels inverts the beta quantile
    assert metric.interval.lower == pytest.approx(scipy_ci.low, rel=1e-9, abs=1e-12)
    assert metric.interval.upper == pytest.approx(scipy_ci.high, rel=1e-9, abs=1e-12)


def test_refusal_changes_the_denominator():
    # given 1,000 eligible questions, 20 emitted answers of 5 assessed claims each, and 10 of
    # them inadmissible with exactly one unsupported claim
    questions = [
        HeldoutQuestion(
            emitted=True,
            answer_admissible=i >= 10,
            claims=5,
            unsupported_claims=1 if i < 10 else 0,
        )
        for i in range(20)
    ] + [HeldoutQuestion(emitted=False) for _ in range(980)]
    # when the report is computed
    report = heldout_report(questions)
    # then every rate keeps its own numerator, denominator and unit
    expected = {
        "answer_rate": (20, 1000, "eligible question", 0.02),
        "unconditional_failure_rate": (10, 1000, "eligible question", 0.01),
        "emitted_answer_risk": (10, 20, "emitted answer", 0.5),
        "unsupported_claim_risk": (10, 100, "assessed claim", 0.1),
        "any_error_answer_rate": (10, 20, "emitted answer with assessed claims", 0.5),
    }
    for name, (k, n, unit, value) in expected.items():
        metric = getattr(report, name)
        assert (metric.numerator, metric.denominator, metric.unit) == (k, n, unit)
        assert metric.value == pytest.approx(value)
        assert_exact_interval(metric, k, n)
    assert "independent" in report.unsupported_claim_risk.note
    # no sets were returned: set coverage is undefined, not 0
    assert report.set_coverage.value is None
    assert report.set_coverage.interval is None
    assert "undefined" in report.set_coverage.reason
    assert report.set_coverage_all_eligible.value == 0.0
    assert report.set_sizes.n_no_set == 1000 and report.set_sizes.mean is None


def test_set_coverage_survives_while_selection_fails():
    # given 100 questions whose samples are {bad, bad, good}, only "good" admissible; calibration
    # on the same construction gives M* = 2, so every set is {bad, good}
    samples = ["bad", "bad", "good"]
    scores = [nonconformity_score(samples, {"good"})] * 100
    threshold = conformal_threshold(scores, 0.1)
    assert threshold.threshold == 2
    questions = []
    for _ in range(100):
        profile = frequency_profile(samples)
        retained = prediction_set(profile, threshold)
        selected = profile.mode  # the selector picks the mode: always "bad"
        questions.append(
            HeldoutQuestion(
                emitted=True,
                answer_admissible=selected == "good",
                set_size=retained.size,
                set_covers="good" in retained.classes,
            )
        )
    report = heldout_report(questions)
    # then set coverage is 100/100 and selected-answer error is 100/100
    assert (report.set_coverage.numerator, report.set_coverage.denominator) == (100, 100)
    assert (report.emitted_answer_risk.numerator, report.emitted_answer_risk.denominator) == (
        100,
        100,
    )
    assert report.set_coverage.value == 1.0 and report.emitted_answer_risk.value == 1.0
    assert report.set_sizes.counts == ((2, 100),)
    assert report.set_sizes.mean == 2
    assert_exact_interval(report.set_coverage, 100, 100)
    assert report.set_coverage.interval.upper == 1.0


def test_abstentions_count_against_all_eligible_coverage():
    questions = [
        HeldoutQuestion(emitted=True, answer_admissible=True, set_size=1, set_covers=True),
        HeldoutQuestion(emitted=True, answer_admissible=False, set_size=3, set_covers=False),
        HeldoutQuestion(emitted=False, set_size=0, set_covers=False),
        HeldoutQuestion(emitted=False),
    ]
    report = heldout_report(questions)
    assert (report.set_coverage.numerator, report.set_coverage.denominator) == (1, 3)
    assert (report.set_coverage_all_eligible.numerator,) == (1,)
    assert report.set_coverage_all_eligible.denominator == 4
    assert report.set_sizes.counts == ((0, 1), (1, 1), (3, 1))
    assert report.set_sizes.n_no_set == 1
    assert report.set_sizes.mean == pytest.approx(4 / 3)
    assert len(report.metrics) == 7


def test_zero_answer_policy_has_zero_answer_rate_and_undefined_risk():
    report = heldout_report([HeldoutQuestion(emitted=False)] * 50)
    assert report.answer_rate.value == 0.0
    assert report.emitted_answer_risk.value is None
    assert report.emitted_answer_risk.reason is not None


def test_proportion_metric_confidence_and_errors():
    metric = proportion_metric("x", 3, 100, "claim", confidence=0.99)
    assert metric.interval.confidence == 0.99
    assert_exact_interval(metric, 3, 100, confidence=0.99)
    with pytest.raises(StatsError, match="numerator 5 exceeds denominator 4"):
        proportion_metric("x", 5, 4, "claim")
    with pytest.raises(StatsError, match="x numerator must be an integer count"):
        proportion_metric("x", 0.5, 4, "claim")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"emitted": True}, "needs answer_admissible"),
        ({"emitted": False, "answer_admissible": True}, "abstention"),
        (
            {"emitted": True, "answer_admissible": True, "claims": 1, "unsupported_claims": 2},
            "exceeds",
        ),
        ({"emitted": False, "set_size": 2}, "both"),
        ({"emitted": False, "set_size": 0, "set_covers": True}, "empty set cannot cover"),
    ],
)
def test_contradictory_outcomes_are_refused(kwargs, message):
    with pytest.raises(StatsError, match=message):
        HeldoutQuestion(**kwargs)
