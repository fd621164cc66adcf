"""Codes, reasons and result types shared by the error-rate estimators.

Labels are integer codes (:data:`POSITIVE`, :data:`NEGATIVE`, :data:`MISSING`); a result that is
undefined carries one of the reason strings below, which are stored in reports, so their wording
is part of the contract. Each result records whether it is :data:`EXACT` (finite-sample) or
:data:`ASYMPTOTIC` (CLT).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

Assumption = Literal["asymptotic (CLT)", "finite-sample exact"]
#: The interval's validity rests on a central limit theorem (coverage as n and N grow).
ASYMPTOTIC: Assumption = "asymptotic (CLT)"
#: The bound holds with probability >= 1 - delta at every sample size.
EXACT: Assumption = "finite-sample exact"

#: Codes of judge and human labels in the arrays this module takes.
POSITIVE = 1
NEGATIVE = 0
MISSING = -1  # judge unavailable / human unresolved

# Reasons a result is undefined; stored in reports, so their wording is part of the contract.
NO_AUDITED_ITEMS = "no audited item with a usable human label"
UNSAMPLED_STRATUM = "a stratum of the design has items but no audited item"
FEWER_THAN_TWO_LABELLED = "fewer than 2 labelled items"
NO_UNLABELLED_ITEMS = "no unlabelled items"

UnresolvedPolicy = Literal["count-as-error", "exclude"]


# -- results ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EstimateSummary:
    """The fields every method shares, for a side-by-side table.

    Attributes:
        method: ``"human-only"``, ``"ppi"``, ``"ppi++"`` or ``"union bound"``.
        estimate: point estimate in [0, 1] (PPI's can fall outside), or None (the union bound
            is a bound only; or undefined).
        lower: two-sided lower limit at ``confidence``, or None.
        upper: two-sided upper limit at ``confidence``, or None.
        upper_bound: one-sided upper bound at ``confidence``, or None when undefined.
        confidence: 1 - delta.
        assumption: :data:`EXACT` or :data:`ASYMPTOTIC`.
        reason: why the result is undefined, or None.
        note: what was done to the figures for display (PPI's clipping to [0, 1]), or None.
    """

    method: str
    estimate: float | None
    lower: float | None
    upper: float | None
    upper_bound: float | None
    confidence: float
    assumption: Assumption
    reason: str | None
    note: str | None = None


class _Summarised:
    """The :meth:`summary` of a result that has some of :class:`EstimateSummary`'s fields."""

    def summary(self) -> EstimateSummary:
        """Return the shared fields; one the result lacks (a bound has no estimate) is None."""
        fields = self.__dict__
        get = fields.get
        return EstimateSummary(
            fields["method"],
            get("estimate"),
            get("lower"),
            get("upper"),
            get("upper_bound"),
            fields["confidence"],
            fields["assumption"],
            get("reason"),
        )


@dataclass(frozen=True)
class PPIEstimate:
    """A prediction-powered estimate of a mean (here, an error rate) and its normal interval.

    Attributes:
        method: ``"ppi"`` (lam = 1) or ``"ppi++"`` (lam tuned, or fixed by the caller).
        estimate: theta_lam, or None when undefined. A proportion in exact arithmetic would lie
            in [0, 1]; the estimate can leave it (the rectifier is a difference).
        se: its estimated standard error sqrt(imputed_se^2 + rectifier_se^2), or None.
        lower: two-sided limit estimate - z_{1-delta/2} se, not clipped (as ppi_py reports
            it; :meth:`clipped` gives the [0, 1] version), or None.
        upper: two-sided limit estimate + z_{1-delta/2} se, not clipped, or None.
        upper_bound: one-sided bound estimate + z_{1-delta} se, or None.
        confidence: 1 - delta.
        lam: the power-tuning parameter used, in [0, 1], or None when undefined.
        n_labelled: labelled items n.
        n_unlabelled: unlabelled items N.
        imputed_mean: weighted mean of lam * judge over the unlabelled items, or None.
        rectifier: weighted mean of (human - lam * judge) over the labelled items, or None.
        imputed_se: std(lam * judge, population) / sqrt(N), or None.
        rectifier_se: std(human - lam * judge, population) / sqrt(n), or None.
        assumption: always :data:`ASYMPTOTIC`.
        assumptions: the conditions the interval rests on, in words.
        notes: data-dependent remarks (zero variance, constant predictions, ...).
        reason: why the estimate is undefined, or None.
    """

    method: str
    estimate: float | None
    se: float | None
    lower: float | None
    upper: float | None
    upper_bound: float | None
    confidence: float
    lam: float | None
    n_labelled: int
    n_unlabelled: int
    imputed_mean: float | None
    rectifier: float | None
    imputed_se: float | None
    rectifier_se: float | None
    assumption: Assumption
    assumptions: tuple[str, ...]
    notes: tuple[str, ...]
    reason: str | None

    def clipped(self) -> tuple[float, float] | None:
        """Return the two-sided interval intersected with [0, 1] (the range of a rate).

        Clipping loses no coverage (the true rate lies in [0, 1]); None when undefined.
        """
        if self.lower is None or self.upper is None:
            return None
        return max(0.0, self.lower), min(1.0, self.upper)

    def summary(self) -> EstimateSummary:
        """Return the shared fields, with the estimate, interval and bound clipped to [0, 1].

        An error rate lies in [0, 1], so clipping loses no coverage; when it changed a figure,
        ``note`` gives the unclipped ones (which stay in this result's own fields).
        """
        if self.estimate is None or self.lower is None or self.upper is None:
            return EstimateSummary(
                self.method, None, None, None, None, self.confidence, self.assumption, self.reason
            )
        raw = (self.estimate, self.lower, self.upper, self.upper_bound)
        estimate, lower, upper = (min(1.0, max(0.0, v)) for v in raw[:3])
        bound = None if self.upper_bound is None else min(1.0, max(0.0, self.upper_bound))
        note = None
        if (estimate, lower, upper, bound) != raw:
            note = (
                f"clipped to [0, 1], the range of a rate; unclipped: estimate "
                f"{self.estimate:.4f}, interval [{self.lower:.4f}, {self.upper:.4f}]"
            )
        return EstimateSummary(
            self.method,
            estimate,
            lower,
            upper,
            bound,
            self.confidence,
            self.assumption,
            self.reason,
            note,
        )


@dataclass(frozen=True)
class StratumBound:
    """One stratum's counts and exact bound.

    Attributes:
        stratum: the stratum's key (its position when no keys were given).
        population: items of the stratum in the workload, N_h >= 1, or None when not given (a
            single stratum of unknown size).
        sampled: audited items with a usable human label, 0 <= n_h <= N_h.
        errors: of those, human errors k_h.
        inclusion_probability: n_h / N_h in [0, 1], or None when N_h is not given.
        upper_bound: one-sided Clopper–Pearson upper bound on the stratum's error rate at the
            per-stratum level; 1.0 when n_h = 0 (nothing is known).
    """

    stratum: Hashable
    population: int | None
    sampled: int
    errors: int
    inclusion_probability: float | None
    upper_bound: float


@dataclass(frozen=True)
class HumanOnlyBound(_Summarised):
    """The human-only exact bound on the error rate.

    Attributes:
        method: ``"human-only"``.
        estimate: sum_h W_h k_h / n_h; None when some stratum with items has no audited item
            (see ``notes``) or nothing was audited.
        lower: two-sided lower limit sum_h W_h L_h (per stratum two-sided at 1 - delta/H), or
            None when undefined.
        upper: two-sided upper limit sum_h W_h U_h, likewise.
        upper_bound: one-sided upper bound sum_h W_h U_h (per stratum one-sided at 1 - delta/H);
            with one stratum, the plain Clopper–Pearson bound. None when nothing was audited.
        confidence: 1 - delta, the joint level.
        per_stratum_confidence: 1 - delta/H, the level of each stratum's bound.
        n_sampled: audited items used.
        n_errors: human errors among them.
        n_strata_sampled: H, strata with at least one audited item.
        strata: per-stratum counts and one-sided bounds.
        assumption: always :data:`EXACT`.
        assumptions: the conditions, in words.
        notes: data-dependent remarks.
        reason: why the bound is undefined, or None.
    """

    method: str
    estimate: float | None
    lower: float | None
    upper: float | None
    upper_bound: float | None
    confidence: float
    per_stratum_confidence: float | None
    n_sampled: int
    n_errors: int
    n_strata_sampled: int
    strata: tuple[StratumBound, ...]
    assumption: Assumption
    assumptions: tuple[str, ...]
    notes: tuple[str, ...]
    reason: str | None


@dataclass(frozen=True)
class UnionBound(_Summarised):
    """The union bound: judge flag-rate bound plus judge miss-rate bound.

    Attributes:
        method: ``"union bound"``.
        upper_bound: min(1, flag_rate_upper + miss_rate_upper), in (0, 1].
        confidence: 1 - delta (each part at 1 - delta/2).
        n_population: judged items N.
        n_flagged: items the judge flagged or could not label (unavailable counts as a flag: its
            error rate is bounded by 1, the conservative choice).
        flag_rate: n_flagged / N.
        flag_rate_upper: one-sided Clopper–Pearson bound on the flag rate at 1 - delta/2.
        n_negatives_audited: audited judge-negative items with a usable human label.
        n_missed: human errors among them.
        miss_rate: n_missed / n_negatives_audited (pooled over strata), or None if none audited.
        miss_rate_upper: bound on P(error | not flagged) at 1 - delta/2: the maximum over the
            judge-negative strata of their bounds at 1 - delta/(2 H_neg); 1.0 when a stratum
            with judge-negatives has none audited.
        miss_strata: the judge-negative strata's counts and bounds.
        assumption: always :data:`EXACT`.
        assumptions: the conditions, in words.
        notes: data-dependent remarks.
    """

    method: str
    upper_bound: float
    confidence: float
    n_population: int
    n_flagged: int
    flag_rate: float
    flag_rate_upper: float
    n_negatives_audited: int
    n_missed: int
    miss_rate: float | None
    miss_rate_upper: float
    miss_strata: tuple[StratumBound, ...]
    assumption: Assumption
    assumptions: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class JointUnionBound(_Summarised):
    """The union bound in its joint form: flag-rate bound plus P(not flagged and error) bound.

    Attributes:
        method: ``"union bound (joint)"``.
        upper_bound: min(1, flag_rate_upper + joint_miss_rate_upper), or None when not
            applicable (see ``reason``).
        confidence: 1 - delta (each part at 1 - delta/2).
        n_population: judged items N.
        n_flagged: items the judge flagged or could not label.
        flag_rate_upper: one-sided Clopper–Pearson bound on the flag rate at 1 - delta/2.
        n_audited: audited items with a usable human label (every judge verdict).
        n_joint_missed: those the judge did not flag and people found in error.
        joint_miss_rate: n_joint_missed / n_audited, or None when none is audited.
        joint_miss_rate_upper: one-sided Clopper–Pearson bound on P(not flagged, error) at
            1 - delta/2, or None when not applicable.
        assumption: always :data:`EXACT`.
        assumptions: the conditions, in words.
        reason: why it does not apply to this audit, or None.
    """

    method: str
    upper_bound: float | None
    confidence: float
    n_population: int
    n_flagged: int
    flag_rate_upper: float
    n_audited: int
    n_joint_missed: int
    joint_miss_rate: float | None
    joint_miss_rate_upper: float | None
    assumption: Assumption
    assumptions: tuple[str, ...]
    reason: str | None


@dataclass(frozen=True)
class ErrorRateComparison:
    """The population error rate estimated three ways (four results), side by side.

    Attributes:
        human_only: :func:`human_only_bound` of the audit sample.
        ppi: :func:`ppi_mean` (lam = 1).
        ppi_plus_plus: :func:`ppi_plus_plus_mean` (lam tuned).
        union: :func:`union_bound` (conditional form: misses among audited judge-negatives).
        union_joint: :func:`union_bound_joint` (joint form: unflagged errors among all audited
            items), which applies to a simple random audit of the workload only.
        delta: miscoverage of every result, in (0, 1).
        n_population: judged items N.
        n_audited: audited items n (resolved or not).
        n_unresolved: audited items without a resolved human label.
        n_unavailable: judged items the judge could not label.
        unresolved_policy: ``"count-as-error"`` (unresolved audited items count as errors: upper
            bounds stay valid whatever their labels turn out to be; point estimates lean high) or
            ``"exclude"`` (dropped, assuming they are missing at random within their stratum).
        unavailable_prediction: the number PPI uses as the judge's prediction where the judge is
            unavailable (PPI is valid for any fixed prediction; the union bound always treats
            unavailable as a flag).
    """

    human_only: HumanOnlyBound
    ppi: PPIEstimate
    ppi_plus_plus: PPIEstimate
    union: UnionBound
    union_joint: JointUnionBound
    delta: float
    n_population: int
    n_audited: int
    n_unresolved: int
    n_unavailable: int
    unresolved_policy: UnresolvedPolicy
    unavailable_prediction: float

    def summaries(self) -> tuple[EstimateSummary, ...]:
        """Return the five results' shared fields, in display order."""
        return (
            self.human_only.summary(),
            self.ppi.summary(),
            self.ppi_plus_plus.summary(),
            self.union.summary(),
            self.union_joint.summary(),
        )
