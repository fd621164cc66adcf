"""Selective-risk certification over a prespecified threshold family (Learn then Test).

n i.i.d. calibration questions each have an acceptance score and a 0/1 loss (1 = inadmissible).
For each of M thresholds t_j fixed before calibration, ``m_j`` answers are accepted (``score >=
t_j`` or ``score > t_j``, as the spec declares) and ``k_j`` of them are errors. H_j: P(error |
accepted) > alpha is tested with p_j = P[Binomial(m_j, alpha) <= k_j] (1 when m_j = 0), by
Bonferroni (p_j <= delta/M) or fixed-sequence testing (order fixed in the spec before
calibration). Either way the probability of certifying any unsafe threshold is at most delta, so
choosing among certified thresholds afterwards keeps the claim; nothing certified is the
fail-closed outcome "no certified operating point". Losses that are not 0/1 are refused unless
declared bounded in [0, 1] (``bounded=True``): those are tested with Hoeffding–Bentkus
(:mod:`certification.stats.bounded`, Learn then Test section 3).

Sources: Angelopoulos, Bates, Candès, Jordan and Lei (2021), "Learn then Test: Calibrating
Predictive Algorithms to Achieve Risk Control", arXiv:2110.01052; Clopper and Pearson (1934).
Check: alpha 0.10, delta 0.05, M 5 make the cutoff 0.01; zero errors pass only from m = 44
(0.9^44 = 0.0097).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from certification.stats.bounded import (
    hoeffding_bentkus_p_values,
    hoeffding_bentkus_upper_bounds,
)
from certification.stats.errors import StatsError
from certification.stats.intervals import (
    check_count,
    check_counts,
    check_open_unit,
    clopper_pearson_upper_array,
)

__all__ = [
    "NO_CERTIFIED_OPERATING_POINT",
    "UTILITIES",
    "Certificate",
    "PValueTest",
    "ThresholdCounts",
    "ThresholdResult",
    "binomial_p_value",
    "binomial_p_values",
    "certify",
    "check_accept",
    "check_family",
    "check_method",
    "certify_scores",
    "smallest_certifiable_count",
    "threshold_counts",
]

Acceptance = Literal[">=", ">"]
Method = Literal["bonferroni", "fixed_sequence"]
#: The p-value a certificate used: exact binomial (0/1 losses) or Hoeffding–Bentkus (bounded).
PValueTest = Literal["binomial", "hoeffding_bentkus"]

#: The fail-closed outcome text: when no threshold passes, there is no certificate.
NO_CERTIFIED_OPERATING_POINT = "no certified operating point"
CERTIFIED = "certified"


# -- counts -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThresholdCounts:
    """Integer counts per threshold of a prespecified family.

    ``thresholds`` are in spec order (the testing order of fixed-sequence testing); m_j =
    ``accepted[j]`` in [0, n], k_j = ``errors[j]`` in [0, m_j] (bounded losses: accepted losses
    > 0); ``n`` counts calibration answers. ``loss_sums`` is None for 0/1 losses, else each
    threshold's accepted loss total in [0, m_j] (tested with Hoeffding–Bentkus).

    Raises:
        StatsError: on construction, if the lengths differ, the family is empty, a count is not
            an integer, the counts are inconsistent (k_j > m_j or m_j > n, a loss total outside
            [0, m_j]), or ``accept`` is unknown.
    """

    thresholds: tuple[float, ...]
    accepted: tuple[int, ...]
    errors: tuple[int, ...]
    n: int
    accept: Acceptance = ">="
    loss_sums: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        """Validate the counts (see the class docstring)."""
        check_accept(self.accept)
        size = len(self.thresholds)
        if size == 0:
            raise StatsError("thresholds must hold at least one threshold (M >= 1)")
        if len(self.accepted) != size or len(self.errors) != size:
            raise StatsError(
                f"thresholds, accepted and errors must have the same length, got "
                f"{size}, {len(self.accepted)} and {len(self.errors)}"
            )
        n = check_count(self.n, name="n")
        for j, (m, k) in enumerate(zip(self.accepted, self.errors, strict=True)):
            m = check_count(m, name=f"accepted[{j}]")
            k = check_count(k, name=f"errors[{j}]")
            if k > m:
                raise StatsError(f"errors[{j}]={k} exceeds accepted[{j}]={m}")
            if m > n:
                raise StatsError(f"accepted[{j}]={m} exceeds n={n}")
        if self.loss_sums is not None:
            if len(self.loss_sums) != size:
                raise StatsError(f"loss_sums must have length {size}, got {len(self.loss_sums)}")
            for j, (m, total) in enumerate(zip(self.accepted, self.loss_sums, strict=True)):
                if not (math.isfinite(total) and 0.0 <= total <= m):
                    raise StatsError(f"loss_sums[{j}]={total!r} is outside [0, accepted[{j}]={m}]")

    @property
    def test(self) -> PValueTest:
        """The p-value these counts are tested with."""
        return "binomial" if self.loss_sums is None else "hoeffding_bentkus"

    @property
    def size(self) -> int:
        """M, the size of the whole prespecified family (Bonferroni divides delta by it)."""
        return len(self.thresholds)


def check_accept(accept: object) -> None:
    """Raise StatsError unless ``accept`` is ``">="`` or ``">"``."""
    if accept not in (">=", ">"):
        raise StatsError(f"accept must be '>=' or '>', got {accept!r}")


def check_method(method: object) -> None:
    """Raise StatsError unless ``method`` is ``"bonferroni"`` or ``"fixed_sequence"``."""
    if method not in ("bonferroni", "fixed_sequence"):
        raise StatsError(f"method must be 'bonferroni' or 'fixed_sequence', got {method!r}")


def check_family(
    scores: ArrayLike,
    losses: ArrayLike,
    thresholds: Sequence[float] | ArrayLike,
    *,
    bounded: bool,
) -> tuple[NDArray[np.float64], NDArray[Any], NDArray[np.float64]]:
    """Return scores, losses and thresholds as arrays, after checking them.

    Shapes: scores (n,) floats, +-inf allowed; losses (n,) 0/1 (int64) or, with ``bounded``,
    in [0, 1] (float64); thresholds (M,) floats, M >= 1.

    Raises:
        StatsError: if a shape disagrees, a score or threshold is NaN, a loss is not 0/1 (with
            ``bounded``: not in [0, 1]), or the family is empty.
    """
    score_arr = np.asarray(scores, dtype=np.float64)
    if score_arr.ndim != 1:
        raise StatsError(f"scores must be one-dimensional, got shape {score_arr.shape}")
    if np.isnan(score_arr).any():
        raise StatsError("scores must not contain NaN (a missing score has no acceptance decision)")
    loss_arr = _check_losses(losses, int(score_arr.shape[0]), bounded)
    family = np.asarray(thresholds, dtype=np.float64)
    if family.ndim != 1 or family.size == 0:
        raise StatsError(f"thresholds must be a non-empty 1-D list, got shape {family.shape}")
    if np.isnan(family).any():
        raise StatsError("thresholds must not contain NaN")
    return score_arr, loss_arr, family


def _check_losses(losses: ArrayLike, n: int, bounded: bool) -> NDArray[Any]:
    array = np.asarray(losses)
    if array.ndim != 1 or array.shape[0] != n:
        raise StatsError(f"losses must have shape ({n},) like scores, got {array.shape}")
    if array.dtype == np.bool_:
        return array.astype(np.float64 if bounded else np.int64)
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise StatsError(f"losses must be 0/1 numbers or booleans, got dtype {array.dtype}")
    if bounded:
        values = array.astype(np.float64)
        bad = np.flatnonzero(~((values >= 0) & (values <= 1)))
        if bad.size:
            raise StatsError(
                f"losses[{int(bad[0])}]={float(values[bad[0]])!r} is outside [0, 1] "
                "(a bounded loss)"
            )
        return values
    if not np.all((array == 0) | (array == 1)):
        raise StatsError(
            "losses must be 0/1: the exact binomial p-value is valid only for binary losses "
            "(a bounded non-binary loss needs Hoeffding–Bentkus)"
        )
    return array.astype(np.int64)


def threshold_counts(
    scores: ArrayLike,
    losses: ArrayLike,
    thresholds: Sequence[float] | ArrayLike,
    *,
    accept: Acceptance = ">=",
    bounded: bool = False,
) -> ThresholdCounts:
    """Count accepted answers and accepted errors (or loss totals) at every threshold.

    Raises:
        StatsError: if shapes disagree, a score or threshold is NaN, a loss is not 0/1 (with
            ``bounded``: not in [0, 1]), the family is empty, or ``accept`` is unknown.
    """
    check_accept(accept)
    score_arr, loss_arr, family = check_family(scores, losses, thresholds, bounded=bounded)
    n = int(score_arr.shape[0])

    order = np.argsort(score_arr, kind="stable")
    sorted_scores = score_arr[order]
    # cumulative[i] = errors among the i lowest scores, so errors above position i = total - it.
    cumulative = np.concatenate(([0], np.cumsum(loss_arr[order] > 0)))
    side: Literal["left", "right"] = "left" if accept == ">=" else "right"
    first_accepted = np.searchsorted(sorted_scores, family, side=side)
    accepted = n - first_accepted
    errors = cumulative[-1] - cumulative[first_accepted]
    loss_sums = None
    if bounded:
        # top[i] = total loss of the i highest scores, summed from the top (never a difference
        # of large sums), clipped to [0, i] against rounding.
        top = np.concatenate(([0.0], np.cumsum(loss_arr[order][::-1])))
        totals = np.minimum(top[accepted], accepted)
        loss_sums = tuple(float(t) for t in totals.tolist())
    return ThresholdCounts(
        thresholds=tuple(family.tolist()),
        accepted=tuple(int(m) for m in accepted.tolist()),
        errors=tuple(int(k) for k in errors.tolist()),
        n=n,
        accept=accept,
        loss_sums=loss_sums,
    )


# -- p-values ---------------------------------------------------------------------------------
def binomial_p_value(errors: int, accepted: int, alpha: float) -> float:
    """Exact p-value of H: risk > alpha, p = P[Binomial(accepted, alpha) <= errors].

    Raises:
        StatsError: if a count is not an integer, k > m, or alpha is outside (0, 1).

    Source: Angelopoulos et al. (2021), Learn then Test (conservative boundary p-value
    p = P[Binomial(m, alpha) <= k] for H: risk > alpha). Check: m 44, k 0, alpha 0.10 gives
    0.9^44 = 0.0096977373.
    """
    return float(binomial_p_values([errors], [accepted], alpha)[0])


def binomial_p_values(errors: ArrayLike, accepted: ArrayLike, alpha: float) -> NDArray[np.float64]:
    """Vectorised :func:`binomial_p_value` for a whole family.

    ``errors`` and ``accepted`` are integer arrays of shape (M,) with k_j <= m_j. Returns float64
    p_j = ``scipy.stats.binom.cdf(k_j, m_j, alpha)`` of shape (M,), 1 where m_j = 0.

    Raises:
        StatsError: on non-integer arrays, mismatched shapes, k_j > m_j or alpha outside (0, 1).
    """
    k = check_counts(errors, name="errors")
    m = check_counts(accepted, name="accepted")
    if k.shape != m.shape:
        raise StatsError(f"errors and accepted must have the same shape, got {k.shape}, {m.shape}")
    if np.any(k > m):
        raise StatsError("errors must be <= accepted elementwise")
    a = check_open_unit(alpha, name="alpha")
    p = np.ones(k.shape, dtype=np.float64)
    some = m > 0
    p[some] = _st.binom.cdf(k[some], m[some], a)
    return p


def smallest_certifiable_count(
    *, alpha: float, delta: float, n_thresholds: int = 1, errors: int = 0
) -> int:
    """The smallest accepted count m with P[Binomial(m, alpha) <= errors] <= delta / n_thresholds.

    With zero errors this is ceil(ln(delta/M) / ln(1-alpha)) (alpha 0.10, delta 0.05,
    M 5 gives 44). It tells a spec author how many accepted calibration answers a threshold needs
    before it can certify at all. The comparison is the one :func:`certify` makes (Bonferroni).

    Raises:
        StatsError: on a level outside (0, 1) or a non-integer/zero family size or error count.
    """
    a = check_open_unit(alpha, name="alpha")
    d = check_open_unit(delta, name="delta")
    size = check_count(n_thresholds, name="n_thresholds")
    if size == 0:
        raise StatsError("n_thresholds must be >= 1")
    k = check_count(errors, name="errors")
    level = d / size

    def passes(m: int) -> bool:
        return float(_st.binom.cdf(k, m, a)) <= level

    # p is decreasing in m; bracket by doubling, then bisect to the first m that passes.
    low, high = k, max(k + 1, 1)
    while not passes(high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        if passes(mid):
            high = mid
        else:
            low = mid
    return high


# -- certification ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ThresholdResult:
    """One threshold's row in a certificate: raw counts, p-value, bound and decision.

    ``answer_rate`` = m_j / n (None when n = 0, see ``note``); ``empirical_risk`` = k_j / m_j
    (bounded losses: loss_sum / m_j), None when m_j = 0. ``p_value`` = P[Binom(m_j, alpha) <= k_j]
    (bounded losses: Hoeffding–Bentkus) and ``upper_bound`` the one-sided Clopper–Pearson
    (Hoeffding–Bentkus) bound at the certificate's ``bound_confidence``; both 1 when m_j = 0.
    ``tested`` is False only after the first failure in fixed-sequence testing.
    """

    index: int
    threshold: float
    accepted: int
    errors: int
    answer_rate: float | None
    empirical_risk: float | None
    p_value: float
    upper_bound: float
    tested: bool
    certified: bool
    note: str | None
    loss_sum: float | None = None


#: Declared utilities for choosing among certified thresholds. Each maps a row to a key that is
#: maximised; ties go to the earlier threshold in family order (deterministic, spec-defined).
UTILITIES: dict[str, Callable[[ThresholdResult], float]] = {
    # Largest answer rate = most accepted answers: among certified thresholds, the one that answers
    # most often.
    "answer_rate": lambda row: float(row.accepted),
    # Smallest upper bound on the selective risk: the most conservative operating point.
    "lowest_upper_bound": lambda row: -row.upper_bound,
}


@dataclass(frozen=True)
class Certificate:
    """The outcome of selective-risk certification over one prespecified family.

    ``n_thresholds`` is M, the whole family (thresholds accepting nothing included);
    ``test_level`` is delta / M (Bonferroni) or delta (fixed sequence) and ``bound_confidence`` =
    1 - test_level, so a row is certified iff its bound is <= alpha (duality). ``chosen_index``
    is None when nothing was certified (fail closed, ``reason`` says why); ``outcome`` is
    ``"certified"`` or ``"no certified operating point"``.
    """

    alpha: float
    delta: float
    method: Method
    accept: Acceptance
    n_calibration: int
    n_thresholds: int
    test_level: float
    bound_confidence: float
    utility: str
    results: tuple[ThresholdResult, ...]
    certified_indices: tuple[int, ...]
    chosen_index: int | None
    outcome: str
    reason: str | None
    test: PValueTest = "binomial"

    @property
    def chosen(self) -> ThresholdResult | None:
        """The chosen threshold's row, or None when no operating point was certified."""
        return None if self.chosen_index is None else self.results[self.chosen_index]

    @property
    def is_certified(self) -> bool:
        """Whether an operating point was certified."""
        return self.chosen_index is not None


