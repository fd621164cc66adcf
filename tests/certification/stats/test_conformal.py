"""Conformal sets, reliability level and sequential stopping against reference values."""

from __future__ import annotations

import math
import re
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certification.stats.conformal import (
    calibrate,
    conformal_index,
    conformal_threshold,
    encode_admissible,
    encode_samples,
    evaluate_sets,
    exact_alpha,
    frequency_profile,
    hoeffding_epsilon,
    nonconformity_score,
    prediction_set,
    rank_scores_from_codes,
    reliability_level,
    sequential_stop,
    sequential_stop_codes,
    should_stop,
    truncate_codes,
)
from certification.stats.errors import InsufficientDataError, StatsError

INF = math.inf
SCORES_20 = [1.0] * 18 + [2.0] + [INF]
SCORES_50 = [1.0] * 45 + [2.0] * 3 + [3.0] + [INF]


# -- reference values -------------------------------------------------------------------------
def test_rank_score_reference():
    samples = ["A"] * 5 + ["B"] * 3 + ["C"] * 2
    assert nonconformity_score(samples, {"B"}) == 2
    assert nonconformity_score(samples, {"D"}) == INF


@pytest.mark.parametrize(
    ("scores", "alpha", "expected"),
    [
        (SCORES_20, 0.10, 2),
        (SCORES_20, 0.05, INF),
        (SCORES_20, 0.15, 1),
        (SCORES_20, 0.14, 2),
        (SCORES_50, 0.05, 3),
        (SCORES_50, 0.10, 2),
        (SCORES_50, 0.02, INF),
    ],
)
def test_threshold_reference(scores, alpha, expected):
    threshold = conformal_threshold(scores, alpha)
    assert threshold.threshold == expected
    # independent oracle: the k-th smallest by integer index
    k = math.ceil((len(scores) + 1) * (1 - Fraction(str(alpha))))
    assert threshold.k == k
    assert threshold.threshold == (sorted(scores)[k - 1] if k <= len(scores) else INF)


@pytest.mark.parametrize(
    ("scores", "fraction", "value"),
    [(SCORES_20, Fraction(18, 21), 0.857142857), (SCORES_50, Fraction(45, 51), 0.882352941)],
)
def test_reliability_reference(scores, fraction, value):
    level = reliability_level(scores)
    assert level.level == fraction
    assert level.value == pytest.approx(value, abs=1e-9)
    # it is the largest 1 - alpha with M* = 1: at 1 - alpha = level, M* = 1; just above, M* > 1
    alpha = 1 - fraction
    assert conformal_threshold(scores, alpha).threshold == 1
    assert conformal_threshold(scores, alpha - Fraction(1, 10**6)).threshold > 1


@pytest.mark.parametrize(
    ("k", "eps"), [(2, 0.960323), (7, 0.513314), (8, 0.480161), (20, 0.303681), (100, 0.135810)]
)
def test_hoeffding_epsilon_reference(k, eps):
    assert hoeffding_epsilon(k, 0.05) == pytest.approx(eps, abs=1e-6)
    assert hoeffding_epsilon(k, 0.05) == pytest.approx(math.sqrt(math.log(40) / (2 * k)))


def test_stopping_reference():
    # unanimous samples: continue at k=7, stop at k=8
    assert not should_stop(7, 7, delta=0.05)
    assert should_stop(8, 8, delta=0.05)
    # at k=20: 16/20 continues, 17/20 stops
    assert not should_stop(16, 20, delta=0.05)
    assert should_stop(17, 20, delta=0.05)
    # k = 1 never stops (the rule starts at k = 2)
    assert not should_stop(1, 1, delta=0.9)


def test_unanimous_question_stops_after_eight_and_saves_the_rest():
    result = sequential_stop(["42"] * 20, delta=0.05)
    assert (result.samples_used, result.samples_saved, result.stopped_early) == (8, 12, True)
    # canonicalisation happens before counting: "$42", "42.0" and "42" are one class
    mixed = ["42", "$42", "42.0", " 42 "] * 5
    assert sequential_stop(mixed, delta=0.05, canonicaliser="numeric").samples_used == 8
    assert sequential_stop(mixed, delta=0.05, canonicaliser="exact").samples_used == 20


# -- exact k, no clamping ---------------------------------------------------------------------
def test_k_uses_the_decimal_alpha_not_the_binary_float():
    # (9 + 1)(1 - 0.3) = 7 exactly; with the binary float 0.3 the product is 7.000...1 -> 8
    assert math.ceil(10 * (1 - Fraction(0.3))) == 8
    assert conformal_index(9, 0.3) == 7
    assert conformal_index(9, "0.3") == 7
    assert exact_alpha(0.1) == Fraction(1, 10)


