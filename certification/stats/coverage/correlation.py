"""Within-group and lag correlations of a per-row quantity: ICC(1) and lag-k autocorrelations.

ICC(1) is the one-way ANOVA estimator, with the unequal-group-size form of Donner (1986).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.intervals import check_count

#: Spread at or below which a quantity counts as constant: a value constant in exact arithmetic
#: need not be constant in floating point.
CONSTANT_TOLERANCE = 1e-12


@dataclass(frozen=True)
class ICCResult:
    """One-way ANOVA intra-class correlation ICC(1).

    ``icc`` = (MSB - MSW) / (MSB + (m0 - 1) MSW), in [-1/(m0-1), 1], None when undefined
    (``reason``); MSB and MSW are the mean squares between and within the G groups of N rows;
    ``group_size`` is m0 (m for equal groups, else (N - sum n_i^2 / N) / (G - 1)).
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

    ``groups`` are G sequences of finite values (e.g. 0/1 coverage indicators), sizes may
    differ. ``icc`` is None with reason "no variation" when every value is the same.

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

    ``values`` are rho_1, rho_2, ... (lag 1 first), stopping before a lag with no pair inside
    any group, with ``pairs`` used per lag; empty when undefined (constant indicator,
    ``reason``).
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

    ``sequences`` are G sequences of finite values in within-group order (e.g. the coverage
    indicator per row of a document), lengths may differ; ``max_lag`` defaults to the longest
    length - 1. Empty with a reason when the pooled values are constant.

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
