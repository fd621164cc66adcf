"""The Hoeffding–Bentkus p-value and bound, against a direct implementation of the formula.

The reference below is written from Learn then Test (Angelopoulos et al. 2021), section 3:
p = min(exp(-n h1(min(R, alpha), alpha)), e * P[Binom(n, alpha) <= ceil(n R)]), with the
relative entropy written out term by term in plain math (0 log 0 = 0) and the binomial cdf from
scipy.stats.binom.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom

from certification.stats.bounded import (
    hoeffding_bentkus_p_value,
    hoeffding_bentkus_p_values,
    hoeffding_bentkus_upper_bounds,
)
from certification.stats.errors import StatsError
from certification.stats.selective_risk import (
    ThresholdCounts,
    binomial_p_value,
    certify,
    threshold_counts,
)


def _xlog(x: float, y: float) -> float:
    return 0.0 if x == 0 else x * math.log(x / y)


def reference_p(total: float | Fraction, n: int, alpha: float) -> float:
    """The formula at the exact total (an int or Fraction: its ceiling is exact)."""
    if n == 0:
        return 1.0
    r = float(total / n)
    a = min(r, alpha)
    h1 = _xlog(a, alpha) + _xlog(1 - a, 1 - alpha)
    hoeffding = math.exp(-n * h1)
    bentkus = math.e * float(binom.cdf(math.ceil(total), n, alpha))
    return min(hoeffding, bentkus)


GRID_N = (1, 2, 5, 10, 44, 100, 1000)
GRID_ALPHA = (0.01, 0.05, 0.1, 0.2, 0.5, 0.9)
GRID_FRACTIONS = (0.0, 0.001, 0.013, 0.05, 0.0999, 0.1, 0.15, 0.25, 0.5, 0.77, 1.0)


def test_p_value_matches_the_formula_over_a_grid() -> None:
    checked = 0
    for n in GRID_N:
        for alpha in GRID_ALPHA:
            # exact totals for the reference; their float values for the code
            totals = [Fraction(str(f)) * n for f in GRID_FRACTIONS] + [
                Fraction(k) for k in range(0, n + 1, max(1, n // 7))
            ]
            got = hoeffding_bentkus_p_values([float(t) for t in totals], [n] * len(totals), alpha)
            for total, value in zip(totals, got, strict=True):
                expected = reference_p(total, n, alpha)
                assert value == pytest.approx(expected, rel=1e-10, abs=1e-300), (total, n, alpha)
                checked += 1
    assert checked > 500


@pytest.mark.parametrize(
    ("risk", "n", "alpha"),
    [(0.05, 100, 0.1), (0.01, 1000, 0.05), (0.3, 10, 0.5), (0.12, 300, 0.2), (0.5, 7, 0.9)],
)
def test_scalar_p_value_takes_the_mean(risk: float, n: int, alpha: float) -> None:
    assert hoeffding_bentkus_p_value(risk, n, alpha) == pytest.approx(
        reference_p(Fraction(str(risk)) * n, n, alpha), rel=1e-12
    )


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.3, 0.5, 0.9])
def test_p_value_of_the_mean_k_over_n_is_that_of_the_integer_total(alpha: float) -> None:
    # k/n as a float, times n, lands above k for many (k, n) (0.28 * 25 = 7.000000000000001):
    # the ceiling must still be k, for the float mean, the Fraction and the float total
    checked = 0
    for n in range(1, 61):
        for k in range(n + 1):
            expected = reference_p(k, n, alpha)
            assert hoeffding_bentkus_p_value(k / n, n, alpha) == pytest.approx(
                expected, rel=1e-12
            ), (k, n)
            assert hoeffding_bentkus_p_value(Fraction(k, n), n, alpha) == pytest.approx(
                expected, rel=1e-12
            )
            assert hoeffding_bentkus_p_values([(k / n) * n], [n], alpha)[0] == pytest.approx(
                expected, rel=1e-12
            )
            checked += 1
    assert checked == sum(n + 1 for n in range(1, 61))
    # the case that exposed it: 7 of 25 at alpha 0.5
    assert 0.28 * 25 > 7
    assert hoeffding_bentkus_p_value(0.28, 25, 0.5) == pytest.approx(
        math.e * binom.cdf(7, 25, 0.5), rel=1e-12
    )


def test_float_loss_sums_give_the_p_values_and_bounds_of_the_exact_totals() -> None:
    # thirty losses of 0.1 sum to 3.0000000000000004 in floating point; exactly 3 in decimals
    scores = np.arange(60) / 60
    losses = np.where(np.arange(60) % 2 == 0, 0.1, 0.0)
    counts = threshold_counts(scores, losses, [0.0, 0.5], bounded=True)
    assert counts.loss_sums[0] > 3.0
    cert = certify(counts, alpha=0.2, delta=0.1)
    for row, total in zip(cert.results, (Fraction(3), Fraction(3, 2)), strict=True):
        assert row.p_value == pytest.approx(reference_p(total, row.accepted, 0.2), rel=1e-12)
    exact = hoeffding_bentkus_upper_bounds([3.0], [60], confidence=0.95)
    rounded = hoeffding_bentkus_upper_bounds([counts.loss_sums[0]], [60], confidence=0.95)
    assert rounded[0] == exact[0]


def test_worked_values() -> None:
    # R 0.05 at n 100 against alpha 0.1: Hoeffding exp(-100 h1(0.05, 0.1)) = 0.18812 is larger
    # than Bentkus e * P[Binom(100, 0.1) <= 5] = e * 0.057577 = 0.15651, which is the p-value.
    h1 = 0.05 * math.log(0.5) + 0.95 * math.log(0.95 / 0.9)
    assert math.exp(-100 * h1) == pytest.approx(0.1881247, abs=1e-7)
    bentkus = math.e * sum(math.comb(100, k) * 0.1**k * 0.9 ** (100 - k) for k in range(6))
    assert bentkus == pytest.approx(0.1565102, abs=1e-7)
    assert hoeffding_bentkus_p_value(0.05, 100, 0.1) == pytest.approx(bentkus, rel=1e-12)
    # R 0.0501 at n 100 (total 5.01, ceil 6): Bentkus e * P[Binom(100, 0.1) <= 6] = 0.3188
    # loses to Hoeffding exp(-100 h1(0.0501, 0.1)), which is the p-value.
    r = 0.0501
    h1 = r * math.log(r / 0.1) + (1 - r) * math.log((1 - r) / 0.9)
    bentkus = math.e * sum(math.comb(100, k) * 0.1**k * 0.9 ** (100 - k) for k in range(7))
    assert math.exp(-100 * h1) < bentkus
    assert hoeffding_bentkus_p_values([5.01], [100], 0.1)[0] == pytest.approx(
        math.exp(-100 * h1), rel=1e-10
    )
    # R 0.3 at n 10 against 0.5: Bentkus e * P[Binom(10, .5) <= 3] = e * 176/1024 = 0.4672
    # loses narrowly to Hoeffding exp(-10 (0.3 log 0.6 + 0.7 log 1.4)) = 0.4392.
    hoeffding = math.exp(-10 * (0.3 * math.log(0.6) + 0.7 * math.log(1.4)))
    assert hoeffding == pytest.approx(0.4391875, abs=1e-7) and hoeffding < math.e * 176 / 1024
    assert hoeffding_bentkus_p_value(0.3, 10, 0.5) == pytest.approx(hoeffding, rel=1e-12)


@pytest.mark.parametrize("n", [1, 5, 22, 44, 100, 2000])
@pytest.mark.parametrize("alpha", [0.01, 0.1, 0.3, 0.75])
def test_zero_loss_equals_the_exact_binomial_p_value(n: int, alpha: float) -> None:
    # Hoeffding term (1 - alpha)^n, Bentkus term e (1 - alpha)^n: the minimum is (1 - alpha)^n,
    # which is P[Binom(n, alpha) <= 0], the exact binomial p-value of zero errors.
    p = hoeffding_bentkus_p_value(0.0, n, alpha)
    assert p == pytest.approx((1 - alpha) ** n, rel=1e-12)
    assert p == pytest.approx(binomial_p_value(0, n, alpha), rel=1e-12)


def test_zero_loss_check_value() -> None:
    assert hoeffding_bentkus_p_value(0.0, 44, 0.1) == pytest.approx(0.0096977373, abs=1e-10)


@pytest.mark.parametrize("n", [1, 3, 10, 57, 400])
@pytest.mark.parametrize("alpha", [0.02, 0.1, 0.5, 0.95])
def test_risk_at_or_above_alpha_gives_one(n: int, alpha: float) -> None:
    for risk in (alpha, min(1.0, alpha + 1e-9), (alpha + 1) / 2, 1.0):
        assert hoeffding_bentkus_p_value(risk, n, alpha) == 1.0


def test_no_losses_gives_one() -> None:
    assert hoeffding_bentkus_p_value(0.0, 0, 0.1) == 1.0
    assert list(hoeffding_bentkus_p_values([0.0, 0.0], [0, 10], 0.1)) == pytest.approx(
        [1.0, 0.9**10]
    )


def test_p_value_decreases_with_n_at_fixed_mean() -> None:
    p = [hoeffding_bentkus_p_value(0.04, n, 0.1) for n in (50, 100, 200, 400, 800)]
    assert all(a > b for a, b in zip(p, p[1:], strict=False))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (dict(risk=-0.01, n=10, alpha=0.1), "risk must lie in"),
        (dict(risk=1.01, n=10, alpha=0.1), "risk must lie in"),
        (dict(risk=float("nan"), n=10, alpha=0.1), "risk must lie in"),
        (dict(risk=True, n=10, alpha=0.1), "risk must be a number"),
        (dict(risk=0.1, n=10.0, alpha=0.1), "n must be an integer"),
        (dict(risk=0.1, n=10, alpha=1.0), "alpha must lie"),
        (dict(risk=0.1, n=10, alpha=0.0), "alpha must lie"),
    ],
)
def test_scalar_refuses_bad_input(bad: dict, message: str) -> None:
    with pytest.raises(StatsError, match=message):
        hoeffding_bentkus_p_value(**bad)


def test_vector_refuses_totals_outside_zero_n() -> None:
    with pytest.raises(StatsError, match=r"\[0, n\]"):
        hoeffding_bentkus_p_values([10.5], [10], 0.1)
    with pytest.raises(StatsError, match=r"\[0, n\]"):
        hoeffding_bentkus_p_values([-1e-12], [10], 0.1)
    with pytest.raises(StatsError, match="finite"):
        hoeffding_bentkus_p_values([float("nan")], [10], 0.1)
    with pytest.raises(StatsError, match="same shape"):
        hoeffding_bentkus_p_values([1.0, 2.0], [10], 0.1)


@pytest.mark.parametrize(
    ("total", "n"), [(0.0, 44), (5.0, 100), (12.7, 100), (1.5, 7), (333.3, 1000), (9.99, 10)]
)
@pytest.mark.parametrize("confidence", [0.9, 0.99, 0.998])
def test_upper_bound_inverts_the_p_value(total: float, n: int, confidence: float) -> None:
    level = 1 - confidence
    (bound,) = hoeffding_bentkus_upper_bounds([total], [n], confidence=confidence)
    assert total / n <= bound <= 1
    if bound < 1:
        assert reference_p(total, n, bound) <= level * (1 + 1e-12)
        assert reference_p(total, n, max(total / n, bound - 1e-9)) > level
    else:
        assert reference_p(total, n, 1 - 1e-12) > level or total == n


def test_upper_bound_edges() -> None:
    bounds = hoeffding_bentkus_upper_bounds([0.0, 3.0, 0.0], [0, 3, 44], confidence=0.99)
    assert bounds[0] == 1.0 and bounds[1] == 1.0
    # zero loss: (1 - a)^44 = 0.01 at a = 1 - 0.01^(1/44), the Clopper–Pearson bound of 0 in 44
    assert bounds[2] == pytest.approx(1 - 0.01 ** (1 / 44), rel=1e-9)


def test_type_one_error_is_controlled_for_continuous_losses() -> None:
    # Losses Beta(2, 18) have mean exactly 0.1: H (risk > alpha) holds at the boundary alpha 0.1,
    # so P[p <= 0.05] must not exceed 0.05 (HB is conservative: far below it).
    rng = np.random.default_rng(17)
    n, reps = 60, 4000
    sums = rng.beta(2, 18, size=(reps, n)).sum(axis=1)
    p = hoeffding_bentkus_p_values(sums, [n] * reps, 0.1)
    assert float(np.mean(p <= 0.05)) <= 0.05


# -- the certificate with bounded losses ------------------------------------------------------
def test_threshold_counts_carry_loss_totals() -> None:
    scores = [0.9, 0.8, 0.8, 0.5, 0.3, 0.1]
    losses = [0.0, 0.25, 0.5, 1.0, 0.0, 0.75]
    counts = threshold_counts(scores, losses, [0.8, 0.5, 0.0, 0.95], bounded=True)
    assert counts.accepted == (3, 4, 6, 0)
    assert counts.loss_sums == pytest.approx((0.75, 1.75, 2.5, 0.0))
    assert counts.errors == (2, 3, 4, 0)
    assert counts.test == "hoeffding_bentkus"
    strict = threshold_counts(scores, losses, [0.8], accept=">", bounded=True)
    assert strict.accepted == (1,) and strict.loss_sums == (0.0,)


def test_threshold_counts_refuse_losses_outside_unit_interval() -> None:
    with pytest.raises(StatsError, match=r"losses\[2\]=1.5 is outside \[0, 1\]"):
        threshold_counts([1, 2, 3], [0.0, 0.5, 1.5], [1.0], bounded=True)
    with pytest.raises(StatsError, match="outside"):
        threshold_counts([1, 2, 3], [0.0, float("nan"), 0.5], [1.0], bounded=True)
    with pytest.raises(StatsError, match="0/1"):
        threshold_counts([1, 2, 3], [0.0, 0.5, 1.0], [1.0])


def test_certify_bounded_uses_hoeffding_bentkus() -> None:
    rng = np.random.default_rng(3)
    scores = rng.uniform(size=400)
    losses = np.clip(rng.beta(1, 30, size=400) * (1.5 - scores), 0, 1)
    family = [0.0, 0.3, 0.6, 0.9]
    counts = threshold_counts(scores, losses, family, bounded=True)
    cert = certify(counts, alpha=0.1, delta=0.05)
    assert cert.test == "hoeffding_bentkus"
    for j, row in enumerate(cert.results):
        m = int(np.sum(scores >= family[j]))
        total = float(losses[scores >= family[j]].sum())
        assert row.accepted == m
        assert row.loss_sum == pytest.approx(total, rel=1e-12)
        assert row.empirical_risk == pytest.approx(total / m)
        exact = sum(Fraction(x) for x in losses[scores >= family[j]])  # the binary floats' sum
        assert row.p_value == pytest.approx(reference_p(exact, m, 0.1), rel=1e-10)
        assert row.certified == (row.p_value <= 0.05 / 4)
        assert row.certified == (row.upper_bound <= 0.1)
    assert cert.certified_indices


def test_zero_bounded_losses_certify_like_zero_errors() -> None:
    scores = np.arange(100) / 100
    family = [0.5, 0.55, 0.6, 0.7]
    bounded = certify(
        threshold_counts(scores, np.zeros(100), family, bounded=True), alpha=0.1, delta=0.05
    )
    binary = certify(
        threshold_counts(scores, np.zeros(100, dtype=int), family), alpha=0.1, delta=0.05
    )
    assert binary.test == "binomial" and bounded.test == "hoeffding_bentkus"
    assert bounded.certified_indices == binary.certified_indices == (0, 1)
    for b, e in zip(bounded.results, binary.results, strict=True):
        assert b.p_value == pytest.approx(e.p_value, rel=1e-12)
        assert b.upper_bound == pytest.approx(e.upper_bound, rel=1e-9)
    assert bounded.reason is None and binary.reason is None


def test_counts_refuse_inconsistent_loss_totals() -> None:
    with pytest.raises(StatsError, match=r"loss_sums\[0\]=3.5 is outside"):
        ThresholdCounts(thresholds=(0.5,), accepted=(3,), errors=(3,), n=5, loss_sums=(3.5,))
    with pytest.raises(StatsError, match="length"):
        ThresholdCounts(thresholds=(0.5,), accepted=(3,), errors=(3,), n=5, loss_sums=())