def test_k_above_n_is_infinite_never_clamped():
    # n = 5 at alpha 0.1: k = ceil(6 * 0.9) = 6 > 5, even though every score is 1
    threshold = conformal_threshold([1.0] * 5, 0.1)
    assert threshold.k == 6
    assert threshold.threshold == INF
    assert threshold.is_infinite
    assert "needs at least 9" in threshold.reason


def test_threshold_is_not_numpy_quantile_higher():
    # n = 10, alpha 0.2: k = ceil(8.8) = 9, the 9th smallest; the tempting
    # np.quantile(scores, k/n, method="higher") interpolates on n - 1 gaps and returns the 10th
    scores = np.arange(1.0, 11.0)
    assert conformal_threshold(scores, 0.2).threshold == sorted(scores)[9 - 1] == 9.0
    assert np.quantile(scores, 9 / 10, method="higher") == 10.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.integers(1, 6).map(float), st.just(INF)), min_size=1, max_size=80),
    st.sampled_from(["0.01", "0.05", "0.1", "0.15", "0.2", "0.3", "0.5", "0.9"]),
)
def test_threshold_is_the_kth_smallest_by_integer_index(scores, alpha):
    n = len(scores)
    k = math.ceil((n + 1) * (1 - Fraction(alpha)))
    expected = sorted(scores)[k - 1] if k <= n else INF
    assert conformal_threshold(scores, alpha).threshold == expected
    level = reliability_level(scores)
    ones = sum(1 for s in scores if s <= 1)
    assert level.level == (Fraction(ones, n + 1) if ones else None)


def test_reliability_undefined_without_an_admissible_mode():
    level = reliability_level([2.0, INF, 3.0])
    assert level.level is None and level.value is None
    assert "M* = 1 at no alpha" in level.reason


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ([0.0, 1.0], "ranks >= 1"),
        ([1.5], "integer ranks"),
        ([float("nan")], "NaN"),
        ([-INF], "ranks >= 1"),
    ],
)
def test_malformed_scores_are_refused(scores, message):
    with pytest.raises(StatsError, match=message):
        conformal_threshold(scores, 0.1)


def test_empty_calibration_and_bad_alpha():
    with pytest.raises(InsufficientDataError):
        conformal_threshold([], 0.1)
    for bad in (0, 1, 1.5, -0.1, "x", True):
        with pytest.raises(StatsError, match="alpha"):
            conformal_threshold([1.0], bad)


# -- profiles, sets, evaluation ---------------------------------------------------------------
def test_tie_rules():
    samples = ["b", "a", "b", "a", "c"]
    assert frequency_profile(samples).classes == ("a", "b", "c")
    assert frequency_profile(samples, tie_rule="first_seen").classes == ("b", "a", "c")
    assert frequency_profile(samples).counts == (2, 2, 1)
    with pytest.raises(StatsError, match="tie_rule"):
        frequency_profile(samples, tie_rule="random")


@pytest.mark.parametrize(
    ("samples", "classes"),
    [
        # numbers compare as numbers, never as strings ("1000" < "5" as strings)
        (["1000", "5"], ("5", "1000")),
        (["0.5", "1/3", "-2", "10"], ("-2", "1/3", "0.5", "10")),
        # numbers first, then the other classes as strings: an order, where a pairwise
        # "numeric if both are numbers, else string" rule would cycle (2 < 10 < 1a < 2)
        (["b", "10", "1a", "2"], ("2", "10", "1a", "b")),
        # equal values written differently (the exact canonicaliser) fall back to the string
        (["5.0", "5", "05"], ("05", "5", "5.0")),
    ],
)
def test_canonical_ascending_orders_numeric_classes_numerically(samples, classes):
    assert frequency_profile(samples).classes == classes
    encoded = encode_samples([samples])
    assert encoded.vocabulary == classes
    # the first class of the vocabulary is the mode of a tie (canonical_ascending)
    ranks = rank_scores_from_codes(encoded.codes, np.zeros_like(encoded.codes, dtype=bool))
    assert encoded.vocabulary[ranks.mode_codes[0]] == classes[0]


def test_canonicaliser_applies_to_samples_and_admissible_answers():
    samples = ["$1,000", "1000", "1000.0", "999"]
    assert nonconformity_score(samples, ["1,000.00"], canonicaliser="numeric") == 1
    assert nonconformity_score(samples, ["1,000.00"], canonicaliser="exact") == INF


