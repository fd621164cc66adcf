"""Label budget planning: how many more calibration labels a spec needs if its observed rates held.

A plan is not a certificate: it assumes the rates observed on the resolved calibration labels
hold for the labels to come; certificates use real labels only.

**Selective risk** (Learn then Test, Angelopoulos et al. 2021, arXiv:2110.01052, sections 3–4).
Threshold j has k_j errors among d_j (accepted answers, or every eligible unit) of n units. With N
more units, *the observed rates held* gives d_j + floor(N d_j / n) and ceil(k_j d' / d_j) errors
(rounded up), and the plan is the smallest N at which the certificate's own test certifies j (for
fixed-sequence testing, every earlier threshold too), by exact search over the test's inverse.
*The chance of certifying* draws A ~ Binomial(N, d_j / n) new denominator units and E | A ~
Binomial(A, k_j / d_j) new errors: P(certify) = sum_A P(A) P(k_j + E <= e_max(d_j + A)); exact
for Bonferroni, an upper bound for fixed-sequence testing. The plan also gives the first sizes
whose chance reaches :data:`CHANCE_TARGETS`. A threshold whose observed rate is at least alpha
never certifies at a test level below 1/2 (a median of Binomial(m, alpha) is at most
ceil(m alpha)).

**Conformal sets** (split conformal; Angelopoulos and Bates 2021, arXiv:2107.07511, section 1):
M* is the k-th smallest of n scores, k = ceil((n+1)(1-alpha)), infinite when k > n or fewer than
k scores are finite. The smallest n with k <= n is ceil(1/alpha) - 1; with the solvable share
f / n held, M* is finite from the smallest n + N with f + floor(N f / n) >= k(n + N), never when
the unsolvable share is at least alpha. The reliability level #{s_i <= 1} / (n+1) (Mouzouni 2026,
Definition 2.4) has expectation c (n+N) / (n (n+N+1)) if the share c / n of admissible modes held.

The p-value is a parameter (``p_values``, default
:func:`~certification.stats.selective_risk.binomial_p_values`); it must be non-decreasing in the
errors and non-increasing in the denominator.
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
