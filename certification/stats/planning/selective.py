"""The selective-risk plan: per threshold, the additional units that certify it, and the chance.

See :mod:`certification.stats.planning` for the rules and sources (Angelopoulos et al. 2021,
"Learn then Test", arXiv:2110.01052, sections 3–4).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from certification.stats.errors import StatsError
from certification.stats.intervals import check_count, check_open_unit
from certification.stats.planning.common import MAX_ADDITIONAL, check_n_more
from certification.stats.selective_risk import Method, binomial_p_values, check_method

#: p-values of H: risk > alpha for (errors, denominators, alpha) arrays, as
#: :func:`~certification.stats.selective_risk.binomial_p_values`.
PValues = Callable[[ArrayLike, ArrayLike, float], NDArray[np.float64]]

#: Tail probability of the new denominator count left out of the chance of certifying on each
#: side (see _probability): far below any printed digit.
TAIL = 1e-30


# -- the test, inverted -----------------------------------------------------------------------
class _Test:
    """The certificate's p-value test at one level, with its two inverses.

    ``min_denominator(e)``: the smallest d with p(e, d) <= level; ``max_errors(d)``: the most
    errors e with p(e, d) <= level (-1 when none). Both rely on p being non-decreasing in e and
    non-increasing in d, so ``min_denominator`` is non-decreasing in e; it is kept as a table
    over e = 0, 1, ..., grown by doubling.
    """

    def __init__(self, alpha: float, level: float, p_values: PValues) -> None:
        self.alpha, self.level, self.p_values = alpha, level, p_values
        self._table = np.zeros(0, dtype=np.int64)

    def passes(
        self, errors: NDArray[np.int64], denominators: NDArray[np.int64]
    ) -> NDArray[np.bool_]:
        return np.asarray(self.p_values(errors, denominators, self.alpha) <= self.level)

    def _grow(self, size: int) -> None:
        if size > self._table.size:
            size = max(size, 2 * self._table.size, 64)
            errors = np.arange(self._table.size, size, dtype=np.int64)
            self._table = np.concatenate((self._table, self._bisect_denominator(errors)))

    def min_denominator(self, errors: NDArray[np.int64]) -> NDArray[np.int64]:
        self._grow(int(errors.max()) + 1 if errors.size else 0)
        return self._table[errors]

    def _bisect_denominator(self, errors: NDArray[np.int64]) -> NDArray[np.int64]:
        # Start above Hoeffding's bound exp(-2 (alpha d - e)^2 / d) <= level, which every
        # binomial (and Hoeffding–Bentkus) p-value is below; double where it does not pass yet.
        half_log = math.log(1.0 / self.level) / 2.0
        root = (math.sqrt(half_log) + np.sqrt(half_log + 4.0 * self.alpha * errors)) / (
            2.0 * self.alpha
        )
        high = np.maximum(errors, np.ceil(root**2).astype(np.int64)) + 1
        for _ in range(64):
            failing = ~self.passes(errors, high)
            if not failing.any():
                break
            high = np.where(failing, high * 2, high)
        else:  # pragma: no cover - a p-value that never falls below the level
            raise StatsError("the p-value never falls below the test level")
        low = errors - 1  # d < e is impossible, so d = e - 1 counts as failing
        while True:
            active = high - low > 1
            if not active.any():
                return np.asarray(high, dtype=np.int64)
            mid = (low + high) // 2
            ok = self.passes(errors[active], mid[active])
            high[active] = np.where(ok, mid[active], high[active])
            low[active] = np.where(ok, low[active], mid[active])

    def max_errors(self, denominators: NDArray[np.int64]) -> NDArray[np.int64]:
        """e_max(d) for every d given: the number of e with min_denominator(e) <= d, minus 1."""
        largest = int(denominators.max())
        while not self._table.size or self._table[-1] <= largest:
            self._grow(self._table.size + 1)
        return np.searchsorted(self._table, denominators, side="right").astype(np.int64) - 1


# -- one threshold under the observed rates ---------------------------------------------------
@dataclass(frozen=True)
class _Rates:
    n: int
    d: int
    k: int

    def denominator(self, more: int) -> int:
        return self.d + (more * self.d) // self.n

    def errors(self, denominator: int) -> int:
        return -((-self.k * denominator) // self.d) if self.d else 0

    def first_more(self, denominator: int) -> int:
        """The smallest N with d + floor(N d / n) >= denominator (d > 0)."""
        return max(0, -((-(denominator - self.d) * self.n) // self.d))


def _first_passing_denominator(test: _Test, rates: _Rates, start: int, cap: int) -> int | None:
    """The smallest D in [start, cap] that passes with ceil(k D / d) errors, or None.

    The errors are constant, equal to e, on D in ((e-1) d / k, e d / k]; there D passes iff
    D >= min_denominator(e). Error counts are scanned in doubling blocks.
    """
    d, k = rates.d, rates.k
    if k == 0:
        found = max(start, int(test.min_denominator(np.array([0]))[0]))
        return found if found <= cap else None
    first, last = rates.errors(start), rates.errors(cap)
    size = 64
    while first <= last:
        e = np.arange(first, min(first + size, last + 1), dtype=np.int64)
        low = np.maximum(start, (e - 1) * d // k + 1)
        high = np.minimum(cap, e * d // k)
        candidate = np.maximum(low, test.min_denominator(e))
        hits = np.flatnonzero(candidate <= high)
        if hits.size:
            return int(candidate[hits[0]])
        first, size = int(e[-1]) + 1, size * 2
    return None


def _never_reason(rates: _Rates, alpha: float, level: float) -> str | None:
    if rates.n == 0:
        return "no calibration unit is resolved yet: there is no observed rate to plan from"
    if rates.d == 0:
        return (
            "accepts no calibration answer: at the observed answer rate (0) more units never "
            "reach it"
        )
    if level < 0.5 and rates.k >= alpha * rates.d:
        return (
            f"observed error rate {rates.k}/{rates.d} = {rates.k / rates.d:.4g} is at least "
            f"alpha = {alpha:g}: at that rate no number of labels certifies it"
        )
    return None


@dataclass(frozen=True)
class _Step:
    """A threshold's plan, or None with the reason; ``never`` tells impossible from over budget."""

    more: int | None
    reason: str | None = None
    never: bool = False


