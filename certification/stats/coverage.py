"""Coverage variability: how far one calibration's realised coverage can land from 1 - alpha.

Two finite samples move realised conformal coverage. Given n calibration points and
k = ceil((n+1)(1-alpha)), the coverage the threshold delivers on fresh data is Beta(k, n+1-k) for
tie-free scores; the fraction covered on n_test test points is then Beta-Binomial(n_test, k,
n+1-k), variance about alpha(1-alpha)/(n+2) + alpha(1-alpha)/n_test. Leaving out the second term
understates the spread by sqrt(2) with equal halves.

Rows that share a source (a document, an entity, a question's candidates) are not independent. A
random *row* split of a fixed pool is exchangeable by construction and cannot detect that; a
*grouped* split (whole groups to one side, as a deployment meets new documents) shows the real
spread, and the design effect computed from the within-group correlation of the coverage
indicator predicts it before the split is run (sqrt(deff) = predicted excess). An i.i.d. control
(the same procedure on pools resampled with replacement) gives the band of excess values that
noise alone produces.

When rows share a source, split by group; spreads and effective sample sizes then use groups or
a design effect.

Sources: "Uncertainty for Language Models, Taught Through What Breaks", episode 5
(https://jongha-jeon-dev.github.io/standarderror/lectures/; 1.06x row excess inside the 0.88-1.10
i.i.d. band, 1.42x grouped, 1.43x predicted); Angelopoulos and Bates (2021), arXiv:2107.07511,
section 3.1 (Beta and Beta-Binomial coverage); Vovk, Gammerman and Shafer (2005); Kish (1965),
Survey Sampling (design effect 1 + (m-1) rho, m_w = sum m_i^2 / sum m_i); Donner (1986) for ICC(1)
with unequal group sizes.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.conformal import AlphaLike, conformal_index, exact_alpha
from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.intervals import check_count

__all__ = [
    "CoverageSpread",
    "DependenceReport",
    "DesignEffect",
    "ICCResult",
    "IIDControl",
    "LagCorrelations",
    "RealisedCoverageSpread",
    "SplitSpread",
    "beta_coverage",
    "design_effect",
    "design_effect_from_lags",
    "design_effect_unequal",
    "effective_sample_size",
    "icc_oneway",
    "iid_control",
    "lag_correlations",
    "realised_coverage_spread",
    "split_dependence_report",
    "split_spread",
]

#: Spread at or below which a quantity counts as constant: a value constant in exact arithmetic
#: need not be constant in floating point.
CONSTANT_TOLERANCE = 1e-12


# -- Beta and Beta-Binomial spreads -----------------------------------------------------------
@dataclass(frozen=True)
class CoverageSpread:
    """Distribution of the coverage a conformal threshold delivers: Beta(k, n+1-k).

    Attributes:
        n_calibration: n.
        alpha: the miscoverage level, exact.
        k: ceil((n+1)(1-alpha)).
        a: the Beta's first parameter (k), or None when k > n.
        b: the Beta's second parameter (n+1-k), or None when k > n.
        mean: k/(n+1), or None.
        variance: k(n+1-k) / ((n+1)^2 (n+2)), or None.
        sd: sqrt(variance), or None.
        reason: why the values are None (k > n: the threshold is infinite and covers everything),
            or None.
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

    Args:
        n_calibration: n, integer >= 1.
        alpha: miscoverage level in (0, 1) (read exactly, as in conformal calibration).

    Returns:
        A :class:`CoverageSpread`.

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

    Attributes:
        n_calibration: n.
        n_test: test points.
        alpha: the miscoverage level, exact.
        k: ceil((n+1)(1-alpha)).
        mean: k/(n+1), or None when k > n.
        variance: exact variance of the covered fraction, or None.
        sd: sqrt(variance), or None.
        beta_variance: the calibration (Beta) term alone, or None.
        approximate_variance: alpha(1-alpha)/(n+2) + alpha(1-alpha)/n_test (always defined).
        reason: why values are None, or None.
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

    Args:
        n_calibration: n, integer >= 1.
        n_test: test points, integer >= 1.
        alpha: miscoverage level in (0, 1).

    Returns:
        A :class:`RealisedCoverageSpread`.

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


