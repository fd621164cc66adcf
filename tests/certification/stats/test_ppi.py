"""Error rate with a judge in the loop: hand-computed reference values, ``ppi_py`` as an
independent reference for PPI and PPI++, exact and simulated coverage of the exact bounds.

``ppi_py`` (the authors' package, PyPI ``ppi-python``) is a test-only reference: the product
reimplements its mean formulas on numpy. No database and no Django.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, binomtest

from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.intervals import clopper_pearson_upper_array
from certification.stats.ppi import (
    ASYMPTOTIC,
    EXACT,
    FEWER_THAN_TWO_LABELLED,
    NO_AUDITED_ITEMS,
    NO_UNLABELLED_ITEMS,
    UNSAMPLED_STRATUM,
    estimate_error_rate,
    human_only_bound,
    ppi_mean,
    ppi_plus_plus_mean,
    union_bound,
)

ppi_py = pytest.importorskip("ppi_py", reason="ppi-python is the test-only PPI reference")


def section_7_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reference audit: 20 labelled items, 200 unlabelled ones."""
    y = np.zeros(20)
    y[[0, 1, 2, 18, 19]] = 1
    yhat = np.zeros(20)
    yhat[[0, 1, 17, 18]] = 1
    yhat_unlabelled = np.zeros(200)
    yhat_unlabelled[:24] = 1
    return y, yhat, yhat_unlabelled


def judge_data(
    seed: int, n: int, big_n: int, *, quality: float = 0.85
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bernoulli(0.2) errors and a judge that agrees with them with probability ``quality``."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n + big_n) < 0.2
    agree = rng.random(n + big_n) < quality
    judge = np.where(agree, truth, ~truth).astype(float)
    return truth[:n].astype(float), judge[:n], judge[n:]


# -- the reference audit (Angelopoulos et al. 2023) -------------------------------------------
def test_ppi_reference_estimate_and_interval():
    y, yhat, yhat_unlabelled = section_7_data()
    result = ppi_mean(y, yhat, yhat_unlabelled, delta=0.05)
    assert result.estimate == pytest.approx(0.17, abs=1e-12)
    assert result.lower == pytest.approx(-0.00423848, abs=1e-6)
    assert result.upper == pytest.approx(0.34423848, abs=1e-6)
    assert (result.imputed_mean, result.rectifier) == pytest.approx((0.12, 0.05))
    assert result.lam == 1.0
    assert (result.n_labelled, result.n_unlabelled) == (20, 200)
    assert result.assumption == ASYMPTOTIC
    # the unclipped interval is the reference value; clipping to [0, 1] is a display choice
    assert result.clipped() == (0.0, pytest.approx(0.34423848, abs=1e-6))


def test_ppi_reference_by_hand_formula():
    # theta ± z sqrt(var_unlabelled / N + var_rectifier / n), population variances
    y, yhat, yhat_unlabelled = section_7_data()
    se = np.sqrt(yhat_unlabelled.var() / 200 + (y - yhat).var() / 20)
    result = ppi_mean(y, yhat, yhat_unlabelled)
    assert result.se == pytest.approx(se, rel=1e-12)


def test_human_only_reference_bound():
    # the same data, human only: 5 errors in 20
    result = human_only_bound([5], [20], delta=0.05)
    assert result.upper_bound == pytest.approx(0.4555824, abs=1e-6)
    reference = binomtest(5, 20, alternative="less").proportion_ci(0.95).high
    assert result.upper_bound == pytest.approx(reference, rel=1e-9)
    assert result.estimate == pytest.approx(0.25)
    assert result.assumption == EXACT
    assert result.n_strata_sampled == 1
    assert result.per_stratum_confidence == pytest.approx(0.95)


def test_human_only_two_sided_interval_is_clopper_pearson():
    result = human_only_bound([7], [50], delta=0.05)
    # k = 7, n = 50, 95% two-sided (the scipy documentation's example)
    assert result.lower == pytest.approx(0.05819170033997342, rel=1e-9)
    assert result.upper == pytest.approx(0.26739600249700846, rel=1e-9)


def test_human_only_from_the_raw_labels_equals_the_reference():
    # given the reference audit as a simple random sample of a 220-item workload
    y, yhat, yhat_unlabelled = section_7_data()
    judge = np.concatenate([yhat, yhat_unlabelled]).astype(np.int64)
    result = estimate_error_rate(judge, np.arange(20), y.astype(np.int64), delta=0.05)
    assert result.human_only.upper_bound == pytest.approx(0.4555824, abs=1e-6)
    assert result.human_only.strata[0].inclusion_probability == pytest.approx(20 / 220)


# -- PPI and PPI++ against ppi_py -------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("delta", [0.05, 0.1])
def test_ppi_matches_ppi_py(seed, delta):
    y, yhat, yhat_unlabelled = judge_data(seed, 150, 3000)
    result = ppi_mean(y, yhat, yhat_unlabelled, delta=delta)
    low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_unlabelled, alpha=delta, lam=1)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_unlabelled, lam=1)
    assert result.estimate == pytest.approx(float(np.squeeze(point)), rel=1e-9)
    assert result.lower == pytest.approx(float(low[0]), rel=1e-9)
    assert result.upper == pytest.approx(float(high[0]), rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ppi_plus_plus_matches_ppi_py(seed):
    y, yhat, yhat_unlabelled = judge_data(seed, 120, 2000, quality=0.7)
    result = ppi_plus_plus_mean(y, yhat, yhat_unlabelled, delta=0.05)
    low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_unlabelled, alpha=0.05)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_unlabelled)
    assert result.estimate == pytest.approx(float(np.squeeze(point)), rel=1e-9)
    assert result.lower == pytest.approx(float(low[0]), rel=1e-9)
    assert result.upper == pytest.approx(float(high[0]), rel=1e-9)
    assert 0.0 <= result.lam <= 1.0