def certify(
    counts: ThresholdCounts,
    *,
    alpha: float,
    delta: float,
    method: Method = "bonferroni",
    utility: str | Callable[[ThresholdResult], float] = "answer_rate",
) -> Certificate:
    """Test every threshold of the family and choose an operating point, failing closed.

    ``method``: ``"bonferroni"`` (certify j iff p_j <= delta/M) or ``"fixed_sequence"`` (family
    order at level delta, stop at the first failure; valid only when the spec fixed the order
    before calibration). ``utility`` chooses among certified thresholds: a name in
    :data:`UTILITIES` (default the largest answer rate) or a callable mapping a row to a value to
    maximise (its ``__name__`` is recorded); ties go to the earlier threshold.

    Raises:
        StatsError: if alpha or delta is outside (0, 1), or the method or utility is unknown.

    Bonferroni divides delta by M, the size of the whole family, including thresholds that
    accept nothing (p = 1). Counts of 0/1 losses are tested with the exact binomial p-value and
    Clopper–Pearson bound; counts of bounded losses (``counts.loss_sums``) with the
    Hoeffding–Bentkus p-value and bound (:mod:`certification.stats.bounded`).

    Source: Learn then Test (Angelopoulos et al. 2021, arXiv:2110.01052), sections 2–3.
    """
    a = check_open_unit(alpha, name="alpha")
    d = check_open_unit(delta, name="delta")
    check_method(method)
    if isinstance(utility, str):
        if utility not in UTILITIES:
            raise StatsError(f"utility must be one of {sorted(UTILITIES)}, got {utility!r}")
        utility_name, key = utility, UTILITIES[utility]
    elif callable(utility):
        utility_name, key = getattr(utility, "__name__", repr(utility)), utility
    else:
        raise StatsError(f"utility must be a name or a callable, got {utility!r}")

    size = counts.size
    m = np.asarray(counts.accepted, dtype=np.int64)
    k = np.asarray(counts.errors, dtype=np.int64)
    test_level = d / size if method == "bonferroni" else d
    if counts.loss_sums is None:
        p_values = binomial_p_values(k, m, a)
        bounds = clopper_pearson_upper_array(k, m, confidence=1.0 - test_level)
    else:
        p_values = hoeffding_bentkus_p_values(counts.loss_sums, m, a)
        bounds = hoeffding_bentkus_upper_bounds(counts.loss_sums, m, confidence=1.0 - test_level)
    passes = p_values <= test_level
    if method == "bonferroni":
        tested = np.ones(size, dtype=bool)
        certified = passes
    else:
        failures = np.flatnonzero(~passes)
        stop = int(failures[0]) if failures.size else size
        tested = np.arange(size) <= stop
        certified = np.arange(size) < stop

    n = counts.n
    rows = []
    for j in range(size):
        m_j, k_j = counts.accepted[j], counts.errors[j]
        total = None if counts.loss_sums is None else counts.loss_sums[j]
        note = None
        if m_j == 0:
            note = "accepts nothing: selective risk undefined; p-value 1 and bound 1"
        elif n == 0:
            note = "empty calibration set"
        if not tested[j]:
            note = "not tested: fixed-sequence testing stopped at an earlier failure"
        rows.append(
            ThresholdResult(
                index=j,
                threshold=counts.thresholds[j],
                accepted=m_j,
                errors=k_j,
                answer_rate=m_j / n if n else None,
                empirical_risk=(k_j if total is None else total) / m_j if m_j else None,
                p_value=float(p_values[j]),
                upper_bound=float(bounds[j]),
                tested=bool(tested[j]),
                certified=bool(certified[j]),
                note=note,
                loss_sum=total,
            )
        )

    certified_indices = tuple(int(j) for j in np.flatnonzero(certified))
    chosen_index: int | None = None
    reason: str | None = None
    if certified_indices:
        # max() keeps the first maximum, so ties go to the earlier threshold in family order.
        chosen_index = max(certified_indices, key=lambda j: key(rows[j]))
    else:
        needed = smallest_certifiable_count(
            alpha=a, delta=d, n_thresholds=size if method == "bonferroni" else 1
        )
        # With zero loss the Hoeffding–Bentkus p-value is (1 - alpha)^m too, so the count holds
        # for bounded losses.
        reason = (
            f"no threshold has p <= {test_level:.6g}; even with zero errors a threshold needs "
            f"at least {needed} accepted answers"
        )
    return Certificate(
        alpha=a,
        delta=d,
        method=method,
        accept=counts.accept,
        n_calibration=n,
        n_thresholds=size,
        test_level=test_level,
        bound_confidence=1.0 - test_level,
        utility=utility_name,
        results=tuple(rows),
        certified_indices=certified_indices,
        chosen_index=chosen_index,
        outcome=CERTIFIED if certified_indices else NO_CERTIFIED_OPERATING_POINT,
        reason=reason,
        test=counts.test,
    )


def certify_scores(
    scores: ArrayLike,
    losses: ArrayLike,
    thresholds: Sequence[float] | ArrayLike,
    *,
    accept: Acceptance = ">=",
    alpha: float,
    delta: float,
    method: Method = "bonferroni",
    utility: str | Callable[[ThresholdResult], float] = "answer_rate",
    bounded: bool = False,
) -> Certificate:
    """Count (:func:`threshold_counts`) and certify (:func:`certify`) in one call.

    Raises:
        StatsError: as :func:`threshold_counts` and :func:`certify`.
    """
    counts = threshold_counts(scores, losses, thresholds, accept=accept, bounded=bounded)
    return certify(counts, alpha=alpha, delta=delta, method=method, utility=utility)