# -- design effect and ICC --------------------------------------------------------------------
@dataclass(frozen=True)
class DesignEffect:
    """A design effect: the variance of a mean over its value under independence.

    Attributes:
        value: deff > 0 (1 = independent rows; > 1 = positively correlated within groups).
        cluster_size: the (weighted) cluster size the formula used: m, m_w, or the mean block
            length for lag correlations.
        method: ``"equal clusters"``, ``"unequal clusters"`` or ``"lag correlations"``.
    """

    value: float
    cluster_size: float
    method: str

    @property
    def predicted_excess(self) -> float:
        """sqrt(deff): the predicted ratio of the grouped-split SD to the exchangeable SD."""
        return math.sqrt(self.value)


def _check_rho(rho: object, name: str = "rho") -> float:
    if isinstance(rho, bool) or not isinstance(rho, int | float | np.floating):
        raise StatsError(f"{name} must be a correlation in [-1, 1], got {rho!r}")
    value = float(rho)
    if not (-1.0 <= value <= 1.0):
        raise StatsError(f"{name} must lie in [-1, 1], got {rho!r}")
    return value


def _finish(value: float, size: float, method: str) -> DesignEffect:
    if value <= 0:
        raise StatsError(
            f"design effect {value:.6g} <= 0: the correlation is below its lower limit "
            "for this cluster size"
        )
    return DesignEffect(value=value, cluster_size=size, method=method)


def design_effect(cluster_size: int, rho: float) -> DesignEffect:
    """Kish's design effect for equal clusters: 1 + (m - 1) rho.

    Args:
        cluster_size: m, rows per cluster, integer >= 1.
        rho: intra-cluster correlation in [-1, 1] (e.g. :func:`icc_oneway`).

    Returns:
        A :class:`DesignEffect` (``method="equal clusters"``).

    Raises:
        StatsError: if m < 1, rho is outside [-1, 1], or the result is not positive
            (rho < -1/(m-1)).

    Source: Kish (1965) section 5.4. Check: m 5, rho 0.1 gives 1.4.
    """
    m = check_count(cluster_size, name="cluster_size")
    if m < 1:
        raise StatsError("cluster_size must be >= 1")
    return _finish(1 + (m - 1) * _check_rho(rho), float(m), "equal clusters")


def design_effect_unequal(cluster_sizes: Sequence[int], rho: float) -> DesignEffect:
    """Design effect for unequal clusters: 1 + (m_w - 1) rho, m_w = sum(m_i^2) / sum(m_i).

    Args:
        cluster_sizes: shape (G,), integer sizes >= 1.
        rho: intra-cluster correlation in [-1, 1].

    Returns:
        A :class:`DesignEffect` whose ``cluster_size`` is m_w.

    Raises:
        StatsError: on an empty list, a size < 1 or a non-integer, or rho out of range.

    Source: Kish (1965) (size-weighted mean cluster size). Check: [1,2,3,4,10], rho 0.2 gives
    m_w 6.5, deff 2.1.
    """
    sizes = [check_count(m, name=f"cluster_sizes[{i}]") for i, m in enumerate(cluster_sizes)]
    if not sizes or min(sizes) < 1:
        raise StatsError("cluster_sizes must be a non-empty list of sizes >= 1")
    m_w = sum(m * m for m in sizes) / sum(sizes)
    return _finish(1 + (m_w - 1) * _check_rho(rho), m_w, "unequal clusters")


