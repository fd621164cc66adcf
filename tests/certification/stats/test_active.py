"""Active inference (Zrnic and Candès 2024): the design, the IPW estimator and its interval.

References are independent of the product: the authors' notebook formulas written out here
(``np.mean(Yhat + (Y - Yhat) * xi / probs)``, ``np.std(...) / np.sqrt(n)``) and seeded
simulation. ``ppi_py`` 0.2.3 has no active or
Horvitz–Thompson estimator (its weights are rescaled to mean 1, the Hajek form), so it is no
reference here. No database and no Django.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from certification.stats.errors import StatsError
from certification.stats.ppi import (
    active_inclusion_probabilities,
    active_ppi_mean,
    judge_uncertainty,
)

#: Monte Carlo tolerance of a coverage estimate over 2,000 studies: 2.5 standard errors of a
#: proportion near 0.95 (sqrt(0.95 * 0.05 / 2000) = 0.0049).
COVERAGE_TOLERANCE = 0.0122


def world(rng: np.random.Generator, big_n: int, *, calibrated: bool) -> tuple[np.ndarray, ...]:
    """Judge probabilities p ~ Beta(0.4, 0.4); errors Y ~ Bernoulli(p) or Bernoulli(p^2).

    Returns p, Y and the error rate E[Y]: 0.5, or E[p^2] = a (a + 1) / (2a (2a + 1)) for a
    miscalibrated judge that over-predicts errors.
    """
    p = rng.beta(0.4, 0.4, big_n)
    truth = p if calibrated else p**2
    y = (rng.random(big_n) < truth).astype(float)
    rate = 0.5 if calibrated else 0.4 * 1.4 / (0.8 * 1.8)
    return p, y, rate


def draw(rng, pi):
    return np.flatnonzero(rng.random(pi.size) < pi)


# -- the design --------------------------------------------------------------------------------
def test_probabilities_spend_the_budget_within_the_floor_and_one():
    rng = np.random.default_rng(3)
    u = judge_uncertainty(rng.beta(0.4, 0.4, 500))
    pi = active_inclusion_probabilities(u, budget=60, floor=0.2)
    assert pi.sum() == pytest.approx(60, rel=1e-12)
    assert pi.min() >= 0.2 * 60 / 500 - 1e-15
    assert pi.max() <= 1.0
    # more uncertain, more likely to be labelled
    order = np.argsort(u)
    assert np.all(np.diff(pi[order]) >= -1e-15)


def test_excess_over_one_is_redistributed():
    # given one very uncertain item among confident ones
    u = np.array([1.0] + [0.01] * 9)
    # when the budget is 3 labels
    pi = active_inclusion_probabilities(u, budget=3, floor=0.1)
    # then the uncertain item is certain and the other nine share the remaining 2
    assert pi[0] == 1.0
    assert pi[1:] == pytest.approx(np.full(9, 2 / 9), rel=1e-12)


def test_the_full_budget_labels_everything():
    pi = active_inclusion_probabilities(np.linspace(0, 0.5, 8), budget=8)
    assert np.array_equal(pi, np.ones(8))


@pytest.mark.parametrize("u", [np.zeros(10), np.full(10, 0.3)])
def test_constant_uncertainty_is_the_uniform_design(u):
    # a 0/1 verdict has u = 0 everywhere: nothing to rank by
    assert active_inclusion_probabilities(u, budget=4) == pytest.approx(np.full(10, 0.4))


def test_verdicts_have_no_uncertainty():
    assert np.array_equal(judge_uncertainty([0.0, 1.0, 1.0]), np.zeros(3))
    assert judge_uncertainty([0.5, 0.1]) == pytest.approx([0.5, math.sqrt(0.09)])


@pytest.mark.parametrize(
    ("uncertainty", "budget", "floor"),
    [
        ([0.1, -0.1], 1, 0.2),
        ([0.1, float("nan")], 1, 0.2),
        ([], 1, 0.2),
        ([0.1, 0.2], 0, 0.2),
        ([0.1, 0.2], 3, 0.2),
        ([0.1, 0.2], 1, 0.0),
        ([0.1, 0.2], 1, 1.5),
    ],
)
def test_bad_designs_are_refused(uncertainty, budget, floor):
    with pytest.raises(StatsError):
        active_inclusion_probabilities(uncertainty, budget=budget, floor=floor)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=40),
    st.floats(0.01, 1.0),
    st.floats(0.01, 1.0),
)
def test_probabilities_always_sum_to_the_budget(u, share, floor):
    budget = max(share * len(u), 1e-3)
    pi = active_inclusion_probabilities(u, budget=budget, floor=floor)
    assert pi.sum() == pytest.approx(budget, rel=1e-9)
    assert np.all(pi <= 1.0) and np.all(pi >= floor * budget / len(u) * (1 - 1e-12))


# -- the estimator against the authors' formulas -----------------------------------------------
def test_estimate_and_interval_equal_the_direct_formula():
    rng = np.random.default_rng(11)
    p, y, _ = world(rng, 800, calibrated=False)
    pi = active_inclusion_probabilities(judge_uncertainty(p), budget=120)
    idx = draw(rng, pi)
    xi = np.zeros(800)
    xi[idx] = 1
    # the authors' notebook, written out
    terms = p + (y - p) * xi / pi
    se = np.std(terms) / np.sqrt(800)
    result = active_ppi_mean(p, pi, idx, y[idx], delta=0.1)
    assert result.estimate == pytest.approx(np.mean(terms), rel=1e-12)
    assert result.se == pytest.approx(se, rel=1e-12)
    assert result.lower == pytest.approx(np.mean(terms) - norm.ppf(0.95) * se, rel=1e-12)
    assert result.upper_bound == pytest.approx(np.mean(terms) + norm.ppf(0.9) * se, rel=1e-12)
    assert result.n_labelled == idx.size and result.expected_labels == pytest.approx(120)


def test_a_uniform_design_needs_exactly_its_own_labels():
    # with pi constant, the uniform design with the same variance is the design itself
    rng = np.random.default_rng(2)
    p, y, _ = world(rng, 400, calibrated=True)
    pi = np.full(400, 0.25)
    idx = draw(rng, pi)
    result = active_ppi_mean(p, pi, idx, y[idx])
    assert result.uniform_labels == pytest.approx(100, rel=1e-12)
    assert result.saving == pytest.approx(0.0, abs=1e-12)


def test_a_perfect_judge_on_the_labelled_items_leaves_the_saving_undefined():
    f = np.array([1.0, 0.0, 1.0, 0.0])
    result = active_ppi_mean(f, np.full(4, 0.5), [0, 1], [1.0, 0.0])
    assert result.uniform_labels is None and result.saving is None
    assert "zero" in result.saving_reason


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"inclusion": [0.5, 0.0, 0.5]}, "inclusion"),
        ({"inclusion": [0.5, 0.5]}, "shape"),
        ({"labelled": [0, 0], "y": [1.0, 1.0]}, "distinct"),
        ({"labelled": [3], "y": [1.0]}, "positions"),
        ({"y": [2.0]}, "y"),
    ],
)
def test_bad_inputs_are_refused(kwargs, message):
    values = {
        "predictions": [0.2, 0.5, 0.9],
        "inclusion": [0.5, 0.5, 0.5],
        "labelled": [1],
        "y": [1.0],
        **kwargs,
    }
    with pytest.raises(StatsError, match=message):
        active_ppi_mean(**values)


# -- simulation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("calibrated", [True, False])
def test_coverage_is_nominal_over_2000_studies(calibrated):
    # 2,000 seeded studies of 1,000 items with a budget of 100 labels; the interval covers the
    # error rate E[Y] (a new workload each study) at 95%, minus the Monte Carlo tolerance
    rng = np.random.default_rng(20240305)
    covered = 0
    for _ in range(2000):
        p, y, rate = world(rng, 1000, calibrated=calibrated)
        pi = active_inclusion_probabilities(judge_uncertainty(p), budget=100)
        idx = draw(rng, pi)
        result = active_ppi_mean(p, pi, idx, y[idx])
        covered += result.lower <= rate <= result.upper
    assert covered / 2000 >= 0.95 - COVERAGE_TOLERANCE


def test_unbiased_for_the_items_error_rate():
    # one fixed workload, 4,000 draws of the design: the mean estimate is its error rate
    rng = np.random.default_rng(7)
    p, y, _ = world(rng, 500, calibrated=False)
    pi = active_inclusion_probabilities(judge_uncertainty(p), budget=50)
    estimates = np.array(
        [
            active_ppi_mean(p, pi, idx, y[idx]).estimate
            for idx in (draw(rng, pi) for _ in range(4000))
        ]
    )
    standard_error = estimates.std(ddof=1) / math.sqrt(estimates.size)
    assert abs(estimates.mean() - y.mean()) <= 4 * standard_error


def test_the_uniform_comparison_matches_the_simulated_spread():
    # the uniform design with the reported number of labels has the active design's spread
    rng = np.random.default_rng(13)
    p, y, _ = world(rng, 2000, calibrated=True)
    pi = active_inclusion_probabilities(judge_uncertainty(p), budget=150)
    active = [active_ppi_mean(p, pi, idx, y[idx]) for idx in (draw(rng, pi) for _ in range(3000))]
    uniform_labels = float(np.mean([r.uniform_labels for r in active]))
    assert uniform_labels > 150  # a calibrated judge saves labels
    rate = np.full(2000, uniform_labels / 2000)
    uniform = [
        active_ppi_mean(p, rate, idx, y[idx]).estimate
        for idx in (draw(rng, rate) for _ in range(3000))
    ]
    # the spread over the designs (the part of the variance the design controls), within 6%
    ratio = np.std(uniform) / np.std([r.estimate for r in active])
    assert ratio == pytest.approx(1.0, abs=0.06)
