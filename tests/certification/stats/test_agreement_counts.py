"""Agreement figures from additive counts equal those of the ratings matrix they were counted from.

The reference is :func:`agreement_summary` of the matrix (alpha by the ``krippendorff`` package,
kappa as statsmodels), and the published worked examples; the counts of two halves of a matrix
added together give the figures of the whole (the property the vote tally relies on).
"""

from __future__ import annotations

from collections import Counter

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certification.stats.agreement import (
    FEWER_THAN_TWO_UNITS,
    LabelScale,
    LevelCounts,
    agreement_summary,
    agreement_summary_from_counts,
    krippendorff_alpha_from_counts,
)
from certification.stats.errors import StatsError
from labeling.tally import total, unit_tally
from tests.certification.stats.test_agreement import (
    FLEISS_1971,
    KRIPPENDORFF_2011,
    THREE_CODERS,
    units_of,
)

LABELS = st.sampled_from(["supported", "refuted", "cannot_decide", "evidence_unavailable:x"])


@st.composite
def matrices(draw):
    n_raters = draw(st.integers(1, 5))
    rows = draw(
        st.lists(st.lists(st.none() | LABELS, min_size=n_raters, max_size=n_raters), max_size=25)
    )
    return rows, [f"user:{i}" for i in range(n_raters)]


