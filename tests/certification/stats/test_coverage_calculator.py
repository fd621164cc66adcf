"""The coverage calculator against independent scipy computations and episode 5's values."""

from __future__ import annotations

import math

import pytest
from scipy.stats import beta, betabinom

from certification.stats.coverage import coverage_calculator
from certification.stats.errors import InsufficientDataError, StatsError


def test_reproduces_the_beta_sd_at_12288_and_alpha_0_1():
    # given: l = floor((n+1) alpha) = 1228, Beta(n+1-l, l) = Beta(11061, 1228)
    calc = coverage_calculator(12288, "0.1")
    reference = beta(12288 + 1 - 1228, 1228)
    # then
    assert calc.l == 1228
    assert (calc.beta.a, calc.beta.b) == (11061, 1228)
    assert calc.beta.sd == pytest.approx(reference.std(), rel=1e-12)
    assert round(calc.beta.sd, 4) == 0.0027


def test_reproduces_the_sd_with_the_test_term_on_an_equal_test_half():
    # given: the other half of 24,576 predictions as the test set
    calc = coverage_calculator(12288, "0.1", n_test=12288)
    reference = betabinom(12288, 11061, 1228)
    # then
    assert calc.realised is not None
    assert calc.realised.sd == pytest.approx(reference.std() / 12288, rel=1e-12)
    assert round(calc.realised.sd, 4) == 0.0038


@pytest.mark.parametrize(("n", "alpha", "n_test"), [(100, "0.1", 50), (19, "0.05", 1000)])
def test_matches_scipy_for_other_sizes(n, alpha, n_test):
    calc = coverage_calculator(n, alpha, n_test=n_test)
    ell = math.floor((n + 1) * float(alpha))
    assert calc.beta.sd == pytest.approx(beta(n + 1 - ell, ell).std(), rel=1e-12)
    assert calc.realised is not None
    expected = betabinom(n_test, n + 1 - ell, ell).std() / n_test
    assert calc.realised.sd == pytest.approx(expected, rel=1e-12)


def test_design_effect_inflates_both_terms_by_its_square_root():
    calc = coverage_calculator(1000, "0.1", n_test=500, group_size=5, icc=0.1)
    assert calc.design_effect is not None
    assert calc.design_effect.value == pytest.approx(1.4)
    assert calc.grouped_beta_sd == pytest.approx(calc.beta.sd * math.sqrt(1.4))
    assert calc.realised is not None and calc.realised.sd is not None
    assert calc.grouped_realised_sd == pytest.approx(calc.realised.sd * math.sqrt(1.4))
    assert calc.effective_n_calibration == pytest.approx(714.2857, abs=1e-4)
    assert calc.effective_n_test == pytest.approx(500 / 1.4)


def test_too_small_a_calibration_set_gives_an_infinite_threshold_with_a_reason():
    calc = coverage_calculator(5, "0.1", n_test=10)
    assert calc.l == 0
    assert calc.beta.sd is None and "infinite" in (calc.beta.reason or "")
    assert calc.realised is not None and calc.realised.sd is None


def test_huge_n_is_computed_exactly():
    calc = coverage_calculator(10**12, "0.1", n_test=10**12)
    assert calc.beta.sd == pytest.approx(math.sqrt(0.09 / (10**12 + 2)), rel=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_calibration": 0, "alpha": "0.1"}, InsufficientDataError, "n_calibration"),
        ({"n_calibration": 10, "alpha": "0"}, StatsError, "alpha"),
        ({"n_calibration": 10, "alpha": "1"}, StatsError, "alpha"),
        ({"n_calibration": 10, "alpha": "0.1", "group_size": 5}, StatsError, "icc"),
        ({"n_calibration": 10, "alpha": "0.1", "icc": 0.1}, StatsError, "group_size"),
        (
            {"n_calibration": 10, "alpha": "0.1", "group_size": 5, "icc": -0.5},
            StatsError,
            "design effect",
        ),
        (
            {"n_calibration": 10, "alpha": "0.1", "group_size": 5, "icc": math.nan},
            StatsError,
            "icc",
        ),
    ],
)
def test_refuses_bad_input_naming_it(kwargs, error, match):
    with pytest.raises(error, match=match):
        coverage_calculator(**kwargs)