def design_effect_from_lags(
    lag_correlations: Sequence[float], block_sizes: int | Sequence[int]
) -> DesignEffect:
    """Design effect of block means from lag correlations: 1 + 2 sum_k (1 - k/m) rho_k.

    For blocks of unequal sizes m_i (N rows in all) the same variance computation gives
    1 + (2/N) sum_i sum_{k < m_i} (m_i - k) rho_k, which reduces to the formula above when all
    sizes equal m.

    Args:
        lag_correlations: rho_1, rho_2, ... (lag 1 first), each in [-1, 1]; lags >= m_i
            are ignored for a block of size m_i, missing lags count as 0.
        block_sizes: m (all blocks equal) or the sizes m_i, integers >= 1.

    Returns:
        A :class:`DesignEffect` (``method="lag correlations"``, ``cluster_size`` the mean size).

    Raises:
        StatsError: on a correlation out of range, a bad size, or a non-positive result.

    Source: the variance of a mean of a stationary sequence (e.g. Kish 1965); episode 5
    ("design effect 2.06, predicted excess 1.43").
    """
    rho = np.array(
        [_check_rho(r, f"lag_correlations[{i}]") for i, r in enumerate(lag_correlations)]
    )
    sizes_in = [block_sizes] if isinstance(block_sizes, int | np.integer) else list(block_sizes)
    sizes = np.array([check_count(m, name="block_sizes") for m in sizes_in], dtype=np.int64)
    if sizes.size == 0 or sizes.min() < 1:
        raise StatsError("block_sizes must be >= 1")
    lags = np.arange(1, rho.size + 1)
    # sum over blocks of (m_i - k)_+ for each lag k, then weight rho_k.
    pairs = np.clip(sizes[:, None] - lags[None, :], 0, None).sum(axis=0)
    value = 1 + 2 * float(np.dot(pairs, rho)) / float(sizes.sum())
    return _finish(value, float(sizes.mean()), "lag correlations")


def effective_sample_size(n: int, deff: DesignEffect | float) -> float:
    """The effective sample size n / deff: how many independent rows n correlated rows are worth.

    Args:
        n: rows, integer >= 0.
        deff: a :class:`DesignEffect` or its value (> 0).

    Returns:
        n / deff (may be fractional).

    Raises:
        StatsError: on a non-integer n or a non-positive design effect.

    Source: Kish (1965). Check: n 1000, deff 1.4 gives 714.2857.
    """
    rows = check_count(n, name="n")
    value = deff.value if isinstance(deff, DesignEffect) else float(deff)
    if not value > 0:
        raise StatsError(f"deff must be > 0, got {deff!r}")
    return rows / value


@dataclass(frozen=True)
class ICCResult:
    """One-way ANOVA intra-class correlation ICC(1).

    Attributes:
        icc: (MSB - MSW) / (MSB + (m0 - 1) MSW), in [-1/(m0-1), 1], or None (see ``reason``).
        msb: mean square between groups.
        msw: mean square within groups.
        n_groups: G.
        n: rows N.
        group_size: m0, the group size in the formula (m for equal groups, else
            (N - sum n_i^2 / N) / (G - 1)).
        reason: why ``icc`` is undefined, or None.
    """

    icc: float | None
    msb: float
    msw: float
    n_groups: int
    n: int
    group_size: float
    reason: str | None