def test_prediction_sets():
    profile = frequency_profile(["a"] * 4 + ["b"] * 3 + ["c"])
    assert prediction_set(profile, 1).classes == ("a",)
    assert prediction_set(profile, 2).size == 2
    assert prediction_set(profile, 7).classes == ("a", "b", "c")
    trivial = prediction_set(profile, INF)
    assert trivial.trivial and trivial.size is None
    with pytest.raises(StatsError, match="threshold must be"):
        prediction_set(profile, 1.5)


def test_evaluation_counts_by_hand():
    scores = [1.0, 2.0, 3.0, INF, 1.0]
    n_classes = [3, 2, 4, 2, 1]
    result = evaluate_sets(scores, n_classes, 2)
    assert (result.covered, result.n, result.coverage) == (3, 5, 0.6)
    assert (result.covered_solvable, result.n_solvable, result.coverage_solvable) == (3, 4, 0.75)
    # sizes min(2, classes): 2, 2, 2, 2, 1
    assert result.set_size_counts == ((1, 1), (2, 4))
    assert result.mean_set_size == pytest.approx(9 / 5)
    infinite = evaluate_sets(scores, n_classes, INF)
    assert infinite.coverage == 1.0 and infinite.mean_set_size is None
    assert "infinite" in infinite.reason


def _ascending(cls):
    # an independent reading of the rule for the plain decimals drawn below
    if re.fullmatch(r"-?\d+(\.\d+)?", cls):
        return (0, Fraction(cls), cls)
    return (1, Fraction(0), cls)


def brute_force_scores(samples, admissible, tie_rule):
    # an independent reference: Counter + sort, no shared code
    scores = []
    for row, good in zip(samples, admissible, strict=True):
        counts = Counter(row)
        first = {}
        for i, cls in enumerate(row):
            first.setdefault(cls, i)
        if tie_rule == "canonical_ascending":
            ranked = sorted(counts, key=lambda c: (-counts[c], _ascending(c)))
        else:
            ranked = sorted(counts, key=lambda c: (-counts[c], first[c]))
        ranks = [r for r, c in enumerate(ranked, 1) if c in good]
        scores.append(float(min(ranks)) if ranks else INF)
    return scores


CLASSES = ["a", "b", "c", "5", "1000", "10", "2.5", "-3", "07"]
question = st.tuples(
    st.lists(st.sampled_from(CLASSES), min_size=0, max_size=12),
    st.sets(st.sampled_from([*CLASSES, "h"]), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(question, min_size=1, max_size=25),
    st.sampled_from(["canonical_ascending", "first_seen"]),
)
def test_vectorised_scores_match_a_brute_force_reference(questions, tie_rule):
    samples = [q[0] for q in questions]
    admissible = [q[1] for q in questions]
    encoded = encode_samples(samples)
    mask = encode_admissible(samples, admissible)
    ranks = rank_scores_from_codes(encoded.codes, mask, tie_rule=tie_rule)
    expected = brute_force_scores(samples, admissible, tie_rule)
    assert ranks.scores.tolist() == expected
    assert ranks.n_classes.tolist() == [len(set(row)) for row in samples]
    per_question = [nonconformity_score(s, a, tie_rule=tie_rule) for s, a in questions]
    assert per_question == expected
    modes = [encoded.vocabulary[c] if c >= 0 else None for c in ranks.mode_codes]
    assert modes == [frequency_profile(s, tie_rule=tie_rule).mode for s in samples]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abc"), max_size=25), min_size=1, max_size=20))
def test_vectorised_stopping_matches_the_per_question_replay(samples):
    codes = encode_samples(samples).codes
    summary = sequential_stop_codes(codes, delta=0.05)
    replay = [sequential_stop(row, delta=0.05) for row in samples]
    assert summary.samples_used.tolist() == [r.samples_used for r in replay]
    assert summary.samples_saved == sum(r.samples_saved for r in replay)
    truncated = truncate_codes(codes, summary.samples_used)
    assert ((truncated >= 0).sum(axis=1) == summary.samples_used).all()


def test_mixed_admissibility_within_a_class_is_refused():
    codes = np.array([[0, 0, 1]])
    mask = np.array([[True, False, False]])
    with pytest.raises(StatsError, match="question 0"):
        rank_scores_from_codes(codes, mask)


def test_padding_must_trail():
    with pytest.raises(StatsError, match="only after"):
        rank_scores_from_codes(np.array([[-1, 0]]), np.array([[False, False]]))


def test_calibrate_bundles_threshold_reliability_and_histogram():
    result = calibrate(SCORES_20, 0.1)
    assert result.threshold.threshold == 2
    assert result.reliability.level == Fraction(18, 21)
    assert result.score_counts == ((1.0, 18), (2.0, 1), (INF, 1))


# -- properties: coverage on exchangeable data ------------------------------------------------
def simulate_coverage(rng, probs, values, n, n_test, alpha, seeds):
    cal = rng.choice(values, size=(seeds, n), p=probs)
    test = rng.choice(values, size=(seeds, n_test), p=probs)
    k = conformal_index(n, alpha)
    if k > n:
        return np.ones(seeds)
    thresholds = np.partition(cal, k - 1, axis=1)[:, k - 1]
    return (test <= thresholds[:, None]).mean(axis=1)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.floats(0.05, 1.0), min_size=2, max_size=6),
    st.integers(5, 200),
    st.sampled_from(["0.05", "0.1", "0.2", "0.3"]),
    st.integers(0, 2**32 - 1),
)
def test_coverage_is_at_least_1_minus_alpha_on_average(weights, n, alpha, seed):
    # given exchangeable calibration and test questions with discrete rank scores (ties, inf)
    probs = np.array(weights) / sum(weights)
    values = np.array([float(r) for r in range(1, len(weights))] + [INF])
    coverage = simulate_coverage(
        np.random.default_rng(seed), probs, values, n, 200, Fraction(alpha), 3000
    )
    # then mean coverage over seeds is >= 1 - alpha (up to 4 Monte Carlo standard errors)
    se = coverage.std(ddof=1) / math.sqrt(coverage.size) + 1e-12
    assert coverage.mean() >= 1 - float(Fraction(alpha)) - 4 * se


