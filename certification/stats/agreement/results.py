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
    """A value, or None with one of the module's reason constants in ``reason``."""

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

    On the n units both rated: ``observed_agreement`` p_o and ``expected_agreement`` p_e = sum_i
    p_i. p_.i from the marginals (None when n = 0); ``kappa`` = (p_o - p_e) / (1 - p_e) in
    [-1, 1]; ``se`` its large-sample standard error (not under the null) and ``ci_low``/``ci_high``
    the Wald interval kappa -/+ z se clipped to [-1, 1] at ``confidence``. ``se0`` is the standard
    error under kappa = 0 (independent raters with the observed marginals), ``z`` = kappa / se0
    (None when se0 is 0) and ``p_value`` = 2 P(Z >= |z|). Figures are None when kappa is.
    ``interval_reason`` says why the computed standard errors, interval and test say nothing
    useful (one rater used a single label; no label in common; too few shared units; a standard
    error of 0 because every unit agrees); it is shown in place of the interval.
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
    """Cohen's kappa of one pair of raters (``rater_a`` first in input order)."""

    rater_a: str
    rater_b: str
    result: CohenKappa


@dataclass(frozen=True)
class PairwiseKappa:
    """Cohen's kappa of every rater pair sharing a unit; ``reason`` says why there is none."""

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

    ``codes`` is n_units × n_raters, -1 for a missing rating, else an index into ``categories``
    (sorted by ``repr``: deterministic; nominal statistics do not depend on it).
    """

    codes: NDArray[np.int64]
    categories: tuple[Label, ...]


@dataclass(frozen=True)
class AgreementSummary:
    """Agreement statistics of one label level (e.g. answer labels, or claim labels).

    ``n_pairable_units`` counts units with at least two ratings (used by alpha and percent
    agreement); ``category_counts`` gives (label, ratings) in ``categories`` order. ``alpha`` is
    Krippendorff's under the metric of ``scale`` (nominal, ordinal, interval or ratio);
    ``fleiss_kappa`` is undefined unless every pairable unit has the same number of ratings;
    ``percent_agreement`` is the mean over pairable units of the share of agreeing rater pairs.
    ``pairs`` (input order) have intervals at ``confidence``; ``pairs_reason`` as
    :class:`PairwiseKappa`.
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
