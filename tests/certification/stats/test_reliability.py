"""Per-person reliability statistics against independent computations.

Rates and intervals against ``scipy.stats.binomtest(...).proportion_ci(method="exact")``, kappa
against scikit-learn's ``cohen_kappa_score``, the near-silent rule on constructed raters, and the
Dawid–Skene fit against crowd-kit's own output and an EM written here from Dawid and Skene
(1979) §2 on the paper's Table 1 data (45 patients, 5 anaesthetists, 4 classes).
"""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import DawidSkene
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score

from certification.stats.errors import StatsError
from certification.stats.reliability import (
    NO_LABEL,
    NOT_IDENTIFIED,
    DawidSkeneUndefined,
    accuracy_against,
    dawid_skene,
    default_label,
    dispute_rates,
    near_silence,
    rate,
)


def _scipy_ci(k: int, n: int) -> tuple[float, float]:
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return ci.low, ci.high


@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 20), (3, 20), (19, 20), (20, 20), (41, 97)])
def test_rate_is_the_exact_clopper_pearson_interval(k, n):
    result = rate(k, n)
    assert (result.numerator, result.denominator) == (k, n)
    assert result.value == pytest.approx(k / n)
    assert (result.interval.lower, result.interval.upper) == pytest.approx(_scipy_ci(k, n))


def test_rate_of_no_trial_is_undefined_not_zero():
    result = rate(0, 0)
    assert result.value is None and result.interval is None
    with pytest.raises(StatsError):
        rate(1, 0)


def _constructed():
    # 30 units, 3 raters. Rater "good" matches the reference on 27, "poor" on 15 (a random
    # pattern), "part" labels only the first 12 units; references missing on units 25-29.
    rng = random.Random(7)
    labels = ["supported", "not_supported", "contradicted"]
    references = [rng.choice(labels) for _ in range(25)] + [None] * 5
    good, poor, part = [], [], []
    for i, ref in enumerate(references):
        truth = ref or "supported"
        good.append(truth if i not in (3, 11, 17) else labels[(labels.index(truth) + 1) % 3])
        poor.append(truth if rng.random() < 0.5 else rng.choice(labels))
        part.append(truth if i < 12 else None)
    ratings = [list(row) for row in zip(good, poor, part, strict=True)]
    return ratings, ["good", "poor", "part"], references


def test_accuracy_confusion_per_label_and_kappa_match_direct_counts():
    ratings, raters, references = _constructed()
    results = {r.rater: r for r in accuracy_against(ratings, raters, references)}
    for column, rater in enumerate(raters):
        pairs = [
            (ref, row[column])
            for row, ref in zip(ratings, references, strict=True)
            if ref is not None and row[column] is not None
        ]
        k = sum(ref == vote for ref, vote in pairs)
        result = results[rater]
        assert (result.accuracy.numerator, result.accuracy.denominator) == (k, len(pairs))
        interval = result.accuracy.interval
        assert (interval.lower, interval.upper) == pytest.approx(_scipy_ci(k, len(pairs)))
        # Confusion matrix: rows reference, columns the rater's label.
        for i, ref_label in enumerate(result.labels):
            for j, vote_label in enumerate(result.labels):
                expected = sum(p == (ref_label, vote_label) for p in pairs)
                assert result.confusion[i][j] == expected
        for label, per in result.per_label:
            of_label = [vote for ref, vote in pairs if ref == label]
            assert per.denominator == len(of_label)
            assert per.numerator == sum(v == label for v in of_label)
            assert (per.interval.lower, per.interval.upper) == pytest.approx(
                _scipy_ci(per.numerator, per.denominator)
            )
        refs = [ref for ref, _ in pairs]
        votes = [vote for _, vote in pairs]
        if len(set(refs) | set(votes)) > 1:
            assert result.kappa.kappa == pytest.approx(cohen_kappa_score(refs, votes))
    assert results["good"].accuracy.numerator == 22  # 25 references, 3 deliberate errors
    assert results["part"].accuracy.denominator == 12


def test_accuracy_leaves_out_raters_without_a_reference_unit_and_checks_shapes():
    assert accuracy_against([["a", None]], ["x", "y"], ["a"])[0].rater == "x"
    assert len(accuracy_against([["a", None]], ["x", "y"], ["a"])) == 1
    with pytest.raises(StatsError):
        accuracy_against([["a"]], ["x"], ["a", "b"])
    with pytest.raises(StatsError):
        accuracy_against([["a", "b"]], ["x", "x"], ["a"])


