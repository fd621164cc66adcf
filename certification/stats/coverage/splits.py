"""Seeded split simulations: row versus grouped splits of a fixed pool, and an i.i.d. control.

A random *row* split of a fixed pool is exchangeable by construction and cannot detect dependence
between rows that share a source; a *grouped* split (whole groups to one side) shows the real
spread, the design effect predicts it, and the same procedure on pools resampled with replacement
gives the band of excess values that noise alone produces.
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
from certification.stats.coverage.beta import realised_coverage_spread
from certification.stats.coverage.correlation import LagCorrelations, lag_correlations
from certification.stats.coverage.design_effect import DesignEffect, design_effect_from_lags
from certification.stats.coverage.ties import (
    TIED_PREDICTION_REASON,
    TieSummary,
    tie_summary,
    tied_split_coverage,
)
from certification.stats.errors import InsufficientDataError, StatsError
from certification.stats.intervals import check_count

SplitKind = Literal["row", "group"]
#: How the exchangeable reference SD of an excess was computed.
Reference = Literal["beta-binomial", "exact tied split"]


@dataclass(frozen=True)
class SplitSpread:
    """Realised coverage over repeated random calibration/test splits of one pool.

    ``split`` is ``"row"`` (rows assigned independently) or ``"group"`` (whole groups); ``mean``,
    ``sd`` (ddof = 1), ``n_calibration`` and ``n_test`` are over the draws. ``beta_sd`` is the
    Beta (calibration-only) SD at ``n_calibration``, None when undefined or tie-aware (the Beta
    law assumes tie-free scores); ``exchangeable_sd`` is the SD a random row split gives,
    computed per ``reference``: ``"beta-binomial"`` (tie-free, Angelopoulos and Bates 2021
    section 3.1) or ``"exact tied split"``
    (:func:`~certification.stats.coverage.tied_split_coverage`). ``sd_ratio`` = sd / beta_sd
    (the comparison episode 5 shows to be short a term); ``excess`` = sd / exchangeable_sd (1 =
    exchangeable rows).
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
    reference: Reference


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
    tie_aware: bool | None = None,
) -> SplitSpread:
    """Simulate split conformal on random calibration/test splits of a fixed pool.

    Each draw splits the pool (rows independently, or whole groups), takes the conformal
    threshold of the calibration part (k-th smallest, k = ceil((n+1)(1-alpha))) and records the
    fraction of test scores at or below it. The excess divides the measured SD by the SD a
    random row split of the same pool gives: the Beta-Binomial one for tie-free scores, and for
    tied scores (where the Beta-Binomial law does not hold) the exact law of a random split of
    the pool (:func:`~certification.stats.coverage.tied_split_coverage`), at the mean sizes.

    ``scores`` (shape (N,), ``inf`` allowed) are nonconformity scores, lower = more conforming;
    ``groups`` (shape (N,)) is required for ``split="group"``; ``draws`` >= 2. ``tie_aware``
    picks the exact tied reference (True) or the Beta-Binomial one (False); None decides by
    whether the pool holds ties.

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
    sd = float(coverages.std(ddof=1))
    tied = tie_summary(pool).has_ties if tie_aware is None else tie_aware
    reference: Reference
    if tied:
        reference = "exact tied split"
        size = min(max(round(n_cal), 1), n - 1)
        exchangeable_sd = tied_split_coverage(pool, size, exact).sd
        beta_sd = None
    else:
        reference = "beta-binomial"
        spread = realised_coverage_spread(max(round(n_cal), 1), max(round(n_test), 1), exact)
        exchangeable_sd = spread.sd
        beta_sd = math.sqrt(spread.beta_variance) if spread.beta_variance is not None else None
    return SplitSpread(
        split=split,
        draws=rounds,
        seed=seed,
        mean=float(coverages.mean()),
        sd=sd,
        n_calibration=n_cal,
        n_test=n_test,
        beta_sd=beta_sd,
        exchangeable_sd=exchangeable_sd,
        sd_ratio=sd / beta_sd if beta_sd else None,
        excess=sd / exchangeable_sd if exchangeable_sd else None,
        reference=reference,
    )


@dataclass(frozen=True)
class IIDControl:
    """Row-split excess per i.i.d. pool of the same size (``low``, ``high``, ``mean`` of it)."""

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

    Each pool's excess uses the reference of the pool it imitates: the exact tied reference
    when the original scores are tied, else the Beta-Binomial one (the duplicates resampling
    creates in a tie-free pool are an artefact of the bootstrap, not ties of the scores).

    ``pools`` >= 1, ``draws`` >= 2 per pool; pool j uses a child seed of ``seed``. The result is
    the band an excess must leave to mean anything.

    Raises:
        StatsError: on a bad argument.
        InsufficientDataError: with fewer than 4 rows.

    Source: episode 5 ("twenty pools that are i.i.d. by construction ... 0.88 to 1.10").
    """
    pool = _check_pool(scores)
    count = check_count(pools, name="pools")
    if count < 1:
        raise StatsError("pools must be >= 1")
    tied = tie_summary(pool).has_ties
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
            tie_aware=tied,
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

    ``row`` cannot detect dependence (exchangeable by construction); ``group`` is the
    deployment-like split. ``lags`` are the within-group lag correlations of the coverage
    indicator at the pooled threshold; ``predicted_excess`` = sqrt(design effect) and
    ``effective_n`` = N / design effect. ``predicted_reason`` says why the prediction is withheld
    for tied scores (for tie-free scores a None prediction means the design effect is undefined).
    """

    row: SplitSpread
    group: SplitSpread
    control: IIDControl
    lags: LagCorrelations
    design_effect: DesignEffect | None
    predicted_excess: float | None
    effective_n: float | None
    ties: TieSummary
    predicted_reason: str | None


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
    effect, whose square root predicts the grouped split's excess before it is run. That
    prediction assumes tie-free scores: for tied scores it is withheld (None, with
    ``predicted_reason``), while the design effect and effective n are still reported.

    Rows of a group are in their sequence order; row, group and control runs use seeds
    ``seed``, ``seed + 1`` and ``seed + 2``; ``max_lag`` defaults to the longest group - 1.

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
    ties = tie_summary(pool)
    predicted_reason = TIED_PREDICTION_REASON if ties.has_ties else None
    return DependenceReport(
        row=split_spread(pool, alpha=exact, draws=draws, seed=seed, split="row"),
        group=split_spread(pool, ids, alpha=exact, draws=draws, seed=seed + 1, split="group"),
        control=iid_control(pool, alpha=exact, pools=pools, draws=draws, seed=seed + 2),
        lags=lags,
        design_effect=deff,
        predicted_excess=deff.predicted_excess if deff and not ties.has_ties else None,
        effective_n=pool.size / deff.value if deff else None,
        ties=ties,
        predicted_reason=predicted_reason,
    )
