"""Coverage variability against reference values, scipy, statsmodels and seeded simulations."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import beta as beta_dist
from scipy.stats import betabinom
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm

from certification.stats.coverage import (
    beta_coverage,
    design_effect,
    design_effect_from_lags,
    design_effect_unequal,
    effective_sample_size,
    icc_oneway,
    iid_control,
    lag_correlations,
    realised_coverage_spread,
    split_dependence_report,
    split_spread,
)
from certification.stats.errors import InsufficientDataError, StatsError

ICC_GROUPS = [[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 0, 1], [1, 1, 1, 1], [0, 0, 1, 0]]


# -- reference values -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "alpha", "a", "b", "mean", "variance"),
    [(100, 0.10, 91, 10, 0.9009901, 8.745778e-4), (19, 0.05, 19, 1, 0.95, 2.261905e-3)],
)
def test_beta_reference(n, alpha, a, b, mean, variance):
    spread = beta_coverage(n, alpha)
    assert (spread.a, spread.b) == (a, b)
    assert spread.mean == pytest.approx(mean, abs=1e-6)
    assert spread.variance == pytest.approx(variance, rel=1e-6)
    # independent reference: scipy's Beta
    assert spread.mean == pytest.approx(beta_dist(a, b).mean(), rel=1e-12)
    assert spread.variance == pytest.approx(beta_dist(a, b).var(), rel=1e-12)


def test_design_effect_reference_equal_clusters():
    deff = design_effect(5, 0.1)
    assert deff.value == pytest.approx(1.4)
    assert effective_sample_size(1000, deff) == pytest.approx(714.2857, abs=1e-4)


def test_design_effect_reference_unequal_clusters():
    deff = design_effect_unequal([1, 2, 3, 4, 10], 0.2)
    assert deff.cluster_size == pytest.approx(6.5)
    assert deff.value == pytest.approx(2.1)


def test_icc_reference():
    result = icc_oneway(ICC_GROUPS)
    assert result.msb == pytest.approx(0.675, abs=1e-12)
    assert result.msw == pytest.approx(0.15, abs=1e-12)
    assert result.icc == pytest.approx(0.4666667, abs=1e-6)


def anova_reference(groups):
    frame = pd.DataFrame(
        [(value, f"g{i}") for i, group in enumerate(groups) for value in group],
        columns=["y", "g"],
    )
    table = anova_lm(ols("y ~ C(g)", data=frame).fit())
    return table.loc["C(g)", "mean_sq"], table.loc["Residual", "mean_sq"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=6),
        min_size=2,
        max_size=8,
    ).filter(lambda gs: sum(len(g) for g in gs) > len(gs))
)
def test_icc_mean_squares_match_statsmodels_anova(groups):
    result = icc_oneway(groups)
    msb, msw = anova_reference(groups)
    assert result.msb == pytest.approx(msb, rel=1e-7, abs=1e-9)
    assert result.msw == pytest.approx(msw, rel=1e-7, abs=1e-9)
    sizes = np.array([len(g) for g in groups], dtype=float)
    m0 = (sizes.sum() - (sizes**2).sum() / sizes.sum()) / (len(groups) - 1)
    assert result.group_size == pytest.approx(m0)
    if result.icc is not None:
        assert result.icc == pytest.approx((msb - msw) / (msb + (m0 - 1) * msw), rel=1e-6, abs=1e-9)


def test_icc_without_variation_is_undefined():
    result = icc_oneway([[1, 1], [1, 1, 1]])
    assert result.icc is None
    assert result.reason.startswith("no variation")


def test_icc_needs_two_groups_and_within_group_rows():
    with pytest.raises(InsufficientDataError, match="2 groups"):
        icc_oneway([[1, 0]])
    with pytest.raises(InsufficientDataError, match="within-group"):
        icc_oneway([[1], [0]])


# -- Beta-Binomial ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "n_test", "alpha"), [(100, 100, 0.1), (12288, 12288, 0.1), (19, 50, 0.05)]
)
def test_realised_spread_matches_scipy_betabinom(n, n_test, alpha):
    spread = realised_coverage_spread(n, n_test, alpha)
    k = math.ceil((n + 1) * (1 - Fraction(str(alpha))))
    reference = betabinom(n_test, k, n + 1 - k)
    assert spread.variance == pytest.approx(reference.var() / n_test**2, rel=1e-9)
    assert spread.mean == pytest.approx(reference.mean() / n_test, rel=1e-12)
    a = alpha
    assert spread.approximate_variance == pytest.approx(
        a * (1 - a) / (n + 2) + a * (1 - a) / n_test
    )


def test_seed_003_exchangeable_sd_with_both_terms():
    # 12,288 + 12,288 at alpha 0.1: Beta SD 0.0027 alone, 0.0038 with the test term
    spread = realised_coverage_spread(12288, 12288, 0.1)
    assert math.sqrt(spread.beta_variance) == pytest.approx(0.0027, abs=5e-5)
    assert spread.sd == pytest.approx(0.0038, abs=5e-5)
    # equal halves: leaving out the test term understates the spread by about sqrt(2)
    assert spread.sd / math.sqrt(spread.beta_variance) == pytest.approx(math.sqrt(2), rel=1e-3)


def test_infinite_threshold_has_no_spread():
    spread = beta_coverage(5, 0.1)
    assert spread.mean is None and spread.variance is None
    assert "k = 6 > n = 5" in spread.reason
    assert realised_coverage_spread(5, 100, 0.1).sd is None


# -- design effects ---------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(st.integers(1, 50), st.floats(0, 1))
def test_constant_lag_correlation_reduces_to_kish(m, rho):
    # rho_k = rho at every lag: 1 + 2 sum (1 - k/m) rho = 1 + (m - 1) rho
    from_lags = design_effect_from_lags([rho] * (m - 1), m)
    assert from_lags.value == pytest.approx(design_effect(m, rho).value, rel=1e-12)


def test_lags_with_unequal_blocks_weight_each_block():
    # blocks of 2 and 4, rho_1 = 0.5 only: pairs at lag 1 = 1 + 3 = 4, N = 6
    assert design_effect_from_lags([0.5], [2, 4]).value == pytest.approx(1 + 2 * 0.5 * 4 / 6)


def test_seed_003_design_effect_arithmetic():
    # the seed's 24,576 rows "worth about 11,948" imply deff 2.0569 (printed as 2.06), whose
    # square root is the predicted excess 1.43
    deff = design_effect(11, 0.10569)
    assert deff.value == pytest.approx(2.0569)
    assert effective_sample_size(24576, deff) == pytest.approx(11948, abs=1)
    assert deff.predicted_excess == pytest.approx(1.43, abs=5e-3)
    assert design_effect(2, 0.0).predicted_excess == 1.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: design_effect(5, 1.5), "rho must lie in"),
        (lambda: design_effect(0, 0.1), "cluster_size must be >= 1"),
        (lambda: design_effect(5, -0.5), "design effect"),
        (lambda: design_effect(5.0, 0.1), "integer count"),
        (lambda: design_effect_unequal([], 0.1), "non-empty"),
        (lambda: effective_sample_size(10, 0.0), "deff must be > 0"),
    ],
)
def test_design_effect_errors(call, message):
    with pytest.raises(StatsError, match=message):
        call()


def test_lag_correlations_by_hand():
    # one sequence 1 0 1 0: mu 0.5, var 0.25; lag 1 products all -0.25 -> -1; lag 2 -> +1
    result = lag_correlations([[1, 0, 1, 0]])
    assert result.values == pytest.approx((-1.0, 1.0, -1.0))
    assert result.pairs == (3, 2, 1)
    constant = lag_correlations([[1, 1], [1, 1, 1]])
    assert constant.values == () and "no variation" in constant.reason


# -- seeded simulations -----------------------------------------------------------------------
def grouped_pool(seed=3, groups=60, size=20):
    rng = np.random.default_rng(seed)
    effect = rng.normal(size=groups)
    scores = (effect[:, None] + rng.normal(size=(groups, size))).ravel()
    return scores, np.repeat(np.arange(groups), size)


def test_simulations_are_deterministic_for_a_seed():
    scores, groups = grouped_pool()
    first = split_spread(scores, groups, alpha=0.1, draws=20, seed=9, split="group")
    second = split_spread(scores, groups, alpha=0.1, draws=20, seed=9, split="group")
    assert first == second
    assert iid_control(scores, alpha=0.1, pools=2, draws=10, seed=1) == iid_control(
        scores, alpha=0.1, pools=2, draws=10, seed=1
    )


@pytest.mark.slow
def test_row_split_cannot_see_groups_but_grouped_split_and_design_effect_do():
    # given 60 groups of 20 rows sharing a group effect (ICC of the scores about 0.5)
    scores, groups = grouped_pool()
    report = split_dependence_report(scores, groups, alpha=0.1, draws=200, pools=10, seed=1)
    # then both splits keep marginal coverage near 0.9
    assert report.row.mean == pytest.approx(0.9, abs=0.01)
    assert report.group.mean == pytest.approx(0.9, abs=0.01)
    # the row split shows no excess: inside what i.i.d. pools give (exchangeable by construction)
    assert 0.8 < report.row.excess < 1.2
    assert report.control.low < 1.0 < report.control.high + 0.1
    # against the Beta term alone the row split looks 1.4x too wide: the missing test term
    assert report.row.sd_ratio == pytest.approx(math.sqrt(2), rel=0.15)
    # the grouped split is far outside the i.i.d. band, and sqrt(deff) predicts it
    assert report.group.excess > 2 * report.control.high
    assert report.predicted_excess == pytest.approx(report.group.excess, rel=0.2)
    assert report.effective_n == pytest.approx(1200 / report.design_effect.value)
    # the lag-based design effect agrees with Kish's 1 + (m-1) ICC of the coverage indicator
    covered = scores <= np.sort(scores)[math.ceil(1201 * 0.9) - 1]
    icc = icc_oneway([covered[groups == g].astype(float) for g in range(60)]).icc
    assert report.design_effect.value == pytest.approx(design_effect(20, icc).value, rel=0.1)


@pytest.mark.slow
def test_independent_rows_show_no_excess_under_either_split():
    rng = np.random.default_rng(11)
    scores = rng.normal(size=1200)
    groups = np.repeat(np.arange(60), 20)
    report = split_dependence_report(scores, groups, alpha=0.1, draws=200, pools=5, seed=2)
    assert 0.8 < report.row.excess < 1.2
    assert 0.8 < report.group.excess < 1.25
    assert report.predicted_excess == pytest.approx(1.0, abs=0.2)


def test_split_arguments_are_checked():
    scores, groups = grouped_pool()
    with pytest.raises(StatsError, match="needs groups"):
        split_spread(scores, alpha=0.1, split="group")
    with pytest.raises(StatsError, match="one label per score"):
        split_spread(scores, groups[:-1], alpha=0.1, split="group")
    with pytest.raises(StatsError, match="split must be"):
        split_spread(scores, alpha=0.1, split="block")
    with pytest.raises(StatsError, match="draws must be >= 2"):
        split_spread(scores, alpha=0.1, draws=1)
    with pytest.raises(InsufficientDataError):
        split_spread([1.0, 2.0], alpha=0.1)