def icc_oneway(groups: Sequence[Sequence[float]] | Sequence[ArrayLike]) -> ICCResult:
    """ICC(1) from a one-way ANOVA of values grouped by source.

    Args:
        groups: G groups, each a sequence of finite values (e.g. 0/1 coverage indicators); sizes
            may differ.

    Returns:
        An :class:`ICCResult`; ``icc`` is None with reason "no variation" when every value is the
        same (the denominator is 0).

    Raises:
        StatsError: on a non-finite value.
        InsufficientDataError: if G < 2, a group is empty, or no group has 2 or more rows (no
            within-group degrees of freedom).

    Source: Fisher's intraclass correlation via ANOVA; Donner (1986) for m0. Check: the 0/1 groups
    [[1,1,1,0],[0,0,0,0],[1,1,0,1],[1,1,1,1],[0,0,1,0]] give MSB 0.675, MSW 0.15, ICC(1) 0.4666667.
    """
    arrays = [np.asarray(g, dtype=np.float64).ravel() for g in groups]
    if len(arrays) < 2:
        raise InsufficientDataError("icc needs at least 2 groups")
    if any(a.size == 0 for a in arrays):
        raise InsufficientDataError("every group must hold at least one value")
    if any(not np.isfinite(a).all() for a in arrays):
        raise StatsError("groups must hold finite values")
    sizes = np.array([a.size for a in arrays], dtype=np.float64)
    total = float(sizes.sum())
    n_groups = len(arrays)
    if total <= n_groups:
        raise InsufficientDataError("no within-group degrees of freedom: every group has 1 row")
    means = np.array([a.mean() for a in arrays])
    grand = float(np.concatenate(arrays).mean())
    ssb = float(np.dot(sizes, (means - grand) ** 2))
    ssw = float(sum(float(((a - a.mean()) ** 2).sum()) for a in arrays))
    msb = ssb / (n_groups - 1)
    msw = ssw / (total - n_groups)
    m0 = (total - float((sizes**2).sum()) / total) / (n_groups - 1)
    denominator = msb + (m0 - 1) * msw
    if abs(denominator) <= CONSTANT_TOLERANCE:
        return ICCResult(
            icc=None,
            msb=msb,
            msw=msw,
            n_groups=n_groups,
            n=int(total),
            group_size=m0,
            reason="no variation: every value is the same",
        )
    return ICCResult(
        icc=(msb - msw) / denominator,
        msb=msb,
        msw=msw,
        n_groups=n_groups,
        n=int(total),
        group_size=m0,
        reason=None,
    )


@dataclass(frozen=True)
class LagCorrelations:
    """Within-group correlations of a row indicator at lags 1, 2, ...

    Attributes:
        values: rho_1, rho_2, ... (lag 1 first); a lag with no pair inside any group is omitted
            (the tuple stops before it). Empty when undefined.
        pairs: pairs used per lag, aligned with ``values``.
        reason: why the correlations are undefined (the indicator is constant), or None.
    """

    values: tuple[float, ...]
    pairs: tuple[int, ...]
    reason: str | None


def lag_correlations(
    sequences: Sequence[ArrayLike], *, max_lag: int | None = None
) -> LagCorrelations:
    """Correlation of values between rows k apart inside one sequence, pooled over sequences.

    rho_k = sum over within-sequence pairs (x_t - mu)(x_{t+k} - mu) / (pairs_k * var), with mu and
    var the pooled mean and (population) variance of all rows, as in episode 5 ("measure how
    correlated that mark is between rows a given distance apart inside one sequence").

    Args:
        sequences: G sequences of finite values in their within-group order (e.g. the coverage
            indicator per row of a document); lengths may differ.
        max_lag: the largest lag, default the longest sequence length - 1.

    Returns:
        A :class:`LagCorrelations`; empty with a reason when the pooled values are constant.

    Raises:
        StatsError: on a non-finite value or a negative max_lag.
        InsufficientDataError: if there are no rows.
    """
    arrays = [np.asarray(s, dtype=np.float64).ravel() for s in sequences]
    pooled = np.concatenate(arrays) if arrays else np.empty(0)
    if pooled.size == 0:
        raise InsufficientDataError("sequences hold no rows")
    if not np.isfinite(pooled).all():
        raise StatsError("sequences must hold finite values")
    longest = max(a.size for a in arrays)
    top = longest - 1 if max_lag is None else check_count(max_lag, name="max_lag")
    if float(np.ptp(pooled)) <= CONSTANT_TOLERANCE:
        return LagCorrelations(values=(), pairs=(), reason="no variation: the values are constant")
    mu, var = float(pooled.mean()), float(pooled.var())
    centred = [a - mu for a in arrays]
    values: list[float] = []
    pairs: list[int] = []
    for lag in range(1, min(top, longest - 1) + 1):
        products = 0.0
        count = 0
        for c in centred:
            if c.size > lag:
                products += float(np.dot(c[:-lag], c[lag:]))
                count += c.size - lag
        values.append(max(-1.0, min(1.0, products / (count * var))))
        pairs.append(count)
    return LagCorrelations(values=tuple(values), pairs=tuple(pairs), reason=None)