def _next_more(test: _Test, rates: _Rates, more: int, budget: int, alpha: float) -> _Step:
    """The smallest N' >= more at which this threshold's own test passes."""
    reason = _never_reason(rates, alpha, test.level)
    if reason is not None:
        return _Step(None, reason, never=rates.n > 0)
    found = _first_passing_denominator(
        test, rates, rates.denominator(more), rates.denominator(budget)
    )
    if found is None:
        return _Step(None, f"not certifiable within {budget:,} more units at the observed rates")
    return _Step(max(more, rates.first_more(found)))


def _probability(test: _Test, rates: _Rates, more: int) -> float:
    """P(this threshold's own test passes with ``more`` units), under the observed rates."""
    n, d, k = rates.n, rates.d, rates.k
    if d == 0:
        return float(test.passes(np.array([k]), np.array([d]))[0])
    # A ~ Binomial(more, d/n) new denominator units. By Bernstein's inequality
    # P(|A - more p| >= t) <= 2 exp(-t^2 / (2 (more p (1-p) + t/3))) = 2 TAIL at the t below,
    # so leaving the outcomes beyond it out misses less than 2 TAIL of probability.
    rate = d / n
    log_term = math.log(1.0 / TAIL)
    reach = log_term / 3 + math.sqrt(log_term**2 / 9 + 2 * log_term * more * rate * (1 - rate))
    low = max(0, math.floor(more * rate - reach))
    high = min(more, math.ceil(more * rate + reach))
    added = np.arange(low, high + 1, dtype=np.int64)
    weights = _st.binom.pmf(added, more, rate)
    allowed = test.max_errors(d + added) - k
    inside = _st.binom.cdf(allowed, added, k / d)
    return float(min(1.0, max(0.0, float(np.dot(weights, inside)))))


# -- selective risk ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ThresholdPlan:
    """One threshold's plan.

    d_j = ``denominator`` (accepted answers or units) and k_j = ``errors`` are the counts now,
    ``rate`` = k_j / d_j (None when d_j = 0). ``additional`` is the fewest more calibration units
    that certify it if the observed rates held (0 when certified now; None: see ``reason``), with
    the counts and P(certify) at that plan in ``planned_*`` and ``probability_at_plan``;
    ``probability_at_n_more`` is P(certify) with the plan's ``n_more`` units. ``never`` is True
    when no number of labels certifies it at the observed rates (it accepts nothing, its rate is
    at least alpha, or in a fixed sequence such a threshold comes first), False when it merely
    needs more than the budget.
    """

    index: int
    denominator: int
    errors: int
    rate: float | None
    certified_now: bool
    additional: int | None
    planned_denominator: int | None
    planned_errors: int | None
    probability_at_plan: float | None
    probability_at_n_more: float | None
    never: bool
    reason: str | None


