"""The Beta and Beta-Binomial spread of one calibration's realised conformal coverage.

Given n calibration points and k = ceil((n+1)(1-alpha)), the coverage the threshold delivers on
fresh data is Beta(k, n+1-k) for tie-free scores; the fraction covered on n_test test points is
Beta-Binomial(n_test, k, n+1-k), variance about alpha(1-alpha)/(n+2) + alpha(1-alpha)/n_test
(Angelopoulos and Bates 2021, arXiv:2107.07511, section 3.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from certification.stats.conformal import AlphaLike, conformal_index, exact_alpha
from certification.stats.errors import InsufficientDataError
from certification.stats.intervals import check_count


@dataclass(frozen=True)
class CoverageSpread:
    """Distribution of the coverage a conformal threshold delivers: Beta(k, n+1-k).

    ``k`` = ceil((n+1)(1-alpha)); ``a`` = k and ``b`` = n+1-k; ``mean`` = k/(n+1);
    ``variance`` = k(n+1-k) / ((n+1)^2 (n+2)). All but ``k`` are None when k > n (the threshold
    is infinite and covers everything; ``reason`` says so).
    """

    n_calibration: int
    alpha: Fraction
    k: int
    a: int | None
    b: int | None
    mean: float | None
    variance: float | None
    sd: float | None
    reason: str | None


def beta_coverage(n_calibration: int, alpha: AlphaLike) -> CoverageSpread:
    """The Beta(k, n+1-k) law of the coverage delivered by a threshold from n tie-free points.

    ``alpha`` is read exactly, as in conformal calibration.

    Raises:
        StatsError: on a non-integer n or alpha outside (0, 1).
        InsufficientDataError: if n = 0.

    Source: Vovk et al. (2005); Angelopoulos and Bates (2021) section 3.1. Check: n = 100,
    alpha 0.10 gives Beta(91, 10), mean 0.9009901, variance 8.745778e-4.
    """
    n = check_count(n_calibration, name="n_calibration")
    if n == 0:
        raise InsufficientDataError("n_calibration must be >= 1")
    exact = exact_alpha(alpha)
    k = conformal_index(n, exact)
    if k > n:
        return CoverageSpread(
            n_calibration=n,
            alpha=exact,
            k=k,
            a=None,
            b=None,
            mean=None,
            variance=None,
            sd=None,
            reason=f"k = {k} > n = {n}: the threshold is infinite and coverage is 1",
        )
    a, b = k, n + 1 - k
    variance = a * b / ((n + 1) ** 2 * (n + 2))
    return CoverageSpread(
        n_calibration=n,
        alpha=exact,
        k=k,
        a=a,
        b=b,
        mean=a / (n + 1),
        variance=variance,
        sd=math.sqrt(variance),
        reason=None,
    )


@dataclass(frozen=True)
class RealisedCoverageSpread:
    """Spread of realised coverage, the covered fraction: Beta-Binomial(n_test, k, n+1-k) / n_test.

    ``k`` = ceil((n+1)(1-alpha)), ``mean`` = k/(n+1); ``variance`` is the covered fraction's
    exact variance and ``beta_variance`` the calibration (Beta) term alone; these are None when
    k > n (``reason``). ``approximate_variance`` = alpha(1-alpha)/(n+2) + alpha(1-alpha)/n_test
    is always defined.
    """

    n_calibration: int
    n_test: int
    alpha: Fraction
    k: int
    mean: float | None
    variance: float | None
    sd: float | None
    beta_variance: float | None
    approximate_variance: float
    reason: str | None


def realised_coverage_spread(
    n_calibration: int, n_test: int, alpha: AlphaLike
) -> RealisedCoverageSpread:
    """Both terms of the spread of realised coverage: Beta (calibration) and binomial (test).

    The covered count X is Beta-Binomial(n_test, a, b) with a = k, b = n+1-k (exchangeable
    calibration and test points, no ties), so Var(X / n_test) = a b (a + b + n_test) /
    (n_test (a+b)^2 (a+b+1)), equal to ``scipy.stats.betabinom(n_test, a, b).var() / n_test**2``.

    Raises:
        StatsError: on non-integer sizes or alpha outside (0, 1).
        InsufficientDataError: if a size is 0.

    Source: Angelopoulos and Bates (2021) section 3.1; episode 5 ("The formula was short a term").
    """
    n = check_count(n_calibration, name="n_calibration")
    t = check_count(n_test, name="n_test")
    if n == 0 or t == 0:
        raise InsufficientDataError("n_calibration and n_test must be >= 1")
    beta = beta_coverage(n, alpha)
    a_float = float(beta.alpha)
    approx = a_float * (1 - a_float) / (n + 2) + a_float * (1 - a_float) / t
    if beta.a is None or beta.b is None:
        return RealisedCoverageSpread(
            n_calibration=n,
            n_test=t,
            alpha=beta.alpha,
            k=beta.k,
            mean=None,
            variance=None,
            sd=None,
            beta_variance=None,
            approximate_variance=approx,
            reason=beta.reason,
        )
    a, b = beta.a, beta.b
    variance = a * b * (a + b + t) / (t * (a + b) ** 2 * (a + b + 1))
    return RealisedCoverageSpread(
        n_calibration=n,
        n_test=t,
        alpha=beta.alpha,
        k=beta.k,
        mean=beta.mean,
        variance=variance,
        sd=math.sqrt(variance),
        beta_variance=beta.variance,
        approximate_variance=approx,
        reason=None,
    )
