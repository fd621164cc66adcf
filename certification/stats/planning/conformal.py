"""The conformal plan: the calibration size at which M* becomes finite, and the reliability level.

See :mod:`certification.stats.planning` for the rules and sources (Vovk, Gammerman and Shafer
2005; Angelopoulos and Bates 2021, arXiv:2107.07511, section 1; Mouzouni 2026, Definition 2.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from scipy import stats as _st

from certification.stats.conformal.scores import AlphaLike
from certification.stats.conformal.threshold import conformal_index, exact_alpha
from certification.stats.errors import StatsError
from certification.stats.intervals import check_count
from certification.stats.planning.common import MAX_ADDITIONAL, check_n_more


def expected_reliability(n: int, n_mode_admissible: int, more: int) -> Fraction | None:
    """E[#{s_i <= 1} / (n' + 1)] at n' = n + more questions if the share c / n held.

    ``n_mode_admissible`` is c, the questions whose mode is admissible (score 1), in [0, n].
    Returns c (n + more) / (n (n + more + 1)) exactly (c / (n+1) at more = 0, the reliability
    level itself), or None when n = 0 or c = 0 (undefined: M* = 1 at no alpha).

    Source: the reliability level of Mouzouni (2026), Definition 2.4, with
    E[Binomial(more, c/n)] = more c / n new admissible modes.
    """
    size = check_count(n, name="n")
    c = check_count(n_mode_admissible, name="n_mode_admissible")
    extra = check_count(more, name="more")
    if c > size:
        raise StatsError(f"n_mode_admissible={c} exceeds n={size}")
    if size == 0 or c == 0:
        return None
    return Fraction(c * (size + extra), size * (size + extra + 1))


@dataclass(frozen=True)
class ConformalPlan:
    """The label budget plan of a conformal threshold M*.

    Of the n calibration questions (after exclusions), ``n_finite`` have a finite score (an
    admissible answer was sampled) and ``n_mode_admissible`` an admissible mode (score 1).
    ``k`` = ceil((n+1)(1-alpha)); ``finite_now`` = k <= n_finite; ``minimum_n`` =
    ceil(1/alpha) - 1, below which M* is infinite whatever the scores. ``additional`` is the
    fewest more questions after which M* is finite if the observed share of solvable questions
    held (0 when finite now; None: ``reason``), ``planned_n`` = n + additional; the
    ``probability_*`` fields give P(M* finite) at the plan and at ``n_more`` more questions.
    ``reliability_now`` is c / (n+1), with its expectations at ``planned_n`` and n + ``n_more``.
    ``never`` is True when the unsolvable share is at least alpha (M* stays infinite).
    """

    alpha: Fraction
    n: int
    n_finite: int
    n_mode_admissible: int
    k: int
    finite_now: bool
    minimum_n: int
    additional: int | None
    planned_n: int | None
    probability_at_plan: float | None
    probability_at_n_more: float | None
    n_more: int | None
    reliability_now: Fraction | None
    expected_reliability_at_plan: Fraction | None
    expected_reliability_at_n_more: Fraction | None
    never: bool
    reason: str | None


def _finite_probability(n: int, f: int, alpha: Fraction, more: int) -> float:
    """P(f + Binomial(more, f/n) >= k(n + more))."""
    needed = conformal_index(n + more, alpha) - f
    if needed <= 0:
        return 1.0
    return float(_st.binom.sf(needed - 1, more, f / n))


def _first_finite(n: int, f: int, alpha: Fraction, budget: int) -> tuple[int | None, str | None]:
    if n == 0:
        return None, "no calibration question is resolved yet: there is no observed rate"
    share = Fraction(f, n)
    if share <= 1 - alpha:
        return None, (
            f"{n - f} of {n} calibration questions are unsolvable (no admissible answer "
            f"sampled), at least alpha = {alpha}: at that share M* stays infinite at any size"
        )
    # f + N f / n >= (n + N + 1)(1 - alpha) is necessary, so start the exact scan there.
    start = max(0, math.ceil(((n + 1) * (1 - alpha) - f) / (share - (1 - alpha))))
    for more in range(start, budget + 1):
        if f + (more * f) // n >= conformal_index(n + more, alpha):
            return more, None
    return None, f"M* is not finite within {budget:,} more questions at the observed share"


def conformal_plan(
    *,
    n: int,
    n_finite: int,
    n_mode_admissible: int,
    alpha: AlphaLike,
    n_more: int | None = None,
    budget: int = MAX_ADDITIONAL,
) -> ConformalPlan:
    """Plan the calibration questions a finite M* needs, and the reliability level to expect.

    Counts: ``n_finite`` in [0, n], ``n_mode_admissible`` (score 1) in [0, n_finite]; ``alpha``
    is read exactly (``exact_alpha``); ``budget`` bounds the additional questions searched.

    Raises:
        StatsError: on inconsistent counts, alpha outside (0, 1), or ``n_more`` above
            ``budget``.

    Source: Vovk, Gammerman and Shafer (2005); Angelopoulos and Bates (2021),
    arXiv:2107.07511, section 1 (k = ceil((n+1)(1-alpha)), infinite when k > n). Check:
    alpha 0.1 gives a minimum of 9 calibration questions (k = 9 at n = 9, 9 > 8 at n = 8).
    """
    exact = exact_alpha(alpha)
    size = check_count(n, name="n")
    f = check_count(n_finite, name="n_finite")
    c = check_count(n_mode_admissible, name="n_mode_admissible")
    if not c <= f <= size:
        raise StatsError(f"need n_mode_admissible <= n_finite <= n, got {c}, {f}, {size}")
    cap = check_count(budget, name="budget")
    more = check_n_more(n_more, cap)
    k = conformal_index(size, exact)
    additional, reason = _first_finite(size, f, exact, cap)
    return ConformalPlan(
        alpha=exact,
        n=size,
        n_finite=f,
        n_mode_admissible=c,
        k=k,
        finite_now=k <= f,
        minimum_n=math.ceil(1 / exact) - 1,
        additional=additional,
        planned_n=None if additional is None else size + additional,
        probability_at_plan=None
        if additional is None
        else _finite_probability(size, f, exact, additional),
        probability_at_n_more=None
        if more is None or size == 0
        else _finite_probability(size, f, exact, more),
        n_more=more,
        reliability_now=expected_reliability(size, c, 0),
        expected_reliability_at_plan=None
        if additional is None
        else expected_reliability(size, c, additional),
        expected_reliability_at_n_more=None
        if more is None
        else expected_reliability(size, c, more),
        never=size > 0 and Fraction(f, size) <= 1 - exact,
        reason=reason,
    )
