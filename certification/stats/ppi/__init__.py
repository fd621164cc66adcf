"""Population error rate with a judge in the loop, estimated three ways side by side.

N items carry a judge label (1 flagged as an error, 0 not flagged, -1 unavailable); an audit
sample of n of them, drawn at random (possibly stratified by verdict and slice, with known
inclusion probabilities), carries resolved human labels (1 error, 0 no error, -1 unresolved). The
target is the proportion of items people would label an error. Each result records its
assumption:

1. **Human-only** (:func:`human_only_bound`), *exact*: Clopper–Pearson on the audited items; with
   strata, sum_h W_h U_h (W_h = N_h / N), each stratum at 1 - delta/H (Bonferroni). Exact for
   i.i.d. draws; drawn without replacement from the finite N the binomial bound is not strictly
   guaranteed (a hypergeometric one would be): rare small violations occur when nearly every item
   is an error and few are audited.
2. **PPI and PPI++** (:func:`ppi_mean`, :func:`ppi_plus_plus_mean`), *asymptotic (CLT)*:
   theta = mean(lam judge over all items) + weighted mean(human - lam judge over the audit), lam =
   1 or the variance-minimising lam; inclusion probabilities enter as Hájek weights (the
   stratified difference estimator). Shown beside, never instead of, the exact bound.
3. **Union bound** (:func:`union_bound`), *exact*: error rate <= P(flag) + P(error | no flag),
   each Clopper–Pearson at 1 - delta/2 (the miss rate the maximum over judge-negative strata). The
   joint form (:func:`union_bound_joint`) bounds P(no flag, error) from every audited item and
   applies to a simple random audit only.
4. **Active** (:func:`active_ppi_mean`), *asymptotic*: the IPW prediction-powered estimate for a
   sample drawn with uncertainty-driven probabilities (:mod:`~certification.stats.ppi.active`).

Sources: Clopper and Pearson (1934), Biometrika 26(4); Angelopoulos, Bates, Fannjiang, Jordan and
Zrnic (2023), "Prediction-powered inference", Science 382(6671), arXiv:2301.09633 (mean
estimation); Angelopoulos, Duchi and Zrnic (2023), "PPI++", arXiv:2311.01453 (plug-in lam =
Cov(Y, f) / ((1 + n/N) Var(f)) clipped to [0, 1]); formulas as the authors' ``ppi_py``
(``ppi_mean_ci``, ``_calc_lam_glm``), the tests' reference; Särndal, Swensson and Wretman (1992)
for the difference estimator.
"""

from certification.stats.ppi.active import (
    ActivePPIEstimate,
    active_inclusion_probabilities,
    active_observation_range,
    active_ppi_mean,
    judge_uncertainty,
)
from certification.stats.ppi.estimate import estimate_error_rate
from certification.stats.ppi.human_only import human_only_bound
from certification.stats.ppi.prediction_powered import ppi_mean, ppi_plus_plus_mean
from certification.stats.ppi.results import (
    ASYMPTOTIC,
    EXACT,
    FEWER_THAN_TWO_LABELLED,
    MISSING,
    NEGATIVE,
    NO_AUDITED_ITEMS,
    NO_UNLABELLED_ITEMS,
    POSITIVE,
    UNSAMPLED_STRATUM,
    Assumption,
    ErrorRateComparison,
    EstimateSummary,
    HumanOnlyBound,
    JointUnionBound,
    PPIEstimate,
    StratumBound,
    UnionBound,
    UnresolvedPolicy,
)
from certification.stats.ppi.union import union_bound, union_bound_joint

__all__ = [
    "ASYMPTOTIC",
    "EXACT",
    "ActivePPIEstimate",
    "FEWER_THAN_TWO_LABELLED",
    "MISSING",
    "NEGATIVE",
    "NO_AUDITED_ITEMS",
    "NO_UNLABELLED_ITEMS",
    "POSITIVE",
    "UNSAMPLED_STRATUM",
    "Assumption",
    "ErrorRateComparison",
    "EstimateSummary",
    "HumanOnlyBound",
    "JointUnionBound",
    "PPIEstimate",
    "StratumBound",
    "UnionBound",
    "UnresolvedPolicy",
    "active_inclusion_probabilities",
    "active_observation_range",
    "active_ppi_mean",
    "estimate_error_rate",
    "human_only_bound",
    "judge_uncertainty",
    "ppi_mean",
    "ppi_plus_plus_mean",
    "union_bound",
    "union_bound_joint",
]