# -- seeded split simulations -----------------------------------------------------------------
SplitKind = Literal["row", "group"]


@dataclass(frozen=True)
class SplitSpread:
    """Realised coverage over repeated random calibration/test splits of one pool.

    Attributes:
        split: ``"row"`` (rows assigned independently) or ``"group"`` (whole groups).
        draws: splits simulated.
        seed: the generator seed.
        mean: mean realised coverage.
        sd: standard deviation of realised coverage over draws (ddof = 1).
        n_calibration: mean calibration size over draws.
        n_test: mean test size over draws.
        beta_sd: the Beta (calibration-only) SD for ``n_calibration``, or None when undefined.
        exchangeable_sd: the SD with both terms (Beta-Binomial), or None when undefined.
        sd_ratio: sd / beta_sd (the comparison episode 5 shows to be short a term), or None.
        excess: sd / exchangeable_sd (1 = what exchangeable rows give), or None.
    """

    split: SplitKind
    draws: int
    seed: int
    mean: float
    sd: float
    n_calibration: float
    n_test: float
    beta_sd: float | None
    exchangeable_sd: float | None
    sd_ratio: float | None
    excess: float | None


def _coverage_once(
    scores: NDArray[np.float64], calibration: NDArray[np.bool_], alpha: Fraction
) -> tuple[float, int, int]:
    cal = scores[calibration]
    test = scores[~calibration]
    n_cal = int(cal.size)
    k = conformal_index(n_cal, alpha)
    threshold = math.inf if k > n_cal else float(np.partition(cal, k - 1)[k - 1])
    return float(np.count_nonzero(test <= threshold)) / test.size, n_cal, int(test.size)


def _hashable_label(label: object) -> Hashable:
    if not isinstance(label, Hashable):
        raise StatsError(f"a group label must be hashable, got {type(label).__name__}")
    return label


def _group_ids(groups: Sequence[Hashable] | ArrayLike, n: int) -> NDArray[np.int64]:
    values = groups.tolist() if isinstance(groups, np.ndarray) else groups
    if not isinstance(values, Sequence) or isinstance(values, str | bytes):
        raise StatsError(f"groups must be a sequence of labels, got {type(groups).__name__}")
    labels = [_hashable_label(label) for label in values]
    if len(labels) != n:
        raise StatsError(f"groups must have one label per score ({n}), got {len(labels)}")
    index: dict[Hashable, int] = {}
    return np.array([index.setdefault(label, len(index)) for label in labels], dtype=np.int64)


def _check_pool(scores: ArrayLike) -> NDArray[np.float64]:
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim != 1 or array.size < 4:
        raise InsufficientDataError("scores must be one-dimensional with at least 4 rows")
    if np.isnan(array).any():
        raise StatsError("scores must not contain NaN")
    return array


