"""Statistics over all raters: Krippendorff's alpha, percent agreement and Fleiss' kappa.

Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", Annenberg School for
Communication, https://repository.upenn.edu/asc_papers/43 (nominal metric, via the
``krippendorff`` package); Fleiss (1971), "Measuring nominal scale agreement among many raters",
Psychological Bulletin 76(5), 378–382 (the same numbers as
``statsmodels.stats.inter_rater.fleiss_kappa(method="fleiss")``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import krippendorff
import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.agreement.encoding import encode_ratings
from certification.stats.agreement.results import (
    FEWER_THAN_TWO_RATINGS_PER_UNIT,
    FEWER_THAN_TWO_UNITS,
    MISSING,
    NO_PAIRABLE_UNIT,
    NO_VARIATION,
    UNEQUAL_RATINGS_PER_UNIT,
    Label,
    Statistic,
)
from certification.stats.errors import StatsError


def pairable_units(codes: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which units (rows of ``codes``) carry at least two ratings."""
    return np.asarray((codes != MISSING).sum(axis=1) >= 2, dtype=np.bool_)


def krippendorff_alpha_nominal(ratings: Sequence[Sequence[Label | None]]) -> Statistic:
    """Krippendorff's alpha for nominal labels, missing ratings allowed.

    ``ratings`` is n_units × n_raters, ``None`` = missing. alpha = 1 - D_o / D_e, at most 1
    (1 = perfect agreement, 0 = chance, negative = systematic disagreement). Units with fewer
    than two ratings drop out. Undefined when fewer than 2 units have 2 or more ratings
    (:data:`FEWER_THAN_TWO_UNITS`), or all pairable ratings carry one label, so that D_e is 0
    (:data:`NO_VARIATION`).

    Raises:
        StatsError: if the matrix is ragged.

    Source: Krippendorff (2011), §C (nominal data, missing values), computed by the
    ``krippendorff`` package (``krippendorff.alpha(reliability_data=raters × units, nan = missing,
    level_of_measurement="nominal")``). Check: Krippendorff's (2011) 4 observers × 12
    units give 0.7434210526; the 3 coders × 15 units example gives 0.6913580247.
    """
    return alpha_statistic(encode_ratings(ratings).codes)


def alpha_statistic(codes: NDArray[np.int64]) -> Statistic:
    """Krippendorff's alpha (nominal) of encoded ratings, undefined with its reason."""
    pairable = codes[pairable_units(codes)]
    if pairable.shape[0] < 2:
        return Statistic.undefined(FEWER_THAN_TWO_UNITS)
    present = np.unique(pairable[pairable != MISSING])
    if present.size < 2:
        return Statistic.undefined(NO_VARIATION)
    # raters × units, missing as NaN: the package's reliability_data layout.
    data = np.where(pairable == MISSING, np.nan, pairable.astype(float)).T
    value = krippendorff.alpha(
        reliability_data=data, value_domain=present.astype(float), level_of_measurement="nominal"
    )
    return Statistic(value=float(value))


# -- percent agreement ------------------------------------------------------------------------
def _unit_counts(codes: NDArray[np.int64], k: int) -> NDArray[np.int64]:
    """Count table of units × categories (missing ratings not counted)."""
    counts = np.zeros((codes.shape[0], k), dtype=np.int64)
    units, raters = np.nonzero(codes != MISSING)
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

    ``ratings`` is n_units × n_raters, ``None`` = missing. A proportion in [0, 1] (never
    percent), undefined (:data:`NO_PAIRABLE_UNIT`) when no unit has two ratings; unlike kappa
    and alpha it is defined without variation (identical ratings everywhere give 1.0).

    Raises:
        StatsError: if the matrix is ragged.
    """
    encoded = encode_ratings(ratings)
    return percent_statistic(encoded.codes, len(encoded.categories))


def percent_statistic(codes: NDArray[np.int64], k: int) -> Statistic:
    """Mean pairwise percent agreement of the pairable units, undefined with its reason."""
    counts = _unit_counts(codes[pairable_units(codes)], k)
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

    ``counts`` is N × k integers, ``counts[i, j]`` = raters who put unit i in category j, every
    row summing to the same n (the raters need not be the same people). kappa = (P-bar - P_e) /
    (1 - P_e) with P-bar = mean_i (sum_j n_ij^2 - n) / (n (n - 1)) and P_e = sum_j p_j^2, in
    exact rational arithmetic. Undefined when N < 2 (:data:`FEWER_THAN_TWO_UNITS`), n < 2
    (:data:`FEWER_THAN_TWO_RATINGS_PER_UNIT`), or every rating falls in one category
    (:data:`NO_VARIATION`).

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

    ``ratings`` is n_units × n_raters, ``None`` = missing. Undefined
    (:data:`UNEQUAL_RATINGS_PER_UNIT`) when those units have different numbers of ratings
    (Fleiss' kappa needs the same number per unit; use alpha then).

    Raises:
        StatsError: if the matrix is ragged.
    """
    encoded = encode_ratings(ratings)
    return fleiss_statistic(encoded.codes, len(encoded.categories))


def fleiss_statistic(codes: NDArray[np.int64], k: int) -> Statistic:
    """Fleiss' kappa of the pairable units, undefined when their numbers of ratings differ."""
    counts = _unit_counts(codes[pairable_units(codes)], k)
    if len({int(s) for s in counts.sum(axis=1)}) > 1:
        return Statistic.undefined(UNEQUAL_RATINGS_PER_UNIT)
    return fleiss_kappa(counts)