#: The chances of certifying that a plan also gives the size for: the planned size itself
#: certifies with the chance it shows, often only 50–70 %.
CHANCE_TARGETS = (0.8, 0.95)


@dataclass(frozen=True)
class ChanceSize:
    """The additional units (None: over budget) that certify with >= ``target`` chance."""

    target: float
    additional: int | None
    probability: float | None


def _additional_for_chance(
    chance: Callable[[int], float], start: int, budget: int, target: float
) -> ChanceSize:
    """The first N in [start, budget] where ``chance`` reaches ``target``: doubling, bisection.

    The chance of certifying rises with N up to small dips where one more planned error falls
    due, so the N returned is where it crosses the target (chance(N) >= target > chance(N - 1)
    unless N = start), found in O(log budget) evaluations; past a dip a few smaller sizes may
    reach the target too.
    """
    if chance(start) >= target:
        return ChanceSize(target, start, chance(start))
    low, step = start, 1
    while True:
        high = min(budget, start + step)
        if chance(high) >= target:
            break
        if high == budget:
            return ChanceSize(target, None, None)
        low, step = high, step * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if chance(middle) >= target else (middle, high)
    return ChanceSize(target, high, chance(high))


@dataclass(frozen=True)
class SelectivePlan:
    """The label budget plan of a selective-risk certificate.

    ``test_level`` is delta / M (Bonferroni) or delta (fixed sequence); ``zero_error_minimum`` the
    smallest denominator that certifies with zero errors; ``budget`` the largest number of
    additional units searched. ``probability_is_bound`` is True for fixed-sequence testing, where
    the probabilities are upper bounds (at the plan: the threshold's own test passes; at
    ``n_more``: the smallest such chance over it and the thresholds before it).
    ``fewest_index`` is the planned threshold needing the fewest additional units (first of
    equals; None when none is planned) and ``fewest_for_chance`` its :class:`ChanceSize` per
    :data:`CHANCE_TARGETS`.
    """

    alpha: float
    delta: float
    method: Method
    n: int
    n_thresholds: int
    test_level: float
    zero_error_minimum: int
    n_more: int | None
    budget: int
    probability_is_bound: bool
    rows: tuple[ThresholdPlan, ...]
    fewest_index: int | None
    fewest_for_chance: tuple[ChanceSize, ...]


