"""Betting confidence sequences and the below-target e-process (certification.stats.sequential).

The reference is a plain loop written from Waudby-Smith & Ramdas (2024) (Sec. 4: hedged capital,
predictable plug-in bets, truncation 1/2, the grid of candidate means widened by one step) and
Waudby-Smith & Ramdas (2020) for sampling without replacement: one candidate mean, one time,
one scalar at a time. The reference package ``confseq`` does not install here (its build pins
pybind11 2.6, which does not compile on Python 3.11, and it uses ``np.float_``, gone in NumPy 2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from certification.stats.errors import StatsError
from certification.stats.sequential import (
    below_target_test,
    betting_cs,
    betting_upper_cs,
    stopping_plan,
    stratified_betting_bounds,
)


# -- an independent plain implementation -------------------------------------------------------
def _bets(x: list[float], level: float) -> list[float]:
    bets, total, squares = [], 0.0, 0.0
    for t in range(1, len(x) + 1):
        variance = (0.25 + squares) / t  # s2_{t-1}, with s2_0 = 1/4
        bets.append(math.sqrt(2 * math.log(1 / level) / (variance * t * math.log(1 + t))))
        total += x[t - 1]
        mean_t = (0.5 + total) / (t + 1)
        squares += (x[t - 1] - mean_t) ** 2
    return bets


def _capital(x: list[float], m: float, side: int, level: float, big_n: int | None) -> list[float]:
    """log capital after each observation (inf once m is impossible)."""
    bets, out, log_k, seen, dead = _bets(x, level), [], 0.0, 0.0, False
    for t, (value, bet) in enumerate(zip(x, bets, strict=True)):
        m_t = m if big_n is None else (big_n * m - seen) / (big_n - t)
        dead = dead or not (0 <= m_t <= 1)
        if not dead:
            denominator = m_t if side > 0 else 1 - m_t
            cap = math.inf if denominator == 0 else 0.5 / denominator
            log_k += math.log(1 + side * min(bet, cap) * (value - m_t))
        out.append(math.inf if dead else log_k)
        seen += value
    return out


def _reference(
    x: list[float], alpha: float, big_n: int | None, grid: int, two_sided: bool
) -> tuple[list[float], list[float]]:
    grid_m = [k / grid for k in range(grid + 1)]
    if two_sided:
        plus = [_capital(x, m, 1, alpha / 2, big_n) for m in grid_m]
        minus = [_capital(x, m, -1, alpha / 2, big_n) for m in grid_m]
        caps = [
            [max(p, q) + math.log(0.5) for p, q in zip(a, b, strict=True)]
            for a, b in zip(plus, minus, strict=True)
        ]
    else:
        caps = [_capital(x, m, -1, alpha, big_n) for m in grid_m]
    lower, upper, lo, hi, total = [], [], 0.0, 1.0, 0.0
    for t in range(len(x)):
        total += x[t]
        kept = [grid_m[i] for i in range(grid + 1) if caps[i][t] < math.log(1 / alpha)]
        now_lo = max(0.0, kept[0] - 1 / grid) if kept and two_sided else 0.0
        now_hi = min(1.0, kept[-1] + 1 / grid) if kept else 1.0
        if big_n is not None:
            now_hi = min(now_hi, 1 - (t + 1 - total) / big_n)
            if two_sided:
                now_lo = max(now_lo, total / big_n)
        lo, hi = max(lo, now_lo), min(hi, now_hi)
        lower.append(lo)
        upper.append(hi)
    return lower, upper


SEQUENCES = [
    pytest.param(0.2, None, 0, id="bernoulli-0.2-iid"),
    pytest.param(0.02, None, 1, id="bernoulli-0.02-iid"),
    pytest.param(0.5, None, 2, id="bernoulli-0.5-iid"),
    pytest.param(0.1, 150, 3, id="bernoulli-0.1-without-replacement"),
    pytest.param(None, None, 4, id="beta-continuous"),
]


def _data(rate: float | None, seed: int, n: int = 120) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if rate is None:
        return rng.beta(2, 5, size=n)
    return (rng.random(n) < rate).astype(float)


@pytest.mark.parametrize(("rate", "big_n", "seed"), SEQUENCES)
def test_two_sided_sequence_equals_the_plain_implementation(rate, big_n, seed):
    # given a sequence of observations
    x = _data(rate, seed)
    # when the vectorised sequence is computed
    cs = betting_cs(x, alpha=0.05, population=big_n, grid=100)
    # then every bound equals the plain loop's
    lower, upper = _reference(list(x), 0.05, big_n, 100, two_sided=True)
    assert cs.lower == pytest.approx(lower, abs=1e-12)
    assert cs.upper == pytest.approx(upper, abs=1e-12)
    assert cs.final_lower <= float(np.mean(x)) <= cs.final_upper


@pytest.mark.parametrize(("rate", "big_n", "seed"), SEQUENCES)
def test_upper_sequence_equals_the_plain_implementation(rate, big_n, seed):
    x = _data(rate, seed)
    cs = betting_upper_cs(x, alpha=0.05, population=big_n, grid=100)
    _, upper = _reference(list(x), 0.05, big_n, 100, two_sided=False)
    assert cs.upper == pytest.approx(upper, abs=1e-12)
    assert not cs.lower.any()
    # one-sided at alpha is tighter than the two-sided upper bound (which spends alpha/2)
    assert cs.final_upper <= betting_cs(x, alpha=0.05, population=big_n, grid=100).final_upper


@pytest.mark.parametrize(("rate", "big_n", "seed"), SEQUENCES)
def test_below_target_wealth_equals_the_plain_capital(rate, big_n, seed):
    x = _data(rate, seed)
    test = below_target_test(x, target=0.3, delta=0.05, population=big_n)
    expected = _capital(list(x), 0.3, -1, 0.05, big_n)
    assert np.log(test.wealth) == pytest.approx(expected, abs=1e-9)
    crossed = [t + 1 for t, k in enumerate(expected) if k >= math.log(20)]
    assert test.stopped_at == (crossed[0] if crossed else None)


def test_a_rate_far_below_target_is_rejected_and_the_upper_sequence_agrees():
    # given 300 observations with 3% errors against a target of 0.10
    x = _data(0.03, 11, n=300)
    test = below_target_test(x, target=0.10, delta=0.05)
    upper = betting_upper_cs(x, alpha=0.05)
    # then the test stops, and at its stop the upper sequence is at or below the target
    assert test.rejected
    assert upper.upper[test.stopped_at - 1] <= 0.10 + 1e-3
    assert test.max_wealth >= 20


def test_empty_sequences_bound_nothing():
    assert betting_cs([], alpha=0.05).final_upper == 1.0
    assert betting_upper_cs([], alpha=0.05, population=10).final_lower == 0.0
    assert below_target_test([], target=0.1).rejected is False


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: betting_cs([0.5, 1.2]), "must lie in \\[0, 1\\]"),
        (lambda: betting_cs([0.5, np.nan]), "must lie in \\[0, 1\\]"),
        (lambda: betting_cs([[0.5]]), "one-dimensional"),
        (lambda: betting_cs([0.5], alpha=1.0), "alpha"),
        (lambda: betting_upper_cs([1, 0, 1], population=2), "population"),
        (lambda: below_target_test([0.0], target=0.0), "target"),
        (lambda: stopping_plan(1.0, target=0.1, delta=0.05, population=10), "rate"),
    ],
)
def test_bad_input_is_refused_with_its_name(call, message):
    with pytest.raises(StatsError, match=message):
        call()


# -- stratified combination ---------------------------------------------------------------------
def test_one_stratum_is_the_plain_sequence():
    x = _data(0.2, 5)
    bound = stratified_betting_bounds({"all": x}, {"all": 400}, alpha=0.05, grid=200)
    cs = betting_cs(x, alpha=0.05, population=400, grid=200)
    up = betting_upper_cs(x, alpha=0.05, population=400, grid=200)
    assert (bound.lower, bound.upper, bound.upper_bound) == (
        cs.final_lower,
        cs.final_upper,
        up.final_upper,
    )
    assert bound.estimate == pytest.approx(float(np.mean(x)))


def test_strata_are_weighted_by_share_at_alpha_over_h_and_unobserved_ones_count_whole():
    # given three strata of the design (one not observed yet) and one outside it
    a, b = _data(0.05, 6, n=80), _data(0.4, 7, n=40)
    observations = {"negative": a, "positive": b, "unavailable": np.zeros(0), "late": None}
    populations = {"negative": 600, "positive": 200, "unavailable": 100, "late": 100}
    bound = stratified_betting_bounds(observations, populations, alpha=0.06, grid=200)
    # then each observed stratum's bound is at 0.06 / 3 and the others count [0, 1]
    ua = betting_upper_cs(a, alpha=0.02, population=600, grid=200).final_upper
    ub = betting_upper_cs(b, alpha=0.02, population=200, grid=200).final_upper
    assert bound.per_stratum_alpha == pytest.approx(0.02)
    assert bound.upper_bound == pytest.approx(0.6 * ua + 0.2 * ub + 0.1 + 0.1)
    assert bound.estimate is None
    assert bound.n == 120


# -- time-uniform validity by simulation ----------------------------------------------------------
# 1,000 replicate sequences per setting; "miss" = the truth leaves the sequence at ANY t <= n.
# Tolerance: three binomial standard errors of a rate alpha over 1,000 replicates.
REPLICATES = 1000
ALPHA = 0.1
TOLERANCE = 3 * math.sqrt(ALPHA * (1 - ALPHA) / REPLICATES)


@pytest.mark.slow
@pytest.mark.parametrize("mean", [0.01, 0.1, 0.5])
@pytest.mark.parametrize("two_sided", [True, False])
def test_iid_sequences_cover_the_mean_at_every_time(mean, two_sided):
    rng = np.random.default_rng(20240 + int(mean * 1000) + two_sided)
    misses = 0
    for _ in range(REPLICATES):
        x = (rng.random(200) < mean).astype(float)
        make = betting_cs if two_sided else betting_upper_cs
        cs = make(x, alpha=ALPHA, grid=200)
        misses += bool(np.any((cs.lower > mean) | (cs.upper < mean)))
    assert misses / REPLICATES <= ALPHA + TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("errors", [3, 30, 150])
def test_without_replacement_sequences_cover_the_population_mean(errors):
    # given a finite population of 300 items, drawn in random orders, 200 of them observed
    rng = np.random.default_rng(7 + errors)
    items = np.zeros(300)
    items[:errors] = 1.0
    mean = errors / 300
    misses = 0
    for _ in range(REPLICATES):
        x = rng.permutation(items)[:200]
        cs = betting_cs(x, alpha=ALPHA, population=300, grid=200)
        misses += bool(np.any((cs.lower > mean + 1e-12) | (cs.upper < mean - 1e-12)))
    assert misses / REPLICATES <= ALPHA + TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("target", [0.02, 0.1, 0.5])
def test_e_process_type_one_error_at_the_null_boundary(target):
    # given the true mean exactly at the target (the least favourable null), 400 looks each
    rng = np.random.default_rng(99 + int(target * 100))
    rejections = sum(
        below_target_test(
            (rng.random(400) < target).astype(float), target=target, delta=ALPHA
        ).rejected
        for _ in range(REPLICATES)
    )
    assert rejections / REPLICATES <= ALPHA + TOLERANCE


# -- planner --------------------------------------------------------------------------------------
def test_stopping_plan_is_seeded_and_needs_fewer_labels_at_lower_rates():
    # given a workload of 500 items and a target of 0.10
    low = stopping_plan(0.025, target=0.10, delta=0.05, population=500, replicates=60, seed=3)
    high = stopping_plan(0.075, target=0.10, delta=0.05, population=500, replicates=60, seed=3)
    # then the same inputs give the same plan, and a lower true rate stops sooner
    again = stopping_plan(0.025, target=0.10, delta=0.05, population=500, replicates=60, seed=3)
    assert low == again
    assert low.errors == 12 and high.errors == 38
    assert low.mean < high.mean <= 500
    # every replicate stops by the last item: with all 500 seen the rate is known exactly
    assert low.share_stopped == 1.0


def test_stopping_plan_mean_matches_an_explicit_simulation():
    plan = stopping_plan(0.05, target=0.15, delta=0.05, population=200, replicates=40, seed=8)
    rng = np.random.default_rng(8)
    items = np.zeros(200)
    items[:10] = 1.0
    stops = []
    for _ in range(40):
        x = rng.permutation(items)
        log_k = _capital(list(x), 0.15, -1, 0.05, 200)
        stops.append(next((t + 1 for t, k in enumerate(log_k) if k >= math.log(20)), 200))
    assert plan.mean == pytest.approx(float(np.mean(stops)))
    assert plan.median == pytest.approx(float(np.median(stops)))
