"""Conformal prediction sets and the reliability level from self-consistency samples.

Per question, K sampled answers are canonicalised and their classes ranked by frequency, ties by
the declared tie rule. The score s is the 1-based rank of the highest-ranked admissible class
(infinity when none was sampled). M* is the k-th smallest of n calibration scores, k =
ceil((n+1)(1-alpha)) computed exactly; k > n means an infinite threshold, never clamped to n. A
new question's set is its top M* classes: P(s_test <= M*) >= 1 - alpha for exchangeable
questions. The reliability level #{i : s_i <= 1} / (n+1) is the largest 1 - alpha at which
M* = 1. The Hoeffding stopping rule must be applied identically to calibration and test
questions. The per-question functions over strings and the vectorised path over integer codes
give the same scores.

Sources: Mouzouni (2026), arXiv:2602.21368 (Definition 2.4, the rank score, the stopping rule of
the reference code); Angelopoulos and Bates (2021), arXiv:2107.07511, section 1; Vovk, Gammerman
and Shafer (2005).
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
