"""Agreement statistics from additive counts, so they can be kept current vote by vote.

Every statistic of :func:`~certification.stats.agreement.agreement_summary` is a function of
sums over units of counts that depend on one unit's ratings only (:class:`LevelCounts`). A
caller that keeps those sums up to date as ratings change gets the statistics at a cost that
does not depend on the number of units: :func:`agreement_summary_from_counts` reads only the
counts (labels², rater pairs and distinct numbers of ratings per unit).

With m_u ratings in unit u, n_uc of them with label c, and n_c = sum over units with
m_u >= 2 of n_uc (n = sum_c n_c):

- Krippendorff's (2011, §C) nominal alpha = 1 - (n - 1) D / (n² - sum_c n_c²), where
  D = sum_u (m_u (m_u - 1) - A_u) / (m_u - 1) is the sum of the off-diagonal coincidences and
  A_u = sum_c n_uc (n_uc - 1) the unit's ordered agreeing pairs;
- percent agreement = mean over units with m_u >= 2 of A_u / (m_u (m_u - 1));
- Fleiss' (1971) kappa, when every unit with m_u >= 2 has the same m: P-bar = sum_u A_u /
  (N m (m - 1)), P_e = sum_c n_c² / (N m)²;
- Cohen's kappa of a rater pair: their contingency table, a sum over the units both rated.

Alpha, Fleiss' kappa and percent agreement are computed in exact rational arithmetic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from certification.stats.agreement.cohen import cohen_kappa
from certification.stats.agreement.encoding import _missing
from certification.stats.agreement.results import (
    FEWER_THAN_TWO_UNITS,
    NO_PAIRABLE_UNIT,
    NO_VARIATION,
    UNEQUAL_RATINGS_PER_UNIT,
    AgreementSummary,
    Label,
    PairKappa,
    Statistic,
    pairs_reason,
)
from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit


@dataclass(frozen=True)
class LevelCounts:
    """The additive counts of one label level that its agreement statistics are functions of.

    Attributes:
        raters: the raters with at least one rating, in the order pairs are formed (rater_a
            before rater_b); unique.
        votes: label → ratings with that label (every unit).
        units: m → units with exactly m ratings (m >= 1).
        pairable: m → label → ratings with that label in units of m >= 2 ratings.
        agreeing: m → over units of m >= 2 ratings, the sum of n_c (n_c - 1) over labels c.
        pairs: (rater_a, rater_b) → (label_a, label_b) → units both rated with those labels;
            rater_a comes before rater_b in ``raters``.
    """

    raters: tuple[str, ...]
    votes: Mapping[Label, int]
    units: Mapping[int, int]
    pairable: Mapping[int, Mapping[Label, int]] = field(default_factory=dict)
    agreeing: Mapping[int, int] = field(default_factory=dict)
    pairs: Mapping[tuple[str, str], Mapping[tuple[Label, Label], int]] = field(default_factory=dict)

    @classmethod
    def from_ratings(
        cls, ratings: Sequence[Sequence[Label | None]], raters: Sequence[str]
    ) -> LevelCounts:
        """Count a ratings matrix (n_units × n_raters, ``None`` = missing).

        Raises:
            StatsError: if a row's length is not ``len(raters)``.
        """
        names = tuple(raters)
        votes: Counter[Label] = Counter()
        units: Counter[int] = Counter()
        pairable: dict[int, Counter[Label]] = {}
        agreeing: Counter[int] = Counter()
        pairs: dict[tuple[str, str], Counter[tuple[Label, Label]]] = {}
        used: set[str] = set()
        for row in ratings:
            if len(row) != len(names):
                raise StatsError(f"ratings must have one entry per rater ({len(names)})")
            present = [(r, v) for r, v in zip(names, row, strict=True) if not _missing(v)]
            if not present:
                continue
            m = len(present)
            units[m] += 1
            per_label = Counter(v for _, v in present)
            votes.update(per_label)
            used.update(r for r, _ in present)
            if m < 2:
                continue
            pairable.setdefault(m, Counter()).update(per_label)
            agreeing[m] += sum(n * (n - 1) for n in per_label.values())
            for i, (rater_a, label_a) in enumerate(present):
                for rater_b, label_b in present[i + 1 :]:
                    pairs.setdefault((rater_a, rater_b), Counter())[(label_a, label_b)] += 1
        return cls(
            raters=tuple(r for r in names if r in used),
            votes=dict(votes),
            units=dict(units),
            pairable={m: dict(c) for m, c in pairable.items()},
            agreeing=dict(agreeing),
            pairs={pair: dict(c) for pair, c in pairs.items()},
        )


def _alpha(counts: LevelCounts, n_pairable_units: int) -> Statistic:
    if n_pairable_units < 2:
        return Statistic.undefined(FEWER_THAN_TWO_UNITS)
    per_label: Counter[Label] = Counter()
    for labels in counts.pairable.values():
        per_label.update(labels)
    if sum(1 for n in per_label.values() if n) < 2:
        return Statistic.undefined(NO_VARIATION)
    n = sum(per_label.values())
    disagreeing = sum(
        (
            Fraction(units * m * (m - 1) - counts.agreeing.get(m, 0), m - 1)
            for m, units in counts.units.items()
            if m >= 2
        ),
        Fraction(0),
    )
    expected = n * n - sum(c * c for c in per_label.values())
    return Statistic(value=float(1 - (n - 1) * disagreeing / expected))


def _percent(counts: LevelCounts, n_pairable_units: int) -> Statistic:
    if n_pairable_units == 0:
        return Statistic.undefined(NO_PAIRABLE_UNIT)
    shares = sum(
        (Fraction(counts.agreeing.get(m, 0), m * (m - 1)) for m in counts.units if m >= 2),
        Fraction(0),
    )
    return Statistic(value=float(shares / n_pairable_units))


def _fleiss(counts: LevelCounts) -> Statistic:
    sizes = [m for m, units in counts.units.items() if m >= 2 and units]
    if len(sizes) > 1:
        return Statistic.undefined(UNEQUAL_RATINGS_PER_UNIT)
    if not sizes or counts.units[sizes[0]] < 2:
        return Statistic.undefined(FEWER_THAN_TWO_UNITS)
    m = sizes[0]
    n_units = counts.units[m]
    grand = n_units * m
    squares = sum(t * t for t in counts.pairable.get(m, {}).values())
    if squares == grand * grand:
        return Statistic.undefined(NO_VARIATION)
    p_bar = Fraction(counts.agreeing.get(m, 0), grand * (m - 1))
    p_e = Fraction(squares, grand * grand)
    return Statistic(value=float((p_bar - p_e) / (1 - p_e)))


def agreement_summary_from_counts(
    counts: LevelCounts, *, confidence: float = 0.95
) -> AgreementSummary:
    """All agreement statistics of one label level, from its counts.

    The same figures as :func:`~certification.stats.agreement.agreement_summary` of the
    ratings the counts were taken from: Cohen's kappa per pair bit for bit (the same
    contingency tables, labels in the same order), alpha up to floating-point rounding (it is
    computed exactly here, by the ``krippendorff`` package there), Fleiss' kappa and percent
    agreement exactly.

    Args:
        counts: the level's :class:`LevelCounts`.
        confidence: two-sided level of the pairwise kappa intervals, in (0, 1).

    Returns:
        An :class:`AgreementSummary`.

    Raises:
        StatsError: ``confidence`` outside (0, 1), or a pair names a rater not in
            ``counts.raters``.

    Sources: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", §C; Fleiss
    (1971), eqs. 2–9; Cohen (1960) with the standard error of Fleiss, Cohen and Everitt (1969).
    """
    level = check_open_unit(confidence, name="confidence")
    labels = tuple(sorted((label for label, n in counts.votes.items() if n), key=repr))
    index = {label: i for i, label in enumerate(labels)}
    order = {rater: i for i, rater in enumerate(counts.raters)}
    if any(a not in order or b not in order for a, b in counts.pairs):
        raise StatsError("every rater of a pair must be one of counts.raters")
    pairs = []
    for (rater_a, rater_b), cells in sorted(
        counts.pairs.items(), key=lambda item: (order[item[0][0]], order[item[0][1]])
    ):
        table = np.zeros((len(labels), len(labels)), dtype=np.int64)
        for (label_a, label_b), n in cells.items():
            table[index[label_a], index[label_b]] += n
        if table.sum():
            pairs.append(PairKappa(rater_a, rater_b, cohen_kappa(table, confidence=level)))
    n_pairable = sum(units for m, units in counts.units.items() if m >= 2)
    return AgreementSummary(
        n_units=sum(counts.units.values()),
        n_pairable_units=n_pairable,
        n_ratings=sum(counts.votes.values()),
        raters=counts.raters,
        category_counts=tuple((label, int(counts.votes[label])) for label in labels),
        alpha=_alpha(counts, n_pairable),
        fleiss_kappa=_fleiss(counts),
        percent_agreement=_percent(counts, n_pairable),
        pairs=tuple(pairs),
        confidence=level,
        pairs_reason=pairs_reason(len(counts.raters), len(pairs)),
    )