def test_ppi_plus_plus_reference_data_matches_ppi_py():
    y, yhat, yhat_unlabelled = section_7_data()
    result = ppi_plus_plus_mean(y, yhat, yhat_unlabelled)
    low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_unlabelled, alpha=0.05)
    assert (result.lower, result.upper) == pytest.approx((low[0], high[0]), rel=1e-9)
    # PPI++ is never wider than PPI on the data it was tuned on, to first order
    assert result.se <= ppi_mean(y, yhat, yhat_unlabelled).se + 1e-12


@pytest.mark.parametrize("seed", [4, 5])
def test_weighted_ppi_and_ppi_plus_plus_match_ppi_py(seed):
    rng = np.random.default_rng(seed)
    y, yhat, yhat_unlabelled = judge_data(seed, 200, 2500)
    w = rng.uniform(0.5, 8.0, size=200)
    w_u = rng.uniform(0.5, 2.0, size=2500)
    for lam in (1, None):
        ours = (ppi_mean if lam == 1 else ppi_plus_plus_mean)(
            y, yhat, yhat_unlabelled, delta=0.1, weights=w, weights_unlabelled=w_u
        )
        low, high = ppi_py.ppi_mean_ci(
            y, yhat, yhat_unlabelled, alpha=0.1, lam=lam, w=w, w_unlabeled=w_u
        )
        point = ppi_py.ppi_mean_pointestimate(
            y, yhat, yhat_unlabelled, lam=lam, w=w, w_unlabeled=w_u
        )
        assert ours.estimate == pytest.approx(float(np.squeeze(point)), rel=1e-9)
        assert (ours.lower, ours.upper) == pytest.approx((low[0], high[0]), rel=1e-9)


def test_one_sided_upper_bound_matches_ppi_py():
    y, yhat, yhat_unlabelled = judge_data(9, 100, 1000)
    ppi = ppi_mean(y, yhat, yhat_unlabelled, delta=0.05)
    _, high = ppi_py.ppi_mean_ci(y, yhat, yhat_unlabelled, alpha=0.05, alternative="smaller", lam=1)
    assert ppi.upper_bound == pytest.approx(float(high[0]), rel=1e-9)
    # ppi_py 0.2.3 drops `alternative` when it tunes lam itself (its recursive call does not pass
    # it on, so it returns the two-sided interval); compare at our tuned lam, which the point
    # estimate shows to be ppi_py's
    tuned = ppi_plus_plus_mean(y, yhat, yhat_unlabelled, delta=0.05)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_unlabelled)
    assert tuned.estimate == pytest.approx(float(np.squeeze(point)), rel=1e-9)
    _, high = ppi_py.ppi_mean_ci(
        y, yhat, yhat_unlabelled, alpha=0.05, alternative="smaller", lam=tuned.lam
    )
    assert tuned.upper_bound == pytest.approx(float(high[0]), rel=1e-9)
    assert tuned.upper_bound < tuned.upper