def test_dispute_rates_count_labels_on_units_whose_labels_differ():
    ratings = [
        ["a", "a", None],
        ["a", "b", None],
        ["b", None, "b"],
        ["a", "b", "c"],
        [None, "a", None],
    ]
    rates = dispute_rates(ratings, ["x", "y", "z"])
    # x: compared units 0,1,2,3 (4), disputed 1,3 (2); y: 0,1,3 (3), disputed 1,3; z: 2,3 -> 1.
    assert (rates["x"].numerator, rates["x"].denominator) == (2, 4)
    assert (rates["y"].numerator, rates["y"].denominator) == (2, 3)
    assert (rates["z"].numerator, rates["z"].denominator) == (1, 2)


def test_default_label_is_the_most_common_with_ties_broken_by_order():
    assert default_label([["b", "a"], ["a", "b"]]) == "a"
    assert default_label([["x", "y"], ["y", None]]) == "y"
    assert default_label([[None]]) is None


def _silence_world(silent_flags: int, n: int = 50):
    # Two raters flag 17 of 50 each (34 of 100), the third flags ``silent_flags`` of 50.
    rows = []
    for i in range(n):
        rows.append(
            [
                "inadmissible" if i < 17 else "admissible",
                "inadmissible" if 10 <= i < 27 else "admissible",
                "inadmissible" if i < silent_flags else "admissible",
            ]
        )
    return rows


def test_an_annotator_flagging_1_of_50_against_34_of_100_is_near_silent():
    result = {s.rater: s for s in near_silence(_silence_world(1), ["a", "b", "quiet"])}
    quiet = result["quiet"]
    assert quiet.default_label == "admissible"
    assert (quiet.flags.numerator, quiet.flags.denominator) == (1, 50)
    assert quiet.others_rate == pytest.approx(34 / 100)
    # The rule by hand: 0.02 <= 0.25 * 0.34 and the exact upper bound below 0.34.
    assert 1 / 50 <= 0.25 * 0.34
    assert _scipy_ci(1, 50)[1] < 0.34
    assert quiet.near_silent
    assert not result["a"].near_silent and not result["b"].near_silent


@pytest.mark.parametrize(
    ("flags", "silent"), [(0, True), (2, True), (4, True), (5, False), (12, False)]
)
def test_near_silence_needs_a_rate_far_below_the_others(flags, silent):
    # 0.25 * 0.34 = 0.085: 4 of 50 (0.08) is at most that, 5 of 50 (0.10) is not.
    result = {s.rater: s for s in near_silence(_silence_world(flags), ["a", "b", "quiet"])}
    assert result["quiet"].near_silent is silent


def test_near_silence_needs_enough_labels_and_a_comparison():
    few = _silence_world(0, n=30)[:19]  # 19 labels < 20
    result = {s.rater: s for s in near_silence(few, ["a", "b", "quiet"])}
    assert not result["quiet"].near_silent
    alone = [["admissible", None]] * 30
    result = {s.rater: s for s in near_silence(alone, ["solo", "nobody"])}
    assert result["solo"].others_rate is None and not result["solo"].near_silent


