"""The split-conformal threshold, the reliability level and the calibration result.

On n calibration scores the threshold M* is the k-th smallest score with k = ceil((n+1)(1-alpha)),
computed exactly from the alpha given (float, decimal string, Fraction or Decimal); M* is infinite
when k > n, never clamped to n (Angelopoulos and Bates 2021, arXiv:2107.07511, section 1). The
reliability level 1 - alpha* = #{i : s_i <= 1} / (n+1) is the largest 1 - alpha at which M* = 1.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.conformal.scores import INF, AlphaLike
from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.intervals import check_count


def exact_alpha(alpha: AlphaLike) -> Fraction:
    """Return alpha as an exact fraction in (0, 1).

    A float is read through its shortest round-tripping decimal (``repr``), which is what the user
    typed: ``Fraction(0.3)`` would be 0.29999999999999998889..., and ceil((n+1)(1-alpha)) with it
    gives k = 8 instead of 7 at n = 9. Accepts a float, a decimal string ("0.1"), a
    :class:`~fractions.Fraction` or a :class:`~decimal.Decimal`.

    Raises:
        StatsError: if alpha is not a number or lies outside (0, 1).
    """
    try:
        if isinstance(alpha, bool):
            raise TypeError
        if isinstance(alpha, Fraction | Decimal | str | numbers.Rational):
            value = Fraction(alpha)
        elif isinstance(alpha, numbers.Real):
            # Any real (float, numpy.float64, numpy.float32...) as the shortest decimal that
            # reads back as the same double: 0.1 is 1/10, not 0.1000000000000000055...
            value = Fraction(repr(float(alpha)))
        else:
            raise TypeError
    except (TypeError, ValueError, ZeroDivisionError):
        raise StatsError(f"alpha must be a number in (0, 1), got {alpha!r}") from None
    if not (0 < value < 1):
        raise StatsError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    return value


def conformal_index(n: int, alpha: AlphaLike) -> int:
    """The order-statistic index k = ceil((n+1)(1-alpha)), computed exactly.

    k >= 1; k > n means the threshold is infinite (never clamp it to n).

    Raises:
        StatsError: on a non-integer n or alpha outside (0, 1).
    """
    size = check_count(n, name="n")
    return math.ceil((size + 1) * (1 - exact_alpha(alpha)))


@dataclass(frozen=True)
class ConformalThreshold:
    """The conformal threshold M* of one calibration set.

    ``k`` = ceil((n+1)(1-alpha)); ``threshold`` is the k-th smallest score (integer-valued) or
    ``math.inf``, with ``reason`` saying why (k > n, or the k-th smallest score is infinite).
    """

    alpha: Fraction
    n: int
    k: int
    threshold: float
    reason: str | None

    @property
    def is_infinite(self) -> bool:
        """Whether M* is infinite (the prediction set is every answer: uninformative)."""
        return math.isinf(self.threshold)


def check_scores(scores: ArrayLike) -> NDArray[np.float64]:
    """Return ``scores`` as a 1-D float64 array of valid scores, or raise StatsError."""
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim != 1:
        raise StatsError(f"scores must be one-dimensional, got shape {array.shape}")
    finite = np.isfinite(array)
    if np.isnan(array).any():
        raise StatsError("scores must not contain NaN (an unsolvable question scores inf)")
    if (array < 1).any():
        raise StatsError("scores must be ranks >= 1 or +inf")
    if not np.array_equal(array[finite], np.floor(array[finite])):
        raise StatsError("scores must be integer ranks or +inf")
    return array


def conformal_threshold(scores: ArrayLike, alpha: AlphaLike) -> ConformalThreshold:
    """M* = the k-th smallest calibration score, k = ceil((n+1)(1-alpha)); infinite if k > n.

    Uses the integer order statistic (``np.partition``), never ``np.quantile`` (whose
    ``method="higher"`` returns the wrong order statistic). ``scores`` (shape (n,)) are rank
    scores: integers >= 1 as floats, or ``inf``; a float ``alpha`` is read exactly
    (:func:`exact_alpha`).

    Raises:
        StatsError: on malformed scores or alpha.
        InsufficientDataError: if n = 0.
    """
    array = check_scores(scores)
    n = int(array.shape[0])
    if n == 0:
        raise InsufficientDataError("scores is empty: a conformal threshold needs n >= 1")
    exact = exact_alpha(alpha)
    k = conformal_index(n, exact)
    if k > n:
        needed = math.ceil(1 / exact - 1)
        return ConformalThreshold(
            alpha=exact,
            n=n,
            k=k,
            threshold=INF,
            reason=f"k = {k} > n = {n}: alpha = {exact} needs at least {needed} calibration "
            "questions for a finite threshold",
        )
    value = float(np.partition(array, k - 1)[k - 1])
    reason = None
    if math.isinf(value):
        reason = f"the k = {k}-th smallest score is infinite: too many unsolvable questions"
    return ConformalThreshold(alpha=exact, n=n, k=k, threshold=value, reason=reason)


@dataclass(frozen=True)
class ReliabilityLevel:
    """The reliability level 1 - alpha* = #{s_i <= 1} / (n+1) (Mouzouni 2026, Definition 2.4).

    ``n_mode_admissible`` counts s_i = 1; ``level`` is the exact fraction (``value`` its float),
    None when no mode was admissible (M* = 1 at no alpha).
    """

    n: int
    n_mode_admissible: int
    level: Fraction | None
    value: float | None
    reason: str | None


def reliability_level(scores: ArrayLike) -> ReliabilityLevel:
    """The largest 1 - alpha at which M* = 1.

    M* = 1 iff k <= c with c = #{s_i <= 1}, i.e. iff 1 - alpha <= c / (n+1); the largest such level
    is c / (n+1). The n+1 (not n) is the finite-sample correction, so a perfect calibration set
    of 20 gives 20/21, not 1. ``level`` is None (with a reason) when c = 0.

    Raises:
        StatsError: on malformed scores.
        InsufficientDataError: if n = 0.

    Source: Mouzouni (2026) Definition 2.4. Check: scores 18×1, 1×2, 1×inf give 18/21; scores
    45×1, 3×2, 1×3, 1×inf give 45/51.
    """
    array = check_scores(scores)
    n = int(array.shape[0])
    if n == 0:
        raise InsufficientDataError("scores is empty: a reliability level needs n >= 1")
    top = int(np.count_nonzero(array <= 1))
    if top == 0:
        return ReliabilityLevel(
            n=n,
            n_mode_admissible=0,
            level=None,
            value=None,
            reason="no calibration question has an admissible mode: M* = 1 at no alpha",
        )
    level = Fraction(top, n + 1)
    return ReliabilityLevel(
        n=n, n_mode_admissible=top, level=level, value=float(level), reason=None
    )


@dataclass(frozen=True)
class ConformalCalibration:
    """M*, reliability level and score histogram (ascending, ``inf`` last) of a calibration set."""

    threshold: ConformalThreshold
    reliability: ReliabilityLevel
    score_counts: tuple[tuple[float, int], ...]


def calibrate(scores: ArrayLike, alpha: AlphaLike) -> ConformalCalibration:
    """Compute M*, the reliability level and the score histogram from calibration scores.

    Raises:
        StatsError: on malformed scores or alpha.
        InsufficientDataError: if n = 0.
    """
    array = check_scores(scores)
    values, counts = np.unique(array, return_counts=True)
    return ConformalCalibration(
        threshold=conformal_threshold(array, alpha),
        reliability=reliability_level(array),
        score_counts=tuple(
            (float(v), int(c)) for v, c in zip(values.tolist(), counts.tolist(), strict=True)
        ),
    )