def _same(ours, theirs):
    assert ours.n_units == theirs.n_units
    assert ours.n_pairable_units == theirs.n_pairable_units
    assert ours.n_ratings == theirs.n_ratings
    assert ours.raters == theirs.raters
    assert ours.category_counts == theirs.category_counts
    for name in ("alpha", "fleiss_kappa", "percent_agreement"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert a.reason == b.reason, name
        if b.value is not None:
            assert a.value == pytest.approx(b.value, abs=1e-12), name
    # The same contingency tables: the pairwise figures are equal bit for bit.
    assert ours.pairs == theirs.pairs


def _add(a: LevelCounts, b: LevelCounts, raters) -> LevelCounts:
    def plus(x, y):
        out = Counter(x)
        out.update(y)
        return dict(out)

    return LevelCounts(
        raters=tuple(r for r in raters if r in set(a.raters) | set(b.raters)),
        votes=plus(a.votes, b.votes),
        units=plus(a.units, b.units),
        pairable={
            m: plus(a.pairable.get(m, {}), b.pairable.get(m, {}))
            for m in {*a.pairable, *b.pairable}
        },
        agreeing=plus(a.agreeing, b.agreeing),
        pairs={p: plus(a.pairs.get(p, {}), b.pairs.get(p, {})) for p in {*a.pairs, *b.pairs}},
        coincident={
            m: plus(a.coincident.get(m, {}), b.coincident.get(m, {}))
            for m in {*a.coincident, *b.coincident}
        },
    )


@settings(max_examples=300, deadline=None)
@given(matrices())
def test_counts_give_the_figures_of_the_matrix(matrix):
    rows, raters = matrix
    counts = LevelCounts.from_ratings(rows, raters)
    _same(agreement_summary_from_counts(counts), agreement_summary(rows, raters))


@settings(max_examples=200, deadline=None)
@given(matrices(), st.integers(0, 25))
def test_counts_of_two_parts_add_up_to_the_whole(matrix, cut):
    rows, raters = matrix
    parts = _add(
        LevelCounts.from_ratings(rows[:cut], raters),
        LevelCounts.from_ratings(rows[cut:], raters),
        raters,
    )
    _same(agreement_summary_from_counts(parts), agreement_summary(rows, raters))


@pytest.mark.parametrize(
    ("reference", "alpha"),
    [(KRIPPENDORFF_2011, 0.7434210526), (THREE_CODERS, 0.6913580247)],
)
def test_published_alpha_from_counts(reference, alpha):
    rows = units_of(reference)
    raters = [f"r{i}" for i in range(len(reference))]
    summary = agreement_summary_from_counts(LevelCounts.from_ratings(rows, raters))
    assert summary.alpha.value == pytest.approx(alpha, abs=1e-9)


def test_fleiss_1971_from_counts():
    # Fleiss (1971): 10 subjects, 14 raters each; a rater per (subject, rating) is enough.
    rows = []
    for subject in FLEISS_1971:
        labels = [c for c, n in enumerate(subject) for _ in range(n)]
        rows.append(labels)
    raters = [f"r{i}" for i in range(14)]
    summary = agreement_summary_from_counts(LevelCounts.from_ratings(rows, raters))
    assert summary.fleiss_kappa.value == pytest.approx(0.2099307044, abs=1e-9)


ORDER = ("1", "2", "3", "4", "5")
NUMBERS = st.sampled_from(["1", "2", "3", "4", "5"])


@st.composite
def numeric_matrices(draw):
    n_raters = draw(st.integers(2, 5))
    rows = draw(
        st.lists(
            st.lists(st.none() | NUMBERS, min_size=n_raters, max_size=n_raters),
            min_size=2,
            max_size=25,
        )
    )
    return rows, [f"user:{i}" for i in range(n_raters)]


def _package(rows, kind):
    data = np.array([[np.nan if v is None else float(v) for v in row] for row in rows]).T
    return krippendorff.alpha(reliability_data=data, level_of_measurement=kind)


def _scale(kind):
    return LabelScale(kind, ORDER if kind == "ordinal" else ())


@pytest.mark.parametrize(
    ("kind", "alpha"),
    # Krippendorff (2011), the 4 observers × 12 units example: nominal 0.743, ordinal 0.815,
    # interval 0.849 (his text, to 3 decimals; the package's values to 10 agree)
    [("nominal", 0.7434210526), ("ordinal", 0.8153875038), ("interval", 0.8491071429)],
)
def test_published_alpha_for_each_metric_from_counts(kind, alpha):
    rows = [[None if v is None else str(v) for v in row] for row in units_of(KRIPPENDORFF_2011)]
    raters = [f"r{i}" for i in range(len(KRIPPENDORFF_2011))]
    got = krippendorff_alpha_from_counts(LevelCounts.from_ratings(rows, raters), _scale(kind))
    assert got.value == pytest.approx(alpha, abs=1e-9)
    assert got.value == pytest.approx(_package(rows, kind), abs=1e-12)
    assert round(got.value, 3) == {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849}[kind]


@settings(max_examples=150, deadline=None)
@given(numeric_matrices(), st.sampled_from(["nominal", "ordinal", "interval", "ratio"]))
def test_alpha_for_each_metric_equals_the_krippendorff_package(matrix, kind):
    rows, raters = matrix
    got = krippendorff_alpha_from_counts(LevelCounts.from_ratings(rows, raters), _scale(kind))
    values = {v for row in rows if sum(x is not None for x in row) >= 2 for v in row if v}
    pairable = sum(sum(x is not None for x in row) >= 2 for row in rows)
    if pairable < 2:
        assert got.reason == FEWER_THAN_TWO_UNITS
    elif len(values) < 2:
        assert got.value is None
    else:
        assert got.value == pytest.approx(_package(rows, kind), abs=1e-9)
    if kind == "nominal" and got.value is not None:
        nominal = agreement_summary(rows, raters).alpha.value
        assert got.value == pytest.approx(nominal, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(numeric_matrices(), st.integers(0, 25))
def test_metric_alpha_of_two_parts_added_equals_the_whole(matrix, cut):
    rows, raters = matrix
    parts = _add(
        LevelCounts.from_ratings(rows[:cut], raters),
        LevelCounts.from_ratings(rows[cut:], raters),
        raters,
    )
    whole = LevelCounts.from_ratings(rows, raters)
    for kind in ("ordinal", "interval"):
        assert krippendorff_alpha_from_counts(parts, _scale(kind)) == (
            krippendorff_alpha_from_counts(whole, _scale(kind))
        )


def test_the_tally_carries_the_coincidences_of_the_counts():
    rows = [[None if v is None else str(v) for v in row] for row in units_of(KRIPPENDORFF_2011)]
    raters = [f"user:{i}" for i in range(4)]
    tally = total(
        unit_tally(1, "answer", {r: v for r, v in zip(raters, row, strict=True) if v})
        for row in rows
    )
    from_tally = {key[3]: {} for key, count in tally.items() if key[0] == "coincident" and count}
    for key, count in tally.items():
        if key[0] == "coincident":
            from_tally[key[3]][(key[4], key[5])] = count
    assert from_tally == LevelCounts.from_ratings(rows, raters).coincident


def test_labels_off_the_declared_scale_leave_alpha_undefined_and_bad_scales_are_refused():
    rows = [["1", "2"], ["2", "cannot_decide"], ["3", "3"]]
    counts = LevelCounts.from_ratings(rows, ["a", "b"])
    got = krippendorff_alpha_from_counts(counts, LabelScale("ordinal", ("1", "2", "3")))
    assert got.reason == "labels not on the ordinal scale: cannot_decide"
    got = krippendorff_alpha_from_counts(counts, LabelScale("interval"))
    assert got.reason == "labels not on the interval scale: cannot_decide"
    with pytest.raises(StatsError, match="in order"):
        LabelScale("ordinal")
    with pytest.raises(StatsError, match="one of"):
        LabelScale("cardinal")  # type: ignore[arg-type]
    with pytest.raises(StatsError, match="'-1' is not a valid ratio value"):
        LabelScale("ratio").value("-1")
