"""Selective-risk certification against hand-computed reference values and scipy/statsmodels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, binomtest
from statsmodels.stats.proportion import proportion_confint

from certification.stats.errors import StatsError
from certification.stats.selective_risk import (
    NO_CERTIFIED_OPERATING_POINT,
    ThresholdCounts,
    binomial_p_value,
    binomial_p_values,
    certify,
    certify_scores,
    smallest_certifiable_count,
    threshold_counts,
)


def family(accepted, errors, n=None):
    return ThresholdCounts(
        thresholds=tuple(float(j) for j in range(len(accepted))),
        accepted=tuple(accepted),
        errors=tuple(errors),
        n=max(accepted) if n is None else n,
    )


# -- reference values (alpha 0.10) ------------------------------------------------------------
@pytest.mark.parametrize(
    ("m", "k", "p", "upper", "certified"),
    [
        (44, 0, 0.0096977373, 0.0993720, True),
        (43, 0, 0.0107752637, 0.1015615, False),
        (100, 3, 0.0078364871, 0.0969710453, True),
    ],
)
def test_reference_rows_at_cutoff_001(m, k, p, upper, certified):
    # given alpha 0.10 and one threshold tested at 0.01 (delta 0.01, M 1)
    cert = certify(family([m], [k]), alpha=0.10, delta=0.01)
    row = cert.results[0]
    # then p-value, 99% upper bound and decision match the table; the table's p-values carry 10
    # decimals, so they are matched to half a unit in that place (rel 1e-9 is asserted against
    # the closed forms and scipy in the next test)
    assert row.p_value == pytest.approx(p, abs=0.5e-10)
    assert row.upper_bound == pytest.approx(upper, abs=1e-6)
    assert cert.bound_confidence == pytest.approx(0.99)
    assert row.certified is certified


def test_reference_p_values_match_closed_forms_and_scipy():
    assert binomial_p_value(0, 44, 0.1) == pytest.approx(0.9**44, rel=1e-12)
    assert binomial_p_value(0, 43, 0.1) == pytest.approx(0.9**43, rel=1e-12)
    assert binomial_p_value(3, 100, 0.1) == pytest.approx(
        binomtest(3, 100, 0.1, alternative="less").pvalue, rel=1e-12
    )
    # 9.6971%: the one-sided 99% bound for m=100, k=3
    assert certify(family([100], [3]), alpha=0.1, delta=0.01).results[0].upper_bound == (
        pytest.approx(0.0969710453, rel=1e-9)
    )


def test_threshold_accepting_nothing_has_p_one_and_is_not_certified():
    cert = certify(family([0], [0], n=10), alpha=0.1, delta=0.05)
    row = cert.results[0]
    assert row.p_value == 1.0
    assert row.upper_bound == 1.0
    assert row.empirical_risk is None
    assert "accepts nothing" in row.note
    assert not row.certified
    assert cert.outcome == NO_CERTIFIED_OPERATING_POINT


@pytest.mark.parametrize(("errors", "expected"), [(0, 44), (1, 64), (2, 81), (3, 97)])
def test_smallest_certifying_count_at_001(errors, expected):
    assert smallest_certifiable_count(alpha=0.1, delta=0.01, errors=errors) == expected
    # independent check: expected passes, expected - 1 does not
    assert binom.cdf(errors, expected, 0.1) <= 0.01 < binom.cdf(errors, expected - 1, 0.1)


def test_seed_000_worksheet_needs_44_with_zero_errors():
    # alpha .10, delta .05, M 5: cutoff 0.01 and m >= ln(delta/M)/ln(1-alpha)
    assert smallest_certifiable_count(alpha=0.1, delta=0.05, n_thresholds=5) == 44
    assert math.ceil(math.log(0.05 / 5) / math.log(0.9)) == 44


REFERENCE_FAMILY = family([30, 60, 100, 150, 200], [0, 1, 3, 9, 16], n=200)
REFERENCE_P = [0.0423912, 0.0137771, 0.00783649, 0.0600462, 0.207478]


def test_reference_family_p_values_and_bonferroni():
    cert = certify(REFERENCE_FAMILY, alpha=0.1, delta=0.05)
    assert [r.p_value for r in cert.results] == pytest.approx(REFERENCE_P, abs=1e-6)
    assert cert.test_level == pytest.approx(0.01)
    assert cert.certified_indices == (2,)
    assert cert.chosen_index == 2
    assert cert.outcome == "certified"
    assert cert.chosen.upper_bound == pytest.approx(0.0969710453, rel=1e-9)


def test_reference_family_fixed_sequence_certifies_the_first_three():
    cert = certify(REFERENCE_FAMILY, alpha=0.1, delta=0.05, method="fixed_sequence")
    assert cert.certified_indices == (0, 1, 2)
    assert [r.tested for r in cert.results] == [True, True, True, True, False]
    # largest answer rate among certified: the third (100 accepted)
    assert cert.chosen_index == 2
    assert cert.test_level == 0.05
    # bounds at 1 - delta keep the duality p <= delta iff bound <= alpha on tested rows
    for row in cert.results[:4]:
        assert (row.upper_bound <= 0.1) == (row.p_value <= 0.05)


def test_p_values_agree_with_scipy_binomtest_over_a_grid():
    m = np.arange(1, 120)
    for k_value in (0, 1, 5):
        k = np.minimum(k_value, m)
        ours = binomial_p_values(k, m, 0.1)
        expected = [
            binomtest(int(a), int(b), 0.1, alternative="less").pvalue
            for a, b in zip(k, m, strict=True)
        ]
        assert ours == pytest.approx(expected, rel=1e-9)


# -- delta is divided by the whole family ----------------------------------------------------
def test_bonferroni_counts_thresholds_that_accept_nothing():
    # (44, 0) alone at delta 0.01 certifies; at delta 0.05 with five empty thresholds
    # beside it the level is 0.05/6 < 0.0097 and it does not
    assert certify(family([44], [0]), alpha=0.1, delta=0.01).is_certified
    padded = ThresholdCounts(
        thresholds=(0.0, 1, 2, 3, 4, 5),
        accepted=(44, 0, 0, 0, 0, 0),
        errors=(0, 0, 0, 0, 0, 0),
        n=44,
    )
    cert = certify(padded, alpha=0.1, delta=0.05)
    assert cert.n_thresholds == 6
    assert not cert.is_certified
    assert cert.outcome == NO_CERTIFIED_OPERATING_POINT
    assert "at least 46" in cert.reason  # ceil(ln(0.05/6) / ln 0.9) = ceil(45.44)
    assert smallest_certifiable_count(alpha=0.1, delta=0.05, n_thresholds=6) == math.ceil(
        math.log(0.05 / 6) / math.log(0.9)
    )


def test_fail_closed_when_nothing_certifies():
    cert = certify(family([10, 20, 43], [0, 0, 0]), alpha=0.1, delta=0.01, method="bonferroni")
    assert cert.outcome == NO_CERTIFIED_OPERATING_POINT
    assert cert.chosen is None
    assert cert.certified_indices == ()
    assert all(not r.certified for r in cert.results)


def test_fixed_sequence_first_failure_stops_everything():
    cert = certify(family([10, 500], [5, 0]), alpha=0.1, delta=0.05, method="fixed_sequence")
    assert not cert.is_certified
    assert [r.tested for r in cert.results] == [True, False]
    assert "not tested" in cert.results[1].note


# -- utility ----------------------------------------------------------------------------------
def test_utilities_choose_among_certified_thresholds():
    counts = family([100, 300, 200], [0, 15, 1], n=300)
    by_rate = certify(counts, alpha=0.1, delta=0.05)
    assert by_rate.certified_indices == (0, 1, 2)
    assert by_rate.chosen_index == 1  # most answers
    by_bound = certify(counts, alpha=0.1, delta=0.05, utility="lowest_upper_bound")
    assert by_bound.chosen_index == 2  # 1/200 has the lowest 1-delta/M bound

    def fewest_errors(row):
        return -row.errors

    custom = certify(counts, alpha=0.1, delta=0.05, utility=fewest_errors)
    assert custom.chosen_index == 0
    assert custom.utility == "fewest_errors"


def test_ties_go_to_the_earlier_threshold():
    cert = certify(family([100, 100], [0, 0], n=100), alpha=0.1, delta=0.05)
    assert cert.chosen_index == 0


# -- counting ---------------------------------------------------------------------------------
def brute_force_counts(scores, losses, thresholds, accept):
    accepted, errors = [], []
    for t in thresholds:
        m = k = 0
        for s, loss in zip(scores, losses, strict=True):
            if (s >= t) if accept == ">=" else (s > t):
                m += 1
                k += loss
        accepted.append(m)
        errors.append(k)
    return accepted, errors


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10).map(lambda v: v / 10), st.integers(0, 1)), max_size=60),
    st.lists(st.integers(-2, 12).map(lambda v: v / 10), min_size=1, max_size=15),
    st.sampled_from([">=", ">"]),
)
def test_counts_match_a_brute_force_loop_with_ties(rows, thresholds, accept):
    scores = [s for s, _ in rows]
    losses = [loss for _, loss in rows]
    counts = threshold_counts(
        np.array(scores, dtype=float), np.array(losses, dtype=int), thresholds, accept=accept
    )
    accepted, errors = brute_force_counts(scores, losses, thresholds, accept)
    assert list(counts.accepted) == accepted
    assert list(counts.errors) == errors
    assert counts.n == len(rows)
    assert all(type(m) is int for m in counts.accepted)


def test_acceptance_direction_matters_at_ties():
    scores = [0.5, 0.5, 0.7]
    losses = [1, 0, 0]
    assert threshold_counts(scores, losses, [0.5], accept=">=").accepted == (3,)
    assert threshold_counts(scores, losses, [0.5], accept=">").accepted == (1,)
    assert threshold_counts(scores, losses, [0.5], accept=">").errors == (0,)


def test_boolean_and_exact_float_losses_are_accepted():
    scores = [0.1, 0.9, 0.8]
    assert threshold_counts(scores, [True, False, True], [0.5]).errors == (1,)
    assert threshold_counts(scores, [1.0, 0.0, 1.0], [0.5]).errors == (1,)


@pytest.mark.parametrize(
    ("scores", "losses", "thresholds", "message"),
    [
        ([0.1, 0.2], [0.5, 1], [0.1], "losses must be 0/1"),
        ([0.1, 0.2], [1], [0.1], r"losses must have shape \(2,\)"),
        ([0.1, float("nan")], [1, 0], [0.1], "scores must not contain NaN"),
        ([0.1, 0.2], [1, 0], [], "thresholds must be a non-empty"),
        ([0.1, 0.2], [1, 0], [float("nan")], "thresholds must not contain NaN"),
    ],
)
def test_bad_inputs_raise_named_errors(scores, losses, thresholds, message):
    with pytest.raises(StatsError, match=message):
        threshold_counts(scores, losses, thresholds)


def test_unknown_direction_method_and_utility_are_refused():
    with pytest.raises(StatsError, match="accept must be"):
        threshold_counts([0.1], [0], [0.1], accept="=>")
    with pytest.raises(StatsError, match="method must be"):
        certify(REFERENCE_FAMILY, alpha=0.1, delta=0.05, method="holm")
    with pytest.raises(StatsError, match="utility must be one of"):
        certify(REFERENCE_FAMILY, alpha=0.1, delta=0.05, utility="accuracy")
    with pytest.raises(StatsError, match="alpha must lie strictly"):
        certify(REFERENCE_FAMILY, alpha=1.0, delta=0.05)


def test_float_counts_are_refused():
    # binom.cdf(n * mean(losses), ...) is a bug; a float count never gets in
    with pytest.raises(StatsError, match=r"accepted\[0\] must be an integer count"):
        ThresholdCounts(thresholds=(0.5,), accepted=(44.0,), errors=(0,), n=44)
    with pytest.raises(StatsError, match="errors must hold integer counts"):
        binomial_p_values(np.array([0.0]), np.array([44]), 0.1)


def test_inconsistent_counts_are_refused():
    with pytest.raises(StatsError, match="exceeds accepted"):
        family([5], [6], n=10)
    with pytest.raises(StatsError, match="exceeds n"):
        family([11], [0], n=10)


def test_certify_scores_runs_the_whole_pipeline():
    scores = np.linspace(0, 1, 200)
    losses = (scores < 0.3).astype(int)
    cert = certify_scores(scores, losses, [0.0, 0.3, 0.5], alpha=0.1, delta=0.05, accept=">=")
    assert cert.results[0].errors == 60
    assert cert.certified_indices == (1, 2)
    assert cert.chosen.threshold == 0.3


# -- properties -------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 500), st.floats(0.01, 0.5))
def test_p_values_are_monotone_in_k_and_m(m, alpha):
    k = np.arange(0, m + 1)
    p = binomial_p_values(k, np.full_like(k, m), alpha)
    assert np.all(np.diff(p) >= 0)
    # more accepted answers with the same errors: stronger evidence
    k0 = m // 3
    assert binomial_p_value(k0, m + 1, alpha) <= binomial_p_value(k0, m, alpha)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 400).flatmap(lambda m: st.tuples(st.integers(0, m), st.just(m))),
    st.floats(0.02, 0.4),
    st.sampled_from([0.001, 0.01, 0.05]),
)
def test_duality_p_value_versus_statsmodels_upper_bound(km, alpha, level):
    # p <= d iff the one-sided 1-d upper bound <= alpha; statsmodels' beta interval is
    # two-sided, so the one-sided level 1-d uses alpha = 2d
    k, m = km
    p = binomial_p_value(k, m, alpha)
    bound = 1.0 if k == m else proportion_confint(k, m, alpha=2 * level, method="beta")[1]
    if abs(p - level) > 1e-9 and abs(bound - alpha) > 1e-9:
        assert (p <= level) == (bound <= alpha)
    cert = certify(family([m], [k]), alpha=alpha, delta=level)
    assert cert.results[0].upper_bound >= k / m  # the bound contains the estimate


def test_false_certification_probability_is_at_most_delta_exactly():
    # true risk exactly alpha: P(certify) = P[Binom(m, alpha) <= k*] with k* the largest k
    # that certifies; it must never exceed delta
    for m in range(1, 400):
        counts = family([m] * (m + 1), list(range(m + 1)), n=m)
        cert = certify(counts, alpha=0.1, delta=0.05, method="fixed_sequence")
        certified_k = [r.errors for r in cert.results if r.p_value <= 0.05]
        if certified_k:
            assert binom.cdf(max(certified_k), m, 0.1) <= 0.05


@pytest.mark.slow
def test_certified_risk_is_at_most_alpha_in_at_least_1_minus_delta_of_calibrations():
    # given scores uniform on [0, 1] and P(error | score s) = 0.3 (1 - s), the selective risk of
    # "accept s >= t" is 0.15 (1 - t): unsafe (> 0.10) for t < 1/3
    alpha, delta, n, runs = 0.10, 0.05, 1500, 600
    thresholds = np.round(np.arange(0.0, 0.95, 0.05), 2)
    true_risk = 0.15 * (1 - thresholds)
    rng = np.random.default_rng(20260404)
    violations = {"bonferroni": 0, "fixed_sequence": 0}
    for _ in range(runs):
        scores = rng.random(n)
        losses = (rng.random(n) < 0.3 * (1 - scores)).astype(int)
        counts = threshold_counts(scores, losses, thresholds)
        for method in violations:
            cert = certify(counts, alpha=alpha, delta=delta, method=method)
            # the chosen threshold's true risk (any certified one, to be strict)
            if any(true_risk[j] > alpha for j in cert.certified_indices):
                violations[method] += 1
    # then the chosen risk is <= alpha in >= 1 - delta of calibrations (binomial slack 3 SD)
    slack = 3 * math.sqrt(delta * (1 - delta) / runs)
    for method, count in violations.items():
        assert count / runs <= delta + slack, method
