"""Drift watch: a conformal test martingale of new scores against a calibration sample.

The calibration scores are the exchangeable past; each new score, in arrival order, gets the
smoothed conformal p-value of its nonconformity among the calibration scores and the new
scores so far (the online bag), and a betting martingale bets against the p-values being
uniform. Under exchangeability of the whole sequence (calibration scores, then new scores)
the p-values are independent and uniform (Vovk, Nouretdinov & Gammerman 2003, "Testing
exchangeability on-line", ICML, Theorem 1; Vovk, Gammerman & Shafer 2005, "Algorithmic
Learning in a Random World", section 7.1), so the martingale reaches ``1/delta`` with
probability at most ``delta`` ever (Ville's inequality).

Nonconformity, in both directions. The score itself (large scores are strange: p-values
``p_up``) and its negation (small scores are strange: ``p_down``), each with the same random
tie-breaker ``theta``; the watch's martingale is the equal-weight mixture of the two. Each
sequence of p-values is independent uniform under exchangeability, and the pairs are
independent of one another (they are functions of the online bag and the new observation), so
both component martingales are martingales in one filtration and so is their average. A shift
of the score distribution up or down makes one family of p-values small and its martingale
grow; a change of spread alone, with the centre unchanged, is seen more slowly (both tails).

Betting. The simple-mixture power martingale (Vovk et al. 2003, section 3):
``M_n = integral over eps in [0, 1] of prod_{i<=n} eps * p_i**(eps - 1)``, which depends on the
p-values only through ``n`` and ``a = -sum log p_i``:
``M_n = int_0^1 eps**n exp(a (1 - eps)) d eps = e**a Gamma(n+1) P(n+1, a) / a**(n+1)`` (``P``
the regularised lower incomplete gamma function), equivalently ``1F1(1; n+2; a) / (n+1)``.
The martingale never resets: once it has crossed, it stays a record of that crossing, not a
detector of a second change.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from certification.stats.errors import InsufficientDataError, StatsError

FloatArray = NDArray[np.float64]
Floats = Sequence[float] | FloatArray

# Below this value of P(n+1, a) the incomplete-gamma form loses digits to cancellation; the
# hypergeometric form converges quickly there (a is then well below n + 1).
_SMALL_GAMMAINC = 1e-100


@dataclass(frozen=True)
class DriftState:
    """The watch after some new scores: the online bag and the martingale's sufficient statistics.

    ``bag`` holds every score seen, calibration and new, sorted ascending (length
    ``n_reference + count``); ``count`` is the martingale's time n. ``log_p_up`` and
    ``log_p_down`` sum ``log p`` over the new scores (<= 0); ``log_martingale`` is the natural
    log of the mixture martingale (0 at the start: M_0 = 1); ``crossed`` is the 1-based index of
    the new score at which it first reached ``1/delta``.
    """

    bag: FloatArray
    n_reference: int
    count: int
    log_p_up: float
    log_p_down: float
    log_martingale: float
    crossed: int | None

    @property
    def martingale(self) -> float:
        """The martingale's value (``inf`` beyond the float range)."""
        return math.exp(self.log_martingale) if self.log_martingale < 709.0 else math.inf


def _finite(scores: Floats, what: str) -> FloatArray:
    values = np.asarray(scores, dtype=np.float64)
    if values.ndim != 1:
        raise StatsError(f"{what} must be a flat sequence of numbers")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise StatsError(f"{what}[{int(bad[0])}] = {values[bad[0]]!r} is not a finite number")
    return values


def drift_start(reference: Floats) -> DriftState:
    """Start a watch on the calibration scores ``reference`` (M_0 = 1).

    ``reference`` holds finite scores in any order.

    Raises:
        InsufficientDataError: ``reference`` is empty.
        StatsError: a score is not finite.
    """
    values = _finite(reference, "reference")
    if values.size == 0:
        raise InsufficientDataError("no calibration score to compare new scores with")
    return DriftState(
        bag=np.sort(values),
        n_reference=int(values.size),
        count=0,
        log_p_up=0.0,
        log_p_down=0.0,
        log_martingale=0.0,
        crossed=None,
    )


def drift_thetas(seed: int, start: int, count: int) -> FloatArray:
    """The tie-breakers of new scores ``start`` (0-based) to ``start + count - 1``, in (0, 1].

    One PCG64 stream per seed, jumped ahead to ``start`` (O(log start)), so a watch folded in
    batches of any sizes draws the same ``theta`` for the same score. Values are ``1 - U`` with
    ``U`` uniform on [0, 1): never 0, so a p-value is never 0.

    Raises:
        StatsError: a negative ``start`` or ``count``.
    """
    if start < 0 or count < 0:
        raise StatsError(f"start and count must be >= 0, got {start} and {count}")
    generator = np.random.PCG64(seed)
    generator.advance(start)
    return 1.0 - np.random.Generator(generator).random(count)