@pytest.mark.slow
def test_continuous_scores_give_coverage_k_over_n_plus_1():
    # tie-free scores: E[coverage] = k/(n+1) exactly, within 1/(n+1) above 1 - alpha
    rng = np.random.default_rng(4)
    n, seeds, alpha = 49, 20000, Fraction(1, 10)
    cal = rng.random((seeds, n))
    test = rng.random((seeds, 100))
    k = conformal_index(n, alpha)
    thresholds = np.partition(cal, k - 1, axis=1)[:, k - 1]
    coverage = (test <= thresholds[:, None]).mean(axis=1)
    se = coverage.std(ddof=1) / math.sqrt(seeds)
    assert abs(coverage.mean() - k / (n + 1)) < 4 * se
    assert 0.9 <= k / (n + 1) <= 0.9 + 1 / (n + 1)


@pytest.mark.slow
def test_pipeline_from_samples_covers_on_average():
    # given questions whose K = 10 samples come from a per-question answer distribution with
    # one admissible answer, calibrated through the vectorised path with sequential stopping
    rng = np.random.default_rng(7)
    alpha, n_cal, n_test, runs = Fraction(1, 10), 150, 150, 300
    coverages = []
    for _ in range(runs):
        n = n_cal + n_test
        skill = rng.beta(2, 1, size=n)  # chance a sample is the admissible answer (code 0)
        wrong = rng.integers(1, 5, size=(n, 10))
        codes = np.where(rng.random((n, 10)) < skill[:, None], 0, wrong)
        stop = sequential_stop_codes(codes, delta=0.05)
        used = truncate_codes(codes, stop.samples_used)
        ranks = rank_scores_from_codes(used, used == 0)
        threshold = conformal_threshold(ranks.scores[:n_cal], alpha)
        result = evaluate_sets(ranks.scores[n_cal:], ranks.n_classes[n_cal:], threshold)
        coverages.append(result.coverage)
    coverage = np.array(coverages)
    se = coverage.std(ddof=1) / math.sqrt(runs)
    assert coverage.mean() >= 0.9 - 4 * se


@pytest.mark.parametrize("alpha", [np.float64(0.1), np.float32(0.25), 0.1])
def test_numpy_scalars_are_accepted_as_alpha(alpha):
    # numpy.float64 is a float whose repr is "np.float64(0.1)"; float32 is no float at all
    assert exact_alpha(alpha) == Fraction(repr(float(alpha)))


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), np.float64("nan"), True, None])
def test_non_numbers_are_refused_as_alpha(alpha):
    with pytest.raises(StatsError):
        exact_alpha(alpha)
