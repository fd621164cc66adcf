"""Clopper–Pearson exact binomial intervals, and the input checks the other stats modules share.

Every routine here takes *integer* counts: a float such as ``n * mean(losses)`` can land just below
the integer it stands for and certify what it should not, so floats are refused rather than rounded.

Source: Clopper, C. J. and Pearson, E. S. (1934), "The use of confidence or fiducial limits
illustrated in the case of the binomial", Biometrika 26(4), 404–413; the beta-quantile form used
here is L = Beta.ppf(g/2; k, n-k+1), U = Beta.ppf(1-g/2; k+1, n-k), as in
``scipy.stats.binomtest(...).proportion_ci(method="exact")``. Exact intervals are used throughout
certlabel, rather than Wilson or Wald, because a certificate must never claim more coverage than it
has: Clopper–Pearson is conservative at every n, including the small accepted counts where Wald
collapses to a zero-width interval.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from certification.stats.errors import InsufficientDataError, StatsError

__all__ = [
    "Interval",
    "Proportion",
    "check_count",
    "check_counts",
    "check_open_unit",
    "clopper_pearson",
    "clopper_pearson_one_sided",
    "clopper_pearson_upper",
    "clopper_pearson_upper_array",
    "proportion_of",
]

Side = Literal["two-sided", "upper", "lower"]


# -- shared input checks ----------------------------------------------------------------------
def check_count(value: object, *, name: str) -> int:
    """Return ``value`` as a Python ``int`` if it is a non-negative integer count.

    ``bool`` and every float (even ``44.0``) are refused; ``name`` is used in the error message.

    Raises:
        StatsError: if ``value`` is not an integer or is negative.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise StatsError(
            f"{name} must be an integer count, got {value!r} ({type(value).__name__}); "
            "pass integer counts, never a float product such as n * mean(losses)"
        )
    count = int(value)
    if count < 0:
        raise StatsError(f"{name} must be >= 0, got {count}")
    return count


