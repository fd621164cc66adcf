"""An anytime-valid (time-uniform) selective-risk test: Learn then Test with e-processes.

The fixed-n certificate (:mod:`certification.stats.selective_risk`) is valid at the calibration
size chosen in advance. This test is valid at every prefix of the calibration units at once, so
it also says after how many units the evidence would have allowed stopping.

**The tested variable.** For a threshold t, unit i has the acceptance indicator A_i (its score
passes t) and the loss L_i in [0, 1] (0/1 or bounded). The selective risk is
R = E[A L] / E[A]. Since E[A] >= 0,

    R > alpha  <=>  E[A (L - alpha)] > 0   (when E[A] > 0),

and when E[A] = 0 (the threshold accepts nothing) E[A (L - alpha)] = 0: the risk is undefined
and the threshold stays in the null. So the null "R > alpha or undefined" is contained in
E[A (L - alpha)] >= 0; no division by a random denominator is needed. The bounded variable
Z_i = A_i (L_i - alpha) lies in [-alpha, 1 - alpha], a range of width 1, so the shift

    X_i = Z_i + alpha = A_i L_i + (1 - A_i) alpha   in [0, 1]

rescales it to [0, 1]: an accepted unit contributes its loss and a rejected unit contributes
exactly alpha (neutral evidence), and the null is E[X] >= alpha. With the ``eligible_units``
denominator the risk is E[A L] itself and X_i = A_i L_i, with the same null E[X] >= alpha. The
betting e-process of :func:`~certification.stats.sequential.betting.below_target_test` with
target alpha is a nonnegative supermartingale under every mean >= alpha, so by Ville's
inequality P(sup_t K_t >= 1/level) <= level: the threshold is certified once its wealth reaches
1/level, at the first crossing or any later look.

**Multiplicity** (as the fixed-n certificate, and for the same reason: the operating point is
chosen among the certified thresholds after looking): ``bonferroni`` runs every one of the M
thresholds' e-processes at delta/M and certifies a threshold once its wealth reaches M/delta
(a union bound: P(some unsafe one ever crosses) <= delta); ``fixed_sequence`` runs them at
delta, in the spec's order, and certifies threshold j once thresholds 0..j have all reached
1/delta (its time is the latest of their crossings). Wrongly certifying anything then needs the
first unsafe threshold's e-process to reach 1/delta, probability <= delta by Ville's inequality,
whenever the look happens (each e-process runs over every unit from the first; testing it later
consults it, it does not restart it).

**Order and assumptions.** The units are taken in the order
``numpy.random.default_rng(seed).permutation(n)`` of their input order: a uniformly random
order drawn from the spec's seed, which depends on n and the seed only, never on a label or a
score (an order sorted by score or by resolution time would void the test). The units are
assumed i.i.d. (or exchangeable) draws from the distribution the risk is about, as for the
fixed-n test. "Stopping after t units" means: had the units been labelled in this order, one
could have stopped at t with the same guarantee. A later run on a larger snapshot draws a new
order: it is a new test, not a continuation of this one.

Sources: Waudby-Smith and Ramdas (2024), "Estimating means of bounded random variables by
betting", JRSS-B 86(1), 1–27, arXiv:2010.09686, Sec. 4 (the capital process and its predictable
plug-in bets); Ville (1939) (the maximal inequality); Angelopoulos, Bates, Candès, Jordan and
Lei (2021), "Learn then Test", arXiv:2110.01052, Sec. 2–3 (Bonferroni and fixed-sequence
family-wise error control over a prespecified threshold family); Vovk and Wang (2021),
"E-values: calibration, combination and applications", Ann. Statist. 49(3) (e-values tested
at delta/M under a union bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.errors import StatsError
from certification.stats.intervals import check_open_unit
from certification.stats.selective_risk import (
    Acceptance,
    Method,
    check_accept,
    check_family,
    check_method,
)
from certification.stats.sequential.betting import below_target_test

Denominator = Literal["accepted_answers", "eligible_units"]

ORDER = "numpy.random.default_rng(seed).permutation(n) of the units' input order"
ASSUMPTION = (
    "anytime-valid (time-uniform) along the seeded random order of the calibration units: units "
    "i.i.d. (or exchangeable), the order drawn from the spec's seed independently of labels and "
    "scores; valid at every prefix at once, so one may stop as soon as the evidence suffices"
)


@dataclass(frozen=True)
class AnytimeThresholdResult:
    """One threshold's e-process in the anytime test.

    ``wealth`` is the e-process K_n after all n units (>= 0; inf only on overflow),
    ``max_wealth`` its largest value over t = 0..n (1 before any unit); ``crossed_at`` is the
    first t (1-based) with K_t >= 1/level. ``tested`` is False after a threshold that never
    crossed (fixed sequence only); ``certified_at`` is the number of units after which it is
    certified (Bonferroni: its own crossing; fixed sequence: the latest crossing of thresholds
    0..j).
    """

    index: int
    threshold: float
    wealth: float
    max_wealth: float
    crossed_at: int | None
    tested: bool
    certified: bool
    certified_at: int | None


@dataclass(frozen=True)
class AnytimeSelectiveTest:
    """The anytime-valid selective-risk test of a prespecified threshold family.

    ``level`` is delta / M (Bonferroni) or delta (fixed sequence) and ``evidence_threshold`` =
    1 / level, the wealth that certifies; ``n`` counts calibration units, taken in the order
    ``seed`` draws (``order`` says how).
    """

    alpha: float
    delta: float
    method: Method
    denominator: Denominator
    level: float
    evidence_threshold: float
    n: int
    seed: int
    results: tuple[AnytimeThresholdResult, ...]
    certified_indices: tuple[int, ...]
    order: str = ORDER
    assumption: str = ASSUMPTION


def tested_observations(
    accepted: NDArray[np.bool_],
    losses: NDArray[np.float64],
    *,
    alpha: float,
    denominator: Denominator,
) -> NDArray[np.float64]:
    """The [0, 1] variable whose mean is below alpha iff the risk is (see the module docstring).

    ``accepted``, ``losses``: shape (n,). Returns shape (n,): A L + (1 - A) alpha for
    ``accepted_answers``, A L for ``eligible_units``.
    """
    if denominator == "eligible_units":
        return np.where(accepted, losses, 0.0)
    return np.where(accepted, losses, alpha)


def anytime_selective_test(
    scores: ArrayLike,
    losses: ArrayLike,
    thresholds: Sequence[float] | ArrayLike,
    *,
    accept: Acceptance = ">=",
    alpha: float,
    delta: float,
    method: Method = "bonferroni",
    denominator: Denominator = "accepted_answers",
    seed: int,
) -> AnytimeSelectiveTest:
    """Test H0: selective risk > alpha at every threshold of a family, anytime-valid.

    ``scores`` (shape (n,)) are in the units' input order, +-inf allowed (a missing score is
    -inf: never accepted); ``losses`` (shape (n,)) lie in [0, 1]; ``thresholds`` (shape (M,))
    are in spec order. ``denominator`` is ``"accepted_answers"`` (risk among accepted answers)
    or ``"eligible_units"`` (accepted errors over all units); ``seed`` >= 0 draws the units'
    random order. With n = 0 nothing is certified.

    Raises:
        StatsError: if shapes disagree, a score or threshold is NaN, a loss is outside [0, 1],
            the family is empty, alpha or delta is outside (0, 1), or the method, acceptance,
            denominator or seed is invalid.

    Source: see the module docstring (Waudby-Smith and Ramdas 2024, Sec. 4; Ville 1939;
    Learn then Test, Angelopoulos et al. 2021, Sec. 2–3).
    """
    a = check_open_unit(alpha, name="alpha")
    d = check_open_unit(delta, name="delta")
    check_accept(accept)
    check_method(method)
    if denominator not in ("accepted_answers", "eligible_units"):
        raise StatsError(
            f"denominator must be 'accepted_answers' or 'eligible_units', got {denominator!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise StatsError(f"seed must be an integer >= 0, got {seed!r}")
    score_arr, loss_arr, family = check_family(scores, losses, thresholds, bounded=True)

    n, size = int(score_arr.size), int(family.size)
    order = np.random.default_rng(int(seed)).permutation(n)
    score_arr, loss_arr = score_arr[order], loss_arr[order]
    level = d / size if method == "bonferroni" else d
    # The acceptance sets of a family are nested, so thresholds accepting as many units accept
    # the same ones and share their e-process: computed once per distinct count.
    by_count: dict[int, tuple[float, float, int | None]] = {}
    crossings = []
    for t in family.tolist():
        passes = score_arr >= t if accept == ">=" else score_arr > t
        count = int(passes.sum())
        if count not in by_count:
            x = tested_observations(passes, loss_arr, alpha=a, denominator=denominator)
            # A wealth past ~1e308 overflows to inf: far beyond any 1/level, still certified.
            with np.errstate(over="ignore"):
                test = below_target_test(x, target=a, delta=level)
            final = float(test.wealth[-1]) if n else 1.0
            by_count[count] = (final, test.max_wealth, test.stopped_at)
        crossings.append(by_count[count])

    rows = []
    prefix_at: int | None = 0  # latest crossing of thresholds 0..j-1 (fixed sequence)
    for j, (final, peak, crossed_at) in enumerate(crossings):
        if method == "bonferroni":
            tested, certified_at = True, crossed_at
        else:
            tested = prefix_at is not None
            certified_at = (
                None if prefix_at is None or crossed_at is None else max(prefix_at, crossed_at)
            )
            prefix_at = certified_at
        rows.append(
            AnytimeThresholdResult(
                index=j,
                threshold=float(family[j]),
                wealth=final,
                max_wealth=peak,
                crossed_at=crossed_at,
                tested=tested,
                certified=certified_at is not None,
                certified_at=certified_at,
            )
        )
    return AnytimeSelectiveTest(
        alpha=a,
        delta=d,
        method=method,
        denominator=denominator,
        level=level,
        evidence_threshold=1.0 / level,
        n=n,
        seed=int(seed),
        results=tuple(rows),
        certified_indices=tuple(r.index for r in rows if r.certified),
    )
