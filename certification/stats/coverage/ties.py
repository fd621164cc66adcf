"""Tied scores: detect them, and the exact spread of realised coverage a random split gives.

The Beta(k, n+1-k) law of delivered coverage and the Beta-Binomial law of realised coverage hold
for tie-free (continuous) scores. Frequency-rank scores (1, 2, 3, ..., infinity) are heavily tied:
the threshold M* can only take the few score values, so realised coverage jumps between a few
levels and stays at or above 1 - alpha; its spread is then not the Beta-Binomial one (it is often
much smaller, because M* rarely moves and only the test term is left). With ties, Beta(k, n+1-k)
is still a stochastic lower bound on the delivered coverage (F(F^-1(U)) >= U for the probability
integral transform: the k-th smallest of n scores S = F^-1(U) is F^-1 of the k-th smallest U),
but its standard deviation says nothing about the tied spread.

What stays exact is the law of a uniformly random split of a fixed pool: choose n of the N pooled
scores for calibration (without replacement), take M* = the k-th smallest calibration score,
k = ceil((n+1)(1-alpha)), and count the other t = N - n scores at or below M*. With the distinct
score values v_1 < ... < v_J, counts c_j and cumulative counts C_j, let A_j = number of
calibration scores <= v_j (hypergeometric). M* = v_j exactly when A_{j-1} < k <= A_j, and then
the realised coverage is (C_j - A_j) / t. Given A_j = a, A_{j-1} is hypergeometric(C_j, C_{j-1},
a), so

    P(M* = v_j, A_j = a) = Hypergeom(N, C_j, n).pmf(a) * Hypergeom(C_j, C_{j-1}, a).cdf(k - 1)

for a >= k, and every moment of realised coverage is a finite sum. For tie-free scores this law
is the Beta-Binomial(t, k, n+1-k) law of the covered count (a random split orders the pool
uniformly), so it is the tie-aware version of the exchangeable reference, not a new model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import hypergeom

from certification.stats.conformal import AlphaLike, conformal_index, exact_alpha
from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.intervals import check_count

#: Threshold atoms whose probability is below this are skipped; the skipped mass is reported.
ATOM_TOLERANCE = 1e-16
#: The captured probability must be within this of 1, else the computation is refused.
MASS_TOLERANCE = 1e-9
#: The window of A_j values summed per atom is its mean +- (WINDOW_SDS sd + WINDOW_PAD): the
#: hypergeometric mass outside is far below double precision (the pad covers a small sd, where
#: the law is Poisson-like); the mass check below refuses a result should it ever not be.
WINDOW_SDS = 12.0
WINDOW_PAD = 30

#: Why the sqrt(design effect) prediction of the grouped-split excess is withheld for tied scores.
TIED_PREDICTION_REASON = (
    "not applicable to tied scores: sqrt(design effect) predicts the grouped spread when the "
    "threshold moves smoothly with the calibration quantile (tie-free scores); with tied scores "
    "M* jumps between a few score values, so the spread is not the exchangeable spread times "
    "sqrt(design effect) and the prediction can be far off in either direction"
)


@dataclass(frozen=True)
class TieSummary:
    """How tied a set of scores is.

    ``distinct`` counts infinity as one value; ``tied_rows`` counts scores sharing their value
    with another; ``largest_tie`` is the size of the largest group of equal values.
    """

    n: int
    distinct: int
    tied_rows: int
    largest_tie: int

    @property
    def has_ties(self) -> bool:
        """True when at least two scores are equal."""
        return self.tied_rows > 0


def _pool(scores: ArrayLike) -> NDArray[np.float64]:
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim != 1:
        raise StatsError(f"scores must be one-dimensional, got shape {array.shape}")
    if np.isnan(array).any():
        raise StatsError("scores must not contain NaN")
    return array


def tie_summary(scores: ArrayLike) -> TieSummary:
    """Count the ties among scores.

    ``scores`` (shape (N,)) may hold ``inf``.

    Raises:
        StatsError: on NaN or a non-1-D input.
    """
    array = _pool(scores)
    _, counts = np.unique(array, return_counts=True)
    return TieSummary(
        n=int(array.size),
        distinct=int(counts.size),
        tied_rows=int(counts[counts > 1].sum()),
        largest_tie=int(counts.max()) if counts.size else 0,
    )


@dataclass(frozen=True)
class TiedSplitCoverage:
    """Exact law of realised coverage under a uniformly random split of a fixed pool.

    n of the N pooled scores are drawn for calibration without replacement, t = N - n are
    tested; ``k`` = ceil((n+1)(1-alpha)). ``mean``, ``variance`` and ``sd`` of realised coverage
    are None when k > n (M* is infinite and coverage is 1; ``reason``). ``threshold_law`` lists
    (score value, P(M* = value)) ascending for each value with probability >=
    ``ATOM_TOLERANCE``; ``skipped_mass`` (at most ``MASS_TOLERANCE``) is the probability of the
    atoms skipped and of the summation windows' tails.
    """

    n_pool: int
    n_calibration: int
    n_test: int
    alpha: Fraction
    k: int
    mean: float | None
    variance: float | None
    sd: float | None
    threshold_law: tuple[tuple[float, float], ...]
    skipped_mass: float
    reason: str | None


def tied_split_coverage(
    scores: ArrayLike, n_calibration: int, alpha: AlphaLike
) -> TiedSplitCoverage:
    """The exact mean and spread of realised coverage under a random split, ties included.

    ``scores`` (shape (N,), ``inf`` allowed) may be tied: ties are handled exactly; n lies in
    [1, N - 1]; ``alpha`` is read exactly. For tie-free scores the variance equals the
    Beta-Binomial(t, k, n+1-k) variance divided by t^2.

    Raises:
        StatsError: on NaN, a bad alpha, n outside [1, N - 1], or if the summed probability
            misses 1 by more than ``MASS_TOLERANCE`` (a numerical failure, never expected).
        InsufficientDataError: with fewer than 2 scores.

    Source: the hypergeometric law of a split without replacement; for tie-free scores it
    reduces to Angelopoulos and Bates (2021) section 3.1 (Beta-Binomial realised coverage).
    """
    pool = _pool(scores)
    total = int(pool.size)
    if total < 2:
        raise InsufficientDataError("a split needs at least 2 scores")
    n = check_count(n_calibration, name="n_calibration")
    if not 1 <= n <= total - 1:
        raise StatsError(f"n_calibration must lie in [1, {total - 1}], got {n}")
    exact = exact_alpha(alpha)
    k = conformal_index(n, exact)
    t = total - n
    values, counts = np.unique(pool, return_counts=True)
    if k > n:
        return TiedSplitCoverage(
            n_pool=total,
            n_calibration=n,
            n_test=t,
            alpha=exact,
            k=k,
            mean=None,
            variance=None,
            sd=None,
            threshold_law=(),
            skipped_mass=0.0,
            reason=f"k = {k} > n = {n}: the threshold is infinite and coverage is 1",
        )
    cumulative = np.cumsum(counts)
    previous = cumulative - counts
    # P(M* <= v_j) = P(A_j >= k); the atom probabilities are its increments.
    at_most = hypergeom.sf(k - 1, total, cumulative, n)
    atoms = np.diff(np.concatenate([[0.0], at_most]))
    kept = np.flatnonzero(atoms >= ATOM_TOLERANCE)
    c_j, c_prev = cumulative[kept], previous[kept]
    share = c_j / total
    spread = np.sqrt(n * share * (1 - share) * t / max(total - 1, 1))
    centre = n * share
    # A_j >= k, A_j - A_{j-1} <= c_j (so A_j < k + c_j), A_j <= n, C_j and A_j >= C_j - t; and
    # the hypergeometric mass of A_j outside centre +- WINDOW_SDS sd is negligible.
    low = np.maximum.reduce(
        [np.full(kept.size, k), c_j - t, np.floor(centre - WINDOW_SDS * spread) - WINDOW_PAD]
    )
    high = np.minimum.reduce(
        [
            np.full(kept.size, n),
            c_j,
            k - 1 + counts[kept],
            np.ceil(centre + WINDOW_SDS * spread) + WINDOW_PAD,
        ]
    ).astype(np.int64)
    low = low.astype(np.int64)
    sizes = np.clip(high - low + 1, 0, None)
    atom = np.repeat(np.arange(kept.size), sizes)
    a = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes) + low[atom]
    w_all = hypergeom.pmf(a, total, c_j[atom], n) * hypergeom.cdf(k - 1, c_j[atom], c_prev[atom], a)
    r_all = (c_j[atom] - a) / t
    per_atom = np.bincount(atom, weights=w_all, minlength=kept.size)
    law = [(float(values[j]), float(p)) for j, p in zip(kept, per_atom, strict=True) if p > 0]
    mass = float(w_all.sum())
    if abs(mass - 1.0) > MASS_TOLERANCE:
        raise StatsError(f"the exact split law summed to {mass!r}, not 1: refusing the result")
    mean = float(np.dot(w_all, r_all)) / mass
    variance = max(float(np.dot(w_all, (r_all - mean) ** 2)) / mass, 0.0)
    return TiedSplitCoverage(
        n_pool=total,
        n_calibration=n,
        n_test=t,
        alpha=exact,
        k=k,
        mean=mean,
        variance=variance,
        sd=math.sqrt(variance),
        threshold_law=tuple(law),
        skipped_mass=abs(1.0 - mass),
        reason=None,
    )
