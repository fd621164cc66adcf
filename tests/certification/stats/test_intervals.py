"""Clopper–Pearson intervals against reference values, scipy and statsmodels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest
from statsmodels.stats.proportion import proportion_confint

from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.intervals import (
    check_count,
    clopper_pearson,
    clopper_pearson_one_sided,
    clopper_pearson_upper,
    clopper_pearson_upper_array,
)


@pytest.mark.parametrize(
    ("k", "n", "confidence", "lower", "upper"),
    [
        (7, 50, 0.95, 0.05819170033997342, 0.26739600249700846),
        (0, 10, 0.95, 0.0, 0.30849710781876077),
        (5, 5, 0.95, 0.4781762498950185, 1.0),
        (0, 18, 0.99, 0.0, 0.25498502848277477),
    ],
)
def test_two_sided_reference_values(k, n, confidence, lower, upper):
    # given the reference table, when the interval is computed
    interval = clopper_pearson(k, n, confidence=confidence)
    # then both limits match to rel 1e-9
    assert interval.lower == pytest.approx(lower, rel=1e-9, abs=0)
    assert interval.upper == pytest.approx(upper, rel=1e-9, abs=0)
    assert interval.side == "two-sided"
    assert interval.method == "clopper-pearson"


def test_one_sided_upper_reference_value():
    assert clopper_pearson_upper(3, 100, confidence=0.99) == pytest.approx(
        0.0969710452653, rel=1e-9
    )


def test_zero_successes_upper_is_closed_form():
    # U = 1 - g^(1/n) for k = 0
    for n in (1, 5, 44, 1000):
        assert clopper_pearson_upper(0, n, confidence=0.99) == pytest.approx(
            1 - 0.01 ** (1 / n), rel=1e-12
        )


def test_one_success_lower_limit_is_closed_form():
    # Beta(1, n) quantile: L = 1 - (1 - g/2)^(1/n), written with log1p/expm1 to keep digits
    for n in (1, 85, 236, 10_000):
        for g in (0.1, 0.05, 0.01):
            expected = -math.expm1(math.log1p(-g / 2) / n)
            assert clopper_pearson(1, n, confidence=1 - g).lower == pytest.approx(
                expected, rel=1e-12
            )


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_two_sided_matches_scipy_and_statsmodels(kn):
    k, n = kn
    for confidence in (0.9, 0.95, 0.99):
        interval = clopper_pearson(k, n, confidence=confidence)
        scipy_ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
        sm_low, sm_high = proportion_confint(k, n, alpha=1 - confidence, method="beta")
        # scipy's binomtest finds the limits by root-finding (brentq, xtol 2e-12: about 1e-8
        # relative error near 0); statsmodels inverts the beta quantile like the formula
        assert interval.lower == pytest.approx(scipy_ci.low, rel=1e-9, abs=1e-12)
        assert interval.upper == pytest.approx(scipy_ci.high, rel=1e-9, abs=1e-12)
        assert interval.lower == pytest.approx(sm_low, rel=1e-9, abs=1e-15)
        assert interval.upper == pytest.approx(sm_high, rel=1e-9, abs=1e-15)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_one_sided_matches_scipy_and_statsmodels_at_twice_g(kn):
    k, n = kn
    for g in (0.01, 0.05, 0.1):
        upper = clopper_pearson_upper(k, n, confidence=1 - g)
        # scipy chooses the one-sided interval through alternative="less"
        scipy_high = binomtest(k, n, alternative="less").proportion_ci(1 - g).high
        # statsmodels' beta interval is two-sided: a one-sided level 1-g needs alpha = 2g
        sm_high = proportion_confint(k, n, alpha=2 * g, method="beta")[1]
        assert upper == pytest.approx(scipy_high, rel=1e-9, abs=1e-12)
        if k < n:
            assert upper == pytest.approx(sm_high, rel=1e-9)
        lower = clopper_pearson_one_sided(k, n, confidence=1 - g, side="lower").lower
        assert lower == pytest.approx(
            binomtest(k, n, alternative="greater").proportion_ci(1 - g).low, rel=1e-9, abs=1e-12
        )


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.floats(0.5, 0.999),
)
def test_intervals_contain_the_estimate(kn, confidence):
    k, n = kn
    assert clopper_pearson(k, n, confidence=confidence).contains(k / n)
    assert clopper_pearson_upper(k, n, confidence=confidence) >= k / n
    assert clopper_pearson_one_sided(k, n, confidence=confidence, side="lower").lower <= k / n


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 20), st.integers(1, 20), st.integers(1, 10))
def test_width_shrinks_with_n_and_grows_with_confidence(k, extra, scale):
    # same proportion k/n, more trials: narrower interval
    n = k + extra
    small = clopper_pearson(k, n)
    large = clopper_pearson(k * (scale + 1), n * (scale + 1))
    assert large.upper - large.lower < small.upper - small.lower
    # same data, higher confidence: the interval contains the lower-confidence one
    wide = clopper_pearson(k, n, confidence=0.99)
    assert wide.lower <= small.lower and wide.upper >= small.upper


def test_array_bounds_equal_scalar_bounds_and_empty_sets_get_one():
    k = np.array([0, 0, 3, 5, 7])
    n = np.array([0, 10, 100, 5, 50])
    bounds = clopper_pearson_upper_array(k, n, confidence=0.99)
    assert bounds[0] == 1.0
    for j in range(1, 5):
        assert bounds[j] == pytest.approx(
            binomtest(int(k[j]), int(n[j]), alternative="less").proportion_ci(0.99).high,
            rel=1e-9,
            abs=1e-12,
        )


def test_empty_denominator_is_insufficient_data_but_a_certificate_bound_is_one():
    with pytest.raises(InsufficientDataError, match="n must be >= 1"):
        clopper_pearson(0, 0)
    assert clopper_pearson_upper(0, 0, confidence=0.95) == 1.0


@pytest.mark.parametrize("bad", [44.0, np.float64(3.0), True, "3", None])
def test_float_and_non_integer_counts_are_refused(bad):
    # a float product must never reach a binomial routine, even when integral
    with pytest.raises(StatsError, match="k must be an integer count"):
        clopper_pearson(bad, 100)


def test_numpy_integers_are_counts():
    assert check_count(np.int64(7), name="k") == 7
    assert clopper_pearson(np.int32(7), np.int64(50)).lower == pytest.approx(
        0.05819170033997342, rel=1e-9
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 6, "n": 5}, "k must be <= n"),
        ({"k": -1, "n": 5}, "k must be >= 0"),
        ({"k": 1, "n": 5, "confidence": 1.0}, "confidence must lie strictly"),
        ({"k": 1, "n": 5, "confidence": 0.0}, "confidence must lie strictly"),
        ({"k": 1, "n": 5, "confidence": 95}, "confidence must lie strictly"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(StatsError, match=message):
        clopper_pearson(**kwargs)


def test_float_arrays_are_refused():
    with pytest.raises(StatsError, match="k must hold integer counts"):
        clopper_pearson_upper_array(np.array([1.0]), np.array([3]), confidence=0.9)