def split_spread(
    scores: ArrayLike,
    groups: Sequence[Hashable] | ArrayLike | None = None,
    *,
    alpha: AlphaLike,
    draws: int = 200,
    seed: int = 0,
    split: SplitKind = "row",
    calibration_fraction: float = 0.5,
) -> SplitSpread:
    """Simulate split conformal on random calibration/test splits of a fixed pool.

    Each draw splits the pool (rows independently, or whole groups), takes the conformal
    threshold of the calibration part (k-th smallest, k = ceil((n+1)(1-alpha))) and records the
    fraction of test scores at or below it.

    Args:
        scores: shape (N,), nonconformity scores (lower = more conforming; ``inf`` allowed).
        groups: shape (N,), a hashable group label per row (required for ``split="group"``).
        alpha: miscoverage level in (0, 1).
        draws: number of splits, integer >= 2.
        seed: seed of ``numpy.random.default_rng``; the same seed gives the same report.
        split: ``"row"`` or ``"group"``.
        calibration_fraction: share of rows (or groups) sent to calibration, in (0, 1).

    Returns:
        A :class:`SplitSpread`.

    Raises:
        StatsError: on a bad argument, or ``split="group"`` without groups or with fewer than 2.
        InsufficientDataError: with fewer than 4 rows.

    Source: episode 5 (200 row splits and 200 sequence splits of 24,576 predictions).
    """
    pool = _check_pool(scores)
    exact = exact_alpha(alpha)
    rounds = check_count(draws, name="draws")
    if rounds < 2:
        raise StatsError("draws must be >= 2 to estimate a spread")
    if not (0 < calibration_fraction < 1):
        raise StatsError("calibration_fraction must lie in (0, 1)")
    rng = np.random.default_rng(seed)
    n = pool.size
    ids: NDArray[np.int64] | None = None
    if split == "group":
        if groups is None:
            raise StatsError("split='group' needs groups")
        ids = _group_ids(groups, n)
        n_groups = int(ids.max()) + 1
        if n_groups < 2:
            raise StatsError("split='group' needs at least 2 groups")
        n_cal_groups = min(max(round(n_groups * calibration_fraction), 1), n_groups - 1)
    elif split != "row":
        raise StatsError(f"split must be 'row' or 'group', got {split!r}")
    n_cal_rows = min(max(round(n * calibration_fraction), 1), n - 1)

    coverages = np.empty(rounds)
    cal_sizes = np.empty(rounds)
    test_sizes = np.empty(rounds)
    for draw in range(rounds):
        if ids is None:
            calibration = np.zeros(n, dtype=bool)
            calibration[rng.permutation(n)[:n_cal_rows]] = True
        else:
            chosen = np.zeros(int(ids.max()) + 1, dtype=bool)
            chosen[rng.permutation(chosen.size)[:n_cal_groups]] = True
            calibration = chosen[ids]
        coverages[draw], cal_sizes[draw], test_sizes[draw] = _coverage_once(
            pool, calibration, exact
        )
    n_cal = float(cal_sizes.mean())
    n_test = float(test_sizes.mean())
    spread = realised_coverage_spread(max(round(n_cal), 1), max(round(n_test), 1), exact)
    beta_sd = math.sqrt(spread.beta_variance) if spread.beta_variance is not None else None
    sd = float(coverages.std(ddof=1))
    return SplitSpread(
        split=split,
        draws=rounds,
        seed=seed,
        mean=float(coverages.mean()),
        sd=sd,
        n_calibration=n_cal,
        n_test=n_test,
        beta_sd=beta_sd,
        exchangeable_sd=spread.sd,
        sd_ratio=sd / beta_sd if beta_sd else None,
        excess=sd / spread.sd if spread.sd else None,
    )


@dataclass(frozen=True)
class IIDControl:
    """Excess values that i.i.d. pools of the same size give under the same row-split procedure.

    Attributes:
        pools: pools simulated.
        draws: splits per pool.
        seed: the generator seed.
        excess: one row-split excess per pool.
        low: smallest excess.
        high: largest excess.
        mean: mean excess.
    """

    pools: int
    draws: int
    seed: int
    excess: tuple[float, ...]
    low: float
    high: float
    mean: float


def iid_control(
    scores: ArrayLike,
    *,
    alpha: AlphaLike,
    pools: int = 20,
    draws: int = 200,
    seed: int = 0,
    calibration_fraction: float = 0.5,
) -> IIDControl:
    """Resample the scores with replacement into i.i.d. pools and measure their row-split excess.

    Args:
        scores: shape (N,), the pool's nonconformity scores.
        alpha: miscoverage level in (0, 1).
        pools: number of i.i.d. pools, integer >= 1.
        draws: splits per pool, integer >= 2.
        seed: generator seed (pool j uses a child seed derived from it).
        calibration_fraction: share of rows sent to calibration.

    Returns:
        An :class:`IIDControl`: the band an excess must leave to mean anything.

    Raises:
        StatsError: on a bad argument.
        InsufficientDataError: with fewer than 4 rows.

    Source: episode 5 ("twenty pools that are i.i.d. by construction ... 0.88 to 1.10").
    """
    pool = _check_pool(scores)
    count = check_count(pools, name="pools")
    if count < 1:
        raise StatsError("pools must be >= 1")
    rng = np.random.default_rng(seed)
    excess = []
    for _ in range(count):
        resampled = rng.choice(pool, size=pool.size, replace=True)
        child = int(rng.integers(0, 2**31 - 1))
        result = split_spread(
            resampled,
            alpha=alpha,
            draws=draws,
            seed=child,
            split="row",
            calibration_fraction=calibration_fraction,
        )
        if result.excess is None:
            raise StatsError("the exchangeable spread is undefined (calibration too small)")
        excess.append(result.excess)
    return IIDControl(
        pools=count,
        draws=draws,
        seed=seed,
        excess=tuple(excess),
        low=min(excess),
        high=max(excess),
        mean=float(np.mean(excess)),
    )


