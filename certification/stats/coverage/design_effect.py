"""Design effects of clustered rows and the effective sample size they leave.

Kish (1965), Survey Sampling: deff = 1 + (m-1) rho for clusters of size m, with
m_w = sum m_i^2 / sum m_i for unequal cluster sizes; sqrt(deff) is the predicted excess of the
spread over the i.i.d. one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from certification.stats.errors import StatsError
from certification.stats.intervals import check_count


@dataclass(frozen=True)
class DesignEffect:
    """A design effect: the variance of a mean over its value under independence.

    ``value`` is deff > 0 (1 = independent rows; > 1 = positively correlated within groups);
    ``cluster_size`` is the one the formula used (m, m_w, or the mean block length); ``method``
    is ``"equal clusters"``, ``"unequal clusters"`` or ``"lag correlations"``.
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

    ``cluster_size`` m >= 1 rows per cluster; ``rho`` in [-1, 1] (e.g. :func:`icc_oneway`).

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

    ``cluster_sizes`` (shape (G,)) are integers >= 1; ``cluster_size`` of the result is m_w.

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

    ``lag_correlations`` are rho_1, rho_2, ... (lag 1 first) in [-1, 1]: lags >= m_i are
    ignored for a block of size m_i, missing lags count as 0. ``block_sizes`` is m or the sizes
    m_i; the result's ``cluster_size`` is the mean size.

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

    The result may be fractional.

    Raises:
        StatsError: on a non-integer n or a non-positive design effect.

    Source: Kish (1965). Check: n 1000, deff 1.4 gives 714.2857.
    """
    rows = check_count(n, name="n")
    value = deff.value if isinstance(deff, DesignEffect) else float(deff)
    if not value > 0:
        raise StatsError(f"deff must be > 0, got {deff!r}")
    return rows / value
