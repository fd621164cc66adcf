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

    ``method`` is ``"human-only"``, ``"ppi"``, ``"ppi++"`` or ``"union bound"``. ``estimate`` lies
    in [0, 1] (PPI's can fall outside) and is None for the union bound (a bound only) or when
    undefined; ``lower``/``upper`` are two-sided and ``upper_bound`` one-sided at ``confidence`` =
    1 - delta. ``note`` says what was done for display (PPI's clipping to [0, 1]).
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

    ``method`` is ``"ppi"`` (lam = 1) or ``"ppi++"`` (lam tuned, or fixed by the caller); ``lam``
    lies in [0, 1]. ``estimate`` is theta_lam, which can leave [0, 1] (the rectifier is a
    difference); ``se`` = sqrt(imputed_se^2 + rectifier_se^2). ``lower``/``upper`` = estimate -/+
    z_{1-delta/2} se, not clipped (as ppi_py reports it; :meth:`clipped` clips);
    ``upper_bound`` = estimate + z_{1-delta} se; ``confidence`` = 1 - delta. With n labelled and
    N unlabelled items: ``imputed_mean`` is the weighted mean of lam * judge over the unlabelled
    ones, ``rectifier`` that of (human - lam * judge) over the labelled ones, ``imputed_se`` =
    std(lam * judge, population) / sqrt(N), ``rectifier_se`` = std(human - lam * judge,
    population) / sqrt(n). Figures are None when undefined (``reason``). ``assumption`` is
    always :data:`ASYMPTOTIC`.
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
        """Return the two-sided interval clipped to [0, 1] (no coverage lost); None if undefined."""
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

    ``stratum`` is the stratum's key (its position when no keys were given); ``population`` is
    N_h >= 1, or None when not given (one stratum of unknown size); ``sampled`` counts audited
    items with a usable human label, 0 <= n_h <= N_h, ``errors`` their human errors k_h;
    ``inclusion_probability`` is n_h / N_h. ``upper_bound`` is the one-sided Clopper–Pearson
    bound on the stratum's error rate at the per-stratum level, 1.0 when n_h = 0.
    """

    stratum: Hashable
    population: int | None
    sampled: int
    errors: int
    inclusion_probability: float | None
    upper_bound: float


@dataclass(frozen=True)
class HumanOnlyBound(_Summarised):
    """The human-only exact bound on the error rate (``assumption`` always :data:`EXACT`).

    ``estimate`` is sum_h W_h k_h / n_h; None when some stratum with items has no audited item
    (see ``notes``) or nothing was audited. ``lower``/``upper`` are sum_h W_h L_h / U_h with each
    stratum two-sided at 1 - delta/H; ``upper_bound`` is sum_h W_h U_h with each stratum
    one-sided at ``per_stratum_confidence`` = 1 - delta/H (one stratum: plain Clopper–Pearson).
    ``confidence`` = 1 - delta is the joint level; H = ``n_strata_sampled``, the strata with an
    audited item.
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
    """The union bound: judge flag-rate bound plus judge miss-rate bound (always :data:`EXACT`).

    ``upper_bound`` = min(1, flag_rate_upper + miss_rate_upper), in (0, 1], at ``confidence`` =
    1 - delta with each part at 1 - delta/2. Of the N judged items (``n_population``),
    ``n_flagged`` were flagged or unlabelled by the judge (unavailable counts as a flag, the
    conservative choice); ``flag_rate_upper`` is the one-sided Clopper–Pearson bound on
    ``flag_rate``. ``miss_rate`` = n_missed / n_negatives_audited over the audited judge-negative
    items with a usable human label (pooled; None if none). ``miss_rate_upper`` bounds P(error |
    not flagged): the maximum over the judge-negative strata of their bounds at
    1 - delta/(2 H_neg), 1.0 when such a stratum has none audited.
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

    ``upper_bound`` = min(1, flag_rate_upper + joint_miss_rate_upper), each part at
    1 - delta/2, or None when not applicable (``reason``). ``n_audited`` counts audited items with
    a usable human label (every judge verdict), ``n_joint_missed`` those unflagged and in error;
    ``joint_miss_rate`` is their ratio (None when none is audited) and ``joint_miss_rate_upper``
    its one-sided Clopper–Pearson bound. ``assumption`` is always :data:`EXACT`.
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

    ``union`` is the conditional form (misses among audited judge-negatives), ``union_joint`` the
    joint form (unflagged errors among all audited items), which applies to a simple random audit
    of the workload only. ``delta`` in (0, 1) is every result's miscoverage; ``n_audited`` counts
    audited items resolved or not. ``unresolved_policy`` is ``"count-as-error"`` (upper bounds
    stay valid whatever the labels turn out to be; point estimates lean high) or ``"exclude"``
    (missing at random within the stratum). ``unavailable_prediction`` is what PPI uses where the
    judge is unavailable (valid for any fixed prediction; the union bound treats it as a flag).
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
