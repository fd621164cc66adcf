"""The coverage-spread calculator: Beta, Beta-Binomial and design effect for sizes a user enters.

Given n calibration points and a miscoverage level alpha, with l = floor((n+1) alpha) the
coverage a split conformal threshold delivers is Beta(n+1-l, l) (Vovk 2012, "Conditional validity
of inductive conformal predictors"; Angelopoulos and Bates 2021, arXiv:2107.07511, section 3.1),
which is Beta(k, n+1-k) with k = ceil((n+1)(1-alpha)) = n+1-l. The covered fraction of n_test test
points adds the test binomial term: Beta-Binomial(n_test, k, n+1-k) / n_test. Rows correlated
within groups of size m (intra-class correlation rho) inflate both variances by the design
effect 1 + (m-1) rho (Kish 1965), so the spread grows by sqrt(deff) and n rows are worth n / deff
independent ones. All of it assumes tie-free scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from certification.stats.conformal import AlphaLike
from certification.stats.coverage.beta import (
    CoverageSpread,
    RealisedCoverageSpread,
    beta_coverage,
    realised_coverage_spread,
)
from certification.stats.coverage.design_effect import (
    DesignEffect,
    design_effect,
    effective_sample_size,
)
from certification.stats.errors import StatsError
from certification.stats.intervals import check_count


@dataclass(frozen=True)
class CoverageCalculation:
    """The calculator's figures for one set of inputs.

    l = floor((n+1) alpha), so the Beta is Beta(n+1-l, l); l = 0 means the threshold is
    infinite. ``realised`` (both terms) needs ``n_test``. With grouping, ``design_effect`` is
    1 + (m-1) rho for ``group_size`` m and ``icc`` rho, the grouped SDs multiply by sqrt(deff)
    and the effective sizes divide by deff; all None without grouping.
    """

    n_calibration: int
    alpha: Fraction
    l: int  # noqa: E741 - the symbol of Vovk (2012)
    beta: CoverageSpread
    n_test: int | None
    realised: RealisedCoverageSpread | None
    group_size: int | None
    icc: float | None
    design_effect: DesignEffect | None
    grouped_beta_sd: float | None
    grouped_realised_sd: float | None
    effective_n_calibration: float | None
    effective_n_test: float | None


def coverage_calculator(
    n_calibration: int,
    alpha: AlphaLike,
    *,
    n_test: int | None = None,
    group_size: int | None = None,
    icc: float | None = None,
) -> CoverageCalculation:
    """Evaluate the spread of conformal coverage for the sizes and correlation given.

    ``alpha`` is read exactly (a decimal string or Decimal keeps the value the user typed);
    ``n_test`` None means the calibration term alone; ``group_size`` m and ``icc`` rho (the
    within-group correlation of the coverage indicator, in [-1, 1], with 1 + (m-1) rho > 0) are
    given together or not at all. With l = 0 (n too small for alpha: coverage is 1) the spreads
    are None with the reason in ``beta.reason``.

    Raises:
        StatsError: on a bad argument (each message names it), including only one of
            ``group_size`` and ``icc``.
        InsufficientDataError: if n or n_test is 0.

    Source: Vovk (2012); Angelopoulos and Bates (2021) section 3.1; Kish (1965).
    Check: n = 12,288, alpha 0.1 gives a Beta sd of 0.0027, and 0.0038 with n_test = 12,288.
    """
    beta = beta_coverage(n_calibration, alpha)
    n = beta.n_calibration
    realised = None
    if n_test is not None:
        realised = realised_coverage_spread(n, n_test, beta.alpha)
    if (group_size is None) != (icc is None):
        raise StatsError("group_size and icc go together: give both or neither")
    deff = None
    if group_size is not None and icc is not None:
        if isinstance(icc, float) and not math.isfinite(icc):
            raise StatsError(f"icc must be a finite correlation in [-1, 1], got {icc!r}")
        deff = design_effect(group_size, icc)
    inflate = math.sqrt(deff.value) if deff else None
    return CoverageCalculation(
        n_calibration=n,
        alpha=beta.alpha,
        l=n + 1 - beta.k,
        beta=beta,
        n_test=None if n_test is None else check_count(n_test, name="n_test"),
        realised=realised,
        group_size=group_size,
        icc=None if icc is None else float(icc),
        design_effect=deff,
        grouped_beta_sd=beta.sd * inflate if inflate and beta.sd is not None else None,
        grouped_realised_sd=(
            realised.sd * inflate if inflate and realised and realised.sd is not None else None
        ),
        effective_n_calibration=effective_sample_size(n, deff) if deff else None,
        effective_n_test=(
            effective_sample_size(n_test, deff) if deff and n_test is not None else None
        ),
    )