def test_fixed_lambda_zero_is_the_classical_mean():
    y, yhat, yhat_unlabelled = judge_data(3, 80, 500)
    result = ppi_plus_plus_mean(y, yhat, yhat_unlabelled, lam=0.0)
    assert result.estimate == pytest.approx(y.mean())
    assert result.se == pytest.approx(y.std() / np.sqrt(80))


def test_a_judge_that_anticorrelates_gets_lambda_zero():
    y, _, _ = judge_data(11, 100, 1)
    yhat = 1.0 - y
    rng = np.random.default_rng(11)
    yhat_unlabelled = (rng.random(1000) < 0.8).astype(float)
    result = ppi_plus_plus_mean(y, yhat, yhat_unlabelled)
    assert result.lam == 0.0
    point = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_unlabelled)
    assert result.estimate == pytest.approx(float(np.squeeze(point)), rel=1e-9)


# -- PPI undefined and degenerate cases -------------------------------------------------------
def test_constant_judge_predictions_give_lambda_zero_with_a_note():
    y = np.array([0.0, 1.0, 0.0, 0.0, 1.0])
    result = ppi_plus_plus_mean(y, np.zeros(5), np.zeros(50))
    assert result.lam == 0.0
    assert result.estimate == pytest.approx(0.4)
    assert any("constant" in note for note in result.notes)


def test_zero_variance_is_reported_not_hidden():
    result = ppi_mean(np.zeros(10), np.zeros(10), np.zeros(100))
    assert result.se == 0.0
    assert result.lower == result.upper == 0.0
    assert any("zero width" in note for note in result.notes)


@pytest.mark.parametrize(
    ("n", "big_n", "reason"),
    [
        (0, 10, FEWER_THAN_TWO_LABELLED),
        (1, 10, FEWER_THAN_TWO_LABELLED),
        (5, 0, NO_UNLABELLED_ITEMS),
    ],
)
def test_ppi_undefined_without_enough_data(n, big_n, reason):
    for function in (ppi_mean, ppi_plus_plus_mean):
        result = function(np.ones(n), np.ones(n), np.ones(big_n))
        assert result.estimate is None and result.lower is None and result.upper_bound is None
        assert result.reason == reason
        assert result.clipped() is None


@pytest.mark.parametrize(
    "args",
    [
        ([0.0, 2.0], [0.0, 1.0], [1.0]),  # label outside [0, 1]
        ([0.0, 1.0], [0.0], [1.0]),  # misaligned
        ([0.0, float("nan")], [0.0, 1.0], [1.0]),
        ([[0.0, 1.0]], [[0.0, 1.0]], [1.0]),  # not 1-D
    ],
)
def test_ppi_input_checks(args):
    with pytest.raises(StatsError):
        ppi_mean(*(np.asarray(a) for a in args))


def test_ppi_refuses_bad_lambda_weights_and_delta():
    y, yhat, yu = section_7_data()
    with pytest.raises(StatsError):
        ppi_plus_plus_mean(y, yhat, yu, lam=1.5)
    with pytest.raises(StatsError):
        ppi_mean(y, yhat, yu, weights=np.zeros(20))
    with pytest.raises(StatsError):
        ppi_mean(y, yhat, yu, weights=np.ones(3))
    with pytest.raises(StatsError):
        ppi_mean(y, yhat, yu, delta=0.0)


