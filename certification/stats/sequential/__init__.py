"""Anytime-valid statistics: confidence sequences and e-processes by betting.

A fixed-n interval is valid only at a sample size chosen in advance; looking after every label
and stopping when it looks good voids it. The figures here are valid at every sample size at
once (time-uniform), so a team may stop labelling as soon as the evidence suffices.

Every public name of ``betting``, ``active``, ``planning`` and ``selective`` is importable
from here.

Source: Waudby-Smith and Ramdas (2024), "Estimating means of bounded random variables by
betting", JRSS-B 86(1), 1–27, arXiv:2010.09686.
"""

from certification.stats.sequential.active import (
    ACTIVE_SEQUENCE_ASSUMPTION,
    ActiveSequenceBound,
    active_betting_bounds,
    bounded_betting_cs,
)
from certification.stats.sequential.betting import (
    ASSUMPTION,
    GRID,
    BelowTargetTest,
    ConfidenceSequence,
    StratifiedSequenceBound,
    StratumSequence,
    below_target_test,
    betting_cs,
    betting_upper_cs,
    check_observations,
    plug_in_bets,
    stratified_betting_bounds,
)
from certification.stats.sequential.planning import REPLICATES, StoppingPlan, stopping_plan
from certification.stats.sequential.selective import (
    AnytimeSelectiveTest,
    AnytimeThresholdResult,
    anytime_selective_test,
)

__all__ = [
    "ACTIVE_SEQUENCE_ASSUMPTION",
    "ASSUMPTION",
    "GRID",
    "REPLICATES",
    "ActiveSequenceBound",
    "AnytimeSelectiveTest",
    "AnytimeThresholdResult",
    "BelowTargetTest",
    "ConfidenceSequence",
    "StoppingPlan",
    "StratifiedSequenceBound",
    "StratumSequence",
    "active_betting_bounds",
    "anytime_selective_test",
    "below_target_test",
    "betting_cs",
    "betting_upper_cs",
    "bounded_betting_cs",
    "check_observations",
    "plug_in_bets",
    "stopping_plan",
    "stratified_betting_bounds",
]
