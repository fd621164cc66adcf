"""Coverage variability: how far one calibration's realised coverage can land from 1 - alpha.

Two finite samples move realised conformal coverage. Given n calibration points and
k = ceil((n+1)(1-alpha)), the coverage the threshold delivers on fresh data is Beta(k, n+1-k) for
tie-free scores; the fraction covered on n_test test points is then Beta-Binomial(n_test, k,
n+1-k), variance about alpha(1-alpha)/(n+2) + alpha(1-alpha)/n_test. Leaving out the second term
understates the spread by sqrt(2) with equal halves.

Rows that share a source (a document, an entity, a question's candidates) are not independent. A
random *row* split of a fixed pool is exchangeable by construction and cannot detect that; a
*grouped* split (whole groups to one side, as a deployment meets new documents) shows the real
spread, and the design effect computed from the within-group correlation of the coverage
indicator predicts it before the split is run (sqrt(deff) = predicted excess). An i.i.d. control
(the same procedure on pools resampled with replacement) gives the band of excess values that
noise alone produces.

When rows share a source, split by group; spreads and effective sample sizes then use groups or
a design effect.

Sources: "Uncertainty for Language Models, Taught Through What Breaks", episode 5
(https://jongha-jeon-dev.github.io/standarderror/lectures/; 1.06x row excess inside the 0.88-1.10
i.i.d. band, 1.42x grouped, 1.43x predicted); Angelopoulos and Bates (2021), arXiv:2107.07511,
section 3.1 (Beta and Beta-Binomial coverage); Vovk, Gammerman and Shafer (2005); Kish (1965),
Survey Sampling (design effect 1 + (m-1) rho, m_w = sum m_i^2 / sum m_i); Donner (1986) for ICC(1)
with unequal group sizes.

Modules: :mod:`~certification.stats.coverage.beta` (Beta and Beta-Binomial spreads),
:mod:`~certification.stats.coverage.design_effect` (design effects, effective sample size),
:mod:`~certification.stats.coverage.correlation` (ICC(1), lag correlations),
:mod:`~certification.stats.coverage.calculator` (the spreads for sizes a user enters),
:mod:`~certification.stats.coverage.ties` (tie detection and the exact tie-aware split law) and
:mod:`~certification.stats.coverage.splits` (seeded split simulations and the dependence report).

Ties: the Beta and Beta-Binomial laws assume tie-free scores. Frequency-rank scores are heavily
tied, so split simulations of tied pools compare against the exact law of a random split of the
pool instead, and the sqrt(design effect) prediction is withheld for them.
Every public name is importable from ``certification.stats.coverage``.
"""

from certification.stats.coverage.beta import (
    CoverageSpread,
    RealisedCoverageSpread,
    beta_coverage,
    realised_coverage_spread,
)
from certification.stats.coverage.calculator import CoverageCalculation, coverage_calculator
from certification.stats.coverage.correlation import (
    CONSTANT_TOLERANCE,
    ICCResult,
    LagCorrelations,
    icc_oneway,
    lag_correlations,
)
from certification.stats.coverage.design_effect import (
    DesignEffect,
    design_effect,
    design_effect_from_lags,
    design_effect_unequal,
    effective_sample_size,
)
from certification.stats.coverage.splits import (
    DependenceReport,
    IIDControl,
    Reference,
    SplitKind,
    SplitSpread,
    iid_control,
    split_dependence_report,
    split_spread,
)
from certification.stats.coverage.ties import (
    TIED_PREDICTION_REASON,
    TiedSplitCoverage,
    TieSummary,
    tie_summary,
    tied_split_coverage,
)

__all__ = [
    "CoverageCalculation",
    "CoverageSpread",
    "DependenceReport",
    "DesignEffect",
    "ICCResult",
    "IIDControl",
    "LagCorrelations",
    "RealisedCoverageSpread",
    "SplitSpread",
    "TieSummary",
    "TiedSplitCoverage",
    "beta_coverage",
    "coverage_calculator",
    "design_effect",
    "design_effect_from_lags",
    "design_effect_unequal",
    "effective_sample_size",
    "icc_oneway",
    "iid_control",
    "lag_correlations",
    "realised_coverage_spread",
    "split_dependence_report",
    "split_spread",
    "tie_summary",
    "tied_split_coverage",
    "CONSTANT_TOLERANCE",
    "Reference",
    "SplitKind",
    "TIED_PREDICTION_REASON",
]