@dataclass(frozen=True)
class DependenceReport:
    """Row split vs grouped split vs i.i.d. control, with the design-effect prediction.

    Attributes:
        row: the row-split spread (cannot detect dependence: exchangeable by construction).
        group: the grouped-split spread (the deployment-like one).
        control: the i.i.d. band of excess values.
        lags: within-group lag correlations of the coverage indicator at the pooled threshold.
        design_effect: the design effect from those correlations, or None when undefined.
        predicted_excess: sqrt(design effect), or None.
        effective_n: N / design effect, or None.
    """

    row: SplitSpread
    group: SplitSpread
    control: IIDControl
    lags: LagCorrelations
    design_effect: DesignEffect | None
    predicted_excess: float | None
    effective_n: float | None


def split_dependence_report(
    scores: ArrayLike,
    groups: Sequence[Hashable] | ArrayLike,
    *,
    alpha: AlphaLike,
    draws: int = 200,
    pools: int = 20,
    seed: int = 0,
    max_lag: int | None = None,
) -> DependenceReport:
    """Episode 5's comparison: row splits, grouped splits, an i.i.d. control and the prediction.

    Each row is marked covered at the pooled threshold (the conformal threshold of all N rows);
    the lag correlations of that mark inside each group (rows in the order given) give the design
    effect, whose square root predicts the grouped split's excess before it is run.

    Args:
        scores: shape (N,), nonconformity scores, rows of a group in their sequence order.
        groups: shape (N,), group label per row.
        alpha: miscoverage level in (0, 1).
        draws: splits per simulation.
        pools: i.i.d. control pools.
        seed: generator seed; row, group and control runs use seed, seed + 1 and seed + 2.
        max_lag: largest lag for the correlations (default: longest group - 1).

    Returns:
        A :class:`DependenceReport`.

    Raises:
        StatsError: on a bad argument.
        InsufficientDataError: with fewer than 4 rows.
    """
    pool = _check_pool(scores)
    exact = exact_alpha(alpha)
    ids = _group_ids(groups, pool.size)
    k = conformal_index(pool.size, exact)
    threshold = math.inf if k > pool.size else float(np.partition(pool, k - 1)[k - 1])
    covered = (pool <= threshold).astype(np.float64)
    order = np.argsort(ids, kind="stable")
    boundaries = np.flatnonzero(np.diff(ids[order])) + 1
    sequences = np.split(covered[order], boundaries)
    lags = lag_correlations(sequences, max_lag=max_lag)
    deff: DesignEffect | None = None
    if lags.reason is None:
        try:
            deff = design_effect_from_lags(lags.values, [s.size for s in sequences])
        except StatsError:
            deff = None
    return DependenceReport(
        row=split_spread(pool, alpha=exact, draws=draws, seed=seed, split="row"),
        group=split_spread(pool, ids, alpha=exact, draws=draws, seed=seed + 1, split="group"),
        control=iid_control(pool, alpha=exact, pools=pools, draws=draws, seed=seed + 2),
        lags=lags,
        design_effect=deff,
        predicted_excess=deff.predicted_excess if deff else None,
        effective_n=pool.size / deff.value if deff else None,
    )