# Dawid and Skene (1979), Table 1: patient -> observer -> responses (observer 1 rated 3 times).
PATIENTS = {
    1: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    2: {1: [3, 3, 3], 2: [4], 3: [3], 4: [3], 5: [4]},
    3: {1: [1, 1, 2], 2: [2], 3: [1], 4: [2], 5: [2]},
    4: {1: [2, 2, 2], 2: [3], 3: [1], 4: [2], 5: [1]},
    5: {1: [2, 2, 2], 2: [3], 3: [2], 4: [2], 5: [2]},
    6: {1: [2, 2, 2], 2: [3], 3: [3], 4: [2], 5: [2]},
    7: {1: [1, 2, 2], 2: [2], 3: [1], 4: [1], 5: [1]},
    8: {1: [3, 3, 3], 2: [3], 3: [4], 4: [3], 5: [3]},
    9: {1: [2, 2, 2], 2: [2], 3: [2], 4: [2], 5: [3]},
    10: {1: [2, 3, 2], 2: [2], 3: [2], 4: [2], 5: [3]},
    11: {1: [4, 4, 4], 2: [4], 3: [4], 4: [4], 5: [4]},
    12: {1: [2, 2, 2], 2: [3], 3: [3], 4: [4], 5: [3]},
    13: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    14: {1: [2, 2, 2], 2: [3], 3: [2], 4: [1], 5: [2]},
    15: {1: [1, 2, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    16: {1: [1, 1, 1], 2: [2], 3: [1], 4: [1], 5: [1]},
    17: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    18: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    19: {1: [2, 2, 2], 2: [2], 3: [2], 4: [2], 5: [1]},
    20: {1: [2, 2, 2], 2: [1], 3: [3], 4: [2], 5: [2]},
    21: {1: [2, 2, 2], 2: [2], 3: [2], 4: [2], 5: [2]},
    22: {1: [2, 2, 2], 2: [2], 3: [2], 4: [2], 5: [1]},
    23: {1: [2, 2, 2], 2: [3], 3: [2], 4: [2], 5: [2]},
    24: {1: [2, 2, 1], 2: [2], 3: [2], 4: [2], 5: [2]},
    25: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    26: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    27: {1: [2, 3, 2], 2: [2], 3: [2], 4: [2], 5: [2]},
    28: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    29: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    30: {1: [1, 1, 2], 2: [1], 3: [1], 4: [2], 5: [1]},
    31: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    32: {1: [3, 3, 3], 2: [3], 3: [2], 4: [3], 5: [3]},
    33: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    34: {1: [2, 2, 2], 2: [2], 3: [2], 4: [2], 5: [2]},
    35: {1: [2, 2, 2], 2: [3], 3: [2], 4: [3], 5: [2]},
    36: {1: [4, 3, 3], 2: [4], 3: [3], 4: [4], 5: [3]},
    37: {1: [2, 2, 1], 2: [2], 3: [2], 4: [3], 5: [2]},
    38: {1: [2, 3, 2], 2: [3], 3: [2], 4: [3], 5: [3]},
    39: {1: [3, 3, 3], 2: [3], 3: [4], 4: [3], 5: [2]},
    40: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    41: {1: [1, 1, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    42: {1: [1, 2, 1], 2: [2], 3: [1], 4: [1], 5: [1]},
    43: {1: [2, 3, 2], 2: [2], 3: [2], 4: [2], 5: [2]},
    44: {1: [1, 2, 1], 2: [1], 3: [1], 4: [1], 5: [1]},
    45: {1: [2, 2, 2], 2: [2], 3: [2], 4: [2], 5: [2]},
}
# One label per rater and unit: observer 1's three passes are three raters here.
PATIENT_RATERS = ["1a", "1b", "1c", "2", "3", "4", "5"]


def _patient_matrix() -> tuple[list[list[str | None]], list[int]]:
    rows = []
    for patient in sorted(PATIENTS):
        r = PATIENTS[patient]
        rows.append([f"c{v}" for v in (*r[1], r[2][0], r[3][0], r[4][0], r[5][0])])
    return rows, sorted(PATIENTS)


def _em(ratings, raters, *, iterations):
    """Dawid and Skene (1979) §2, written here: majority-vote start, then ``iterations`` E steps.

    As crowd-kit: the start is each unit's vote shares; each iteration is an E step from the
    current prior and confusion matrices, then the M step (prior = mean posterior, confusion
    counts floored at 1e-10 before normalising, labels a rater never gave stay at 0).
    """
    labels = sorted({v for row in ratings for v in row if v is not None})
    k = len(labels)
    n, m = len(ratings), len(raters)
    onehot = np.zeros((n, m, k))
    for i, row in enumerate(ratings):
        for r, v in enumerate(row):
            if v is not None:
                onehot[i, r, labels.index(v)] = 1.0
    used = onehot.sum(axis=0) > 0  # rater x label: the rater gave that label at least once

    def m_step(t):
        counts = np.einsum("ij,irl->rjl", t, onehot)
        counts = np.where(used[:, None, :], np.clip(counts, 1e-10, None), 0.0)
        return t.mean(axis=0), counts / counts.sum(axis=2, keepdims=True)

    t = onehot.sum(axis=1)
    t = t / t.sum(axis=1, keepdims=True)
    prior, pi = m_step(t)
    for _ in range(iterations):
        with np.errstate(divide="ignore"):
            log_pi = np.log(pi)
        log = np.log(np.clip(prior, 1e-10, None))[None, :] + np.einsum(
            "irl,rjl->ij", onehot, np.where(onehot.sum(axis=0)[:, None, :] > 0, log_pi, 0.0)
        )
        t = np.exp(log - log.max(axis=1, keepdims=True))
        t = t / t.sum(axis=1, keepdims=True)
        prior, pi = m_step(t)
    return labels, t, prior, pi


def test_dawid_skene_on_the_1979_patient_data_matches_crowd_kit_and_an_independent_em():
    ratings, units = _patient_matrix()
    estimate = dawid_skene(ratings, PATIENT_RATERS, units, tol=1e-12)
    assert estimate.labels == ("c1", "c2", "c3", "c4")
    assert estimate.converged and estimate.change < 1e-12 and estimate.tol == 1e-12
    # Against crowd-kit called directly, for the same number of iterations (its own stopping
    # rule switched off: its bound is not monotone in EM).
    direct = _crowd_kit(ratings, PATIENT_RATERS, units, n_iter=estimate.iterations, tol=-np.inf)
    assert len(direct.loss_history_) == estimate.iterations
    for i, unit in enumerate(units):
        for j, label in enumerate(estimate.labels):
            assert estimate.posteriors[i][j] == pytest.approx(direct.probas_.loc[unit, label])
    # Against the EM written here (rows of the confusion matrix: the true class).
    labels, posteriors, prior, pi = _em(ratings, PATIENT_RATERS, iterations=estimate.iterations)
    assert np.allclose(np.asarray(estimate.posteriors), posteriors, atol=1e-8)
    assert np.allclose(np.asarray(estimate.confusion), pi, atol=1e-8)
    assert np.allclose(estimate.priors, prior, atol=1e-8)
    # A fixed point: 100 more iterations move no posterior by more than 1e-10.
    _, later, _, _ = _em(ratings, PATIENT_RATERS, iterations=estimate.iterations + 100)
    assert np.max(np.abs(later - posteriors)) < 1e-10
    assert estimate.priors == pytest.approx(direct.priors_.reindex(estimate.labels).tolist())
    # Each row of each confusion matrix is a distribution; posteriors too.
    assert np.allclose(np.asarray(estimate.confusion).sum(axis=2), 1.0)
    assert np.allclose(np.asarray(estimate.posteriors).sum(axis=1), 1.0)
    # Patients every observer put in one class get that class with near certainty.
    assert estimate.most_probable(units.index(11)) == "c4"
    assert estimate.posteriors[units.index(1)][0] > 0.999


def test_dawid_skene_is_the_same_whatever_the_order_of_units_and_raters():
    ratings, units = _patient_matrix()
    base = dawid_skene(ratings, PATIENT_RATERS, units, tol=1e-12)
    for seed in range(3):
        rng = random.Random(seed)
        order = list(range(len(units)))
        cols = list(range(len(PATIENT_RATERS)))
        rng.shuffle(order)
        rng.shuffle(cols)
        shuffled = dawid_skene(
            [[ratings[i][c] for c in cols] for i in order],
            [PATIENT_RATERS[c] for c in cols],
            [units[i] for i in order],
            tol=1e-12,
        )
        by_unit = dict(zip(shuffled.units, shuffled.posteriors, strict=True))
        for unit, row in zip(base.units, base.posteriors, strict=True):
            assert by_unit[unit] == pytest.approx(row, abs=1e-8)


def test_dawid_skene_without_labels_is_undefined_and_bad_input_raises():
    assert dawid_skene([[None, None]], ["a", "b"], [1]) == DawidSkeneUndefined(NO_LABEL)
    with pytest.raises(StatsError):
        dawid_skene([["x"]], ["a"], [1, 2])
    with pytest.raises(StatsError):
        dawid_skene([["x"]], ["a"], [1], max_iter=0)
    with pytest.raises(StatsError, match="unit 7, rater b: label 3 is not a string"):
        dawid_skene([["x", "y"], ["x", 3]], ["a", "b"], [6, 7])


def test_dawid_skene_with_one_annotator_or_no_shared_item_is_not_identified():
    # one annotator: formerly an identity confusion matrix and posteriors of 0.9999999999
    one = dawid_skene([["x"], ["y"], ["x"]], ["a"], [1, 2, 3])
    assert one == DawidSkeneUndefined(NOT_IDENTIFIED)
    # two annotators who never label the same item
    apart = dawid_skene([["x", None], [None, "y"], ["y", None]], ["a", "b"], [1, 2, 3])
    assert apart == DawidSkeneUndefined(NOT_IDENTIFIED)


def test_dawid_skene_skips_missing_labels_given_as_none_or_nan():
    ratings, units = _patient_matrix()
    gappy = [list(row) for row in ratings]
    for i in range(0, len(gappy), 3):
        gappy[i][i % 7] = None
    with_nan = [[float("nan") if v is None else v for v in row] for row in gappy]
    by_none = dawid_skene(gappy, PATIENT_RATERS, units)
    by_nan = dawid_skene(with_nan, PATIENT_RATERS, units)
    assert by_none == by_nan and by_none.converged
    _, posteriors, _, _ = _em(gappy, PATIENT_RATERS, iterations=by_none.iterations)
    assert np.allclose(np.asarray(by_nan.posteriors), posteriors, atol=1e-8)


def test_dawid_skene_at_the_cap_says_it_did_not_converge():
    ratings, units = _patient_matrix()
    capped = dawid_skene(ratings, PATIENT_RATERS, units, max_iter=2)
    assert (capped.iterations, capped.max_iter, capped.converged) == (2, 2, False)
    _, first, _, _ = _em(ratings, PATIENT_RATERS, iterations=1)
    _, second, _, _ = _em(ratings, PATIENT_RATERS, iterations=2)
    assert capped.change == pytest.approx(np.max(np.abs(second - first)), rel=1e-9)
    assert capped.change >= capped.tol


def _crowd_kit(ratings, raters, units, **options):
    rows = [
        (u, r, v)
        for u, row in zip(units, ratings, strict=True)
        for r, v in zip(raters, row, strict=True)
        if v is not None
    ]
    data = pd.DataFrame(rows, columns=["task", "worker", "label"])
    with pytest.warns(DeprecationWarning):  # crowd-kit 1.4 on pandas 3
        return DawidSkene(**options).fit(data)


def _simulated(seed):
    # 300 units, 12 raters, 3 classes; each unit labelled by 2-4 raters; rater 0 never answers
    # "c" (a row of its confusion matrix the data never fills).
    rng = np.random.default_rng(seed)
    raters = [f"r{i}" for i in range(12)]
    units = [int(u) for u in rng.permutation(1000)[:300]]
    accuracy = rng.uniform(0.55, 0.95, size=12)
    ratings = []
    for _ in units:
        truth = rng.choice(3, p=[0.5, 0.3, 0.2])
        row: list[str | None] = [None] * 12
        for r in rng.choice(12, size=rng.integers(2, 5), replace=False):
            answer = truth if rng.random() < accuracy[r] else rng.integers(3)
            if r == 0 and answer == 2:
                answer = 0
            row[r] = "abc"[answer]
        ratings.append(row)
    return ratings, raters, units


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), 2])
def test_dawid_skene_matches_crowd_kit_on_simulated_sparse_labels_at_the_fixed_point(seed):
    ratings, raters, units = _simulated(seed)
    estimate = dawid_skene(ratings, raters, units)
    assert estimate.converged and estimate.change < estimate.tol == 1e-6
    assert estimate.labels == ("a", "b", "c")
    # crowd-kit for as many iterations (its stopping rule off) matches to rounding
    direct = _crowd_kit(ratings, raters, units, n_iter=estimate.iterations, tol=-np.inf)
    probas = direct.probas_.reindex(index=list(estimate.units), columns=list(estimate.labels))
    assert np.allclose(np.asarray(estimate.posteriors), probas.to_numpy(), atol=1e-9)
    assert np.allclose(estimate.priors, direct.priors_.reindex(list("abc")).to_numpy(), atol=1e-9)
    for rater, matrix in zip(estimate.raters, estimate.confusion, strict=True):
        block = direct.errors_.xs(rater, level="worker").reindex(
            index=list("abc"), columns=list("abc")
        )
        assert np.allclose(np.asarray(matrix), block.fillna(0.0).to_numpy().T, atol=1e-9)
    assert estimate.confusion[estimate.raters.index("r0")][0][2] == 0.0
    # 1,000 more iterations of the EM written here (the change per iteration shrinks by a
    # factor near 0.97, so that is the fixed point): the posteriors stay within 1e-4 (1e-6 per
    # iteration leaves about 3e-5 to go) and no most probable label changes
    _, far, _, _ = _em(ratings, raters, iterations=estimate.iterations + 1000)
    assert np.max(np.abs(np.asarray(estimate.posteriors) - far)) < 1e-4
    assert [estimate.most_probable(i) for i in range(len(units))] == [
        estimate.labels[j] for j in far.argmax(axis=1)
    ]
