"""Agreement figures from additive counts equal those of the ratings matrix they were counted from.

The reference is :func:`agreement_summary` of the matrix (alpha by the ``krippendorff`` package,
kappa as statsmodels), and the published worked examples; the counts of two halves of a matrix
added together give the figures of the whole (the property the vote tally relies on).
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certification.stats.agreement import (
    LevelCounts,
    agreement_summary,
    agreement_summary_from_counts,
)
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
