"""Result types of the agreement statistics and the reasons a statistic is undefined.

A statistic undefined on the data is a :class:`Statistic` whose ``value`` is None and whose
``reason`` is one of the constants here; they are stored in reports, so their wording is part of
the contract.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from certification.stats.errors import StatsError

Label = Hashable

# Reasons a statistic is undefined; stored in reports, so their wording is part of the contract.
NO_VARIATION = "no variation"
FEWER_THAN_TWO_UNITS = "fewer than 2 units with 2 or more ratings"
FEWER_THAN_TWO_SHARED_UNITS = "fewer than 2 units rated by both raters"
NO_PAIRABLE_UNIT = "no unit with 2 or more ratings"
UNEQUAL_RATINGS_PER_UNIT = "units have different numbers of ratings"
FEWER_THAN_TWO_RATINGS_PER_UNIT = "fewer than 2 ratings per unit"
# Why a level has no pairwise kappa at all.
FEWER_THAN_TWO_RATERS = "fewer than 2 raters: no pair to compare"
NO_SHARED_UNIT = "no two raters rated a common unit"

MISSING = -1


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
        interval_reason: why the standard errors, interval and z test, though computed, say
            nothing useful (one rater used a single label; no label in common; too few
            shared units for the
            large-sample formulas; a standard error of 0 because every shared unit agrees), or
            None when they can be read. Shown in place of the interval.
        se0: standard error of kappa under the null hypothesis kappa = 0 (independent
            raters with the observed marginals); None when kappa is.
        z: kappa / se0, the large-sample test of kappa = 0; None when kappa is, or se0 is 0
            (one rater used a single label, or the raters no label in common).
        p_value: two-sided p-value of ``z`` under the standard normal, 2 P(Z >= |z|), in
            [0, 1]; None when ``z`` is.
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
    interval_reason: str | None = None
    se0: float | None = None
    z: float | None = None
    p_value: float | None = None

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
class PairwiseKappa:
    """Cohen's kappa of every pair of raters who share a unit, or why there is none.

    Attributes:
        pairs: one :class:`PairKappa` per pair sharing at least one unit, in input order.
        reason: why ``pairs`` is empty (``FEWER_THAN_TWO_RATERS``, ``NO_SHARED_UNIT``), or None.
    """

    pairs: tuple[PairKappa, ...]
    reason: str | None


def pairs_reason(n_raters: int, n_pairs: int) -> str | None:
    """Why a level with ``n_raters`` raters (with a rating) has ``n_pairs`` kappas, or None."""
    if n_raters < 2:
        return FEWER_THAN_TWO_RATERS
    return NO_SHARED_UNIT if n_pairs == 0 else None


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
        pairs_reason: why ``pairs`` is empty (``FEWER_THAN_TWO_RATERS``,
            ``NO_SHARED_UNIT``), or None when it is not.
        scale: the labels' level of measurement, whose metric ``alpha`` uses (nominal,
            ordinal, interval or ratio).
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
    pairs_reason: str | None = None
    scale: str = "nominal"