def smoothed_p_values(
    bag: FloatArray, scores: Floats, thetas: Floats
) -> tuple[FloatArray, FloatArray]:
    """The smoothed conformal p-values of ``scores``, each among the bag and the scores before it.

    For the j-th score s (0-based) the bag is ``bag`` plus scores 0..j, of size
    n = len(bag) + j + 1, and ``p_up = (#{z > s} + theta #{z = s}) / n``,
    ``p_down = (#{z < s} + theta #{z = s}) / n`` (the count of equals includes s itself).
    Vovk et al. 2003, equation (2), with nonconformity s and -s.

    ``bag`` is sorted ascending, ``scores`` finite in arrival order, ``thetas`` one tie-breaker
    in (0, 1] per score. Returns ``(p_up, p_down)``, each of ``len(scores)`` values in (0, 1].

    Raises:
        StatsError: lengths differ, a score is not finite or a theta outside (0, 1].
    """
    values = _finite(scores, "scores")
    theta = np.asarray(thetas, dtype=np.float64)
    if theta.shape != values.shape:
        raise StatsError(f"{values.size} scores but {theta.size} thetas")
    if np.any(~(theta > 0) | (theta > 1)):
        raise StatsError("every theta must lie in (0, 1]")
    size = bag.size
    below = np.searchsorted(bag, values, side="left")
    above = size - np.searchsorted(bag, values, side="right")
    equal = size - below - above
    batch: list[float] = []
    for j, s in enumerate(values.tolist()):
        lo, hi = bisect.bisect_left(batch, s), bisect.bisect_right(batch, s)
        below[j] += lo
        above[j] += len(batch) - hi
        equal[j] += hi - lo + 1  # the score itself
        batch.insert(hi, s)
    n = size + np.arange(1, values.size + 1, dtype=np.float64)
    return (above + theta * equal) / n, (below + theta * equal) / n


def power_mixture_log(count: NDArray[np.int64] | int, log_p_sum: FloatArray | float) -> FloatArray:
    """Natural log of the simple-mixture power martingale ``int_0^1 prod eps p_i^(eps-1) d eps``.

    ``count`` n >= 0 broadcasts with ``log_p_sum`` = ``sum log p_i`` (<= 0). Returns ``log
    M_n`` in the inputs' broadcast shape (0-d for two scalars); ``-log(n + 1)`` when every p is 1.

    Source: Vovk, Nouretdinov & Gammerman 2003, section 3 (the simple mixture); the closed
    form is the incomplete-gamma integral of ``eps^n exp(a (1 - eps))`` with ``a = -sum log p``.
    """
    n = np.atleast_1d(np.asarray(count, dtype=np.float64))
    a = np.atleast_1d(np.maximum(-np.asarray(log_p_sum, dtype=np.float64), 0.0))
    n, a = np.broadcast_arrays(n, a)
    out = -np.log1p(n)  # a = 0: int eps^n = 1 / (n + 1)
    positive = a > 0
    p_lower = special.gammainc(n[positive] + 1.0, a[positive])
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma_form = (
            a[positive]
            + special.gammaln(n[positive] + 1.0)
            + np.log(p_lower)
            - (n[positive] + 1.0) * np.log(a[positive])
        )
        series_form = np.log(special.hyp1f1(1.0, n[positive] + 2.0, a[positive])) - np.log1p(
            n[positive]
        )
    out[positive] = np.where(p_lower >= _SMALL_GAMMAINC, gamma_form, series_form)
    shape = np.broadcast_shapes(np.shape(count), np.shape(log_p_sum))
    return np.asarray(out, dtype=np.float64).reshape(shape)


def drift_update(state: DriftState, scores: Floats, thetas: Floats, *, delta: float) -> DriftState:
    """Fold new scores (in arrival order) into the watch; record the first crossing of 1/delta.

    ``thetas`` come from :func:`drift_thetas` at ``state.count``; ``delta`` is the false-alarm
    probability (alarm at ``1/delta``). The mixture martingale is ``(M_up + M_down) / 2``;
    ``crossed`` keeps the first crossing once set.

    Raises:
        StatsError: ``delta`` outside (0, 1), or bad scores or thetas
            (:func:`smoothed_p_values`).
    """
    if not 0.0 < delta < 1.0:
        raise StatsError(f"delta must lie in (0, 1), got {delta!r}")
    p_up, p_down = smoothed_p_values(state.bag, scores, thetas)
    if p_up.size == 0:
        return state
    counts = state.count + np.arange(1, p_up.size + 1, dtype=np.int64)
    sum_up = state.log_p_up + np.cumsum(np.log(p_up))
    sum_down = state.log_p_down + np.cumsum(np.log(p_down))
    log_m = np.logaddexp(power_mixture_log(counts, sum_up), power_mixture_log(counts, sum_down))
    log_m -= math.log(2.0)
    crossed = state.crossed
    if crossed is None:
        hits = np.flatnonzero(log_m >= -math.log(delta))
        if hits.size:
            crossed = int(counts[hits[0]])
    new = np.asarray(scores, dtype=np.float64)
    return DriftState(
        bag=np.insert(state.bag, np.searchsorted(state.bag, np.sort(new)), np.sort(new)),
        n_reference=state.n_reference,
        count=int(counts[-1]),
        log_p_up=float(sum_up[-1]),
        log_p_down=float(sum_down[-1]),
        log_martingale=float(log_m[-1]),
        crossed=crossed,
    )
