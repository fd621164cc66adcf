"""Tie-aware coverage variability: detection, the exact split law, and the split simulations.

The exact law is checked against brute-force enumeration of every split of small tied pools and,
for tie-free scores, against ``scipy.stats.betabinom``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import betabinom

from certification.stats.conformal import conformal_index
from certification.stats.coverage import (
    TIED_PREDICTION_REASON,
    split_dependence_report,
    split_spread,
    tie_summary,
    tied_split_coverage,
)
from certification.stats.errors import InsufficientDataError, StatsError

INF = math.inf


def _brute_force(pool: list[float], n: int, alpha: str) -> tuple[float, float, dict[float, float]]:
    """Mean and variance of realised coverage over every calibration subset of size n."""
    k = conformal_index(n, alpha)
    coverages = []
    thresholds: dict[float, int] = {}
    for cal in itertools.combinations(range(len(pool)), n):
        chosen = set(cal)
        m_star = sorted(pool[i] for i in cal)[k - 1]
        thresholds[m_star] = thresholds.get(m_star, 0) + 1
        test = [pool[i] for i in range(len(pool)) if i not in chosen]
        coverages.append(sum(s <= m_star for s in test) / len(test))
    total = len(coverages)
    return (
        float(np.mean(coverages)),
        float(np.var(coverages)),
        {v: c / total for v, c in sorted(thresholds.items())},
    )


def test_tie_summary_counts_tied_rows_and_the_largest_tie():
    # given: ranks with ties, and infinity twice
    summary = tie_summary([1, 1, 1, 2, 3, 3, INF, INF])
    # then
    assert (summary.n, summary.distinct, summary.tied_rows, summary.largest_tie) == (8, 4, 7, 3)
    assert summary.has_ties
    assert not tie_summary([0.1, 0.2, 0.3]).has_ties


def test_tie_summary_refuses_nan():
    with pytest.raises(StatsError, match="NaN"):
        tie_summary([1.0, math.nan])


@pytest.mark.parametrize(
    ("pool", "n", "alpha"),
    [
        ([1, 1, 1, 2, 2, 3, INF, 1, 2, 1, 1, 4], 6, "0.2"),
        ([1, 1, 1, 1, 1, 1, 2, 2, INF, INF], 5, "0.2"),
        ([1, 1, 2, 1, 1, 1, 1, 3, 1, 1, 2, 1, 1], 8, "0.2"),
        ([2, 2, 2, 2, 2, 2, 2, 2], 4, "0.3"),
    ],
)
def test_exact_split_law_equals_brute_force_enumeration(pool, n, alpha):
    # given: every one of the C(N, n) calibration subsets, enumerated
    mean, variance, thresholds = _brute_force(pool, n, alpha)
    # when
    law = tied_split_coverage(pool, n, alpha)
    # then
    assert law.mean == pytest.approx(mean, rel=1e-12)
    assert law.variance == pytest.approx(variance, rel=1e-9, abs=1e-15)
    assert dict(law.threshold_law) == pytest.approx(thresholds, rel=1e-12)
    assert law.skipped_mass < 1e-12


@pytest.mark.parametrize(
    ("n", "t", "alpha"), [(100, 100, "0.1"), (50, 30, "0.2"), (19, 40, "0.05")]
)
def test_exact_split_law_of_tie_free_scores_is_the_beta_binomial(n, t, alpha):
    # given: distinct scores (a random split orders them uniformly)
    scores = np.random.default_rng(3).permutation(n + t).astype(float)
    k = conformal_index(n, alpha)
    reference = betabinom(t, k, n + 1 - k)
    # when
    law = tied_split_coverage(scores, n, alpha)
    # then
    assert law.mean == pytest.approx(reference.mean() / t, rel=1e-12)
    assert law.variance == pytest.approx(reference.var() / t**2, rel=1e-9)


def test_exact_split_law_with_an_infinite_threshold_has_a_reason():
    law = tied_split_coverage([1, 1, 2, 2, 3, 3], 3, "0.1")  # k = 4 > n = 3
    assert law.mean is None and law.sd is None
    assert "infinite" in (law.reason or "")


@pytest.mark.parametrize("n", [0, 6, 7])
def test_exact_split_law_refuses_a_calibration_size_outside_the_pool(n):
    with pytest.raises(StatsError, match="n_calibration"):
        tied_split_coverage([1, 1, 2, 2, 3, 3], n, "0.1")


def test_exact_split_law_needs_two_scores():
    with pytest.raises(InsufficientDataError):
        tied_split_coverage([1.0], 1, "0.1")


def _grouped_ranks(groups: int, size: int, seed: int) -> tuple[list[float], list[int]]:
    """Frequency ranks whose difficulty is shared within each group (a grouped workload)."""
    rng = np.random.default_rng(seed)
    scores: list[float] = []
    labels: list[int] = []
    for g in range(groups):
        hard = rng.beta(2, 8)
        p = [1 - hard, hard * 0.5, hard * 0.3, hard * 0.2]
        scores += list(rng.choice([1.0, 2.0, 3.0, INF], p=p, size=size))
        labels += [g] * size
    return scores, labels


def test_row_split_of_a_tied_pool_matches_the_exact_law():
    # given: a tied pool and many row splits
    scores, _ = _grouped_ranks(40, 10, seed=1)
    law = tied_split_coverage(scores, 200, "0.1")
    # when
    spread = split_spread(scores, alpha="0.1", draws=4000, seed=2, split="row")
    # then: the simulation estimates the exact law (SD of an SD from 4000 draws is ~1-2%)
    assert spread.reference == "exact tied split"
    assert spread.exchangeable_sd == pytest.approx(law.sd, rel=1e-12)
    assert spread.mean == pytest.approx(law.mean, abs=4 * law.sd / math.sqrt(4000))
    assert spread.excess == pytest.approx(1.0, abs=0.08)
    assert spread.beta_sd is None and spread.sd_ratio is None


def test_tie_free_pool_keeps_the_beta_binomial_reference():
    scores = np.random.default_rng(0).random(400)
    spread = split_spread(scores, alpha="0.1", draws=50, seed=0)
    assert spread.reference == "beta-binomial"
    assert spread.beta_sd is not None


@pytest.mark.slow
def test_grouped_tied_workload_row_and_grouped_excess_differ_and_prediction_is_withheld():
    # given: the shape, 384 groups x 64 frequency-rank scores (24,576 questions)
    scores, groups = _grouped_ranks(384, 64, seed=5)
    # when
    report = split_dependence_report(scores, groups, alpha="0.1", draws=200, pools=20, seed=0)
    # then: both excesses are against the exact tied reference; the row split sits inside the
    # i.i.d. band and the grouped split far above it
    assert report.ties.has_ties and report.ties.distinct == 4
    assert report.row.reference == report.group.reference == "exact tied split"
    assert report.control.low <= report.row.excess <= report.control.high
    assert report.group.excess > 2 * report.control.high
    # and: sqrt(deff) is not a prediction for tied scores; deff itself is still reported
    assert report.design_effect is not None and report.design_effect.value > 1
    assert report.predicted_excess is None
    assert report.predicted_reason == TIED_PREDICTION_REASON
    # and: the figures docs/certification.md quotes (seeded, so exact)
    assert report.row.excess == pytest.approx(0.8701, abs=5e-5)
    assert report.group.excess == pytest.approx(3.7827, abs=5e-5)
    assert (report.control.low, report.control.high) == pytest.approx((0.4572, 1.2999), abs=5e-5)
    assert report.design_effect.value == pytest.approx(3.1969, abs=5e-5)
