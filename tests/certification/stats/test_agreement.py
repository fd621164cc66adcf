"""Agreement statistics: published reference values, statsmodels cross-checks, properties.

No database and no Django: ``certification.stats`` is plain Python.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from itertools import permutations

import krippendorff
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from statsmodels.stats import inter_rater

from certification.stats.agreement import (
    FEWER_THAN_TWO_RATERS,
    FEWER_THAN_TWO_SHARED_UNITS,
    FEWER_THAN_TWO_UNITS,
    NO_COMMON_LABEL,
    NO_PAIRABLE_UNIT,
    NO_SHARED_UNIT,
    NO_VARIATION,
    SINGLE_LABEL,
    UNEQUAL_RATINGS_PER_UNIT,
    LevelCounts,
    Statistic,
    agreement_summary,
    agreement_summary_from_counts,
    cohen_kappa,
    cohen_kappa_labels,
    contingency_table,
    fleiss_kappa,
    fleiss_kappa_ratings,
    krippendorff_alpha_nominal,
    pairwise_cohen_kappa,
    percent_agreement,
)
from certification.stats.errors import StatsError

_ = None  # a missing rating, to keep the reference matrices readable

# Krippendorff (2011), p. 3: 4 observers (rows A–D) × 12 units.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, _, _, _],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _, 3],
    [_, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _],
]
# The ``krippendorff`` package's documentation example: 3 coders × 15 units.
THREE_CODERS = [
    [_, _, _, _, _, 3, 4, 1, 2, 1, 1, 3, 3, _, 3],
    [1, _, 2, 1, 3, 3, 4, 3, _, _, _, _, _, _, _],
    [_, _, 2, 1, 3, 4, 4, _, 2, 1, 1, 3, 3, _, 4],
]
FLEISS_1971 = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def units_of(raters_by_units):
    """Transpose a raters × units matrix (how the references print) to units × raters."""
    return [list(unit) for unit in zip(*raters_by_units, strict=True)]


# -- published reference values (Krippendorff 2011, Cohen, Fleiss 1971) ------------------------
def test_krippendorff_2011_nominal_alpha():
    assert krippendorff_alpha_nominal(units_of(KRIPPENDORFF_2011)).value == pytest.approx(
        0.7434210526, abs=1e-9
    )


def test_three_coders_nominal_alpha():
    assert krippendorff_alpha_nominal(units_of(THREE_CODERS)).value == pytest.approx(
        0.6913580247, abs=1e-9
    )


def test_three_coders_interval_alpha_of_the_package():
    # the interval value of the same reference pins the package's behaviour we rely on
    data = np.array([[np.nan if v is None else v for v in row] for row in THREE_CODERS], float)
    assert krippendorff.alpha(
        reliability_data=data, level_of_measurement="interval"
    ) == pytest.approx(0.8108448928, abs=1e-9)


@pytest.mark.parametrize(
    ("table", "reason"),
    [
        # two units, k = 2: the large-sample interval needs about 2k² = 8
        (
            [[1, 0], [0, 1]],
            "not meaningful on 2 shared units: the large-sample interval needs about 2k² = 8 "
            "for k = 2 labels",
        ),
        (
            [[3, 1, 0], [0, 4, 1], [1, 0, 5]],
            "not meaningful on 15 shared units: the large-sample interval needs about 2k² = 18 "
            "for k = 3 labels",
        ),
        # enough units, but every one agreed: se 0, an interval of no width
        (
            [[12, 0], [0, 9]],
            "not meaningful: the standard error is 0 when every shared unit agrees",
        ),
        # rater A said the first label every time and agrees on half the units: kappa 0
        # whatever B does, and both standard errors 0 for that reason, not agreement
        ([[6, 6], [0, 0]], SINGLE_LABEL),
        ([[0, 0, 0], [7, 6, 8], [0, 0, 0]], SINGLE_LABEL),
        ([[1, 0], [1, 0]], SINGLE_LABEL),  # rater B's single label comes first too
        # the raters never use a label in common: kappa 0, both standard errors 0
        ([[0, 0, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0], [3, 0, 2, 0]], NO_COMMON_LABEL),
        ([[20, 5], [10, 15]], None),
        ([[4, 1], [1, 2]], None),  # n = 8 = 2k²: readable
    ],
)
def test_cohen_says_when_its_interval_is_not_meaningful(table, reason):
    result = cohen_kappa(table)
    assert result.kappa is not None
    assert result.interval_reason == reason
    # the figures are still the formula's, equal to statsmodels' (whose z divides 0 by 0 when
    # the null standard error is 0, and whose variance rounds to a hair below 0 there)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs = inter_rater.cohens_kappa(np.asarray(table))
    assert result.se**2 == pytest.approx(theirs.var_kappa, abs=1e-12)
    assert result.se0**2 == pytest.approx(theirs.var_kappa0, abs=1e-12)
    assert (result.z is None) == (result.se0 == 0.0)


def test_cohen_two_by_two_kappa_se_and_ci():
    result = cohen_kappa([[20, 5], [10, 15]])
    assert result.kappa == pytest.approx(0.4, abs=1e-12)
    assert result.se == pytest.approx(0.126996, abs=1e-6)
    assert result.ci_low == pytest.approx(0.151092, abs=1e-6)
    assert result.ci_high == pytest.approx(0.648908, abs=1e-6)
    assert (result.n, result.observed_agreement, result.expected_agreement) == (50, 0.7, 0.5)


def test_fleiss_fourteen_raters():
    assert fleiss_kappa(FLEISS_1971).value == pytest.approx(0.2099307044, abs=1e-9)


def test_two_annotators_ten_claims():
    a = "S S S S S U U U N N".split()
    b = "S S S S U U U N N N".split()
    result = cohen_kappa_labels(a, b)
    assert result.observed_agreement == pytest.approx(0.8)
    assert result.kappa == pytest.approx(9 / 13, abs=1e-7)
    assert percent_agreement(list(zip(a, b, strict=True))).value == pytest.approx(0.8)


def test_every_rating_identical_is_undefined_with_reason():
    ratings = [["S", "S", "S"]] * 6
    summary = agreement_summary(ratings, ["a", "b", "c"])
    assert summary.alpha == Statistic(value=None, reason=NO_VARIATION)
    assert summary.fleiss_kappa == Statistic(value=None, reason=NO_VARIATION)
    assert summary.percent_agreement.value == 1.0
    assert all(pair.result.kappa is None for pair in summary.pairs)
    assert {pair.result.reason for pair in summary.pairs} == {NO_VARIATION}
    assert all(pair.result.observed_agreement == 1.0 for pair in summary.pairs)


# -- statsmodels as an independent oracle ------------------------------------------------------
def test_cohen_matches_statsmodels_on_a_three_category_table():
    table = [[12, 3, 1], [2, 9, 4], [0, 5, 14]]
    ours = cohen_kappa(table)
    theirs = inter_rater.cohens_kappa(np.array(table))  # statsmodels' interval is 95% only
    assert ours.kappa == pytest.approx(theirs.kappa, abs=1e-12)
    assert ours.se == pytest.approx(theirs.std_kappa, abs=1e-12)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((theirs.kappa_low, theirs.kappa_upp))
    at_90 = cohen_kappa(table, confidence=0.9)
    half = norm.isf(0.05) * theirs.std_kappa
    assert (at_90.ci_low, at_90.ci_high) == pytest.approx((ours.kappa - half, ours.kappa + half))


def test_fleiss_matches_statsmodels():
    assert fleiss_kappa(FLEISS_1971).value == pytest.approx(
        inter_rater.fleiss_kappa(np.array(FLEISS_1971), method="fleiss"), abs=1e-12
    )


# -- undefined cases and input errors ----------------------------------------------------------
@pytest.mark.parametrize(
    ("table", "reason"),
    [
        ([[0, 0], [0, 0]], FEWER_THAN_TWO_SHARED_UNITS),
        ([[1, 0], [0, 0]], FEWER_THAN_TWO_SHARED_UNITS),
        ([[7]], NO_VARIATION),
        ([[0, 0], [0, 7]], NO_VARIATION),
    ],
)
def test_cohen_undefined(table, reason):
    result = cohen_kappa(table)
    assert (result.kappa, result.se, result.ci_low, result.ci_high) == (None, None, None, None)
    assert result.reason == reason


def test_cohen_one_rater_constant_is_zero_not_undefined():
    # rater A always says x, B varies: expected agreement < 1, so kappa is defined (and 0)
    result = cohen_kappa([[3, 2], [0, 0]])
    assert result.kappa == 0.0
    assert result.reason is None


@pytest.mark.parametrize(
    "table",
    [[[1, 2, 3]], [[1.0, 2.0], [3.0, 4.0]], [[1, -1], [0, 2]], [[True, False], [False, True]]],
)
def test_cohen_refuses_bad_tables(table):
    with pytest.raises(StatsError):
        cohen_kappa(table)


@pytest.mark.parametrize("confidence", [0, 1, 95, -0.5, float("nan")])
def test_cohen_refuses_bad_confidence(confidence):
    with pytest.raises(StatsError):
        cohen_kappa([[20, 5], [10, 15]], confidence=confidence)


def test_alpha_undefined_with_fewer_than_two_pairable_units():
    # one unit with two different values (the package would say 0.0) and singletons elsewhere
    ratings = [["x", "y"], ["x", None], [None, "z"]]
    assert krippendorff_alpha_nominal(ratings) == Statistic(None, FEWER_THAN_TWO_UNITS)
    assert percent_agreement(ratings).value == 0.0


def test_alpha_ignores_variation_in_units_that_drop_out():
    ratings = [["x", "x"], ["x", "x"], ["y", None], [None, "z"]]
    assert krippendorff_alpha_nominal(ratings) == Statistic(None, NO_VARIATION)


def test_nothing_pairable():
    ratings = [["x", None], [None, "y"]]
    summary = agreement_summary(ratings, ["a", "b"])
    assert summary.percent_agreement == Statistic(None, NO_PAIRABLE_UNIT)
    assert summary.alpha.reason == FEWER_THAN_TWO_UNITS
    assert summary.pairs == ()  # a and b never rated a common unit
    assert (summary.n_units, summary.n_pairable_units, summary.n_ratings) == (2, 0, 2)


def test_fleiss_ratings_needs_equal_counts_per_unit():
    ratings = [["x", "x", None], ["x", "y", "y"], ["y", "y", "x"]]
    assert fleiss_kappa_ratings(ratings) == Statistic(None, UNEQUAL_RATINGS_PER_UNIT)
    # units with a single rating drop out first, as for alpha
    balanced = [["x", "x", None], ["x", "y", None], ["y", None, None], ["y", "y", None]]
    assert fleiss_kappa_ratings(balanced).defined


def test_fleiss_refuses_unequal_row_sums():
    with pytest.raises(StatsError, match="same number of ratings"):
        fleiss_kappa([[1, 1], [2, 1]])


def test_ragged_ratings_and_bad_raters_are_refused():
    with pytest.raises(StatsError, match="rectangular"):
        agreement_summary([["x", "y"], ["x"]], ["a", "b"])
    with pytest.raises(StatsError, match="unique"):
        agreement_summary([["x", "y"]], ["a", "a"])
    with pytest.raises(StatsError, match="rectangular"):
        agreement_summary([["x", "y"]], ["a", "b", "c"])


def test_empty_level():
    summary = agreement_summary([], ["a", "b"])
    assert summary.raters == ()
    assert summary.pairs == ()
    assert not (summary.alpha.defined or summary.percent_agreement.defined)


def test_statistic_has_exactly_one_of_value_and_reason():
    with pytest.raises(StatsError):
        Statistic(value=None, reason=None)
    with pytest.raises(StatsError):
        Statistic(value=0.5, reason="no variation")


def test_summary_counts_and_pairs():
    ratings = units_of(KRIPPENDORFF_2011)
    summary = agreement_summary(ratings, ["A", "B", "C", "D"])
    assert (summary.n_units, summary.n_pairable_units, summary.n_ratings) == (12, 11, 41)
    assert dict(summary.category_counts) == {1: 9, 2: 13, 3: 11, 4: 5, 5: 3}
    assert [(p.rater_a, p.rater_b) for p in summary.pairs] == [
        ("A", "B"),
        ("A", "C"),
        ("A", "D"),
        ("B", "C"),
        ("B", "D"),
        ("C", "D"),
    ]
    ab = summary.pairs[0].result
    assert ab.n == 9  # units both A and B rated
    assert ab.kappa == pytest.approx(
        cohen_kappa_labels([r[0] for r in ratings], [r[1] for r in ratings]).kappa
    )


def test_contingency_table_uses_only_shared_units():
    table, categories = contingency_table(["x", "y", None, "x"], ["x", None, "y", "y"])
    assert categories == ("x", "y")
    assert table.tolist() == [[1, 1], [0, 0]]


# -- properties --------------------------------------------------------------------------------
tables = st.integers(1, 5).flatmap(
    lambda k: st.lists(st.lists(st.integers(0, 30), min_size=k, max_size=k), min_size=k, max_size=k)
)
LABELS = ("a", "b", "c", "d")


@st.composite
def rating_matrices(draw, min_units=0, max_units=12):
    n_raters = draw(st.integers(2, 4))
    cell = st.one_of(st.none(), st.sampled_from(LABELS))
    rows = draw(
        st.lists(
            st.lists(cell, min_size=n_raters, max_size=n_raters),
            min_size=min_units,
            max_size=max_units,
        )
    )
    return rows, [f"r{i}" for i in range(n_raters)]


def _finite_or_none(value):
    return value is None or math.isfinite(value)


@settings(max_examples=300, deadline=None)
@given(tables)
def test_cohen_properties(table):
    result = cohen_kappa(table)
    assert all(_finite_or_none(v) for v in (result.kappa, result.se, result.ci_low, result.ci_high))
    if result.kappa is None:
        assert result.reason is not None
        return
    assert -1.0 <= result.kappa <= 1.0
    assert result.ci_low <= result.kappa <= result.ci_high
    # symmetric in the raters (transposed table)
    swapped = cohen_kappa(np.array(table).T)
    assert swapped.kappa == result.kappa
    assert swapped.se == pytest.approx(result.se, abs=1e-12)
    # invariant to renaming the labels (the same permutation of rows and columns)
    order = np.random.default_rng(len(table)).permutation(len(table))
    permuted = cohen_kappa(np.array(table)[np.ix_(order, order)])
    assert permuted.kappa == result.kappa
    assert permuted.se == pytest.approx(result.se, abs=1e-12)
    # the same as statsmodels
    with warnings.catch_warnings():
        # statsmodels divides by the null SE, which is 0 when a rater is constant
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs = inter_rater.cohens_kappa(np.array(table))
    assert result.kappa == pytest.approx(theirs.kappa, abs=1e-12)
    if math.isnan(theirs.std_kappa):
        # statsmodels takes the root of a variance that rounding left a hair below 0
        assert result.se == pytest.approx(0.0, abs=1e-7)
    else:
        assert result.se == pytest.approx(theirs.std_kappa, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(tables)
def test_cohen_se_shrinks_as_one_over_root_n(table):
    result = cohen_kappa(table)
    assume(result.defined)
    bigger = cohen_kappa(np.array(table) * 4)
    assert bigger.kappa == result.kappa
    assert bigger.se == pytest.approx(result.se / 2, abs=1e-12)
    # and the interval is monotone in the confidence level
    narrow = cohen_kappa(table, confidence=0.8)
    assert narrow.ci_low >= result.ci_low and narrow.ci_high <= result.ci_high


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(LABELS), min_size=2, max_size=30))
def test_perfect_agreement_gives_one_when_defined(labels):
    result = cohen_kappa_labels(labels, labels)
    if len(set(labels)) == 1:
        assert result.reason == NO_VARIATION
    else:
        assert result.kappa == 1.0
        assert result.se == pytest.approx(0.0, abs=1e-7)
    alpha = krippendorff_alpha_nominal([[v, v, v] for v in labels])
    assert alpha.value == (None if len(set(labels)) == 1 else pytest.approx(1.0))
    assert percent_agreement([[v, v] for v in labels]).value == 1.0


def _alpha_by_coincidences(rows):
    """Krippendorff (2011) §C from the coincidence matrix: an oracle independent of the package."""
    coincidences = Counter()
    for row in rows:
        values = [v for v in row if v is not None]
        m = len(values)
        if m < 2:
            continue
        for i, j in permutations(range(m), 2):
            coincidences[values[i], values[j]] += 1 / (m - 1)
    n_c = Counter()
    for (c, _k), weight in coincidences.items():
        n_c[c] += weight
    n = sum(n_c.values())
    disagreeing = sum(w for (c, k), w in coincidences.items() if c != k)
    expected = n * n - sum(v * v for v in n_c.values())
    return 1 - (n - 1) * disagreeing / expected


@settings(max_examples=300, deadline=None)
@given(rating_matrices())
def test_summary_properties(matrix):
    rows, raters = matrix
    summary = agreement_summary(rows, raters)
    values = [summary.alpha.value, summary.fleiss_kappa.value, summary.percent_agreement.value]
    assert all(_finite_or_none(v) for v in values)  # never NaN
    for stat in (summary.alpha, summary.fleiss_kappa, summary.percent_agreement):
        assert stat.defined != (stat.reason is not None)
    if summary.alpha.defined:
        assert summary.alpha.value <= 1.0 + 1e-12
        assert summary.alpha.value == pytest.approx(_alpha_by_coincidences(rows), abs=1e-9)
    if summary.percent_agreement.defined:
        assert 0.0 <= summary.percent_agreement.value <= 1.0
    for pair in summary.pairs:
        assert pair.result.kappa is None or -1.0 <= pair.result.kappa <= 1.0
    if summary.fleiss_kappa.defined:
        counts = _pairable_counts(rows)
        assert summary.fleiss_kappa.value == pytest.approx(
            inter_rater.fleiss_kappa(counts, method="fleiss"), abs=1e-9
        )


def _pairable_counts(rows):
    kept = [[v for v in row if v is not None] for row in rows]
    kept = [values for values in kept if len(values) >= 2]
    return np.array([[values.count(label) for label in LABELS] for values in kept])


@settings(max_examples=200, deadline=None)
@given(rating_matrices(), st.randoms(use_true_random=False))
def test_summary_is_symmetric_in_raters_and_invariant_to_label_names(matrix, rnd):
    rows, raters = matrix
    summary = agreement_summary(rows, raters)
    # reorder the raters (columns)
    order = list(range(len(raters)))
    rnd.shuffle(order)
    reordered = agreement_summary(
        [[row[i] for i in order] for row in rows], [raters[i] for i in order]
    )
    # rename the labels by a bijection
    renamed_labels = list(LABELS)
    rnd.shuffle(renamed_labels)
    rename = dict(zip(LABELS, [f"x{v}" for v in renamed_labels], strict=True))
    renamed = agreement_summary(
        [[None if v is None else rename[v] for v in row] for row in rows], raters
    )
    for other in (reordered, renamed):
        for name in ("alpha", "fleiss_kappa", "percent_agreement"):
            ours, theirs = getattr(summary, name), getattr(other, name)
            assert ours.reason == theirs.reason
            assert ours.value == pytest.approx(theirs.value, abs=1e-12)
    pair_kappas = {frozenset((p.rater_a, p.rater_b)): p.result for p in summary.pairs}
    for other in (reordered, renamed):
        assert {frozenset((p.rater_a, p.rater_b)) for p in other.pairs} == set(pair_kappas)
        for pair in other.pairs:
            mine = pair_kappas[frozenset((pair.rater_a, pair.rater_b))]
            assert (mine.kappa, mine.reason, mine.n) == (
                pair.result.kappa,
                pair.result.reason,
                pair.result.n,
            )
            assert mine.se == pytest.approx(pair.result.se, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(rating_matrices(min_units=1))
def test_percent_agreement_is_the_mean_share_of_agreeing_pairs(matrix):
    rows, _raters = matrix
    shares = []
    for row in rows:
        values = [v for v in row if v is not None]
        pairs = [(a, b) for a, b in permutations(values, 2)]
        if pairs:
            shares.append(sum(a == b for a, b in pairs) / len(pairs))
    result = percent_agreement(rows)
    if shares:
        assert result.value == pytest.approx(sum(shares) / len(shares), abs=1e-12)
    else:
        assert result.reason == NO_PAIRABLE_UNIT


def test_pairwise_kappa_skips_pairs_without_shared_units():
    rows = [["x", "y", None], ["y", "y", None], [None, None, "x"]]
    result = pairwise_cohen_kappa(rows, ["a", "b", "c"])
    assert [(p.rater_a, p.rater_b, p.result.n) for p in result.pairs] == [("a", "b", 2)]
    assert result.reason is None


@pytest.mark.parametrize(
    ("rows", "raters", "reason"),
    [
        ([["x"], ["y"], ["x"]], ["a"], FEWER_THAN_TWO_RATERS),
        ([["x", None], ["y", None]], ["a", "b"], FEWER_THAN_TWO_RATERS),  # b never rated
        ([["x", None], [None, "y"]], ["a", "b"], NO_SHARED_UNIT),
    ],
)
def test_no_pair_says_why_in_every_result(rows, raters, reason):
    result = pairwise_cohen_kappa(rows, raters)
    assert (result.pairs, result.reason) == ((), reason)
    summary = agreement_summary(rows, raters)
    assert (summary.pairs, summary.pairs_reason) == ((), reason)
    counted = agreement_summary_from_counts(LevelCounts.from_ratings(rows, raters))
    assert (counted.pairs, counted.pairs_reason) == ((), reason)


@pytest.mark.parametrize(
    "table",
    [
        [[20, 5], [10, 15]],
        [[4, 1], [1, 2]],
        [[12, 0], [0, 9]],
        [[3, 9], [8, 2]],  # kappa below 0
        [[3, 1, 0], [0, 4, 1], [1, 0, 5]],
        [[22, 2, 1, 0], [3, 15, 4, 1], [0, 5, 11, 2], [1, 0, 3, 9]],
        [[40, 3, 0], [2, 1, 0], [0, 0, 1]],  # skewed marginals
    ],
)
def test_null_standard_error_and_z_test_equal_statsmodels(table):
    ours = cohen_kappa(table)
    theirs = inter_rater.cohens_kappa(np.asarray(table))
    assert ours.kappa == pytest.approx(theirs.kappa, abs=1e-12)
    assert ours.se0**2 == pytest.approx(theirs.var_kappa0, rel=1e-9)
    assert ours.z == pytest.approx(theirs.z_value, rel=1e-9)
    assert ours.p_value == pytest.approx(theirs.pvalue_two_sided, rel=1e-9)


def test_null_standard_error_of_the_worked_two_by_two():
    # p_e = 0.5, margins all 0.5: var0 = (0.5 + 0.25 - 4 * 0.25 * 1 / 2) / (0.25 * 50) = 0.0192
    result = cohen_kappa([[20, 5], [10, 15]])
    assert result.se0 == pytest.approx(math.sqrt(0.0192), rel=1e-12)
    assert result.z == pytest.approx(0.4 / math.sqrt(0.0192), rel=1e-12)
    assert result.p_value == pytest.approx(2 * norm.sf(0.4 / math.sqrt(0.0192)), rel=1e-12)


def test_a_single_label_rater_has_no_z_test():
    result = cohen_kappa([[6, 6], [0, 0]])
    assert (result.kappa, result.se, result.se0) == (0.0, 0.0, 0.0)
    assert (result.z, result.p_value) == (None, None)
    assert result.interval_reason == SINGLE_LABEL


def test_nan_ratings_are_missing_as_in_the_krippendorff_package():
    # given 3 raters × 5 units with NaN where a rater gave no rating
    nan = float("nan")
    rows = [["a", "a", nan], ["b", "b", "b"], ["a", "b", np.nan], ["c", "c", "c"], [nan, "a", "a"]]
    # when alpha is computed
    got = krippendorff_alpha_nominal(rows).value
    # then it equals the package's value with NaN read as missing (NaN is no fourth category)
    codes = {"a": 0.0, "b": 1.0, "c": 2.0}
    data = np.array([[codes.get(v, np.nan) for v in row] for row in rows]).T
    want = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert got == pytest.approx(want, abs=1e-12)
    assert got == pytest.approx(
        krippendorff_alpha_nominal(
            [[None if isinstance(v, float) else v for v in row] for row in rows]
        ).value,
        abs=1e-15,
    )
