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
- Krippendorff's (2011, §A–C) alpha for any metric: alpha = 1 - (n - 1) sum_ck o_ck δ²_ck /
  sum_ck n_c n_k δ²_ck, from the coincidence matrix o_ck = sum_u C_uck / (m_u - 1), where
  C_uck = n_uc (n_uk - [c = k]) counts the unit's ordered pairs of values (c, k) from
  different ratings. C is an integer per unit, so its sum over units of m ratings is additive
  (``coincident``) and o_ck = sum_m coincident[m][c, k] / (m - 1). The difference functions
  δ²_ck (2011, §E "metric differences"): nominal 0 if c = k else 1; ordinal (sum_{g from c to
  k} n_g - (n_c + n_k) / 2)², the ranks in the declared order; interval (c - k)²; ratio
  ((c - k) / (c + k))², the labels read as numbers.

Alpha, Fleiss' kappa and percent agreement are computed in exact rational arithmetic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

import numpy as np

from certification.stats.agreement.cohen import cohen_kappa
from certification.stats.agreement.encoding import is_missing
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
        raters: unique, in the order pairs are formed (rater_a before rater_b).
        votes: label → ratings with that label (every unit).
        units: m → units with exactly m ratings (m >= 1).
        pairable: m → label → ratings with that label in units of m >= 2 ratings.
        agreeing: m → over units of m >= 2 ratings, the sum of n_c (n_c - 1) over labels c.
        pairs: (rater_a, rater_b) → (label_a, label_b) → units both rated with those labels;
            rater_a comes before rater_b in ``raters``.
        coincident: m → (label_c, label_k) → over units of m >= 2 ratings, the ordered pairs
            of ratings from different raters with values (c, k): sum of n_uc (n_uk - [c = k]).
    """

    raters: tuple[str, ...]
    votes: Mapping[Label, int]
    units: Mapping[int, int]
    pairable: Mapping[int, Mapping[Label, int]] = field(default_factory=dict)
    agreeing: Mapping[int, int] = field(default_factory=dict)
    pairs: Mapping[tuple[str, str], Mapping[tuple[Label, Label], int]] = field(default_factory=dict)
    coincident: Mapping[int, Mapping[tuple[Label, Label], int]] = field(default_factory=dict)

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
        coincident: dict[int, Counter[tuple[Label, Label]]] = {}
        used: set[str] = set()
        for row in ratings:
            if len(row) != len(names):
                raise StatsError(f"ratings must have one entry per rater ({len(names)})")
            present = [(r, v) for r, v in zip(names, row, strict=True) if not is_missing(v)]
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
            cells = coincident.setdefault(m, Counter())
            for c, n_c in per_label.items():
                for k, n_k in per_label.items():
                    if c != k or n_c > 1:
                        cells[(c, k)] += n_c * (n_k - (c == k))
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
            coincident={m: dict(c) for m, c in coincident.items()},
        )


ScaleKind = Literal["nominal", "ordinal", "interval", "ratio"]
SCALE_KINDS: tuple[ScaleKind, ...] = ("nominal", "ordinal", "interval", "ratio")


@dataclass(frozen=True)
class LabelScale:
    """The declared level of measurement of a label set, and the alpha metric it implies.

    ``kind`` is ``nominal`` (labels are names), ``ordinal`` (ranked in ``order``, lowest first,
    every label of the set), ``interval`` or ``ratio`` (labels are decimal numbers, read exactly).

    Raises:
        StatsError: an unknown kind; an ordinal scale without an order or with a repeated
            label.
    """

    kind: ScaleKind = "nominal"
    order: tuple[Label, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in SCALE_KINDS:
            raise StatsError(f"scale must be one of {', '.join(SCALE_KINDS)}, got {self.kind!r}")
        if self.kind == "ordinal" and (not self.order or len(set(self.order)) != len(self.order)):
            raise StatsError("an ordinal scale needs its labels in order, each once")
        if self.kind != "ordinal" and self.order:
            raise StatsError(f"a {self.kind} scale takes no order")

    def value(self, label: Label) -> Fraction:
        """The number an interval or ratio label stands for, exactly (``"2.5"`` is 5/2).

        Raises:
            StatsError: the label does not parse as a finite decimal number (ratio: one >= 0).
        """
        try:
            number = Fraction(str(label).strip())
        except (ValueError, ZeroDivisionError):
            raise StatsError(f"label {label!r} is not a number ({self.kind} scale)") from None
        if self.kind == "ratio" and number < 0:
            raise StatsError(f"label {label!r} is not a valid ratio value (negative)")
        return number


def off_scale(scale: LabelScale, labels: Sequence[Label]) -> tuple[Label, ...]:
    """The labels a non-nominal ``scale`` cannot place (not in the order, not a number)."""
    if scale.kind == "nominal":
        return ()
    if scale.kind == "ordinal":
        return tuple(label for label in labels if label not in scale.order)
    out = []
    for label in labels:
        try:
            scale.value(label)
        except StatsError:
            out.append(label)
    return tuple(out)


def _coincidences(counts: LevelCounts) -> dict[tuple[Label, Label], Fraction]:
    out: dict[tuple[Label, Label], Fraction] = {}
    for m, cells in counts.coincident.items():
        for pair, c in cells.items():
            if c:
                out[pair] = out.get(pair, Fraction(0)) + Fraction(c, m - 1)
    return out


def _delta2(
    scale: LabelScale, marginals: Mapping[Label, Fraction]
) -> dict[tuple[Label, Label], Fraction]:
    """δ²_ck for every pair of labels with a marginal (Krippendorff 2011, §E)."""
    labels = list(marginals)
    if scale.kind == "nominal":
        return {(c, k): Fraction(c != k) for c in labels for k in labels}
    if scale.kind == "ordinal":
        ranked = [label for label in scale.order if label in marginals]
        rank = {label: i for i, label in enumerate(ranked)}
        # cumulative[i] = sum of the marginals of ranks below i
        cumulative = [Fraction(0)]
        for label in ranked:
            cumulative.append(cumulative[-1] + marginals[label])
        out: dict[tuple[Label, Label], Fraction] = {}
        for c in ranked:
            for k in ranked:
                lo, hi = sorted((rank[c], rank[k]))
                between = cumulative[hi + 1] - cumulative[lo]
                out[(c, k)] = (between - (marginals[c] + marginals[k]) / 2) ** 2
        return out
    values = {label: scale.value(label) for label in labels}
    if scale.kind == "interval":
        return {(c, k): (values[c] - values[k]) ** 2 for c in labels for k in labels}
    return {
        (c, k): Fraction(0)
        if values[c] == values[k]
        else ((values[c] - values[k]) / (values[c] + values[k])) ** 2
        for c in labels
        for k in labels
    }


def krippendorff_alpha_from_counts(counts: LevelCounts, scale: LabelScale) -> Statistic:
    """Krippendorff's alpha of the counted ratings with the metric of ``scale``.

    Units with fewer than 2 ratings drop out. Computed in exact rational arithmetic (numeric
    labels are read as exact decimals), so counts added in any order give the same value.

    Undefined with ``FEWER_THAN_TWO_UNITS`` (fewer than 2 units of 2 or more ratings),
    ``NO_VARIATION`` (one value, or an expected disagreement of 0), or a reason naming the
    labels the scale cannot place (e.g. a "cannot decide" vote on an ordinal scale): such votes
    are part of their units' counts and cannot be dropped after the fact.
    Source: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", §A–C (the
    coincidence matrix and alpha) and §E (the difference functions); the same values as the
    ``krippendorff`` package with ``level_of_measurement`` nominal, ordinal, interval, ratio.
    """
    n_pairable_units = sum(units for m, units in counts.units.items() if m >= 2)
    if n_pairable_units < 2:
        return Statistic.undefined(FEWER_THAN_TWO_UNITS)
    coincidences = _coincidences(counts)
    marginals: dict[Label, Fraction] = {}
    for (c, _), o in coincidences.items():
        marginals[c] = marginals.get(c, Fraction(0)) + o
    marginals = {c: n for c, n in marginals.items() if n}
    if len(marginals) < 2:
        return Statistic.undefined(NO_VARIATION)
    outside = off_scale(scale, sorted(marginals, key=repr))
    if outside:
        named = ", ".join(str(label) for label in outside)
        return Statistic.undefined(f"labels not on the {scale.kind} scale: {named}")
    delta2 = _delta2(scale, marginals)
    n = sum(marginals.values())
    observed = sum(o * delta2[pair] for pair, o in coincidences.items())
    expected = sum(
        marginals[c] * marginals[k] * delta2[(c, k)] for c in marginals for k in marginals
    )
    if expected == 0:
        return Statistic.undefined(NO_VARIATION)
    return Statistic(value=float(1 - (n - 1) * observed / expected))


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
    counts: LevelCounts, *, confidence: float = 0.95, scale: LabelScale | None = None
) -> AgreementSummary:
    """All agreement statistics of one label level, from its counts.

    The same figures as :func:`~certification.stats.agreement.agreement_summary` of the
    ratings the counts were taken from: Cohen's kappa per pair bit for bit (the same
    contingency tables, labels in the same order), alpha up to floating-point rounding (it is
    computed exactly here, by the ``krippendorff`` package there), Fleiss' kappa and percent
    agreement exactly.

    ``confidence`` is the two-sided level of the pairwise kappa intervals; ``alpha`` uses the
    metric of ``scale`` (None: nominal; :func:`krippendorff_alpha_from_counts`).

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
        alpha=_alpha(counts, n_pairable)
        if scale is None or scale.kind == "nominal"
        else krippendorff_alpha_from_counts(counts, scale),
        fleiss_kappa=_fleiss(counts),
        percent_agreement=_percent(counts, n_pairable),
        pairs=tuple(pairs),
        confidence=level,
        pairs_reason=pairs_reason(len(counts.raters), len(pairs)),
        scale="nominal" if scale is None else scale.kind,
    )
