"""Inter-annotator agreement on nominal labels: Krippendorff's alpha, Cohen's and Fleiss' kappa.

Shapes. A *ratings* matrix is n_units × n_raters, ``Sequence[Sequence[Label | None]]``, with
``None`` for "this rater did not rate this unit" (missing). A label is any hashable value
(certlabel passes strings such as ``"supported"`` or ``"evidence_unavailable:not_found"``); labels
are nominal, so their order and spelling never matter, only equality. Raters are identified by
strings.

Undefined values. A statistic that is undefined on the data (no variation, too few units) is
reported as a :class:`Statistic` whose ``value`` is None and whose ``reason`` says why — never 0,
1 or NaN. Degeneracy is decided on integer counts, exactly (an expected
agreement of 1 is ``n**2 == sum(row_i * col_i)``), so no floating-point tolerance is needed.
Invalid *input* (a ragged matrix, a negative count) raises :class:`StatsError`.

What is computed:

- :func:`krippendorff_alpha_nominal`: Krippendorff's alpha, nominal metric, missing values
  allowed, via the ``krippendorff`` package. Units with fewer than two ratings drop out.
- :func:`cohen_kappa`: Cohen's (1960) kappa of a k × k contingency table of two raters, with the
  large-sample standard error of Fleiss, Cohen and Everitt (1969) and a Wald interval; the same
  numbers as ``statsmodels.stats.inter_rater.cohens_kappa`` (reimplemented here on numpy so that
  statsmodels stays a test-only dependency). :func:`cohen_kappa_labels` builds the table from two
  label sequences over the units both raters rated.
- :func:`fleiss_kappa`: Fleiss' (1971) kappa of a units × categories count table with the same
  number of ratings per unit (``statsmodels.stats.inter_rater.fleiss_kappa(method="fleiss")``).
- :func:`percent_agreement`: the proportion of agreeing rater pairs, see its docstring.
- :func:`pairwise_cohen_kappa` and :func:`agreement_summary`: everything above for one label level.

Sources: Krippendorff, K. (2011), "Computing Krippendorff's Alpha-Reliability", Annenberg School
for Communication, https://repository.upenn.edu/asc_papers/43 ; Cohen, J. (1960), "A coefficient
of agreement for nominal scales", Educational and Psychological Measurement 20(1), 37–46;
Fleiss, J. L., Cohen, J. and Everitt, B. S. (1969), "Large sample standard errors of kappa and
weighted kappa", Psychological Bulletin 72(5), 323–327; Fleiss, J. L. (1971), "Measuring nominal
scale agreement among many raters", Psychological Bulletin 76(5), 378–382.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import krippendorff
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit

__all__ = [
    "FEWER_THAN_TWO_SHARED_UNITS",
    "FEWER_THAN_TWO_RATINGS_PER_UNIT",
    "FEWER_THAN_TWO_UNITS",
    "NO_PAIRABLE_UNIT",
    "NO_VARIATION",
    "UNEQUAL_RATINGS_PER_UNIT",
    "AgreementSummary",
    "CohenKappa",
    "EncodedRatings",
    "PairKappa",
    "Statistic",
    "agreement_summary",
    "cohen_kappa",
    "cohen_kappa_labels",
    "contingency_table",
    "encode_ratings",
    "fleiss_kappa",
    "fleiss_kappa_ratings",
    "krippendorff_alpha_nominal",
    "pairwise_cohen_kappa",
    "percent_agreement",
]

Label = Hashable

# Reasons a statistic is undefined; stored in reports, so their wording is part of the contract.
NO_VARIATION = "no variation"
FEWER_THAN_TWO_UNITS = "fewer than 2 units with 2 or more ratings"
FEWER_THAN_TWO_SHARED_UNITS = "fewer than 2 units rated by both raters"
NO_PAIRABLE_UNIT = "no unit with 2 or more ratings"
UNEQUAL_RATINGS_PER_UNIT = "units have different numbers of ratings"
FEWER_THAN_TWO_RATINGS_PER_UNIT = "fewer than 2 ratings per unit"

_MISSING = -1


# -- results ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Statistic:
    """A value that may be undefined on the data.

    Attributes:
        value: the statistic, or None when it is undefined.
        reason: why it is undefined (one of the module's reason constants), or None when defined.
    """

    value: float | None
    reason: str | None = None

    def __post_init__(self) -> None:
        if (self.value is None) == (self.reason is None):
            raise StatsError("a Statistic has exactly one of value and reason")

    @property
    def defined(self) -> bool:
        """Whether the statistic has a value."""
        return self.value is not None

    @classmethod
    def undefined(cls, reason: str) -> Statistic:
        """Return an undefined statistic with ``reason``."""
        return cls(value=None, reason=reason)


@dataclass(frozen=True)
class CohenKappa:
    """Cohen's kappa of two raters, with its Fleiss–Cohen–Everitt standard error and interval.

    Attributes:
        n: number of units both raters rated (the table's total).
        observed_agreement: proportion of those units with equal labels, in [0, 1]; None when
            n = 0.
        expected_agreement: chance agreement sum_i p_i. p_.i from the two raters' marginals, in
            [0, 1]; None when n = 0.
        kappa: (p_o - p_e) / (1 - p_e), in [-1, 1]; None when undefined (see ``reason``).
        se: large-sample standard error of kappa (not under the null); None when kappa is.
        ci_low: lower limit of the Wald interval kappa - z * se, clipped at -1; None when kappa is.
        ci_high: upper limit kappa + z * se, clipped at 1; None when kappa is.
        confidence: two-sided level of the interval, in (0, 1).
        reason: why kappa is undefined, or None.
    """

    n: int
    observed_agreement: float | None
    expected_agreement: float | None
    kappa: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    reason: str | None

    @property
    def defined(self) -> bool:
        """Whether kappa has a value."""
        return self.kappa is not None


@dataclass(frozen=True)
class PairKappa:
    """Cohen's kappa of one pair of raters over the units both rated.

    Attributes:
        rater_a: the first rater (earlier in the input's rater order).
        rater_b: the second rater.
        result: the kappa, its standard error and interval; ``result.n`` units shared.
    """

    rater_a: str
    rater_b: str
    result: CohenKappa


@dataclass(frozen=True)
class EncodedRatings:
    """A ratings matrix with labels replaced by integer codes.

    Attributes:
        codes: n_units × n_raters ``int64``; -1 marks a missing rating, otherwise an index into
            ``categories``.
        categories: the distinct labels, sorted by ``repr`` (a deterministic order; nominal
            statistics do not depend on it).
    """

    codes: NDArray[np.int64]
    categories: tuple[Label, ...]


@dataclass(frozen=True)
class AgreementSummary:
    """Agreement statistics of one label level (e.g. answer labels, or claim labels).

    Attributes:
        n_units: units with at least one rating.
        n_pairable_units: units with at least two ratings (the units alpha and percent agreement
            use).
        n_ratings: ratings (votes) in the matrix.
        raters: raters with at least one rating, in input order.
        category_counts: (label, number of ratings) for every label used, in ``categories`` order.
        alpha: Krippendorff's alpha, nominal.
        fleiss_kappa: Fleiss' kappa over the pairable units; undefined unless every pairable
            unit has the same number of ratings.
        percent_agreement: mean over pairable units of the proportion of agreeing rater pairs.
        pairs: Cohen's kappa per pair of raters who share at least one unit, in input order.
        confidence: two-sided level of the pairwise intervals.
    """

    n_units: int
    n_pairable_units: int
    n_ratings: int
    raters: tuple[str, ...]
    category_counts: tuple[tuple[Label, int], ...]
    alpha: Statistic
    fleiss_kappa: Statistic
    percent_agreement: Statistic
    pairs: tuple[PairKappa, ...]
    confidence: float


# -- input ------------------------------------------------------------------------------------
def encode_ratings(
    ratings: Sequence[Sequence[Label | None]], *, n_raters: int | None = None
) -> EncodedRatings:
    """Replace labels by integer codes.

    Args:
        ratings: n_units × n_raters, ``None`` = missing. Every row has the same length.
        n_raters: the expected row length; needed to shape an empty matrix (0 × n_raters).

    Returns:
        The :class:`EncodedRatings`.

    Raises:
        StatsError: if the rows have different lengths (or not ``n_raters``) or a label is not
            hashable.
    """
    rows = [list(row) for row in ratings]
    width = n_raters if n_raters is not None else (len(rows[0]) if rows else 0)
    if any(len(row) != width for row in rows):
        raise StatsError(
            f"ratings must be rectangular with one entry per rater ({width}) in every unit"
        )
    try:
        labels = {value for row in rows for value in row if value is not None}
    except TypeError as exc:
        raise StatsError(f"labels must be hashable: {exc}") from None
    categories = tuple(sorted(labels, key=repr))
    index = {label: i for i, label in enumerate(categories)}
    codes = np.full((len(rows), width), _MISSING, dtype=np.int64)
    for u, row in enumerate(rows):
        for r, value in enumerate(row):
            if value is not None:
                codes[u, r] = index[value]
    return EncodedRatings(codes=codes, categories=categories)


def _check_table(table: ArrayLike) -> NDArray[np.int64]:
    array = np.asarray(table)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise StatsError(f"table must be a square k x k array, got shape {array.shape}")
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
        raise StatsError(f"table must hold integer counts, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.size and int(array.min()) < 0:
        raise StatsError("table counts must be >= 0")
    return array


def _z(confidence: float) -> float:
    return float(_st.norm.ppf(0.5 + confidence / 2.0))


# -- Cohen ------------------------------------------------------------------------------------
def cohen_kappa(table: ArrayLike, *, confidence: float = 0.95) -> CohenKappa:
    """Cohen's kappa of a two-rater contingency table, with standard error and Wald interval.

    Args:
        table: k × k integer counts; ``table[i, j]`` = units rater A labelled i and rater B
            labelled j (categories in the same order on both axes).
        confidence: two-sided level of the interval, in (0, 1); 0.95 gives z = 1.959964.

    Returns:
        A :class:`CohenKappa`. Kappa is undefined ("fewer than 2 units rated by both raters")
        when the table holds fewer than 2 units, and ("no variation") when the expected agreement
        is 1, i.e. both raters used one and the same label throughout; observed agreement is
        still reported then. Kappa itself is computed from integer counts, so perfect agreement
        gives exactly 1.0.

    Raises:
        StatsError: if the table is not square, not integer, or has a negative count, or
            ``confidence`` is outside (0, 1).

    The standard error is the large-sample (non-null) one of Fleiss, Cohen and Everitt (1969),
    eq. 13, exactly as ``statsmodels.stats.inter_rater.cohens_kappa(table).std_kappa``:
    var = [sum_i p_ii (1 - (p_i. + p_.i)(1 - k))^2 + (1 - k)^2 sum_{i != j} p_ij (p_.i + p_j.)^2
    - (k - p_e (1 - k))^2] / ((1 - p_e)^2 n). The interval is kappa ± z·se, clipped to [-1, 1]
    (the range of kappa); unclipped it equals statsmodels' ``kappa_low``/``kappa_upp``.
    Check: [[20, 5], [10, 15]] gives kappa 0.4, se 0.126996, 95% CI
    (0.151092, 0.648908).
    """
    counts = _check_table(table)
    level = check_open_unit(confidence, name="confidence")
    n = int(counts.sum())
    if n == 0:
        return CohenKappa(0, None, None, None, None, None, None, level, FEWER_THAN_TWO_SHARED_UNITS)
    rows = [int(v) for v in counts.sum(axis=1)]
    cols = [int(v) for v in counts.sum(axis=0)]
    agree = int(np.trace(counts))
    chance = sum(r * c for r, c in zip(rows, cols, strict=True))  # n**2 * p_e, exactly
    p_o = agree / n
    p_e = chance / (n * n)
    if n < 2:
        return CohenKappa(n, p_o, p_e, None, None, None, None, level, FEWER_THAN_TWO_SHARED_UNITS)
    if chance == n * n:
        return CohenKappa(n, p_o, p_e, None, None, None, None, level, NO_VARIATION)
    # kappa = (p_o - p_e) / (1 - p_e) with both multiplied by n**2: exact in integers.
    kappa = (n * agree - chance) / (n * n - chance)

    p = counts / n
    p_row = np.asarray(rows, dtype=float) / n
    p_col = np.asarray(cols, dtype=float) / n
    diag = np.diag(p)
    term_a = float((diag * (1.0 - (p_row + p_col) * (1.0 - kappa)) ** 2).sum())
    off = p * (p_col[:, None] + p_row[None, :]) ** 2
    np.fill_diagonal(off, 0.0)
    term_b = (1.0 - kappa) ** 2 * float(off.sum())
    term_c = (kappa - p_e * (1.0 - kappa)) ** 2
    variance = (term_a + term_b - term_c) / ((1.0 - p_e) ** 2 * n)
    # Algebraically >= 0 (0 at perfect agreement); rounding can leave a tiny negative.
    se = math.sqrt(max(variance, 0.0))
    half = _z(level) * se
    return CohenKappa(
        n=n,
        observed_agreement=p_o,
        expected_agreement=p_e,
        kappa=kappa,
        se=se,
        ci_low=max(-1.0, kappa - half),
        ci_high=min(1.0, kappa + half),
        confidence=level,
        reason=None,
    )


def contingency_table(
    labels_a: Sequence[Label | None], labels_b: Sequence[Label | None]
) -> tuple[NDArray[np.int64], tuple[Label, ...]]:
    """Cross-tabulate two raters' labels over the units both rated.

    Args:
        labels_a: shape (n_units,), rater A's labels, ``None`` = not rated.
        labels_b: shape (n_units,), rater B's labels for the same units.

    Returns:
        (table, categories): ``table`` is k × k ``int64`` with rater A on rows, over the k labels
        either rater used on a shared unit, in ``categories`` order (sorted by ``repr``).

    Raises:
        StatsError: if the sequences have different lengths.
    """
    if len(labels_a) != len(labels_b):
        raise StatsError(
            f"both raters need one entry per unit, got {len(labels_a)} and {len(labels_b)}"
        )
    encoded = encode_ratings(
        [
            (a, b)
            for a, b in zip(labels_a, labels_b, strict=True)
            if a is not None and b is not None
        ],
        n_raters=2,
    )
    table = _pair_table(encoded.codes[:, 0], encoded.codes[:, 1], len(encoded.categories))
    return table, encoded.categories


def _pair_table(a: NDArray[np.int64], b: NDArray[np.int64], k: int) -> NDArray[np.int64]:
    return np.bincount(a * k + b, minlength=k * k).astype(np.int64).reshape(k, k)


def cohen_kappa_labels(
    labels_a: Sequence[Label | None],
    labels_b: Sequence[Label | None],
    *,
    confidence: float = 0.95,
) -> CohenKappa:
    """Cohen's kappa of two raters from their labels, over the units both rated.

    Args:
        labels_a: shape (n_units,), rater A's labels, ``None`` = not rated.
        labels_b: shape (n_units,), rater B's labels for the same units.
        confidence: two-sided level of the interval, in (0, 1).

    Returns:
        :func:`cohen_kappa` of :func:`contingency_table`.

    Raises:
        StatsError: as :func:`contingency_table` and :func:`cohen_kappa`.

    Check: A ``S S S S S U U U N N``, B ``S S S S U U U N N N`` gives
    percent agreement 0.8 and kappa 9/13.
    """
    table, _ = contingency_table(labels_a, labels_b)
    return cohen_kappa(table, confidence=confidence)


# -- Krippendorff -----------------------------------------------------------------------------
def _pairable(codes: NDArray[np.int64]) -> NDArray[np.bool_]:
    return np.asarray((codes != _MISSING).sum(axis=1) >= 2, dtype=np.bool_)


def krippendorff_alpha_nominal(ratings: Sequence[Sequence[Label | None]]) -> Statistic:
    """Krippendorff's alpha for nominal labels, missing ratings allowed.

    Args:
        ratings: n_units × n_raters, ``None`` = missing.

    Returns:
        alpha = 1 - D_o / D_e, at most 1 (1 = perfect agreement, 0 = chance, negative =
        systematic disagreement). Units with fewer than two ratings carry no pairable values and
        drop out. Undefined when fewer than 2 units have 2 or more ratings
        (:data:`FEWER_THAN_TWO_UNITS`), or all pairable ratings carry one label, so that the
        expected disagreement D_e is 0 (:data:`NO_VARIATION`).

    Raises:
        StatsError: if the matrix is ragged.

    Source: Krippendorff (2011), §C (nominal data, missing values), computed by the
    ``krippendorff`` package (``krippendorff.alpha(reliability_data=raters × units, nan = missing,
    level_of_measurement="nominal")``). Check: Krippendorff's (2011) 4 observers × 12
    units give 0.7434210526; the 3 coders × 15 units example gives 0.6913580247.
    """
    return _alpha(encode_ratings(ratings).codes)


def _alpha(codes: NDArray[np.int64]) -> Statistic:
    pairable = codes[_pairable(codes)]
    if pairable.shape[0] < 2:
        return Statistic.undefined(FEWER_THAN_TWO_UNITS)
    present = np.unique(pairable[pairable != _MISSING])
    if present.size < 2:
        return Statistic.undefined(NO_VARIATION)
    # raters × units, missing as NaN: the package's reliability_data layout.
    data = np.where(pairable == _MISSING, np.nan, pairable.astype(float)).T
    value = krippendorff.alpha(
        reliability_data=data, value_domain=present.astype(float), level_of_measurement="nominal"
    )
    return Statistic(value=float(value))


# -- percent agreement ------------------------------------------------------------------------
def _unit_counts(codes: NDArray[np.int64], k: int) -> NDArray[np.int64]:
    """Count table of units × categories (missing ratings not counted)."""
    counts = np.zeros((codes.shape[0], k), dtype=np.int64)
    units, raters = np.nonzero(codes != _MISSING)
    np.add.at(counts, (units, codes[units, raters]), 1)
    return counts


def percent_agreement(ratings: Sequence[Sequence[Label | None]]) -> Statistic:
    """Pairwise percent agreement: the mean over units of the share of agreeing rater pairs.

    For a unit with m >= 2 ratings, n_c of them with label c, the share of agreeing (ordered)
    rater pairs is sum_c n_c (n_c - 1) / (m (m - 1)); the statistic is its mean over the units
    with at least two ratings, each unit weighted equally. With two raters it is the proportion
    of shared units on which they agree; with the same m on every unit it is Fleiss' P-bar.
    Weighting units equally (rather than pooling all pairs) keeps a unit seen by many raters from
    outweighing one seen by two.

    Args:
        ratings: n_units × n_raters, ``None`` = missing.

    Returns:
        A proportion in [0, 1] (never percent), or undefined (:data:`NO_PAIRABLE_UNIT`) when no
        unit has two ratings. Unlike kappa and alpha it is defined without variation: identical
        ratings everywhere give 1.0.

    Raises:
        StatsError: if the matrix is ragged.
    """
    encoded = encode_ratings(ratings)
    return _percent(encoded.codes, len(encoded.categories))


def _percent(codes: NDArray[np.int64], k: int) -> Statistic:
    counts = _unit_counts(codes[_pairable(codes)], k)
    if counts.shape[0] == 0:
        return Statistic.undefined(NO_PAIRABLE_UNIT)
    m = counts.sum(axis=1)
    shares = [
        Fraction(int(a), int(b))
        for a, b in zip((counts * (counts - 1)).sum(axis=1), m * (m - 1), strict=True)
    ]
    return Statistic(value=float(sum(shares, Fraction(0)) / len(shares)))


# -- Fleiss -----------------------------------------------------------------------------------
def fleiss_kappa(counts: ArrayLike) -> Statistic:
    """Fleiss' kappa of a units × categories table with the same number of ratings per unit.

    Args:
        counts: N × k integer counts; ``counts[i, j]`` = raters who put unit i in category j.
            Every row sums to the same n (the raters need not be the same people).

    Returns:
        kappa = (P-bar - P_e) / (1 - P_e) with P-bar = mean_i (sum_j n_ij^2 - n) / (n (n - 1))
        and P_e = sum_j p_j^2, computed in exact rational arithmetic. Undefined when N < 2
        (:data:`FEWER_THAN_TWO_UNITS`), n < 2 (:data:`FEWER_THAN_TWO_RATINGS_PER_UNIT`), or every
        rating falls in one category (:data:`NO_VARIATION`).

    Raises:
        StatsError: if ``counts`` is not a 2-D integer array of non-negative counts, or its rows
            have different sums.

    Source: Fleiss (1971), eqs. 2–9; ``statsmodels.stats.inter_rater.fleiss_kappa(method=
    "fleiss")``. Check: Fleiss's (1971) 10 subjects × 5 categories, 14 raters example gives
    0.2099307044.
    """
    array = np.asarray(counts)
    if array.ndim != 2:
        raise StatsError(f"counts must be a units x categories array, got shape {array.shape}")
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
        raise StatsError(f"counts must hold integer counts, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.size and int(array.min()) < 0:
        raise StatsError("counts must be >= 0")
    sums = {int(s) for s in array.sum(axis=1)}
    if len(sums) > 1:
        raise StatsError(
            f"every unit needs the same number of ratings, got row sums {sorted(sums)}"
        )
    n_units = array.shape[0]
    if n_units < 2:
        return Statistic.undefined(FEWER_THAN_TWO_UNITS)
    n = sums.pop()
    if n < 2:
        return Statistic.undefined(FEWER_THAN_TWO_RATINGS_PER_UNIT)
    totals = [int(t) for t in array.sum(axis=0)]
    grand = n_units * n
    squares = sum(t * t for t in totals)
    if squares == grand * grand:
        return Statistic.undefined(NO_VARIATION)
    p_bar = Fraction(int((array * array).sum()) - grand, grand * (n - 1))
    p_e = Fraction(squares, grand * grand)
    return Statistic(value=float((p_bar - p_e) / (1 - p_e)))


def fleiss_kappa_ratings(ratings: Sequence[Sequence[Label | None]]) -> Statistic:
    """Fleiss' kappa of a ratings matrix, over the units with at least two ratings.

    Args:
        ratings: n_units × n_raters, ``None`` = missing.

    Returns:
        :func:`fleiss_kappa` of the pairable units' count table, or undefined
        (:data:`UNEQUAL_RATINGS_PER_UNIT`) when those units have different numbers of ratings
        (Fleiss' kappa needs the same number per unit; use alpha then).

    Raises:
        StatsError: if the matrix is ragged.
    """
    encoded = encode_ratings(ratings)
    return _fleiss(encoded.codes, len(encoded.categories))


def _fleiss(codes: NDArray[np.int64], k: int) -> Statistic:
    counts = _unit_counts(codes[_pairable(codes)], k)
    if len({int(s) for s in counts.sum(axis=1)}) > 1:
        return Statistic.undefined(UNEQUAL_RATINGS_PER_UNIT)
    return fleiss_kappa(counts)


# -- per pair and per level -------------------------------------------------------------------
def _check_raters(raters: Sequence[str]) -> tuple[str, ...]:
    names = tuple(raters)
    if isinstance(raters, str) or not all(isinstance(name, str) for name in names):
        raise StatsError("raters must be a sequence of string ids")
    if len(set(names)) != len(names):
        raise StatsError("rater ids must be unique")
    return names


def _pairs(
    encoded: EncodedRatings, raters: tuple[str, ...], confidence: float
) -> tuple[PairKappa, ...]:
    codes, k = encoded.codes, len(encoded.categories)
    present = codes != _MISSING
    pairs = []
    for i in range(len(raters)):
        for j in range(i + 1, len(raters)):
            shared = present[:, i] & present[:, j]
            if not shared.any():
                continue
            table = _pair_table(codes[shared, i], codes[shared, j], k)
            pairs.append(PairKappa(raters[i], raters[j], cohen_kappa(table, confidence=confidence)))
    return tuple(pairs)


def pairwise_cohen_kappa(
    ratings: Sequence[Sequence[Label | None]],
    raters: Sequence[str],
    *,
    confidence: float = 0.95,
) -> tuple[PairKappa, ...]:
    """Cohen's kappa for every pair of raters, over the units both rated.

    Args:
        ratings: n_units × n_raters, ``None`` = missing.
        raters: shape (n_raters,), unique rater ids naming the columns.
        confidence: two-sided level of the intervals, in (0, 1).

    Returns:
        One :class:`PairKappa` per pair (i < j in ``raters`` order) sharing at least one unit;
        pairs that never rated a common unit are left out. Each pair's kappa may be undefined
        (fewer than 2 shared units, no variation).

    Raises:
        StatsError: if the matrix is ragged, the rater ids do not match its columns or repeat,
            or ``confidence`` is outside (0, 1).
    """
    names = _check_raters(raters)
    encoded = encode_ratings(ratings, n_raters=len(names))
    return _pairs(encoded, names, check_open_unit(confidence, name="confidence"))


def agreement_summary(
    ratings: Sequence[Sequence[Label | None]],
    raters: Sequence[str],
    *,
    confidence: float = 0.95,
) -> AgreementSummary:
    """All agreement statistics of one label level.

    Args:
        ratings: n_units × n_raters, ``None`` = missing. Units without any rating are ignored.
        raters: shape (n_raters,), unique rater ids naming the columns.
        confidence: two-sided level of the pairwise kappa intervals, in (0, 1).

    Returns:
        An :class:`AgreementSummary`: alpha, Fleiss' kappa, percent agreement, pairwise kappas
        and the counts they rest on. Undefined statistics carry a reason, never a number.

    Raises:
        StatsError: if the matrix is ragged, the rater ids do not match its columns or repeat,
            or ``confidence`` is outside (0, 1).
    """
    level = check_open_unit(confidence, name="confidence")
    names = _check_raters(raters)
    encoded = encode_ratings(ratings, n_raters=len(names))
    codes = encoded.codes
    k = len(encoded.categories)
    present = codes != _MISSING
    per_category = np.bincount(codes[present], minlength=k) if k else np.zeros(0, np.int64)
    return AgreementSummary(
        n_units=int(present.any(axis=1).sum()),
        n_pairable_units=int(_pairable(codes).sum()),
        n_ratings=int(present.sum()),
        raters=tuple(name for name, used in zip(names, present.any(axis=0), strict=True) if used),
        category_counts=tuple(
            (label, int(count))
            for label, count in zip(encoded.categories, per_category, strict=True)
        ),
        alpha=_alpha(codes),
        fleiss_kappa=_fleiss(codes, k),
        percent_agreement=_percent(codes, k),
        pairs=_pairs(encoded, names, level),
        confidence=level,
    )
