"""Anytime-valid bounds from an active sample (certification.stats.sequential.active) and the
summand's range (certification.stats.ppi.active_observation_range).

The reference is a direct implementation: the summands item by item, rescaled by the range, and
the plain one-scalar-at-a-time capital of the betting tests (Waudby-Smith & Ramdas 2024, Sec. 4)
at each candidate rate k/G.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from certification.stats.errors import StatsError
from certification.stats.ppi import (
    active_inclusion_probabilities,
    active_observation_range,
    judge_uncertainty,
)
from certification.stats.sequential import active_betting_bounds, bounded_betting_cs
from tests.certification.stats.test_sequential import _capital


# -- the range of the summand -------------------------------------------------------------------
def _item_ranges(f: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each item's summand when drawn with Y = 0 and with Y = 1."""
    return f + (0.0 - f) / pi, f + (1.0 - f) / pi


def test_a_verdict_judge_has_the_uniform_range():
    # given 0/1 verdicts: the design is uniform at 10/40 = 1/4
    f = np.array([0.0, 1.0] * 20)
    pi = active_inclusion_probabilities(judge_uncertainty(f), budget=10)
    # then Z ranges over [1 - 4, 4]: a drawn error the judge missed weighs 1/pi = 4
    assert active_observation_range(f, pi, floor=0.2) == pytest.approx((-3.0, 4.0))


def test_certain_predictions_attain_the_range():
    # given scores including certain ones (f = 0 and f = 1, uncertainty 0)
    f = np.concatenate(([0.0, 1.0], np.linspace(0.05, 0.95, 38)))
    pi = active_inclusion_probabilities(judge_uncertainty(f), budget=12, floor=0.2)
    lo, hi = active_observation_range(f, pi, floor=0.2)
    # then the range is set by them, and holds every item's summand, drawn or not
    assert (lo, hi) == pytest.approx((1 - 1 / pi[1], 1 / pi[0]))
    low, high = _item_ranges(f, pi)
    assert lo == pytest.approx(low.min()) and hi == pytest.approx(high.max())
    assert np.all((f >= lo) & (f <= hi))


def test_without_certain_items_the_range_is_the_designs():
    # given scores none of which is certain
    f = np.linspace(0.1, 0.7, 30)
    pi = active_inclusion_probabilities(judge_uncertainty(f), budget=9, floor=0.3)
    # the scale s, by hand from the least likely (uncapped) item: pi = s q, q = 0.7 u / mean u + 0.3
    u = np.sqrt(f * (1 - f))
    q = 0.7 * u / u.mean() + 0.3
    scale = pi[0] / q[0]
    least = 0.3 * scale  # an item with u = 0 would get s * 0.3
    lo, hi = active_observation_range(f, pi, floor=0.3)
    assert (lo, hi) == pytest.approx((1 - 1 / least, 1 / least))
    # wider than the workload's own summands: it holds for any item the design can draw
    low, high = _item_ranges(f, pi)
    assert lo < low.min() and hi > high.max()


