"""Label budget planning: how many more calibration labels a spec needs if its observed rates held.

A plan is not a certificate. It assumes that the rates observed on the resolved calibration
labels (answer rate, error rate, share of unsolvable questions) hold for the labels still to
come; the certificate is computed only from real labels, and a plan's figures are what a team
uses to size a labelling budget before spending it.

**Selective risk** (Learn then Test, Angelopoulos, Bates, Candès, Jordan and Lei 2021,
arXiv:2110.01052, sections 3–4: the binomial p-value p = P[Binomial(m, alpha) <= k] of
H: risk > alpha, tested at delta / M with Bonferroni or at delta in a fixed sequence). For
threshold j the certificate tests k_j errors out of a denominator d_j (the accepted answers, or
every eligible unit) among n calibration units. With N more units:

- *the observed rates held*: the denominator becomes d_j + floor(N d_j / n) and the errors
  ceil(k_j d' / d_j) (the error rate k_j / d_j held, rounded up: a planned error is never
  dropped). The plan is the smallest N at which the certificate's own test certifies j (for
  fixed-sequence testing, every threshold before j as well), found by an exact search over the
  test's inverse (the smallest denominator that passes with e errors, per e).
- *the chance of certifying*: each new unit is, independently, in the denominator with
  probability d_j / n and an error with probability k_j / n. With A ~ Binomial(N, d_j / n) new
  denominator units and E | A ~ Binomial(A, k_j / d_j) new errors,
  P(certify) = sum_A P(A) P(k_j + E <= e_max(d_j + A)), e_max(D) the most errors that pass
  with denominator D. Exact for Bonferroni; for fixed-sequence testing (where j needs every
  earlier threshold to pass too) the figure is an upper bound, the chance that j's own test
  passes. The planned size certifies with the chance it shows, often only 50–70 %; the plan
  also gives, for the threshold needing the fewest units, the first size whose chance reaches
  80 % and 95 % (:data:`CHANCE_TARGETS`).
- A threshold whose observed rate is at least alpha never certifies at that rate when the test
  level is below 1/2: a median of Binomial(m, alpha) is at most ceil(m alpha), so
  p >= 1/2 whenever k >= ceil(m alpha) (and any more conservative p-value, e.g.
  Hoeffding–Bentkus, is larger still).

**Conformal sets** (split conformal, Vovk, Gammerman and Shafer 2005; Angelopoulos and Bates
2021, "A gentle introduction to conformal prediction", arXiv:2107.07511, section 1): with n
calibration scores M* is the k-th smallest, k = ceil((n+1)(1-alpha)), infinite when k > n and
also when fewer than k scores are finite (unsolvable questions score infinity). The smallest n
with k <= n is ceil(1/alpha) - 1, whatever the scores; if the observed share of solvable
questions f / n held, M* is finite from the smallest n + N with f + floor(N f / n) >= k(n + N),
and never when the unsolvable share is at least alpha. The reliability level
#{s_i <= 1} / (n+1) (Mouzouni 2026, Definition 2.4) has expectation c (n+N) / (n (n+N+1)) at
n + N questions if the observed share c / n of admissible modes held.

Modules: :mod:`~certification.stats.planning.selective`,
:mod:`~certification.stats.planning.conformal` and :mod:`~certification.stats.planning.common`
(the search budget); every public name is importable from ``certification.stats.planning``.

The p-value is a parameter (``p_values``, default
:func:`~certification.stats.selective_risk.binomial_p_values`) so a certificate with another
p-value for the same hypotheses is planned with the same search; it must be non-decreasing in
the errors and non-increasing in the denominator.
"""

from certification.stats.planning.common import MAX_ADDITIONAL
from certification.stats.planning.conformal import (
    ConformalPlan,
    conformal_plan,
    expected_reliability,
)
from certification.stats.planning.selective import (
    CHANCE_TARGETS,
    ChanceSize,
    PValues,
    SelectivePlan,
    ThresholdPlan,
    selective_plan,
)

__all__ = [
    "CHANCE_TARGETS",
    "MAX_ADDITIONAL",
    "ChanceSize",
    "ConformalPlan",
    "PValues",
    "SelectivePlan",
    "ThresholdPlan",
    "conformal_plan",
    "expected_reliability",
    "selective_plan",
]