# -- human-only: stratified and undefined -----------------------------------------------------
def test_stratified_bound_by_hand():
    # given two strata: 3 errors in 20 audited of 100 items, 1 in 40 of 900
    result = human_only_bound([3, 1], [20, 40], [100, 900], delta=0.05, strata=["pos", "neg"])
    # then each stratum is bounded at 1 - 0.05/2 and the bounds are mixed 0.1 / 0.9
    u_pos = binomtest(3, 20, alternative="less").proportion_ci(0.975).high
    u_neg = binomtest(1, 40, alternative="less").proportion_ci(0.975).high
    assert result.upper_bound == pytest.approx(0.1 * u_pos + 0.9 * u_neg, rel=1e-9)
    assert result.estimate == pytest.approx(0.1 * 3 / 20 + 0.9 * 1 / 40)
    assert result.per_stratum_confidence == pytest.approx(0.975)
    assert [s.stratum for s in result.strata] == ["pos", "neg"]
    assert result.strata[0].inclusion_probability == pytest.approx(0.2)
    assert result.strata[1].upper_bound == pytest.approx(u_neg, rel=1e-9)
    two_pos = binomtest(3, 20).proportion_ci(0.975, method="exact")
    two_neg = binomtest(1, 40).proportion_ci(0.975, method="exact")
    assert result.lower == pytest.approx(0.1 * two_pos.low + 0.9 * two_neg.low, rel=1e-9)
    assert result.upper == pytest.approx(0.1 * two_pos.high + 0.9 * two_neg.high, rel=1e-9)
    assert result.lower <= result.estimate <= result.upper_bound <= result.upper


def test_an_unsampled_stratum_counts_as_all_errors_and_spends_no_delta():
    result = human_only_bound([1, 0], [30, 0], [300, 100], delta=0.05)
    u = binomtest(1, 30, alternative="less").proportion_ci(0.95).high
    assert result.per_stratum_confidence == pytest.approx(0.95)
    assert result.upper_bound == pytest.approx(0.75 * u + 0.25, rel=1e-9)
    assert result.estimate is None
    assert any(UNSAMPLED_STRATUM in note for note in result.notes)


def test_nothing_audited_is_undefined():
    result = human_only_bound([0, 0], [0, 0], [10, 10])
    assert result.upper_bound is None and result.estimate is None
    assert result.reason == NO_AUDITED_ITEMS


@pytest.mark.parametrize(
    ("errors", "sampled", "population"),
    [
        ([3], [2], None),  # errors > sampled
        ([1, 1], [2, 2], None),  # several strata without sizes
        ([1], [5], [4]),  # sampled > population
        ([0], [0], [0]),  # empty stratum
        ([1.0], [2], None),  # float count (counts must be integers)
        ([1], [2, 3], [5, 5]),  # shapes
    ],
)
def test_human_only_input_checks(errors, sampled, population):
    with pytest.raises(StatsError):
        human_only_bound(errors, sampled, population)