def _fixed_sequence_plans(
    test: _Test, rates: Sequence[_Rates], budget: int, alpha: float, names: Sequence[str]
) -> list[_Step]:
    """Per threshold: the smallest N at which it and every earlier one pass together.

    That N never decreases along the sequence, so each threshold's search starts at the
    previous one's; a threshold that cannot be certified stops every later one too.
    """
    plans: list[_Step] = []
    more = 0
    stopped: _Step | None = None
    n = rates[0].n
    d = np.array([r.d for r in rates], dtype=np.int64)
    k = np.array([r.k for r in rates], dtype=np.int64)
    for j in range(len(rates)):
        if stopped is not None:
            plans.append(stopped)
            continue
        while True:
            # the prefix's projected counts at ``more``; D passes with K errors iff
            # D >= min_denominator(K), p being non-increasing in D
            denominators = d[: j + 1] + (more * d[: j + 1]) // max(n, 1)
            errors = -((-k[: j + 1] * denominators) // np.maximum(d[: j + 1], 1))
            passing = (d[: j + 1] > 0) & (denominators >= test.min_denominator(errors))
            failing = np.flatnonzero(~passing)
            if not failing.size:
                plans.append(_Step(more))
                break
            steps = {i: _next_more(test, rates[i], more, budget, alpha) for i in failing.tolist()}
            blocked = [(i, step) for i, step in steps.items() if step.more is None]
            if blocked:
                i, step = blocked[0]
                stopped = _Step(
                    None, f"fixed sequence, threshold {names[i]}: {step.reason}", step.never
                )
                plans.append(step if i == j else stopped)
                break
            more = max(step.more for step in steps.values() if step.more is not None)
    return plans


def selective_plan(
    *,
    n: int,
    denominators: Sequence[int],
    errors: Sequence[int],
    alpha: float,
    delta: float,
    method: Method = "bonferroni",
    n_more: int | None = None,
    p_values: PValues = binomial_p_values,
    budget: int = MAX_ADDITIONAL,
    names: Sequence[str] | None = None,
) -> SelectivePlan:
    """Plan the labels a selective-risk certificate needs, per threshold, if the rates held.

    ``n`` counts calibration units after exclusions; d_j = ``denominators[j]`` in [0, n] (accepted
    answers at threshold j, or n under the eligible-units denominator), k_j = ``errors[j]`` in
    [0, d_j]. ``p_values`` is the certificate's p-value function (see the module docstring);
    ``names`` name each threshold in reasons (default ``"#j"``).

    Raises:
        StatsError: on mismatched or inconsistent counts, a level outside (0, 1), an unknown
            method, or ``n_more`` above ``budget``.

    Source: Angelopoulos et al. (2021), "Learn then Test", arXiv:2110.01052, sections 3–4
    (the binomial p-value and family-wise error control the certificate uses). Check: alpha
    0.10, delta 0.05, M 5 and no error give the zero-error minimum 44.
    """
    a = check_open_unit(alpha, name="alpha")
    dl = check_open_unit(delta, name="delta")
    check_method(method)
    size = len(denominators)
    if size == 0 or len(errors) != size:
        raise StatsError(
            f"denominators and errors must be non-empty and of the same length, got {size} "
            f"and {len(errors)}"
        )
    units = check_count(n, name="n")
    cap = check_count(budget, name="budget")
    more = check_n_more(n_more, cap)
    rates = []
    for j, (d, k) in enumerate(zip(denominators, errors, strict=True)):
        d, k = check_count(d, name=f"denominators[{j}]"), check_count(k, name=f"errors[{j}]")
        if k > d or d > units:
            raise StatsError(
                f"threshold {j}: need errors <= denominator <= n, got {k}, {d}, {units}"
            )
        rates.append(_Rates(n=units, d=d, k=k))
    level = dl / size if method == "bonferroni" else dl
    test = _Test(a, level, p_values)

    if method == "bonferroni":
        # each threshold on its own: equal counts plan alike
        by_counts: dict[tuple[int, int], _Step] = {}
        for r in rates:
            if (r.d, r.k) not in by_counts:
                by_counts[r.d, r.k] = _next_more(test, r, 0, cap, a)
        plans = [by_counts[r.d, r.k] for r in rates]
    else:
        labels = list(names) if names is not None else [f"#{j}" for j in range(size)]
        if len(labels) != size:
            raise StatsError(f"names must give one name per threshold, got {len(labels)}")
        plans = _fixed_sequence_plans(test, rates, cap, a, labels)
    chances: dict[tuple[int, int, int], float] = {}

    def chance(rates: _Rates, more: int) -> float:
        key = (rates.d, rates.k, more)
        if key not in chances:
            chances[key] = _probability(test, rates, more)
        return chances[key]

    at_more: list[float | None] = [None] * size
    if more is not None and units:
        at_more = [chance(r, more) for r in rates]
        if method == "fixed_sequence":
            at_more = list(np.minimum.accumulate(np.array(at_more, dtype=np.float64)).tolist())
    rows = []
    for j, (r, step) in enumerate(zip(rates, plans, strict=True)):
        planned = step.more
        planned_d = None if planned is None else r.denominator(planned)
        rows.append(
            ThresholdPlan(
                index=j,
                denominator=r.d,
                errors=r.k,
                rate=r.k / r.d if r.d else None,
                certified_now=planned == 0,
                additional=planned,
                planned_denominator=planned_d,
                planned_errors=None if planned_d is None else r.errors(planned_d),
                probability_at_plan=None if planned is None else chance(r, planned),
                probability_at_n_more=at_more[j],
                never=step.never,
                reason=step.reason,
            )
        )
    plannable = [row for row in rows if row.additional is not None]
    fewest = min(plannable, key=lambda row: row.additional or 0) if plannable else None
    for_chance: tuple[ChanceSize, ...] = ()
    if fewest is not None:
        prefix = rates[: fewest.index + 1] if method == "fixed_sequence" else [rates[fewest.index]]

        def bound(more: int) -> float:
            return min(chance(r, more) for r in prefix)

        sizes: list[ChanceSize] = []
        start = fewest.additional or 0
        for target in CHANCE_TARGETS:  # ascending: each search starts at the previous size
            sizes.append(_additional_for_chance(bound, start, cap, target))
            start = sizes[-1].additional if sizes[-1].additional is not None else cap
        for_chance = tuple(sizes)
    return SelectivePlan(
        alpha=a,
        delta=dl,
        method=method,
        n=units,
        n_thresholds=size,
        test_level=level,
        zero_error_minimum=int(test.min_denominator(np.array([0]))[0]),
        n_more=more,
        budget=cap,
        probability_is_bound=method == "fixed_sequence",
        rows=tuple(rows),
        fewest_index=None if fewest is None else fewest.index,
        fewest_for_chance=for_chance,
    )
