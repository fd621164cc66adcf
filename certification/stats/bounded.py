"""The Hoeffding–Bentkus p-value and upper bound for the mean of a loss bounded in [0, 1].

For n i.i.d. losses L_i in [0, 1] with mean R and observed mean R̂, the null hypothesis
H: R > alpha is tested with

    p_HB = min( exp(-n h1(min(R̂, alpha), alpha)),  e · P[Binomial(n, alpha) <= ceil(n R̂)] )

where h1(a, b) = a log(a/b) + (1 - a) log((1 - a)/(1 - b)) is the Bernoulli relative entropy
(with 0 log 0 = 0). The first term is Hoeffding's (1963) tail bound in its relative-entropy form,
the second Bentkus's (2004) bound; both hold for any distribution on [0, 1], so the p-value is
valid (P[p_HB <= u] <= u under H) without assuming 0/1 losses.

Sources: Angelopoulos, Bates, Candès, Jordan and Lei (2021), "Learn then Test: Calibrating
Predictive Algorithms to Achieve Risk Control", arXiv:2110.01052, section 3 (the
Hoeffding–Bentkus p-value); Bates, Angelopoulos, Lei, Malik and Jordan (2021), "Distribution-free,
Risk-controlling Prediction Sets", J. ACM 68(6), Proposition 3 (the Hoeffding–Bentkus bound).
The formula is the one of the paper's reference implementation (``hb_p_value``: ceil in the
binomial term, the Hoeffding term evaluated at min(R̂, alpha)), with one edge made exact: at
R̂ = 0 the Hoeffding term is (1 - alpha)^n (0 log 0 = 0), where a literal evaluation gives NaN.

Edge cases, exactly:
    * R̂ >= alpha: h1(alpha, alpha) = 0, so the Hoeffding term is 1; the Bentkus term is then at
      least e/2 > 1 (the binomial median is at most ceil(n alpha)), so p_HB = 1.
    * R̂ = 0: p_HB = min((1 - alpha)^n, e (1 - alpha)^n) = (1 - alpha)^n, which is the exact
      binomial p-value P[Binomial(n, alpha) <= 0] of zero errors in n.
    * n = 0: nothing was observed, p_HB = 1.

The binomial term reads the ceiling of the loss total n R̂, so totals are taken exactly where they
can be (an ``int`` or ``fractions.Fraction`` risk is multiplied out exactly), and a float total
within ``TOTAL_TOLERANCE`` × max(n, 1) of an integer is read as that integer: a float sum can land
just above it and make the ceiling one too large.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special as _sp
from scipy import stats as _st

from certification.stats.errors import StatsError
from certification.stats.intervals import check_count, check_counts, check_open_unit

__all__ = [
    "TOTAL_TOLERANCE",
    "hoeffding_bentkus_p_value",
    "hoeffding_bentkus_p_values",
    "hoeffding_bentkus_upper_bounds",
]

#: Bisection steps of the upper bound: 2^-80 is far below a double's resolution on (0, 1).
_BISECTION_STEPS = 80
#: A float loss total within this × max(n, 1) of an integer is that integer (module docstring).
TOTAL_TOLERANCE = 1e-9


def _check_totals(
    loss_sums: ArrayLike, n: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    sums = np.asarray(loss_sums, dtype=np.float64)
    counts = check_counts(n, name="n")
    if sums.ndim != 1 or sums.shape != counts.shape:
        raise StatsError(
            f"loss_sums and n must be 1-D arrays of the same shape, got {sums.shape} and "
            f"{counts.shape}"
        )
    if not np.all(np.isfinite(sums)):
        raise StatsError("loss_sums must be finite")
    if np.any(sums < 0) or np.any(sums > counts):
        raise StatsError("loss_sums must lie in [0, n] elementwise (losses lie in [0, 1])")
    return sums, counts


def _log_p(
    sums: NDArray[np.float64], counts: NDArray[np.int64], alpha: float | NDArray[np.float64]
) -> NDArray[np.float64]:
    """The log of p_HB elementwise for n >= 1 (see the module docstring); alpha may be an array."""
    risk = sums / counts
    a = np.minimum(risk, alpha)
    # h1(a, alpha) with 0 log 0 = 0: rel_entr(x, y) = x log(x / y), 0 at x = 0.
    h1 = _sp.rel_entr(a, alpha) + _sp.rel_entr(1.0 - a, 1.0 - alpha)
    log_hoeffding = -counts * h1
    # ceil(total), with a total within the tolerance above an integer read as that integer
    errors = np.ceil(sums - TOTAL_TOLERANCE * np.maximum(counts, 1))
    log_bentkus = 1.0 + _st.binom.logcdf(errors, counts, alpha)
    log_p: NDArray[np.float64] = np.minimum(np.minimum(log_hoeffding, log_bentkus), 0.0)
    return log_p


def hoeffding_bentkus_p_values(
    loss_sums: ArrayLike, n: ArrayLike, alpha: float
) -> NDArray[np.float64]:
    """Hoeffding–Bentkus p-values of H: mean loss > alpha, for a family of loss totals.

    ``loss_sums`` (shape (M,)) are the totals n R̂ in [0, n], a float within ``TOTAL_TOLERANCE``
    × max(n, 1) of an integer counting as that integer; ``n`` (shape (M,)) are integer counts
    (0 gives p = 1). Returns p_HB in (0, 1] (formula in the module docstring).

    Raises:
        StatsError: if the shapes differ, n is not an integer count, a total is outside [0, n]
            or not finite, or alpha is outside (0, 1).

    Source: Angelopoulos et al. (2021), Learn then Test, section 3; Bates et al. (2021), RCPS,
    Proposition 3.
    """
    sums, counts = _check_totals(loss_sums, n)
    a = check_open_unit(alpha, name="alpha")
    p = np.ones(sums.shape, dtype=np.float64)
    some = counts > 0
    if np.any(some):
        p[some] = np.exp(_log_p(sums[some], counts[some], a))
    return p


def hoeffding_bentkus_p_value(risk: float | Fraction, n: int, alpha: float) -> float:
    """The Hoeffding–Bentkus p-value of H: mean loss > alpha at n losses with mean ``risk``.

    ``risk`` is R̂ in [0, 1]: pass ``Fraction(k, n)`` (or the total to
    :func:`hoeffding_bentkus_p_values`) for an exact total; a float's ``risk * n`` is read within
    ``TOTAL_TOLERANCE``. n = 0 gives p = 1. p_HB = min(exp(-n h1(min(R̂, alpha), alpha)),
    e P[Binomial(n, alpha) <= ceil(n R̂)]), in (0, 1]; 1 when R̂ >= alpha; (1 - alpha)^n when
    R̂ = 0.

    Raises:
        StatsError: if risk is not a number in [0, 1], n is not an integer count, or alpha is
            outside (0, 1).

    Source: Angelopoulos et al. (2021), Learn then Test, section 3. Check: R̂ 0, n 44,
    alpha 0.10 gives 0.9^44 = 0.0096977373, the exact binomial p-value of zero errors.
    """
    if isinstance(risk, bool) or not isinstance(risk, numbers.Real):
        raise StatsError(f"risk must be a number in [0, 1], got {risk!r}")
    if not (0.0 <= float(risk) <= 1.0):
        raise StatsError(f"risk must lie in [0, 1], got {risk!r}")
    count = check_count(n, name="n")
    # an int or Fraction risk gives the exact total; min() keeps a float's within [0, n]
    total = risk * count if isinstance(risk, numbers.Rational) else min(float(risk) * count, count)
    return float(hoeffding_bentkus_p_values([float(total)], [count], alpha)[0])


def hoeffding_bentkus_upper_bounds(
    loss_sums: ArrayLike, n: ArrayLike, *, confidence: float
) -> NDArray[np.float64]:
    """One-sided Hoeffding–Bentkus upper confidence bounds on the mean loss.

    The bound at level 1 - d is the smallest a in [R̂, 1] with p_HB(R̂, n, a) <= d (p_HB is
    non-increasing in a and equals 1 for a <= R̂), found by bisection to below a double's
    resolution (the upper end of the last bracket, where p_HB <= d), so that p_HB(R̂, n, alpha)
    <= d iff the bound is <= alpha, the duality a certificate states. n = 0 and R̂ = 1 give 1.

    Shapes (M,); ``confidence`` is 1 - d. Bounds lie in (0, 1].

    Raises:
        StatsError: as :func:`hoeffding_bentkus_p_values`, or a confidence outside (0, 1).

    Source: Bates et al. (2021), RCPS, Proposition 3 (the Hoeffding–Bentkus upper confidence
    bound, the inversion of the p-value of Learn then Test, section 3).
    """
    sums, counts = _check_totals(loss_sums, n)
    log_level = math.log(1.0 - check_open_unit(confidence, name="confidence"))
    upper = np.ones(sums.shape, dtype=np.float64)
    some = (counts > 0) & (sums < counts)
    if not np.any(some):
        return upper
    s, m = sums[some], counts[some]
    low = s / m  # p = 1 > d here
    high = np.ones_like(low)  # the bound is 1 when nothing below 1 passes
    for _ in range(_BISECTION_STEPS):
        mid = (low + high) / 2.0
        passes = _log_p(s, m, mid) <= log_level
        high = np.where(passes, mid, high)
        low = np.where(passes, low, mid)
    upper[some] = high
    return upper
