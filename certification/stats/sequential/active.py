"""Anytime-valid bounds on an error rate from an active sample, by betting.

An active sample (:mod:`certification.stats.ppi.active`) draws item t with its own probability
pi_t, and the item's summand Z_t = f_t + (Y_t - f_t) xi_t / pi_t has mean the error rate: the
label Y_t is needed only when the item is drawn (xi_t = 1); an item not drawn contributes its
prediction f_t at once. Taken in a uniformly random order fixed before any label, with the
items treated as i.i.d. draws from the traffic (the design function pi(f) held fixed), the Z_t
are i.i.d. with mean theta = E[Y], the traffic's error rate, and lie in a range [lo, hi] known
before the first item (:func:`~certification.stats.ppi.active_observation_range`).

The betting sequences of :mod:`~certification.stats.sequential.betting` then apply to
x_t = (Z_t - lo) / (hi - lo) in [0, 1], whose mean is (theta - lo) / (hi - lo). One global range
is needed: a per-item rescaling (Z_t - a_t) / (b_t - a_t) with item t's own bounds would make
the bet on item t depend on its prediction f_t, and E[Z_t | f_t] = E[Y | f_t] is not theta, so
the capital would not be a martingale at theta. The candidate means are error rates on a grid
of step 1/G in [0, 1] (not rescaled means: the range hi - lo can be large, 1 / pi_0), and the
grid is evaluated in blocks so that memory stays linear in the number of items.

Source: Waudby-Smith and Ramdas (2024), "Estimating means of bounded random variables by
betting", JRSS-B 86(1), 1–27, arXiv:2010.09686, Sec. 4 (hedged capital, predictable plug-in
bets, observations in a known bounded range rescaled to [0, 1]); Zrnic and Candès (2024),
"Active Statistical Inference", ICML, arXiv:2403.03208, Sec. 3 (the summand).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit
from certification.stats.sequential.betting import (
    GRID,
    ConfidenceSequence,
    check_grid,
    grid_sequence,
)

ACTIVE_SEQUENCE_ASSUMPTION = (
    "the workload's items are treated as i.i.d. draws from the traffic (as the fixed-n "
    "human-only bound does), taken in a uniformly random order fixed by the sample's seed "
    "before any label, each drawn independently with its recorded probability; the bound is "
    "on the traffic's error rate"
)


def bounded_betting_cs(
    z: ArrayLike,
    *,
    lower: float,
    upper: float,
    alpha: float = 0.05,
    grid: int = GRID,
    two_sided: bool = True,
) -> ConfidenceSequence:
    """Time-uniform confidence sequence for a mean in [0, 1] of observations in [lower, upper].

    Each z_t is rescaled to x_t = (z_t - lower) / (upper - lower) and bet on as in
    :func:`~certification.stats.sequential.betting_cs` (two-sided, hedged) or
    :func:`~certification.stats.sequential.betting_upper_cs` (one-sided upper bound at alpha,
    lower bounds 0), with the candidate means k / G, k = 0..G, of the mean of z itself; the
    extreme kept candidates are widened by 1/G, and the bounds are running intersections.
    ``z`` (shape (n,)) is i.i.d. with mean in [0, 1], in a value-independent order; ``lower``
    <= 0 and ``upper`` >= 1 are fixed before the first observation; ``grid`` = G >= 2.
    ``population`` is None; n = 0 gives empty arrays.

    Raises:
        StatsError: on lower > 0, upper < 1, a non-finite range, an observation outside it or
            NaN, a non-1-D z, alpha outside (0, 1), or G < 2.

    Source: Waudby-Smith and Ramdas (2024), JRSS-B 86(1), Sec. 4, Thm 3.
    """
    a = check_open_unit(alpha, name="alpha")
    if not (math.isfinite(lower) and math.isfinite(upper)) or lower > 0.0 or upper < 1.0:
        raise StatsError(
            f"the range must satisfy lower <= 0 and upper >= 1, got [{lower}, {upper}]"
        )
    check_grid(grid)
    values = np.asarray(z, dtype=np.float64)
    if values.ndim != 1:
        raise StatsError(f"z must be one-dimensional, got shape {values.shape}")
    if values.size and not bool(np.all((values >= lower) & (values <= upper))):
        raise StatsError(f"z must lie in [{lower}, {upper}] (no NaN)")
    return grid_sequence(
        values,
        alpha=a,
        population=None,
        grid=grid,
        two_sided=two_sided,
        lower=lower,
        upper=upper,
        blocked=True,
    )


@dataclass(frozen=True)
class ActiveSequenceBound:
    """Anytime-valid bounds on the error rate from an active sample's summands so far.

    ``estimate`` is the mean of the summands so far clipped to [0, 1] (None before any);
    ``lower``/``upper`` are the hedged two-sided bounds and ``upper_bound`` the one-sided one,
    now, at 1 - alpha for all times at once. ``n`` counts items in the sequence (drawn or not),
    ``n_labelled`` the drawn ones; [``range_lower``, ``range_upper``] is the summands' range,
    fixed before the first item.
    """

    estimate: float | None
    lower: float
    upper: float
    upper_bound: float
    alpha: float
    n: int
    n_labelled: int
    range_lower: float
    range_upper: float
    assumption: str = ACTIVE_SEQUENCE_ASSUMPTION


def active_betting_bounds(
    predictions: ArrayLike,
    inclusion: ArrayLike,
    drawn: ArrayLike,
    y: ArrayLike,
    *,
    lower: float,
    upper: float,
    alpha: float = 0.05,
    grid: int = GRID,
) -> ActiveSequenceBound:
    """Return the anytime-valid bounds on the error rate from an active sample, in order.

    Item t contributes Z_t = f_t + (y_t - f_t) xi_t / pi_t; the two-sided and the one-sided
    upper sequences of :func:`bounded_betting_cs` at alpha bound the rate at every t at once.

    ``predictions`` f_t in [0, 1], ``inclusion`` pi_t in (0, 1], ``drawn`` xi_t (bool or 0/1)
    and ``y`` (human labels in [0, 1], 1 = error, read only where drawn) have shape (n), in
    sequence order. ``lower`` and ``upper`` are the design's summand range, fixed before the
    first item (:func:`~certification.stats.ppi.active_observation_range`); ``grid`` G gives
    resolution 1/G.

    Raises:
        StatsError: on misaligned arrays, values out of range, or a summand outside
            [lower, upper] (a range that does not belong to this design).

    Source: Waudby-Smith and Ramdas (2024), JRSS-B 86(1), Sec. 4; Zrnic and Candès (2024),
    arXiv:2403.03208, Sec. 3 (the summand).
    """
    f = np.asarray(predictions, dtype=np.float64)
    pi = np.asarray(inclusion, dtype=np.float64)
    xi = np.asarray(drawn, dtype=np.float64)
    labels = np.asarray(y, dtype=np.float64)
    if f.ndim != 1 or not (f.shape == pi.shape == xi.shape == labels.shape):
        raise StatsError("predictions, inclusion, drawn and y must be aligned 1-D arrays")
    if not bool(np.all((f >= 0) & (f <= 1) & (labels >= 0) & (labels <= 1))):
        raise StatsError("predictions and y must lie in [0, 1] (no NaN)")
    if not bool(np.all((pi > 0) & (pi <= 1))) or not bool(np.all((xi == 0) | (xi == 1))):
        raise StatsError("inclusion must lie in (0, 1] and drawn must be 0 or 1")
    z = f + (labels - f) * xi / pi
    two = bounded_betting_cs(z, lower=lower, upper=upper, alpha=alpha, grid=grid)
    one = bounded_betting_cs(z, lower=lower, upper=upper, alpha=alpha, grid=grid, two_sided=False)
    return ActiveSequenceBound(
        estimate=min(1.0, max(0.0, float(z.mean()))) if z.size else None,
        lower=two.final_lower,
        upper=two.final_upper,
        upper_bound=one.final_upper,
        alpha=two.alpha,
        n=int(z.size),
        n_labelled=int(xi.sum()),
        range_lower=float(lower),
        range_upper=float(upper),
    )
