"""Confidence sequences and e-processes for the mean of [0, 1] observations, by betting.

Observations x_1, x_2, ... in [0, 1] arrive one at a time. For a candidate mean m, a gambler
who bets lambda_t on "x_t exceeds m" (the positive side) or "x_t falls short of m" (the
negative side) has the capital

    K_t^+(m) = prod_{i <= t} (1 + lambda_i^+ (x_i - m_i)),
    K_t^-(m) = prod_{i <= t} (1 - lambda_i^- (x_i - m_i)),

with bets chosen from x_1..x_{i-1} only (predictable). At the true mean both are nonnegative
martingales, so by Ville's inequality P(sup_t K_t >= 1/alpha) <= alpha: the set of means whose
capital stayed below 1/alpha covers the truth at every t simultaneously with probability
>= 1 - alpha (time-uniform). A team may therefore look after every label and stop whenever it
likes, for any reason, without voiding the guarantee; a fixed-n interval shown at such a
data-dependent time is not valid, only the sequence is.

Choices, all of Waudby-Smith & Ramdas (2024):

- Hedged capital (two-sided): K_t(m) = max(theta K_t^+(m), (1 - theta) K_t^-(m)), theta = 1/2,
  Sec. 4, Thm 3; one-sided upper bound: the negative side alone at level alpha.
- Predictable plug-in bets: lambda_t = sqrt(2 log(1/a) / (s2_{t-1} t log(1 + t))), a = alpha/2
  per side of the hedged process and a = alpha for a one-sided figure, with the regularised
  running mean mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1) and variance
  s2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1), s2_0 = 1/4; truncated at c/m_t (positive
  side) and c/(1 - m_t) (negative side) with c = 1/2, which keeps every factor >= 1/2 > 0.
- The sequence is the set {m : K_t(m) < 1/alpha} evaluated over a grid of candidate means
  (G + 1 points k/G); each capital is monotone in m, so the set is an interval and widening the
  extreme included grid points by 1/G keeps it valid. The reported bounds are the running
  intersection (max of the lower, min of the upper bounds so far), valid by the same argument.
- Sampling without replacement from a finite population of N items (``population``): m_i is
  then the mean of the items not yet drawn were the population mean m,
  m_i = (N m - sum_{j<i} x_j) / (N - i + 1), which makes K_t a martingale for the *finite
  population's* mean exactly; m with m_i outside [0, 1] is impossible given the draws and is
  excluded, and the deterministic ("logical") bounds sum x / N and 1 - (t - sum x) / N apply.

Assumptions: i.i.d. observations (or a uniformly random draw order without replacement from the
finite population), in an order that does not depend on their values. An order in which the
easy items come back first is not such an order.

Sources: Waudby-Smith and Ramdas (2024), "Estimating means of bounded random variables by
betting", JRSS-B 86(1), 1–27, arXiv:2010.09686 (hedged capital, Thm 3; predictable plug-in bets;
the grid construction); Waudby-Smith and Ramdas (2020), "Confidence sequences for sampling without
replacement", NeurIPS 33 (the conditional means m_i and the logical bounds); Ville (1939),
"Étude critique de la notion de collectif" (the maximal inequality). The reference package
``confseq`` (``betting_cs``, ``betting_mart``, ``betting_upper_cs`` with its default
``lambda_predmix_eb`` bets) implements the same process; the tests compare with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit

#: Bet truncation c: |lambda| <= c / m (or c / (1 - m)); WSR's and confseq's default 1/2.
TRUNCATION = 0.5
#: Grid of candidate means: G + 1 points k / G (confseq's default ``breaks``).
GRID = 1000

ASSUMPTION = (
    "anytime-valid (time-uniform): observations i.i.d. or drawn without replacement, in a "
    "random order fixed before any label was seen; valid at every sample size at once, so one "
    "may stop whenever the figure suffices"
)


def check_observations(x: ArrayLike, *, name: str = "x") -> NDArray[np.float64]:
    """Return ``x`` as a one-dimensional float array of values in [0, 1].

    Raises:
        StatsError: if ``x`` is not one-dimensional, or holds a value outside [0, 1] or NaN.
    """
    values = np.asarray(x, dtype=np.float64)
    if values.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional, got shape {values.shape}")
    if values.size and not bool(np.all((values >= 0.0) & (values <= 1.0))):
        raise StatsError(f"{name} must lie in [0, 1] (no NaN)")
    return values


def _check_population(population: int | None, n: int) -> int | None:
    if population is None:
        return None
    if isinstance(population, bool) or int(population) != population or population < max(n, 1):
        raise StatsError(f"population must be an integer >= the {n} observations, got {population}")
    return int(population)


def plug_in_bets(x: NDArray[np.float64], *, level: float) -> NDArray[np.float64]:
    """Predictable plug-in bets lambda_t (WSR 2024, Sec. 4), before truncation.

    ``x``: shape (n,), values in [0, 1]; ``level``: the per-side alpha in (0, 1). Returns shape
    (n,); lambda_t uses x_1..x_{t-1} only.
    """
    n = x.size
    t = np.arange(1, n + 1, dtype=np.float64)
    mu = (0.5 + np.cumsum(x)) / (t + 1.0)
    s2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1.0)
    s2_before = np.concatenate(([0.25], s2[:-1]))
    return np.sqrt(2.0 * math.log(1.0 / level) / (s2_before * t * np.log1p(t)))


def _null_means(
    x: NDArray[np.float64], m: NDArray[np.float64], population: int | None
) -> NDArray[np.float64]:
    """m_i for each candidate mean (rows) and time (columns): shape (len(m), n)."""
    if population is None:
        return np.broadcast_to(m[:, None], (m.size, x.size))
    before = np.concatenate(([0.0], np.cumsum(x)[:-1]))
    left = population - np.arange(x.size, dtype=np.float64)
    return (population * m[:, None] - before[None, :]) / left[None, :]


def log_capital(
    x: NDArray[np.float64],
    m: NDArray[np.float64],
    *,
    side: int,
    level: float,
    population: int | None,
) -> NDArray[np.float64]:
    """Return log K_t^{side}(m), shape (len(m), n); +inf where m is impossible (WoR)."""
    mt = _null_means(x, m, population)
    lam = plug_in_bets(x, level=level)[None, :]
    with np.errstate(divide="ignore"):
        cap = TRUNCATION / (mt if side > 0 else 1.0 - mt)
    possible = (mt >= 0.0) & (mt <= 1.0)
    lam = np.where(possible, np.minimum(lam, cap), 0.0)
    log_factor = np.log1p(side * lam * (x[None, :] - np.where(possible, mt, 0.0)))
    log_k = np.cumsum(log_factor, axis=1)
    # An impossible m stays impossible (the draws only add up): its capital is infinite.
    impossible = np.logical_or.accumulate(~possible, axis=1)
    return np.where(impossible, np.inf, log_k)


@dataclass(frozen=True)
class ConfidenceSequence:
    """A running-intersection confidence sequence for a mean in [0, 1].

    ``lower`` and ``upper`` have shape (n,), the bounds after each observation (``lower`` is 0
    for a one-sided upper CS); P(the mean leaves [lower_t, upper_t] at any t) <= ``alpha``.
    ``two_sided``: hedged capital, else the upper side only; ``population`` is N when sampling
    without replacement.
    """

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    alpha: float
    two_sided: bool
    population: int | None
    n: int
    assumption: str = ASSUMPTION

    @property
    def final_lower(self) -> float:
        """The lower bound now (0 before any observation)."""
        return float(self.lower[-1]) if self.n else 0.0

    @property
    def final_upper(self) -> float:
        """The upper bound now (1 before any observation)."""
        return float(self.upper[-1]) if self.n else 1.0


#: Grid points times observations evaluated at once (about 16 MB per float array).
BLOCK_CELLS = 2_000_000


def check_grid(grid: int) -> int:
    """Return ``grid`` if it is an integer >= 2 (the candidate means' steps G).

    Raises:
        StatsError: otherwise.
    """
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 2:
        raise StatsError(f"grid must be an integer >= 2, got {grid!r}")
    return grid


def grid_sequence(
    values: NDArray[np.float64],
    *,
    alpha: float,
    population: int | None,
    grid: int,
    two_sided: bool,
    lower: float = 0.0,
    upper: float = 1.0,
    blocked: bool = False,
) -> ConfidenceSequence:
    """The betting sequence for the mean of checked observations in [lower, upper].

    Each value is bet on as x_t = (z_t - lower) / (upper - lower) in [0, 1] (the identity on
    [0, 1]) against the candidate means k / G of z itself, rescaled the same way. ``blocked``
    evaluates the grid in blocks of :data:`BLOCK_CELLS` cells so that memory stays linear in n
    (the per-candidate capitals do not depend on each other). ``population``: N for sampling
    without replacement (with [lower, upper] = [0, 1] only), or None. Inputs are not checked.
    """
    n = values.size
    if n == 0:
        empty = np.zeros(0)
        return ConfidenceSequence(empty, empty, alpha, two_sided, population, 0)
    width = upper - lower
    x = np.clip((values - lower) / width, 0.0, 1.0)  # clip: rounding only
    rates = np.arange(grid + 1, dtype=np.float64) / grid
    candidates = np.clip((rates - lower) / width, 0.0, 1.0)
    threshold = math.log(1.0 / alpha)
    first = np.full(n, -1)
    last = np.full(n, -1)
    block = max(1, BLOCK_CELLS // n) if blocked else grid + 1
    for start in range(0, grid + 1, block):
        m = candidates[start : start + block]
        if two_sided:
            # hedged: max(K+/2, K-/2) < 1/alpha, each side betting at level alpha/2
            plus = log_capital(x, m, side=1, level=alpha / 2, population=population)
            minus = log_capital(x, m, side=-1, level=alpha / 2, population=population)
            inside = np.maximum(plus, minus) + math.log(0.5) < threshold
        else:
            inside = log_capital(x, m, side=-1, level=alpha, population=population) < threshold
        any_in = inside.any(axis=0)
        first = np.where((first < 0) & any_in, start + np.argmax(inside, axis=0), first)
        top = start + m.size - 1 - np.argmax(inside[::-1], axis=0)
        last = np.where(any_in, top, last)
    kept = first >= 0
    low = np.where(kept, np.maximum(0.0, rates[first] - 1.0 / grid), 0.0)
    high = np.where(kept, np.minimum(1.0, rates[last] + 1.0 / grid), 1.0)
    if not two_sided:
        low = np.zeros(n)
    if population is not None:
        t = np.arange(1, n + 1, dtype=np.float64)
        s = np.cumsum(values)
        high = np.minimum(high, 1.0 - (t - s) / population)
        if two_sided:
            low = np.maximum(low, s / population)
    return ConfidenceSequence(
        lower=np.maximum.accumulate(low),
        upper=np.minimum.accumulate(high),
        alpha=alpha,
        two_sided=two_sided,
        population=population,
        n=n,
    )


def _sequence(
    x: ArrayLike, alpha: float, population: int | None, grid: int, two_sided: bool
) -> ConfidenceSequence:
    a = check_open_unit(alpha, name="alpha")
    values = check_observations(x)
    big_n = _check_population(population, values.size)
    return grid_sequence(
        values, alpha=a, population=big_n, grid=check_grid(grid), two_sided=two_sided
    )


def betting_cs(
    x: ArrayLike, *, alpha: float = 0.05, population: int | None = None, grid: int = GRID
) -> ConfidenceSequence:
    """Two-sided time-uniform confidence sequence for the mean, hedged capital.

    ``x`` (shape (n,), in [0, 1]) is in its label-independent order; ``population`` is N when
    sampling without replacement (None: i.i.d.); the grid of candidate means has ``grid`` = G
    steps (resolution 1/G). n = 0 gives empty arrays (final bounds 0 and 1).

    Raises:
        StatsError: on a value outside [0, 1], alpha outside (0, 1), N < n, or G < 2.

    Source: Waudby-Smith and Ramdas (2024), JRSS-B 86(1), Sec. 4, Thm 3 (hedged capital with
    predictable plug-in bets, theta = 1/2, truncation c = 1/2).
    """
    return _sequence(x, alpha, population, grid, two_sided=True)


def betting_upper_cs(
    x: ArrayLike, *, alpha: float = 0.05, population: int | None = None, grid: int = GRID
) -> ConfidenceSequence:
    """One-sided time-uniform upper confidence sequence for the mean (lower bound 0).

    The negative-side capital alone, betting at level alpha: P(the mean exceeds upper_t for
    some t) <= alpha. Arguments, errors and source as :func:`betting_cs`.
    """
    return _sequence(x, alpha, population, grid, two_sided=False)


@dataclass(frozen=True)
class BelowTargetTest:
    """The betting e-process for H0: mean >= target, and its decision.

    H0 is rejected ("below target") once ``wealth``, the e-process K_t after each observation
    (shape (n,); inf where H0 is impossible given the draws, without replacement only), reaches
    1/``delta``; ``stopped_at`` is the first such t (1-based); ``max_wealth`` is 1 before any
    observation.
    """

    target: float
    delta: float
    wealth: NDArray[np.float64]
    rejected: bool
    stopped_at: int | None
    max_wealth: float
    assumption: str = ASSUMPTION


def below_target_test(
    x: ArrayLike, *, target: float, delta: float = 0.05, population: int | None = None
) -> BelowTargetTest:
    """Sequential test of H0: mean >= target by betting that observations fall short of it.

    K_t = prod (1 - lambda_i (x_i - m_i)) with m_i = target (or its without-replacement
    conditional mean), lambda_i >= 0 the plug-in bet at level delta truncated at
    1/2 / (1 - m_i). For every mean >= target each factor has conditional mean <= 1, so K_t
    is a nonnegative supermartingale under the whole composite null (an e-process), and by
    Ville's inequality P(sup_t K_t >= 1/delta) <= delta: rejecting at the first crossing, or at
    any later look, has type-I error <= delta whenever the team stops. Rejection coincides (up
    to the grid) with the one-sided upper sequence at level delta falling below the target.

    ``x`` (shape (n,), in [0, 1]) is in its label-independent order; ``population`` is N when
    sampling without replacement (None: i.i.d.).

    Raises:
        StatsError: on a value outside [0, 1], target or delta outside (0, 1), or N < n.

    Source: Waudby-Smith and Ramdas (2024), JRSS-B 86(1), Sec. 4 (capital process and
    predictable plug-in bets); Ville (1939) for the maximal inequality.
    """
    g = check_open_unit(delta, name="delta")
    m = check_open_unit(target, name="target")
    values = check_observations(x)
    big_n = _check_population(population, values.size)
    log_k = log_capital(values, np.array([m]), side=-1, level=g, population=big_n)[0]
    crossed = log_k >= math.log(1.0 / g)
    wealth = np.exp(log_k)
    return BelowTargetTest(
        target=m,
        delta=g,
        wealth=wealth,
        rejected=bool(crossed.any()),
        stopped_at=int(np.argmax(crossed)) + 1 if crossed.any() else None,
        max_wealth=float(max(1.0, wealth.max(initial=1.0))),
    )


@dataclass(frozen=True)
class StratumSequence:
    """One stratum's part of a stratified anytime bound.

    ``population`` is N_h, ``observed`` n_h (None: not in the design), ``share`` W_h = N_h / N.
    ``lower``/``upper`` are two-sided and ``upper_bound`` one-sided, each at 1 - alpha/H; 0, 1
    and 1 when unobserved.
    """

    key: str
    population: int
    observed: int | None
    share: float
    lower: float
    upper: float
    upper_bound: float


@dataclass(frozen=True)
class StratifiedSequenceBound:
    """Anytime-valid bounds on a stratified population mean sum_h W_h m_h.

    ``estimate`` = sum_h W_h (mean of stratum h's observations), None while a stratum of the
    design has none; ``lower``/``upper`` (two-sided) and ``upper_bound`` (one-sided) combine the
    strata's bounds, each at ``per_stratum_alpha`` = alpha / H, H the strata of the design; ``n``
    counts observations over all strata; ``strata`` are in the order given.
    """

    estimate: float | None
    lower: float
    upper: float
    upper_bound: float
    alpha: float
    per_stratum_alpha: float
    n: int
    strata: tuple[StratumSequence, ...]
    assumption: str


def stratified_betting_bounds(
    observations: dict[str, NDArray[np.float64] | None],
    populations: dict[str, int],
    *,
    alpha: float = 0.05,
    grid: int = GRID,
) -> StratifiedSequenceBound:
    """Combine per-stratum betting sequences into bounds on the population mean.

    The mean is sum_h W_h m_h, W_h = N_h / N. Each of the H strata of the design (those with an
    observation array, possibly empty) gets its sequences at alpha/H, sampling without
    replacement from its N_h items; all hold at every time at once with probability
    >= 1 - alpha (Bonferroni over the H strata fixed by the design, before any label), so
    sum_h W_h L_h and sum_h W_h U_h bound the mean at any combination of stratum sample sizes,
    however chosen. A stratum outside the design (None) or not yet observed counts its share
    as [0, 1]. One stratum is the plain sequence at alpha.

    ``observations`` map stratum keys to shape (n_h,) observations in [0, 1] in draw order, or
    None for a stratum with no item in the design; ``populations`` give N_h >= n_h for the same
    keys; ``grid`` as :func:`betting_cs`.

    Raises:
        StatsError: on mismatched keys, no stratum in the design, N_h < n_h, or bad values.

    Source: Waudby-Smith and Ramdas (2024) per stratum (see :func:`betting_cs`); the weighted
    Bonferroni combination as for the fixed-n stratified exact bound.
    """
    a = check_open_unit(alpha, name="alpha")
    if set(observations) != set(populations):
        raise StatsError("observations and populations must have the same strata")
    design = [k for k, v in observations.items() if v is not None]
    if not design:
        raise StatsError("no stratum is in the design")
    total = sum(int(n) for n in populations.values())
    per = a / len(design)
    rows = []
    lower = upper = one = 0.0
    estimate: float | None = 0.0
    used = 0
    for key, x in observations.items():
        big_n = int(populations[key])
        share = big_n / total
        if x is None or len(x) == 0:
            row = StratumSequence(key, big_n, None if x is None else 0, share, 0.0, 1.0, 1.0)
            estimate = None
        else:
            two = betting_cs(x, alpha=per, population=big_n, grid=grid)
            up = betting_upper_cs(x, alpha=per, population=big_n, grid=grid)
            row = StratumSequence(
                key, big_n, two.n, share, two.final_lower, two.final_upper, up.final_upper
            )
            used += two.n
            if estimate is not None:
                estimate += share * float(np.mean(x))
        rows.append(row)
        lower += share * row.lower
        upper += share * row.upper
        one += share * row.upper_bound
    assumption = ASSUMPTION
    if len(observations) > 1:
        assumption += (
            f"; stratified: each stratum's sequence at alpha/H (H = {len(design)} strata of the "
            "design, sampled without replacement), weighted by its share N_h/N"
        )
    return StratifiedSequenceBound(
        estimate=estimate,
        lower=min(1.0, lower),
        upper=min(1.0, upper),
        upper_bound=min(1.0, one),
        alpha=a,
        per_stratum_alpha=per,
        n=used,
        strata=tuple(rows),
        assumption=assumption,
    )
