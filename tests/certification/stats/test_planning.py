"""The label budget planner against brute force: every N enumerated, every outcome summed.

The certificate's test is recomputed directly with ``scipy.stats.binom`` (p = P[Bin(d, alpha)
<= k], 1 when d = 0), the projected counts by the rule the planner documents (denominator
d + floor(N d / n), errors ceil(k d' / d)), and the chance of certifying by summing over every
future (denominator, error) outcome.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom

from certification.stats.conformal import conformal_index, reliability_level
from certification.stats.errors import StatsError
from certification.stats.planning import (
    conformal_plan,
    expected_reliability,
    selective_plan,
)
from certification.stats.selective_risk import (
    ThresholdCounts,
    binomial_p_values,
    certify,
    smallest_certifiable_count,
)


def p_value(k: int, d: int, alpha: float) -> float:
    return 1.0 if d == 0 else float(binom.cdf(k, d, alpha))


def projected(n: int, d: int, k: int, more: int) -> tuple[int, int]:
    denominator = d + more * d // n
    return denominator, (-(-k * denominator // d) if d else 0)


def brute_first(n, rows, alpha, level, limit, fixed=False):
    """Per threshold, the first N in [0, limit] at which it is certified, or None.

    Every N is tested: the projected counts and their p-values are arrays over N = 0..limit.
    """
    more = np.arange(limit + 1)
    passes = []
    for d, k in rows:
        denominator = d + more * d // n
        errors = -(-k * denominator // d) if d else np.zeros_like(more)
        p = np.where(denominator > 0, binom.cdf(errors, np.maximum(denominator, 1), alpha), 1.0)
        passes.append(p <= level)
    certified = np.logical_and.accumulate(passes, axis=0) if fixed else np.array(passes)
    return [int(np.argmax(row)) if row.any() else None for row in certified]


def brute_probability(n, d, k, alpha, level, more):
    total = 0.0
    for added in range(more + 1):
        weight = binom.pmf(added, more, d / n)
        for new_errors in range(added + 1):
            if p_value(k + new_errors, d + added, alpha) <= level:
                total += weight * binom.pmf(new_errors, added, k / d)
    return total


# -- selective risk: the plan --------------------------------------------------------------------
@pytest.mark.parametrize("n", [6, 19, 28])
@pytest.mark.parametrize(("alpha", "delta"), [(0.1, 0.05), (0.3, 0.1), (0.2, 0.6)])
def test_single_threshold_plans_equal_brute_force(n, alpha, delta):
    for d in range(n + 1):
        for k in range(d + 1):
            plan = selective_plan(
                n=n, denominators=[d], errors=[k], alpha=alpha, delta=delta, budget=300
            )
            expected = brute_first(n, [(d, k)], alpha, delta, 300)[0]
            assert plan.rows[0].additional == expected, (d, k)


@pytest.mark.parametrize("method", ["bonferroni", "fixed_sequence"])
def test_family_plans_equal_brute_force(method):
    # given a family of five thresholds on 30 units, from strict (few accepted) to lenient
    n, rows = 30, [(4, 0), (9, 0), (15, 1), (22, 2), (30, 5)]
    alpha, delta = 0.2, 0.1
    level = delta / len(rows) if method == "bonferroni" else delta
    plan = selective_plan(
        n=n,
        denominators=[d for d, _ in rows],
        errors=[k for _, k in rows],
        alpha=alpha,
        delta=delta,
        method=method,
        budget=3000,
    )
    expected = brute_first(n, rows, alpha, level, 3000, fixed=method == "fixed_sequence")
    assert [r.additional for r in plan.rows] == expected
    assert all(e is not None for e in expected)


def test_fixed_sequence_waits_for_earlier_thresholds():
    # the first threshold accepts few answers: fixed sequence certifies the second only once the
    # first passes too, while Bonferroni (at delta / 2) plans the second on its own
    n, rows = 50, [(10, 1), (50, 2)]
    kwargs = dict(n=n, denominators=[10, 50], errors=[1, 2], alpha=0.15, delta=0.05, budget=2000)
    fixed = selective_plan(method="fixed_sequence", **kwargs)
    alone = selective_plan(method="bonferroni", **kwargs)
    assert [r.additional for r in fixed.rows] == brute_first(n, rows, 0.15, 0.05, 2000, fixed=True)
    assert [r.additional for r in alone.rows] == brute_first(n, rows, 0.15, 0.025, 2000)
    assert fixed.rows[1].additional >= fixed.rows[0].additional > alone.rows[1].additional


def test_the_plan_certifies_through_the_certificate_itself():
    # at the planned N, the projected counts certify through certify(); at N - 1 they do not
    n, rows, alpha, delta = 120, [(60, 3), (90, 6), (120, 9)], 0.1, 0.05
    plan = selective_plan(
        n=n,
        denominators=[d for d, _ in rows],
        errors=[k for _, k in rows],
        alpha=alpha,
        delta=delta,
    )
    for j, row in enumerate(plan.rows):
        assert row.additional is not None and row.additional > 0
        for more, certified in ((row.additional, True), (row.additional - 1, False)):
            counts = [projected(n, d, k, more) for d, k in rows]
            certificate = certify(
                ThresholdCounts(
                    thresholds=(0.0, 1.0, 2.0),
                    accepted=tuple(c[0] for c in counts),
                    errors=tuple(c[1] for c in counts),
                    n=max(c[0] for c in counts),
                ),
                alpha=alpha,
                delta=delta,
            )
            assert (j in certificate.certified_indices) is certified
        assert (row.planned_denominator, row.planned_errors) == projected(
            n, *rows[j], row.additional
        )


def test_zero_error_minimum_is_the_certificates_figure():
    plan = selective_plan(n=10, denominators=[10] * 5, errors=[0] * 5, alpha=0.1, delta=0.05)
    assert (
        plan.zero_error_minimum
        == 44
        == smallest_certifiable_count(alpha=0.1, delta=0.05, n_thresholds=5)
    )
    # with zero errors at every unit, the plan is the units missing to 44
    assert [r.additional for r in plan.rows] == [34] * 5
    assert plan.rows[0].planned_denominator == 44 and plan.rows[0].planned_errors == 0
    fixed = selective_plan(
        n=10, denominators=[10] * 5, errors=[0] * 5, alpha=0.1, delta=0.05, method="fixed_sequence"
    )
    assert fixed.zero_error_minimum == smallest_certifiable_count(alpha=0.1, delta=0.05) == 29


def test_a_certified_threshold_needs_nothing_and_certifies_surely():
    plan = selective_plan(n=100, denominators=[100], errors=[0], alpha=0.1, delta=0.05)
    row = plan.rows[0]
    assert (row.certified_now, row.additional, row.probability_at_plan) == (True, 0, 1.0)


@pytest.mark.parametrize(("d", "k"), [(40, 4), (40, 5), (40, 40)])
def test_a_rate_at_or_above_alpha_never_certifies(d, k):
    plan = selective_plan(n=40, denominators=[d], errors=[k], alpha=0.1, delta=0.05, budget=3000)
    row = plan.rows[0]
    assert row.additional is None and "at least alpha" in row.reason
    # the brute force agrees over the whole budget
    assert brute_first(40, [(d, k)], 0.1, 0.05, 3000)[0] is None


def test_a_threshold_accepting_nothing_and_an_empty_calibration_set_have_reasons():
    plan = selective_plan(n=20, denominators=[0], errors=[0], alpha=0.1, delta=0.05, n_more=30)
    assert (
        plan.rows[0].additional is None and "accepts no calibration answer" in plan.rows[0].reason
    )
    assert plan.rows[0].probability_at_n_more == 0.0
    empty = selective_plan(n=0, denominators=[0], errors=[0], alpha=0.1, delta=0.05, n_more=30)
    assert "no calibration unit" in empty.rows[0].reason
    assert empty.rows[0].probability_at_n_more is None and empty.zero_error_minimum == 29


def test_beyond_the_budget_is_said():
    # rate 0.095 under alpha 0.1 needs tens of thousands of units
    plan = selective_plan(
        n=200, denominators=[200], errors=[19], alpha=0.1, delta=0.05, budget=1000
    )
    assert plan.rows[0].additional is None and "within 1,000 more units" in plan.rows[0].reason
    wide = selective_plan(n=200, denominators=[200], errors=[19], alpha=0.1, delta=0.05)
    more = wide.rows[0].additional
    assert more is not None and more > 1000
    d, k = projected(200, 200, 19, more)
    assert p_value(k, d, 0.1) <= 0.05 < p_value(*projected(200, 200, 19, more - 1)[::-1], 0.1)


# -- selective risk: the chance of certifying ----------------------------------------------------
@pytest.mark.parametrize(
    ("n", "d", "k"), [(30, 12, 0), (30, 12, 1), (30, 30, 2), (25, 7, 7), (40, 33, 3)]
)
@pytest.mark.parametrize("more", [0, 1, 9, 24])
def test_probability_equals_the_sum_over_outcomes(n, d, k, more):
    plan = selective_plan(n=n, denominators=[d], errors=[k], alpha=0.2, delta=0.1, n_more=more)
    assert plan.rows[0].probability_at_n_more == pytest.approx(
        brute_probability(n, d, k, 0.2, 0.1, more), abs=1e-12
    )


def test_probability_under_the_eligible_units_denominator_is_one_binomial():
    # every unit is in the denominator: P = P[Bin(N, k/n) <= e_max(n + N) - k]
    n, k, more, alpha, level = 200, 6, 300, 0.1, 0.05
    plan = selective_plan(n=n, denominators=[n], errors=[k], alpha=alpha, delta=level, n_more=more)
    total = n + more
    e_max = max(e for e in range(total + 1) if binom.cdf(e, total, alpha) <= level)
    assert plan.rows[0].probability_at_n_more == pytest.approx(
        binom.cdf(e_max - k, more, k / n), rel=1e-12
    )
    assert plan.rows[0].probability_at_plan == pytest.approx(
        brute_probability_eligible(n, k, alpha, level, plan.rows[0].additional), rel=1e-12
    )


def brute_probability_eligible(n, k, alpha, level, more):
    return sum(
        binom.pmf(e, more, k / n)
        for e in range(more + 1)
        if binom.cdf(k + e, n + more, alpha) <= level
    )


def test_fixed_sequence_probabilities_are_bounds_by_the_prefix():
    n, rows = 30, [(10, 0), (30, 1)]
    plan = selective_plan(
        n=n,
        denominators=[10, 30],
        errors=[0, 1],
        alpha=0.2,
        delta=0.1,
        method="fixed_sequence",
        n_more=20,
    )
    assert plan.probability_is_bound
    own = [brute_probability(n, d, k, 0.2, 0.1, 20) for d, k in rows]
    assert plan.rows[0].probability_at_n_more == pytest.approx(own[0], abs=1e-12)
    assert plan.rows[1].probability_at_n_more == pytest.approx(min(own), abs=1e-12)


def test_the_p_value_is_swappable():
    # a p-value twice as large (capped at 1) needs at least as many units
    def doubled(errors, accepted, alpha):
        return np.minimum(1.0, 2 * binomial_p_values(errors, accepted, alpha))

    kwargs = dict(n=50, denominators=[50], errors=[1], alpha=0.1, delta=0.05)
    base = selective_plan(**kwargs).rows[0].additional
    strict = selective_plan(p_values=doubled, **kwargs).rows[0].additional
    assert strict is not None and base is not None and strict > base
    d, k = projected(50, 50, 1, strict)
    assert 2 * binom.cdf(k, d, 0.1) <= 0.05


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"denominators": [5], "errors": [6]}, "errors <= denominator"),
        ({"denominators": [11], "errors": [0]}, "errors <= denominator"),
        ({"denominators": [], "errors": []}, "non-empty"),
        ({"n_more": 10**6}, "n_more must be at most"),
        ({"n_more": -1}, ">= 0"),
        ({"alpha": 1.0}, "alpha"),
        ({"method": "holm"}, "method"),
    ],
)
def test_bad_input_is_refused(kwargs, message):
    given = {"n": 10, "denominators": [5], "errors": [0], "alpha": 0.1, "delta": 0.05, **kwargs}
    with pytest.raises(StatsError, match=message):
        selective_plan(**given)


# -- conformal -----------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", ["0.1", "0.3", "0.05", "0.5", "0.07"])
def test_minimum_n_is_the_first_n_with_k_at_most_n(alpha):
    first = next(n for n in range(1, 1000) if conformal_index(n, alpha) <= n)
    plan = conformal_plan(n=0, n_finite=0, n_mode_admissible=0, alpha=alpha)
    assert plan.minimum_n == first
    assert plan.additional is None and "no calibration question" in plan.reason


def test_minimum_n_at_alpha_one_tenth_is_nine():
    assert conformal_plan(n=3, n_finite=3, n_mode_admissible=3, alpha="0.1").minimum_n == 9


@pytest.mark.parametrize(
    ("n", "f", "alpha"),
    [
        (3, 3, "0.1"),
        (5, 5, "0.2"),
        (20, 19, "0.1"),
        (20, 17, "0.2"),
        (40, 37, "0.1"),
        (10, 8, "0.3"),
    ],
)
def test_finite_plan_equals_brute_force(n, f, alpha):
    plan = conformal_plan(n=n, n_finite=f, n_mode_admissible=min(f, 2), alpha=alpha, n_more=7)
    expected = next(
        more for more in range(5000) if f + more * f // n >= conformal_index(n + more, alpha)
    )
    assert plan.additional == expected and plan.planned_n == n + expected
    assert plan.finite_now is (expected == 0)
    needed = conformal_index(n + 7, alpha) - f
    exact = sum(binom.pmf(x, 7, f / n) for x in range(8) if x >= needed)
    assert plan.probability_at_n_more == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize(("n", "f", "alpha"), [(20, 18, "0.1"), (20, 10, "0.3"), (10, 0, "0.2")])
def test_unsolvable_share_at_least_alpha_never_becomes_finite(n, f, alpha):
    plan = conformal_plan(n=n, n_finite=f, n_mode_admissible=0, alpha=alpha)
    assert plan.additional is None and "stays infinite" in plan.reason
    assert not any(f + m * f // n >= conformal_index(n + m, alpha) for m in range(5000))


def test_reliability_now_is_the_stats_modules_level_and_expected_scales():
    scores = [1.0] * 18 + [2.0, math.inf]
    level = reliability_level(scores)
    plan = conformal_plan(n=20, n_finite=19, n_mode_admissible=18, alpha="0.1", n_more=80)
    assert plan.reliability_now == level.level == Fraction(18, 21)
    # expectation at 100 questions with the 18/20 share held: 90 / 101
    assert plan.expected_reliability_at_n_more == Fraction(90, 101)
    assert expected_reliability(20, 18, 80) == Fraction(18 * 100, 20 * 101)
    assert expected_reliability(20, 0, 5) is None and expected_reliability(0, 0, 5) is None


def test_conformal_bad_input_is_refused():
    with pytest.raises(StatsError, match="n_mode_admissible <= n_finite <= n"):
        conformal_plan(n=5, n_finite=6, n_mode_admissible=0, alpha="0.1")
    with pytest.raises(StatsError, match="alpha"):
        conformal_plan(n=5, n_finite=5, n_mode_admissible=0, alpha="1.2")


def test_never_tells_impossible_from_beyond_the_budget():
    plan = selective_plan(
        n=200,
        denominators=[200, 200, 0],
        errors=[19, 30, 0],
        alpha=0.1,
        delta=0.05,
        budget=1000,
    )
    assert [r.never for r in plan.rows] == [False, True, True]
    fixed = selective_plan(
        n=40, denominators=[40, 40], errors=[8, 0], alpha=0.1, delta=0.05, method="fixed_sequence"
    )
    assert fixed.rows[1].never and fixed.rows[1].reason.startswith("fixed sequence, threshold #0")
    conformal = conformal_plan(n=20, n_finite=17, n_mode_admissible=10, alpha="0.1")
    assert conformal.never and conformal.additional is None


def test_the_documented_example():
    # docs/certification.md, "Planning a label budget": 20 questions, 1 wrong, M = 3
    plan = selective_plan(
        n=20, denominators=[20, 20, 0], errors=[1, 1, 0], alpha=0.1, delta=0.05, n_more=60
    )
    row = plan.rows[0]
    assert (row.additional, row.planned_denominator, row.planned_errors) == (154, 174, 9)
    e_max = max(e for e in range(175) if binom.cdf(e, 174, 0.1) <= 0.05 / 3)
    assert row.probability_at_plan == pytest.approx(binom.cdf(e_max - 1, 154, 0.05), rel=1e-12)
    assert round(row.probability_at_plan, 3) == 0.635
    assert round(row.probability_at_n_more, 3) == 0.192
    assert plan.rows[2].never and plan.zero_error_minimum == 39
    c = conformal_plan(n=20, n_finite=19, n_mode_admissible=19, alpha="0.1", n_more=60)
    assert c.finite_now and c.reliability_now == Fraction(19, 21)
    assert c.expected_reliability_at_n_more == Fraction(76, 81)


def test_the_chance_over_a_large_budget_equals_the_full_sum():
    # N = 600: the planner sums only the outcomes within Bernstein's bound; the full sum over
    # every A = 0..600 (e_max found by scanning every error count) agrees
    n, d, k, more, alpha, level = 30, 12, 1, 600, 0.1, 0.05
    plan = selective_plan(n=n, denominators=[d], errors=[k], alpha=alpha, delta=level, n_more=more)
    added = np.arange(more + 1)
    e_max = np.array(
        [(binom.cdf(np.arange(d + a + 1), d + a, alpha) <= level).sum() - 1 for a in added]
    )
    full = np.dot(binom.pmf(added, more, d / n), binom.cdf(e_max - k, added, k / d))
    assert plan.rows[0].probability_at_n_more == pytest.approx(full, rel=1e-12)


# -- the sizes for an 80 % and a 95 % chance --------------------------------------------------
def chance_by_outcomes(n, d, k, alpha, level, more):
    """P(certify with ``more`` units): every (new denominator, new errors) outcome summed."""
    total = 0.0
    weights = binom.pmf(np.arange(more + 1), more, d / n)
    for added, weight in enumerate(weights):
        errors = np.arange(added + 1)
        passes = binom.cdf(k + errors, d + added, alpha) <= level
        total += weight * binom.pmf(errors[passes], added, k / d).sum()
    return total


@pytest.mark.parametrize(
    ("n", "d", "k", "alpha", "delta"),
    [(20, 20, 1, 0.1, 0.05), (30, 12, 1, 0.2, 0.1), (40, 33, 2, 0.15, 0.05)],
)
def test_the_sizes_for_an_80_and_a_95_percent_chance_are_where_the_chance_crosses(
    n, d, k, alpha, delta
):
    plan = selective_plan(n=n, denominators=[d], errors=[k], alpha=alpha, delta=delta)
    row = plan.rows[0]
    assert plan.fewest_index == 0
    # the planned size itself certifies only with its chance, here below 80 %
    assert row.probability_at_plan < 0.8
    chances = {}

    def chance(more):
        if more not in chances:
            chances[more] = chance_by_outcomes(n, d, k, alpha, delta, more)
        return chances[more]

    assert [size.target for size in plan.fewest_for_chance] == [0.8, 0.95]
    previous = row.additional
    for size in plan.fewest_for_chance:
        # then: an N whose chance reaches the target while N - 1's misses it (the chance dips
        # a little where a planned error falls due, so the crossing need not be the first)
        assert size.probability == pytest.approx(chance(size.additional), abs=1e-12)
        assert size.probability >= size.target
        assert size.additional > previous and chance(size.additional - 1) < size.target
        previous = size.additional


def test_a_certified_threshold_is_sure_at_once_and_names_label_the_fixed_sequence_reason():
    certified = selective_plan(n=100, denominators=[100], errors=[0], alpha=0.1, delta=0.05)
    assert [(s.additional, s.probability) for s in certified.fewest_for_chance] == [
        (0, 1.0),
        (0, 1.0),
    ]
    blocked = selective_plan(
        n=20,
        denominators=[0, 20],
        errors=[0, 1],
        alpha=0.1,
        delta=0.05,
        method="fixed_sequence",
        names=["score >= 0.95", "score >= 0.5"],
    )
    assert blocked.fewest_index is None and blocked.fewest_for_chance == ()
    assert blocked.rows[1].reason.startswith("fixed sequence, threshold score >= 0.95:")