def test_a_census_has_the_unit_range():
    f = np.linspace(0.0, 1.0, 11)
    pi = active_inclusion_probabilities(judge_uncertainty(f), budget=11)
    assert active_observation_range(f, pi, floor=0.2) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: active_observation_range([0.1], [0.5, 0.5], floor=0.2), "shape"),
        (lambda: active_observation_range([0.1], [0.0], floor=0.2), "(0, 1]"),
        (lambda: active_observation_range([1.2], [0.5], floor=0.2), "predictions"),
        (lambda: active_observation_range([0.1], [0.5], floor=0.0), "floor"),
        (lambda: bounded_betting_cs([0.5], lower=0.1, upper=2.0), "lower <= 0"),
        (lambda: bounded_betting_cs([3.0], lower=-1.0, upper=2.0), "must lie in"),
        (
            lambda: active_betting_bounds([0.1], [0.5], [1], [1.0], lower=-0.5, upper=1.5),
            "must lie in",
        ),
        (lambda: active_betting_bounds([0.1], [0.5], [2], [1.0], lower=-1, upper=2), "drawn"),
    ],
)
def test_bad_input_is_refused_with_its_name(call, message):
    with pytest.raises(StatsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


# -- the sequences against a direct implementation ----------------------------------------------
def _direct(
    f: list[float],
    pi: list[float],
    drawn: list[bool],
    y: list[float],
    lo: float,
    hi: float,
    alpha: float,
    grid: int,
) -> tuple[list[float], list[float], list[float]]:
    """Two-sided lower and upper and one-sided upper bounds after each item, by plain loops."""
    z = [fi + (yi - fi) / p if d else fi for fi, p, d, yi in zip(f, pi, drawn, y, strict=True)]
    x = [(v - lo) / (hi - lo) for v in z]
    rates = [k / grid for k in range(grid + 1)]
    means = [(r - lo) / (hi - lo) for r in rates]
    plus = [_capital(x, m, 1, alpha / 2, None) for m in means]
    minus = [_capital(x, m, -1, alpha / 2, None) for m in means]
    upper_side = [_capital(x, m, -1, alpha, None) for m in means]
    lower, upper, one = [], [], []
    lo_t, hi_t, one_t = 0.0, 1.0, 1.0
    for t in range(len(x)):
        kept = [
            rates[i]
            for i in range(grid + 1)
            if max(plus[i][t], minus[i][t]) + math.log(0.5) < math.log(1 / alpha)
        ]
        kept_one = [rates[i] for i in range(grid + 1) if upper_side[i][t] < math.log(1 / alpha)]
        if kept:
            lo_t = max(lo_t, max(0.0, kept[0] - 1 / grid))
            hi_t = min(hi_t, min(1.0, kept[-1] + 1 / grid))
        if kept_one:
            one_t = min(one_t, min(1.0, kept_one[-1] + 1 / grid))
        lower.append(lo_t)
        upper.append(hi_t)
        one.append(one_t)
    return lower, upper, one


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("budget", [15, 45])
def test_the_sequences_equal_the_direct_implementation(seed, budget):
    # given 60 scored items, an active draw and labels from a miscalibrated judge
    rng = np.random.default_rng(seed)
    f = rng.beta(0.6, 2.0, size=60)
    y = (rng.random(60) < np.clip(1.5 * f, 0, 1)).astype(float)
    pi = active_inclusion_probabilities(judge_uncertainty(f), budget=budget, floor=0.2)
    drawn = rng.random(60) < pi
    lo, hi = active_observation_range(f, pi, floor=0.2)
    # when the sequences are computed
    two = bounded_betting_cs(f + (y - f) * drawn / pi, lower=lo, upper=hi, alpha=0.05, grid=200)
    one = bounded_betting_cs(
        f + (y - f) * drawn / pi, lower=lo, upper=hi, alpha=0.05, grid=200, two_sided=False
    )
    bound = active_betting_bounds(f, pi, drawn, y, lower=lo, upper=hi, alpha=0.05, grid=200)
    # then every bound equals the plain loops'
    lower, upper, upper_one = _direct(
        list(f), list(pi), list(drawn), list(y), lo, hi, alpha=0.05, grid=200
    )
    assert two.lower == pytest.approx(lower, abs=1e-12)
    assert two.upper == pytest.approx(upper, abs=1e-12)
    assert one.upper == pytest.approx(upper_one, abs=1e-12) and not one.lower.any()
    assert (bound.lower, bound.upper, bound.upper_bound) == pytest.approx(
        (lower[-1], upper[-1], upper_one[-1]), abs=1e-12
    )
    assert (bound.n, bound.n_labelled) == (60, int(drawn.sum()))
    z = f + (y - f) * drawn / pi
    assert bound.estimate == pytest.approx(min(1.0, max(0.0, float(z.mean()))))


def test_the_grid_blocks_do_not_change_the_bounds(monkeypatch):
    # given a long sequence, evaluated in one block and in blocks of a few grid points
    rng = np.random.default_rng(4)
    f = rng.beta(0.5, 3.0, size=500)
    pi = active_inclusion_probabilities(judge_uncertainty(f), budget=100)
    drawn = rng.random(500) < pi
    z = f + ((rng.random(500) < f) - f) * drawn / pi
    lo, hi = active_observation_range(f, pi, floor=0.2)
    whole = bounded_betting_cs(z, lower=lo, upper=hi, alpha=0.05)
    monkeypatch.setattr("certification.stats.sequential.betting.BLOCK_CELLS", 500 * 7)
    blocks = bounded_betting_cs(z, lower=lo, upper=hi, alpha=0.05)
    assert np.array_equal(whole.lower, blocks.lower)
    assert np.array_equal(whole.upper, blocks.upper)


def test_a_unit_range_is_the_plain_sequence():
    # with every item labelled, Z = Y in [0, 1]: the plain betting sequence on the grid
    from certification.stats.sequential import betting_cs

    x = (np.random.default_rng(3).random(80) < 0.2).astype(float)
    ours = bounded_betting_cs(x, lower=0.0, upper=1.0, alpha=0.05, grid=100)
    plain = betting_cs(x, alpha=0.05, grid=100)
    assert ours.lower == pytest.approx(plain.lower) and ours.upper == pytest.approx(plain.upper)


def test_no_item_bounds_nothing():
    bound = active_betting_bounds([], [], [], [], lower=-1.0, upper=2.0)
    assert (bound.estimate, bound.lower, bound.upper, bound.upper_bound) == (None, 0.0, 1.0, 1.0)


# -- time-uniform validity by simulation ----------------------------------------------------------
# Each replicate: a workload of 200 items drawn i.i.d. from the traffic (predictions on the grid
# VALUES with probabilities SHARES, errors with probability rate(f)), its active design at a
# budget of 160 (floor 0.2) and the Poisson draw; i.i.d. items come in a random order. "Miss" =
# the traffic's error rate leaves the sequence at ANY time (the running intersection: the final
# bounds).
# Tolerance: three binomial standard errors of a rate alpha over the replicates.
REPLICATES = 1000
ALPHA = 0.1
TOLERANCE = 3 * math.sqrt(ALPHA * (1 - ALPHA) / REPLICATES)
VALUES = np.array([0.0, 0.05, 0.2, 0.5, 0.8, 1.0])
SHARES = {
    "mostly-correct": np.array([0.5, 0.3, 0.1, 0.05, 0.03, 0.02]),
    "spread": np.array([0.2, 0.2, 0.2, 0.2, 0.1, 0.1]),
    "mostly-errors": np.array([0.02, 0.03, 0.1, 0.2, 0.3, 0.35]),
}
JUDGES = {"calibrated": VALUES, "inverted": 1.0 - VALUES}


@pytest.mark.slow
@pytest.mark.parametrize("shares", list(SHARES))
@pytest.mark.parametrize("judge", list(JUDGES))
def test_the_sequences_cover_the_traffics_rate_at_every_time(shares, judge):
    share, rate = SHARES[shares], JUDGES[judge]
    truth = float(share @ rate)
    rng = np.random.default_rng([11, len(shares), len(judge)])
    two_sided = one_sided = 0
    uppers = []
    for _ in range(REPLICATES):
        kind = rng.choice(VALUES.size, size=200, p=share)
        f, y = VALUES[kind], (rng.random(200) < rate[kind]).astype(float)
        pi = active_inclusion_probabilities(judge_uncertainty(f), budget=160, floor=0.2)
        drawn = rng.random(200) < pi
        lo, hi = active_observation_range(f, pi, floor=0.2)
        bound = active_betting_bounds(f, pi, drawn, y, lower=lo, upper=hi, alpha=ALPHA, grid=100)
        two_sided += not (bound.lower <= truth <= bound.upper)
        one_sided += truth > bound.upper_bound
        uppers.append(bound.upper_bound)
    assert two_sided / REPLICATES <= ALPHA + TOLERANCE
    assert one_sided / REPLICATES <= ALPHA + TOLERANCE
    # and the bound says something: on average below 1 and within 0.25 of the truth
    assert truth < float(np.mean(uppers)) < min(1.0, truth + 0.25)
