"""Coverage variability: how far one calibration's realised coverage can land from 1 - alpha.

With n calibration points and k = ceil((n+1)(1-alpha)), the coverage on fresh data is Beta(k,
n+1-k) for tie-free scores, and the fraction covered on n_test points Beta-Binomial(n_test, k,
n+1-k): variance about alpha(1-alpha)/(n+2) + alpha(1-alpha)/n_test. Rows sharing a source are
not independent: a random row split cannot show it, a grouped split does, and the design effect
of the coverage indicator's within-group correlation predicts it (sqrt(deff) = predicted excess);
an i.i.d. control gives the band noise alone produces. Tied scores (frequency ranks) are compared
against the exact law of a random split of the pool, and the sqrt(deff) prediction is withheld.

Sources: Angelopoulos and Bates (2021), arXiv:2107.07511, section 3.1; Vovk, Gammerman and Shafer
(2005); Kish (1965), Survey Sampling (design effect 1 + (m-1) rho, m_w = sum m_i^2 / sum m_i);
Donner (1986) for ICC(1) with unequal group sizes; "Uncertainty for Language Models, Taught
Through What Breaks", episode 5 (https://jongha-jeon-dev.github.io/standarderror/lectures/).
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