@st.composite
def strata_counts(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    size = draw(st.integers(1, 5))
    population = draw(st.lists(st.integers(1, 500), min_size=size, max_size=size))
    sampled = [draw(st.integers(1, big)) for big in population]
    errors = [draw(st.integers(0, n)) for n in sampled]
    return errors, sampled, population


@settings(max_examples=80, deadline=None)
@given(strata_counts(), st.sampled_from([0.01, 0.05, 0.1, 0.2]))
def test_human_only_bounds_are_ordered(counts, delta):
    errors, sampled, population = counts
    result = human_only_bound(errors, sampled, population, delta=delta)
    assert 0.0 <= result.lower <= result.estimate <= result.upper_bound <= result.upper <= 1.0
    # a smaller delta never gives a smaller bound
    stricter = human_only_bound(errors, sampled, population, delta=delta / 2)
    assert stricter.upper_bound >= result.upper_bound


def test_strata_must_be_sortable():
    with pytest.raises(StatsError):
        estimate_error_rate(
            np.array([1, 0]), np.array([0]), np.array([1]), strata=np.array([1, "a"], dtype=object)
        )


# -- union bound ------------------------------------------------------------------------------
def test_union_bound_by_hand():
    # given 100 of 1,000 items flagged and 2 misses among 50 audited judge-negatives
    result = union_bound(100, 1000, [2], [50], delta=0.05)
    u_flag = binomtest(100, 1000, alternative="less").proportion_ci(0.975).high
    u_miss = binomtest(2, 50, alternative="less").proportion_ci(0.975).high
    assert result.flag_rate_upper == pytest.approx(u_flag, rel=1e-9)
    assert result.miss_rate_upper == pytest.approx(u_miss, rel=1e-9)
    assert result.upper_bound == pytest.approx(u_flag + u_miss, rel=1e-9)
    assert (result.flag_rate, result.miss_rate) == (0.1, 0.04)
    assert result.assumption == EXACT
    assert result.summary().estimate is None


def test_union_bound_takes_the_largest_stratum_bound_at_delta_over_2h():
    result = union_bound(10, 100, [1, 4], [40, 40], [50, 40], delta=0.1)
    u = [binomtest(k, 40, alternative="less").proportion_ci(1 - 0.1 / 4).high for k in (1, 4)]
    assert result.miss_rate_upper == pytest.approx(max(u), rel=1e-9)
    assert [s.upper_bound for s in result.miss_strata] == pytest.approx(u, rel=1e-9)


def test_union_bound_without_audited_negatives_is_one():
    result = union_bound(10, 100, [0], [0], [90])
    assert result.miss_rate_upper == 1.0 and result.upper_bound == 1.0
    assert result.miss_rate is None
    assert result.notes


def test_union_bound_is_capped_at_one():
    assert union_bound(90, 100, [20], [30]).upper_bound == 1.0


def test_union_bound_input_checks():
    with pytest.raises(InsufficientDataError):
        union_bound(0, 0, [0], [1])
    with pytest.raises(StatsError):
        union_bound(11, 10, [0], [1])
    with pytest.raises(StatsError):
        union_bound(1.0, 10, [0], [1])  # type: ignore[arg-type]


# -- all three from raw labels ----------------------------------------------------------------
def stratified_workload(seed: int) -> dict[str, np.ndarray]:
    """20,000 judged items; audit 150 flagged and 250 unflagged (verdict strata)."""
    rng = np.random.default_rng(seed)
    big_n = 20_000
    truth = rng.random(big_n) < 0.12
    flag = np.where(truth, rng.random(big_n) < 0.7, rng.random(big_n) < 0.05)
    judge = flag.astype(np.int64)
    judge[rng.random(big_n) < 0.01] = -1
    strata = np.where(judge == 1, 1, 0)  # unavailable items are sampled with the unflagged
    audited = np.concatenate(
        [
            rng.choice(np.flatnonzero(strata == 1), 150, replace=False),
            rng.choice(np.flatnonzero(strata == 0), 250, replace=False),
        ]
    )
    human = truth[audited].astype(np.int64)
    return {"judge": judge, "strata": strata, "audited": audited, "human": human, "truth": truth}


def test_stratified_ppi_matches_ppi_py_with_inclusion_weights():
    data = stratified_workload(1)
    result = estimate_error_rate(
        data["judge"], data["audited"], data["human"], strata=data["strata"], delta=0.05
    )
    # the same thing through ppi_py: all items unlabelled, audited weighted N_h / n_h
    predictions = np.where(data["judge"] == -1, 1.0, data["judge"]).astype(float)
    stratum_size = np.bincount(data["strata"])
    stratum_audited = np.bincount(data["strata"][data["audited"]])
    w = (stratum_size / stratum_audited)[data["strata"][data["audited"]]]
    y = data["human"].astype(float)
    yhat = predictions[data["audited"]]
    for ours, lam in ((result.ppi, 1), (result.ppi_plus_plus, None)):
        low, high = ppi_py.ppi_mean_ci(y, yhat, predictions, alpha=0.05, lam=lam, w=w)
        point = ppi_py.ppi_mean_pointestimate(y, yhat, predictions, lam=lam, w=w)
        assert ours.estimate == pytest.approx(float(np.squeeze(point)), rel=1e-9)
        assert (ours.lower, ours.upper) == pytest.approx((low[0], high[0]), rel=1e-9)
    # and the weighted PPI estimate is the stratified difference estimator
    share = stratum_size / stratum_size.sum()
    rectifier = [np.mean((y - yhat)[data["strata"][data["audited"]] == h]) for h in range(2)]
    assert result.ppi.estimate == pytest.approx(predictions.mean() + share @ rectifier, rel=1e-9)


def test_three_estimates_side_by_side():
    data = stratified_workload(2)
    result = estimate_error_rate(
        data["judge"], data["audited"], data["human"], strata=data["strata"], delta=0.05
    )
    rows = result.summaries()
    assert [row.method for row in rows] == [
        "human-only",
        "ppi",
        "ppi++",
        "union bound",
        "union bound (joint)",
    ]
    assert [row.assumption for row in rows] == [EXACT, ASYMPTOTIC, ASYMPTOTIC, EXACT, EXACT]
    # a stratified audit: the joint form does not apply, the other four have their bound
    assert all(row.upper_bound is not None for row in rows[:4])
    assert rows[4].upper_bound is None and rows[4].reason.startswith("the audit was stratified")
    assert result.n_population == 20_000 and result.n_audited == 400
    assert result.n_unavailable == int((data["judge"] == -1).sum())
    # the union bound: flagged or unavailable over all items; misses among audited negatives
    assert result.union.n_flagged == int((data["judge"] != 0).sum())
    negatives = data["judge"][data["audited"]] == 0
    assert result.union.n_negatives_audited == int(negatives.sum())
    assert result.union.n_missed == int(data["human"][negatives].sum())
    assert result.human_only.n_strata_sampled == 2


def test_simple_random_audit_without_strata_is_unweighted_ppi():
    y, yhat, yu = section_7_data()
    judge = np.concatenate([yhat, yu]).astype(np.int64)
    result = estimate_error_rate(judge, np.arange(20), y.astype(np.int64))
    reference = ppi_mean(y, yhat, judge.astype(float))
    assert result.ppi.estimate == pytest.approx(reference.estimate, rel=1e-12)
    assert result.ppi.se == pytest.approx(reference.se, rel=1e-12)


def test_unresolved_policies():
    judge = np.array([1, 1, 0, 0, 0, 0, 0, 0, 1, 0])
    audited = np.arange(10)
    human = np.array([1, 0, 0, 0, 1, 0, -1, 0, -1, 0])
    conservative = estimate_error_rate(judge, audited, human)
    assert conservative.human_only.n_errors == 4 and conservative.human_only.n_sampled == 10
    assert conservative.n_unresolved == 2
    assert any("count as errors" in a for a in conservative.human_only.assumptions)
    excluded = estimate_error_rate(judge, audited, human, unresolved="exclude")
    assert excluded.human_only.n_errors == 2 and excluded.human_only.n_sampled == 8
    assert excluded.ppi.n_labelled == 8
    assert excluded.human_only.upper_bound < conservative.human_only.upper_bound


def test_unavailable_prediction_is_used_by_ppi_only():
    judge = np.array([-1, 1, 0, 0, -1, 0, 0, 1])
    human = np.array([1, 1, 0, 0, 0, 0, 1, 1])
    as_flag = estimate_error_rate(judge, np.arange(8), human)
    as_negative = estimate_error_rate(judge, np.arange(8), human, unavailable_prediction=0.0)
    assert as_flag.union == as_negative.union
    assert as_flag.ppi.imputed_mean == pytest.approx(4 / 8)
    assert as_negative.ppi.imputed_mean == pytest.approx(2 / 8)


def test_a_stratum_without_audited_items_leaves_ppi_undefined():
    judge = np.array([1, 1, 0, 0, 0, 0])
    strata = np.array(["a", "a", "b", "b", "c", "c"])
    result = estimate_error_rate(
        judge, np.array([0, 1, 2, 3]), np.array([1, 0, 0, 0]), strata=strata
    )
    assert result.ppi.reason == UNSAMPLED_STRATUM
    assert result.ppi_plus_plus.reason == UNSAMPLED_STRATUM
    assert result.human_only.estimate is None
    assert result.union.miss_rate_upper == 1.0
    assert [s.stratum for s in result.human_only.strata] == ["a", "b", "c"]


def test_no_audit_at_all():
    result = estimate_error_rate(
        np.array([0, 1, 0]), np.array([], dtype=int), np.array([], dtype=int)
    )
    assert result.human_only.reason == NO_AUDITED_ITEMS
    assert result.ppi.reason == FEWER_THAN_TWO_LABELLED
    assert result.union.upper_bound == 1.0


@pytest.mark.parametrize(
    ("judge", "audited", "human", "kwargs"),
    [
        ([2, 0], [0], [1], {}),  # unknown code
        ([1, 0], [0, 0], [1, 1], {}),  # repeated position
        ([1, 0], [2], [1], {}),  # out of range
        ([1, 0], [0], [1, 0], {}),  # misaligned
        ([1.0, 0.0], [0], [1], {}),  # float codes
        ([1, 0], [0], [1], {"unresolved": "drop"}),
        ([1, 0], [0], [1], {"strata": [0]}),
        ([1, 0], [0], [1], {"unavailable_prediction": 2.0}),
    ],
)
def test_estimate_error_rate_input_checks(judge, audited, human, kwargs):
    with pytest.raises(StatsError):
        estimate_error_rate(np.asarray(judge), np.asarray(audited), np.asarray(human), **kwargs)


def test_an_empty_workload_is_insufficient():
    with pytest.raises(InsufficientDataError):
        estimate_error_rate(
            np.array([], dtype=int), np.array([], dtype=int), np.array([], dtype=int)
        )


# -- coverage ---------------------------------------------------------------------------------
@pytest.mark.parametrize("delta", [0.05, 0.1])
@pytest.mark.parametrize("n", [5, 20, 50, 200])
def test_single_stratum_bound_covers_exactly(n, delta):
    # the coverage of the one-sided bound, summed exactly over every outcome k, for 400 rates
    k = np.arange(n + 1)
    upper = clopper_pearson_upper_array(k, np.full(n + 1, n), confidence=1 - delta)
    for rate in np.linspace(0.0, 1.0, 401)[1:-1]:
        coverage = binom.pmf(k, n, rate)[upper >= rate].sum()
        assert coverage >= 1 - delta - 1e-12


@pytest.mark.slow
def test_human_only_bound_covers_the_rate_in_simulated_stratified_audits():
    # given 3 strata with different error rates, shares and sampling fractions (seeded)
    rng = np.random.default_rng(20261018)
    delta = 0.1
    population = np.array([1_000, 8_000, 1_000])
    sampled = np.array([60, 60, 30])
    rates = np.array([0.4, 0.05, 0.12])
    truth = float(population @ rates / population.sum())
    # when 2,000 audits are simulated (the audited items of a stratum are i.i.d. draws)
    misses = 0
    for _ in range(2_000):
        errors = rng.binomial(sampled, rates)
        bound = human_only_bound(errors, sampled, population, delta=delta).upper_bound
        misses += bound < truth
    # then the bound misses the rate in at most delta of them (up to simulation error: the
    # miss count would be this large under a true miss rate of delta with probability < 0.001)
    assert binom.sf(misses - 1, 2_000, delta) >= 0.001, misses


@pytest.mark.slow
def test_bounds_cover_the_finite_workload_in_simulated_audits():
    # given finite workloads sampled without replacement, end to end from raw labels (seeded)
    rng = np.random.default_rng(7)
    delta = 0.1
    misses_human = misses_union = 0
    runs = 300
    for _ in range(runs):
        big_n = 3_000
        truth = rng.random(big_n) < 0.1
        judge = np.where(truth, rng.random(big_n) < 0.6, rng.random(big_n) < 0.08).astype(int)
        audited = np.concatenate(
            [
                rng.choice(np.flatnonzero(judge == 1), 40, replace=False),
                rng.choice(np.flatnonzero(judge == 0), 60, replace=False),
            ]
        )
        result = estimate_error_rate(
            judge, audited, truth[audited].astype(int), strata=judge, delta=delta
        )
        rate = truth.mean()
        misses_human += result.human_only.upper_bound < rate
        misses_union += result.union.upper_bound < rate
    for misses in (misses_human, misses_union):
        assert binom.sf(misses - 1, runs, delta) >= 0.001, misses


@pytest.mark.slow
def test_ppi_interval_coverage_is_near_nominal():
    # asymptotic: checked for being close to, not above, 1 - delta
    rng = np.random.default_rng(3)
    covered = 0
    runs = 1_000
    for _ in range(runs):
        truth = rng.random(5_200) < 0.2
        judge = np.where(rng.random(5_200) < 0.85, truth, ~truth).astype(float)
        result = ppi_plus_plus_mean(truth[:200].astype(float), judge[:200], judge[200:])
        covered += result.lower <= 0.2 <= result.upper
    assert covered / runs >= 0.92
