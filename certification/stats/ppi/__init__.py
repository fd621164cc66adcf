"""Population error rate with a judge in the loop, estimated three ways side by side.

Setting. A workload of N items has been labelled by an automated judge (1 = flagged as an error,
0 = not flagged, -1 = unavailable). An audit sample of n of them, drawn at random, possibly
stratified (by judge verdict and slice) with known inclusion probabilities, has resolved human
labels (1 = error, 0 = no error, -1 = unresolved). The target is the error rate: the proportion of
items people would label an error, a number in [0, 1]. The three estimates answer the same
question under different assumptions, which each result records:

1. **Human-only** (:func:`human_only_bound`), *finite-sample exact*: Clopper–Pearson on the
   audited items alone. One stratum (a simple random sample): the plain exact bound. Several
   strata with unequal inclusion probabilities: the rate is sum_h W_h m_h with W_h = N_h / N the
   stratum's share of the workload and m_h its error rate; each m_h gets an exact bound at level
   1 - delta/H (Bonferroni over the H sampled strata), and sum_h W_h U_h is then an upper bound
   with probability >= 1 - delta. Conservative, never asymptotic. What is exact: each per-stratum
   bound for the stratum's error *probability* when the audited items of the stratum are i.i.d.
   draws (a simple random sample chosen without looking at the labels, from items that are
   themselves i.i.d.). The combination targets sum_h W_h m_h, the rate at the workload's stratum
   mix. For the finite set of N judged items the sample is drawn without replacement, and the
   binomial bound is not strictly guaranteed there (a hypergeometric bound would be): a grid
   check over N <= 80 found rare violations, all with nearly every item an error and few audited,
   e.g. N = 59, n = 3, 58 errors: miss probability 0.0508 at delta 0.05, at worst 1.10 delta at
   delta 0.2.
2. **PPI and PPI++** (:func:`ppi_mean`, :func:`ppi_plus_plus_mean`), *asymptotic (CLT)*:
   prediction-powered inference combines all N judge labels with the audited human labels,
   theta = mean(lam * judge over all items) + weighted mean(human - lam * judge over the audit),
   with lam = 1 (PPI) or the variance-minimising lam of PPI++. Inclusion probabilities enter as
   Horvitz–Thompson weights 1/pi normalised to mean 1 (the Hájek form); with stratum weights this
   is the stratified difference estimator of survey sampling. Its interval is a normal
   approximation: shown beside, never instead of, the exact bound.
3. **Union bound** (:func:`union_bound`), *finite-sample exact*: error rate = P(flag) P(error |
   flag) + P(no flag) P(error | no flag) <= P(flag) + P(error | no flag). The flag rate (judge
   positive or unavailable) gets an exact upper bound from all N items and the miss rate P(error |
   no flag) from the audited judge-negatives, each Clopper–Pearson at 1 - delta/2; the sum holds
   with probability >= 1 - delta. It is valid for any mix of strata inside the judge-negatives (it
   takes their maximum), and uses only judge-negatives' labels: cheap to audit, loose when the
   judge flags a lot. Its joint form (:func:`union_bound_joint`) bounds P(no flag, error) from
   every audited item instead: never looser in the population, and the natural one for a simple
   random audit of the whole workload, to which alone it applies.

:func:`estimate_error_rate` computes all of them from the population's judge labels, the audit
sample and the design's strata.

4. **Active** (:func:`active_ppi_mean`), *asymptotic (CLT)*: for an active sample, drawn item by
   item with probabilities that grow with the judge's uncertainty
   (:func:`active_inclusion_probabilities`), the inverse-probability-weighted prediction-powered
   estimate of Zrnic and Candès (2024), with the number of labels a uniform design would need
   for the same interval (:mod:`~certification.stats.ppi.active`).

Modules: :mod:`~certification.stats.ppi.results` (codes, reasons, result types),
:mod:`~certification.stats.ppi.human_only`, :mod:`~certification.stats.ppi.prediction_powered`
and :mod:`~certification.stats.ppi.union` (the three estimators),
:mod:`~certification.stats.ppi.estimate` (the orchestrator) and
:mod:`~certification.stats.ppi.checks` (input checks). Every public name is importable from
``certification.stats.ppi``.

Sources: Clopper and Pearson (1934), "The use of confidence or fiducial limits illustrated in the
case of the binomial", Biometrika 26(4), 404–413; Angelopoulos, Bates, Fannjiang, Jordan and
Zrnic (2023), "Prediction-powered inference", Science 382(6671), 669–674, arXiv:2301.09633 (mean
estimation: theta = mean(f on unlabelled) + mean(Y - f on labelled), CI theta ± z sqrt(var_f / N +
var_rectifier / n)); Angelopoulos, Duchi and Zrnic (2023), "PPI++: Efficient prediction-powered
inference", arXiv:2311.01453 (power tuning: theta_lam = mean(lam f on unlabelled) + mean(Y - lam f
on labelled), with the plug-in lam = Cov(Y, f) / ((1 + n/N) Var(f)) clipped to [0, 1]). The
formulas, including the weighted ones, follow the authors' package ``ppi_py`` (``ppi_mean_ci``,
``_calc_lam_glm``), which the tests use as an independent reference; it is not a dependency.
Särndal, Swensson and Wretman (1992), "Model Assisted Survey Sampling" (the difference
estimator) for the weighted reading.
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
