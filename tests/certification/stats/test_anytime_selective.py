"""The anytime-valid selective-risk test (certification.stats.sequential.selective).

The reference is a plain loop written from the definitions: the units in the order
``default_rng(seed).permutation(n)``, each contributing A·L + (1 − A)·alpha (A·L for the
eligible-units denominator), the below-target capital of Waudby-Smith & Ramdas (2024, Sec. 4)
with its predictable plug-in bets truncated at 1/2 / (1 − alpha), one scalar at a time, then
Bonferroni at delta/M or fixed-sequence testing at delta.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from certification.stats.errors import StatsError
from certification.stats.selective_risk import certify_scores
from certification.stats.sequential import anytime_selective_test


# -- an independent plain implementation -------------------------------------------------------
def _log_wealth(x: list[float], target: float, level: float) -> list[float]:
    """log K_t after each observation, betting that the mean is below ``target``."""
    out, log_k, total, squares = [], 0.0, 0.0, 0.0
    for t, value in enumerate(x, start=1):
        variance = (0.25 + squares) / t  # s2_{t-1}, with s2_0 = 1/4
        bet = math.sqrt(2 * math.log(1 / level) / (variance * t * math.log(1 + t)))
        bet = min(bet, 0.5 / (1 - target))
        log_k += math.log(1 - bet * (value - target))
        out.append(log_k)
        total += value
        squares += (value - (0.5 + total) / (t + 1)) ** 2
    return out


def direct(
    scores, losses, thresholds, *, alpha, delta, method, denominator, seed, accept=">="
) -> list[tuple[float, int | None, int | None]]:
    """(log final wealth, first crossing, certified after) per threshold, in family order."""
    order = np.random.default_rng(seed).permutation(len(scores))
    level = delta / len(thresholds) if method == "bonferroni" else delta
    rows, prefix = [], 0
    for t in thresholds:
        x = []
        for i in order:
            accepted = scores[i] >= t if accept == ">=" else scores[i] > t
            rejected_value = 0.0 if denominator == "eligible_units" else alpha
            x.append(float(losses[i]) if accepted else rejected_value)
        log_k = _log_wealth(x, alpha, level)
        crossed = next((i + 1 for i, k in enumerate(log_k) if k >= math.log(1 / level)), None)
        if method == "bonferroni":
            certified_at = crossed
        else:
            certified_at = None if prefix is None or crossed is None else max(prefix, crossed)
            prefix = certified_at
        rows.append((log_k[-1] if log_k else 0.0, crossed, certified_at))
    return rows


def _data(rng, n, risk_of_score):
    scores = rng.random(n)
    losses = (rng.random(n) < risk_of_score(scores)).astype(float)
    return scores, losses


@pytest.mark.parametrize("method", ["bonferroni", "fixed_sequence"])
@pytest.mark.parametrize("denominator", ["accepted_answers", "eligible_units"])
@pytest.mark.parametrize("seed", [0, 7])
def test_equals_the_plain_implementation(method, denominator, seed):
    # given 400 units whose risk falls with the score, and four thresholds in spec order
    rng = np.random.default_rng(100 + seed)
    scores, losses = _data(rng, 400, lambda s: 0.2 * (1 - s))
    thresholds = [0.2, 0.4, 0.6, 0.8]
    # when tested anytime
    test = anytime_selective_test(
        scores,
        losses,
        thresholds,
        alpha=0.15,
        delta=0.05,
        method=method,
        denominator=denominator,
        seed=seed,
    )
    # then each threshold's wealth, crossing and certification equal the plain loop's
    expected = direct(
        scores,
        losses,
        thresholds,
        alpha=0.15,
        delta=0.05,
        method=method,
        denominator=denominator,
        seed=seed,
    )
    got = [(math.log(r.wealth), r.crossed_at, r.certified_at) for r in test.results]
    assert [g[1:] for g in got] == [e[1:] for e in expected]
    assert [g[0] for g in got] == pytest.approx([e[0] for e in expected], rel=1e-9)
    assert test.certified_indices == tuple(j for j, e in enumerate(expected) if e[2] is not None)
    assert any(e[2] is not None for e in expected)  # the comparison includes certifications
    assert test.evidence_threshold == pytest.approx(80.0 if method == "bonferroni" else 20.0)


def test_strict_acceptance_and_bounded_losses_equal_the_plain_implementation():
    # given tied scores (accept iff score > t differs from >=) and losses in [0, 1]
    rng = np.random.default_rng(5)
    scores = np.round(rng.random(200), 1)
    losses = rng.random(200) * 0.2
    kwargs = {"alpha": 0.1, "delta": 0.1, "method": "bonferroni", "seed": 3}
    test = anytime_selective_test(
        scores, losses, [0.3, 0.5], accept=">", denominator="accepted_answers", **kwargs
    )
    expected = direct(
        scores, losses, [0.3, 0.5], accept=">", denominator="accepted_answers", **kwargs
    )
    assert [r.crossed_at for r in test.results] == [e[1] for e in expected]
    assert [math.log(r.wealth) for r in test.results] == pytest.approx([e[0] for e in expected])


def test_fixed_sequence_stops_at_an_unsafe_threshold_and_bonferroni_does_not():
    # given errors only below score 0.5: t = 0.1 is unsafe (risk ~0.22), t = 0.5 is safe (0)
    rng = np.random.default_rng(11)
    scores, losses = _data(rng, 600, lambda s: np.where(s < 0.5, 0.5, 0.0))
    kwargs = {"alpha": 0.1, "delta": 0.05, "seed": 1}
    blocked = anytime_selective_test(scores, losses, [0.1, 0.5], method="fixed_sequence", **kwargs)
    first = anytime_selective_test(scores, losses, [0.5, 0.1], method="fixed_sequence", **kwargs)
    union = anytime_selective_test(scores, losses, [0.1, 0.5], method="bonferroni", **kwargs)
    # then the unsafe threshold first blocks the safe one; second, it is merely not certified
    assert [(r.tested, r.certified) for r in blocked.results] == [(True, False), (False, False)]
    assert [(r.tested, r.certified) for r in first.results] == [(True, True), (True, False)]
    assert first.results[0].crossed_at is not None
    # the safe threshold's own e-process crossed anyway; Bonferroni certifies it at M/delta = 40
    assert blocked.results[1].crossed_at is not None
    assert union.certified_indices == (1,) and union.evidence_threshold == pytest.approx(40.0)


def test_fixed_sequence_certifies_at_the_latest_crossing_of_its_prefix():
    # given 800 units without error
    rng = np.random.default_rng(3)
    scores, losses = _data(rng, 800, np.zeros_like)
    test = anytime_selective_test(
        scores, losses, [0.8, 0.2], alpha=0.1, delta=0.05, method="fixed_sequence", seed=2
    )
    # t = 0.8 accepts a fifth of the units, so it needs more of them than t = 0.2 to cross
    high, low = test.results
    assert high.crossed_at > low.crossed_at
    assert low.certified_at == high.certified_at == high.crossed_at


def test_a_threshold_accepting_nothing_is_never_certified():
    scores = np.zeros(500)
    test = anytime_selective_test(scores, np.zeros(500), [1.0], alpha=0.1, delta=0.05, seed=0)
    # every unit contributes alpha: no evidence either way, the wealth stays at 1
    assert test.results[0].wealth == pytest.approx(1.0)
    assert test.certified_indices == ()


def test_overwhelming_evidence_overflows_to_infinity_without_a_warning():
    # given 3,000 accepted units without error at alpha 0.5 (each bet multiplies by 1.5)
    test = anytime_selective_test(
        np.ones(3000), np.zeros(3000), [0.5], alpha=0.5, delta=0.05, seed=0
    )
    assert test.results[0].wealth == math.inf
    assert test.results[0].certified_at == math.ceil(math.log(20) / math.log(1.5))


def test_no_units_certify_nothing():
    test = anytime_selective_test([], [], [0.5], alpha=0.1, delta=0.05, seed=0)
    assert test.n == 0 and test.certified_indices == ()
    assert test.results[0].wealth == 1.0 and test.results[0].crossed_at is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"losses": [0.0, 1.5]}, r"losses\[1\]=1.5 is outside \[0, 1\]"),
        ({"losses": [0.0]}, "losses must have shape"),
        ({"scores": [0.1, float("nan")]}, "scores must not contain NaN"),
        ({"thresholds": []}, "thresholds must be"),
        ({"alpha": 1.0}, "alpha"),
        ({"method": "holm"}, "method"),
        ({"accept": "<"}, "accept"),
        ({"denominator": "items"}, "denominator"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_input_is_refused_with_its_name(change, message):
    arguments = {
        "scores": [0.1, 0.9],
        "losses": [0.0, 1.0],
        "thresholds": [0.5],
        "alpha": 0.1,
        "delta": 0.05,
        "seed": 0,
        **change,
    }
    with pytest.raises(StatsError, match=message):
        anytime_selective_test(**arguments)


# -- type-I error and power by simulation ----------------------------------------------------------
# 1,000 seeded sequences per setting; a rejection = any threshold certified at any of the n looks.
# Tolerance: three binomial standard errors of a rate delta over 1,000 replicates.
REPLICATES = 1000
DELTA = 0.1
TOLERANCE = 3 * math.sqrt(DELTA * (1 - DELTA) / REPLICATES)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["bonferroni", "fixed_sequence"])
def test_type_one_error_at_the_null_boundary(method):
    # given every threshold's selective risk exactly alpha (losses independent of the score)
    rng = np.random.default_rng(2024 + (method == "bonferroni"))
    rejections = 0
    for replicate in range(REPLICATES):
        scores, losses = _data(rng, 300, lambda s: 0.1 * np.ones_like(s))
        test = anytime_selective_test(
            scores, losses, [0.2, 0.5, 0.8], alpha=0.1, delta=DELTA, method=method, seed=replicate
        )
        rejections += bool(test.certified_indices)
    assert rejections / REPLICATES <= DELTA + TOLERANCE


@pytest.mark.slow
def test_type_one_error_at_the_null_boundary_of_the_eligible_units_denominator():
    # given half the units accepted, with accepted errors at 2 alpha: P(accepted error) = alpha
    rng = np.random.default_rng(77)
    rejections = 0
    for replicate in range(REPLICATES):
        scores, losses = _data(rng, 300, lambda s: 0.2 * np.ones_like(s))
        test = anytime_selective_test(
            scores,
            losses,
            [0.5],
            alpha=0.1,
            delta=DELTA,
            denominator="eligible_units",
            seed=replicate,
        )
        rejections += bool(test.certified_indices)
    assert rejections / REPLICATES <= DELTA + TOLERANCE


@pytest.mark.slow
def test_power_on_a_clearly_safe_threshold_and_its_stopping_times():
    # given a selective risk of 0.02 against alpha 0.1 at a threshold accepting half the units
    rng = np.random.default_rng(31)
    stops = []
    for replicate in range(200):
        scores, losses = _data(rng, 500, lambda s: 0.02 * np.ones_like(s))
        test = anytime_selective_test(
            scores, losses, [0.5], alpha=0.1, delta=0.05, method="bonferroni", seed=replicate
        )
        stops.append(test.results[0].certified_at)
    # then it is certified nearly always, well before all 500 units are seen
    certified = [s for s in stops if s is not None]
    assert len(certified) / len(stops) >= 0.95
    assert np.median(certified) < 350


def test_agrees_with_the_fixed_n_test_on_clearly_safe_and_unsafe_thresholds():
    # the fixed-n binomial test and the anytime test agree on a clearly safe and a clearly
    # unsafe threshold (the anytime one pays for its time-uniformity with more units)
    rng = np.random.default_rng(8)
    scores, losses = _data(rng, 1000, lambda s: np.where(s < 0.3, 0.6, 0.01))
    fixed = certify_scores(scores, losses, [0.0, 0.3], alpha=0.1, delta=0.05)
    anytime = anytime_selective_test(scores, losses, [0.0, 0.3], alpha=0.1, delta=0.05, seed=0)
    assert fixed.certified_indices == anytime.certified_indices == (1,)