def check_counts(values: ArrayLike, *, name: str) -> NDArray[np.int64]:
    """Return a 1-D array (shape (M,)) of non-negative integer counts as ``int64``.

    Raises:
        StatsError: if the array is not one-dimensional, not of an integer dtype (floats are refused
            even when integral), or holds a negative value.
    """
    array = np.asarray(values)
    if array.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
        raise StatsError(f"{name} must hold integer counts, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.size and int(array.min()) < 0:
        raise StatsError(f"{name} must be >= 0, got minimum {int(array.min())}")
    return array


def check_open_unit(value: object, *, name: str) -> float:
    """Return ``value`` as a float if it lies strictly inside (0, 1); ``name`` is for the error.

    Raises:
        StatsError: if ``value`` is not a real number, not finite, or outside (0, 1).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise StatsError(f"{name} must be a number in (0, 1), got {value!r}")
    number = float(value)
    if not (0.0 < number < 1.0):
        raise StatsError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return number


def _check_k_n(k: object, n: object) -> tuple[int, int]:
    k_int = check_count(k, name="k")
    n_int = check_count(n, name="n")
    if k_int > n_int:
        raise StatsError(f"k must be <= n, got k={k_int}, n={n_int}")
    if n_int == 0:
        raise InsufficientDataError(
            "n must be >= 1: a proportion of zero trials has no interval "
            "(a certificate treats its upper bound as 1)"
        )
    return k_int, n_int


# -- results ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    """An exact confidence interval for a binomial proportion.

    ``side`` is ``"two-sided"``, ``"upper"`` ([0, upper]) or ``"lower"`` ([lower, 1]), at
    ``confidence`` 1 - g; ``method`` is always ``"clopper-pearson"``, so a stored report names it.
    """

    lower: float
    upper: float
    confidence: float
    side: Side
    method: str = "clopper-pearson"

    def contains(self, value: float) -> bool:
        """Return whether ``value`` lies in the closed interval [lower, upper]."""
        return self.lower <= value <= self.upper


@dataclass(frozen=True)
class Proportion:
    """A proportion with its counts and exact interval; None with a ``reason`` at 0 trials."""

    numerator: int
    denominator: int
    value: float | None
    interval: Interval | None
    reason: str | None

    @property
    def defined(self) -> bool:
        """Whether the proportion has a value."""
        return self.value is not None

    @property
    def lower(self) -> float | None:
        """Lower interval limit in [0, 1], or None."""
        return None if self.interval is None else self.interval.lower

    @property
    def upper(self) -> float | None:
        """Upper interval limit in [0, 1], or None."""
        return None if self.interval is None else self.interval.upper


def proportion_of(k: int, n: int, confidence: float, reason: str) -> Proportion:
    """``k`` of ``n`` with its two-sided exact interval; undefined with ``reason`` when ``n`` is 0.

    Raises:
        StatsError: as :func:`clopper_pearson` (n > 0 only).
    """
    if n == 0:
        return Proportion(k, n, None, None, reason)
    return Proportion(k, n, k / n, clopper_pearson(k, n, confidence=confidence), None)


# -- intervals --------------------------------------------------------------------------------
def clopper_pearson(k: int, n: int, *, confidence: float = 0.95) -> Interval:
    """Two-sided Clopper–Pearson interval for k successes in n trials.

    L = Beta.ppf(g/2; k, n-k+1) (0 when k = 0) and U = Beta.ppf(1-g/2; k+1, n-k) (1 when k = n),
    with g = 1 - confidence.

    Raises:
        StatsError: if k or n is not an integer count, k > n, or confidence is outside (0, 1).
        InsufficientDataError: if n = 0 (no trials: the proportion is undefined).

    Source: Clopper and Pearson (1934); equals ``scipy.stats.binomtest(k, n).proportion_ci(
    confidence, method="exact")`` and statsmodels ``proportion_confint(method="beta")``.
    """
    k, n = _check_k_n(k, n)
    level = check_open_unit(confidence, name="confidence")
    g = 1.0 - level
    lower = 0.0 if k == 0 else float(_st.beta.ppf(g / 2, k, n - k + 1))
    upper = 1.0 if k == n else float(_st.beta.ppf(1 - g / 2, k + 1, n - k))
    return Interval(lower=lower, upper=upper, confidence=level, side="two-sided")


def clopper_pearson_one_sided(
    k: int, n: int, *, confidence: float = 0.95, side: Literal["upper", "lower"] = "upper"
) -> Interval:
    """One-sided Clopper–Pearson interval: [0, U] (``side="upper"``) or [L, 1] (``"lower"``).

    U = Beta.ppf(1-g; k+1, n-k), with the closed form U = 1 - g^(1/n) when k = 0 and U = 1 when
    k = n; L = Beta.ppf(g; k, n-k+1), 0 when k = 0. The upper form is the one
    a selective-risk certificate shows: p = P[Binom(n, a) <= k] <= g iff U <= a.

    Raises:
        StatsError: on a non-integer or inconsistent count, a level outside (0, 1), or an unknown
            side.
        InsufficientDataError: if n = 0.

    Source: Clopper and Pearson (1934); equals ``scipy.stats.binomtest(k, n, alternative="less")
    .proportion_ci(confidence)`` for the upper side.
    """
    k, n = _check_k_n(k, n)
    level = check_open_unit(confidence, name="confidence")
    g = 1.0 - level
    if side == "upper":
        if k == n:
            upper = 1.0
        elif k == 0:
            upper = 1.0 - g ** (1.0 / n)
        else:
            upper = float(_st.beta.ppf(1 - g, k + 1, n - k))
        return Interval(lower=0.0, upper=upper, confidence=level, side="upper")
    if side == "lower":
        lower = 0.0 if k == 0 else float(_st.beta.ppf(g, k, n - k + 1))
        return Interval(lower=lower, upper=1.0, confidence=level, side="lower")
    raise StatsError(f"side must be 'upper' or 'lower', got {side!r}")


def clopper_pearson_upper(k: int, n: int, *, confidence: float) -> float:
    """One-sided Clopper–Pearson upper bound U at level ``confidence`` (see the one-sided form).

    ``n`` = 0 returns 1.0 (unlike the interval functions), the value a certificate uses for a
    threshold that accepts nothing.

    Raises:
        StatsError: on a non-integer or inconsistent count or a level outside (0, 1).
    """
    if check_count(n, name="n") == 0:
        if check_count(k, name="k") != 0:
            raise StatsError(f"k must be <= n, got k={k}, n=0")
        check_open_unit(confidence, name="confidence")
        return 1.0
    return clopper_pearson_one_sided(k, n, confidence=confidence, side="upper").upper


def clopper_pearson_upper_array(
    k: ArrayLike, n: ArrayLike, *, confidence: float
) -> NDArray[np.float64]:
    """Vectorised one-sided upper bounds, for a whole threshold family at once.

    ``k`` and ``n`` are integer arrays of shape (M,), k <= n; n = 0 gives 1.0. Returns float64 of
    shape (M,) in (0, 1].

    Raises:
        StatsError: if the arrays are not integer, not 1-D, differ in shape, have k > n, or the
            level is outside (0, 1).
    """
    k_arr = check_counts(k, name="k")
    n_arr = check_counts(n, name="n")
    if k_arr.shape != n_arr.shape:
        raise StatsError(f"k and n must have the same shape, got {k_arr.shape} and {n_arr.shape}")
    if np.any(k_arr > n_arr):
        raise StatsError("k must be <= n elementwise")
    g = 1.0 - check_open_unit(confidence, name="confidence")
    upper = np.ones(k_arr.shape, dtype=np.float64)
    zero = (k_arr == 0) & (n_arr > 0)
    upper[zero] = 1.0 - g ** (1.0 / n_arr[zero])
    inner = (k_arr > 0) & (k_arr < n_arr)
    if np.any(inner):
        upper[inner] = _st.beta.ppf(1 - g, k_arr[inner] + 1, n_arr[inner] - k_arr[inner])
    return upper
