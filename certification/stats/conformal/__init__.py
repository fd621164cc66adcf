"""Conformal prediction sets and the reliability level from self-consistency samples.

Per question, K sampled answers are canonicalised (:mod:`certification.stats.canonical`) and their
classes ranked by frequency (descending), ties broken by the declared tie rule. The nonconformity
score s is the 1-based rank of the highest-ranked admissible class, and infinity when no admissible
class was sampled. On n calibration questions the threshold M* is the k-th smallest score with
k = ceil((n+1)(1-alpha)), computed exactly; M* is infinite when k > n. The prediction set of a new
question is its top M* classes, and P(s_test <= M*) >= 1 - alpha for exchangeable questions (split
conformal, Vovk et al. 2005; coverage error at most 1/(n+1) above the target without ties). The
reliability level 1 - alpha* = #{i : s_i <= 1} / (n+1) is the largest 1 - alpha at which M* = 1,
i.e. at which the mode alone can be trusted. A Hoeffding rule stops sampling early when the mode is
stable; it must be applied identically to calibration and test questions.

Two paths compute the same scores: readable per-question functions over strings
(:func:`frequency_profile`, :func:`nonconformity_score`), and a vectorised path over integer-coded
samples (:func:`encode_samples`, :func:`rank_scores_from_codes`) that handles 200,000 questions x
K = 20 samples well under a second.

Sources: Mouzouni (2026), "Black-Box Reliability Certification for AI Agents via Self-Consistency
Sampling and Conformal Calibration", arXiv:2602.21368 (Definition 2.4, the rank score, the
sequential stopping rule of the author's reference code); Angelopoulos and Bates (2021), "A gentle
introduction to conformal prediction", arXiv:2107.07511, section 1 (the ceil((n+1)(1-alpha)) / n
quantile). The threshold index k = ceil((n+1)(1-alpha)) is computed exactly and k > n means an
infinite threshold, never clamped to n.

Modules: :mod:`~certification.stats.conformal.scores` (per-question rank scores over strings),
:mod:`~certification.stats.conformal.threshold` (exact alpha, the threshold, the reliability level,
calibration), :mod:`~certification.stats.conformal.sets` (prediction sets and their evaluation),
:mod:`~certification.stats.conformal.vectorised` (integer-coded samples and their scores) and
:mod:`~certification.stats.conformal.stopping` (sequential stopping). Every public name is
importable from ``certification.stats.conformal``.
"""

from certification.stats.conformal.scores import (
    INF,
    TIE_RULES,
    AlphaLike,
    FrequencyProfile,
    TieRule,
    canonical_order_key,
    frequency_profile,
    nonconformity_score,
    rank_score,
)
from certification.stats.conformal.sets import (
    PredictionSet,
    SetEvaluation,
    evaluate_sets,
    prediction_set,
)
from certification.stats.conformal.stopping import (
    StoppingResult,
    StoppingSummary,
    hoeffding_epsilon,
    sequential_stop,
    sequential_stop_codes,
    should_stop,
    truncate_codes,
)
from certification.stats.conformal.threshold import (
    ConformalCalibration,
    ConformalThreshold,
    ReliabilityLevel,
    calibrate,
    conformal_index,
    conformal_threshold,
    exact_alpha,
    reliability_level,
)
from certification.stats.conformal.vectorised import (
    EncodedSamples,
    RankScores,
    encode_admissible,
    encode_samples,
    rank_scores_from_codes,
)

__all__ = [
    "TIE_RULES",
    "canonical_order_key",
    "ConformalCalibration",
    "ConformalThreshold",
    "EncodedSamples",
    "FrequencyProfile",
    "PredictionSet",
    "RankScores",
    "ReliabilityLevel",
    "SetEvaluation",
    "StoppingResult",
    "StoppingSummary",
    "calibrate",
    "conformal_index",
    "conformal_threshold",
    "encode_admissible",
    "encode_samples",
    "evaluate_sets",
    "exact_alpha",
    "frequency_profile",
    "hoeffding_epsilon",
    "nonconformity_score",
    "prediction_set",
    "rank_score",
    "rank_scores_from_codes",
    "reliability_level",
    "sequential_stop",
    "sequential_stop_codes",
    "should_stop",
    "truncate_codes",
    "TieRule",
    "AlphaLike",
    "INF",
]
