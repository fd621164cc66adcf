"""certification.stats.drift: conformal test martingale of new scores against calibration scores.

Checked against a direct implementation written here (p-values by counting over the whole list,
the martingale by numerical integration of prod eps p^(eps - 1)), and by simulation: the false
alarm rate without a shift, and the detection delay under shifts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from certification.stats.drift import (
    drift_start,
    drift_thetas,
    drift_update,
    power_mixture_log,
    smoothed_p_values,
)
from certification.stats.errors import InsufficientDataError, StatsError


def _direct_p_values(reference, scores, thetas):
    """Vovk et al. 2003, eq. (2), by counting over everything seen up to and including s."""
    seen = list(reference)
    up, down = [], []
    for s, theta in zip(scores, thetas, strict=True):
        seen.append(s)
        z = np.array(seen)
        n = z.size
        up.append((np.sum(z > s) + theta * np.sum(z == s)) / n)
        down.append((np.sum(z < s) + theta * np.sum(z == s)) / n)
    return np.array(up), np.array(down)


def _direct_mixture(p_values):
    """int_0^1 prod_i eps p_i^(eps - 1) d eps, by quadrature of the product itself."""
    p = np.asarray(p_values)
    value, _ = integrate.quad(lambda eps: float(np.prod(eps * p ** (eps - 1.0))), 0.0, 1.0)
    return value


def test_p_values_count_ties_and_predecessors_as_the_direct_definition():
    # given calibration scores with ties and new scores repeating them and each other
    rng = np.random.default_rng(5)
    reference = rng.integers(0, 5, size=40).astype(float)
    scores = rng.integers(0, 6, size=30).astype(float)
    thetas = drift_thetas(11, 0, 30)
    # when the p-values are computed incrementally
    up, down = smoothed_p_values(np.sort(reference), scores, thetas)
    # then they are the direct definition's
    want_up, want_down = _direct_p_values(reference, scores, thetas)
    np.testing.assert_allclose(up, want_up, rtol=1e-12)
    np.testing.assert_allclose(down, want_down, rtol=1e-12)


@pytest.mark.parametrize("shift", [0.0, 0.8, -0.8])
def test_martingale_equals_the_mixture_integral_of_its_p_values(shift):
    # given 30 calibration scores and 25 new ones, possibly shifted
    rng = np.random.default_rng(17)
    reference = rng.normal(size=30)
    scores = rng.normal(size=25) + shift
    thetas = drift_thetas(3, 0, 25)
    # when folded in two batches
    state = drift_start(reference)
    state = drift_update(state, scores[:10], thetas[:10], delta=0.01)
    state = drift_update(state, scores[10:], drift_thetas(3, 10, 15), delta=0.01)
    # then M is the mean of the two direct mixture integrals
    up, down = _direct_p_values(reference, scores, thetas)
    want = (_direct_mixture(up) + _direct_mixture(down)) / 2
    assert state.martingale == pytest.approx(want, rel=1e-7)
    assert state.count == 25


@pytest.mark.parametrize(
    ("n", "a"),
    [(0, 0.5), (5, 3.0), (100, 60.0), (1000, 400.0), (1000, 1500.0), (20000, 15000.0)],
)
def test_closed_form_matches_quadrature_over_regimes(n, a):
    # given n p-values whose logs sum to -a
    # when the closed form is evaluated (incomplete gamma, or 1F1 where that underflows)
    got = power_mixture_log(n, -a)
    # then it is log int_0^1 eps^n exp(a (1 - eps)), integrated scaled by the integrand's peak
    top = min(1.0, n / a)
    log_scale = (n * math.log(top) if n else 0.0) + a * (1 - top)
    value, _ = integrate.quad(
        lambda e: math.exp(n * math.log(e) + a * (1 - e) - log_scale) if e > 0 else 0.0,
        0.0,
        1.0,
        points=[top],
        limit=200,
        epsabs=0,
        epsrel=1e-11,
    )
    assert float(got) == pytest.approx(math.log(value) + log_scale, rel=1e-8, abs=1e-9)


def test_every_p_value_one_gives_one_over_n_plus_one():
    assert float(power_mixture_log(9, 0.0)) == pytest.approx(-math.log(10))


def test_thetas_do_not_depend_on_the_batches():
    whole = drift_thetas(42, 0, 500)
    assert np.array_equal(whole[123:400], drift_thetas(42, 123, 277))
    assert np.all((whole > 0) & (whole <= 1))


def test_refuses_bad_input_naming_it():
    with pytest.raises(InsufficientDataError):
        drift_start([])
    with pytest.raises(StatsError, match=r"reference\[1\]"):
        drift_start([0.1, math.nan])
    state = drift_start([0.1, 0.2])
    with pytest.raises(StatsError, match="delta"):
        drift_update(state, [0.3], [0.5], delta=1.0)
    with pytest.raises(StatsError, match="thetas"):
        drift_update(state, [0.3, 0.4], [0.5], delta=0.1)


def _run(rng, n_reference, n_new, shift, delta, seed):
    state = drift_start(rng.normal(size=n_reference))
    scores = rng.normal(size=n_new) + shift
    return drift_update(state, scores, drift_thetas(seed, 0, n_new), delta=delta)


@pytest.mark.slow
def test_false_alarm_rate_stays_below_delta_without_shift():
    # given 2,000 exchangeable sequences: 100 calibration scores and 300 new ones from the same
    # distribution, at delta 0.1 (a rate large enough to measure)
    rng = np.random.default_rng(2024)
    delta, replicates = 0.1, 2000
    alarms = 0
    p_up = []
    for i in range(replicates):
        state = drift_start(rng.normal(size=100))
        scores = rng.normal(size=300)
        thetas = drift_thetas(i, 0, 300)
        alarms += drift_update(state, scores, thetas, delta=delta).crossed is not None
        if i < 50:
            p_up.append(smoothed_p_values(state.bag, scores, thetas)[0])
    # then the rate is at most delta plus three Monte Carlo standard errors
    rate = alarms / replicates
    assert rate <= delta + 3 * math.sqrt(delta * (1 - delta) / replicates)
    # and the p-values are uniform (Kolmogorov-Smirnov over 15,000 of them)
    assert stats.kstest(np.concatenate(p_up), "uniform").pvalue > 0.001


@pytest.mark.slow
@pytest.mark.parametrize(("shift", "longest_median"), [(1.0, 25), (-1.0, 25), (0.5, 120)])
def test_detects_a_shift_in_either_direction(shift, longest_median):
    # given 500 calibration scores N(0, 1) and new scores shifted by ``shift`` SD, delta 0.01
    rng = np.random.default_rng(7)
    delays = []
    for i in range(200):
        state = _run(rng, 500, 600, shift, 0.01, i)
        delays.append(state.crossed if state.crossed is not None else math.inf)
    # then almost every sequence alarms, after a median delay within the bound (measured with
    # these seeds: 16, 16 and 80.5 new scores)
    assert np.mean(np.isfinite(delays)) >= 0.95
    assert np.median(delays) <= longest_median
