"""Held-out report: the frozen policy applied once to the test partition, one record per metric.

Every metric is a (numerator, denominator, unit, exact interval) record, because the percentages
do not substitute for one another: answering 20 of 1,000 questions with 10 errors is a 2% answer
rate, a 1% unconditional failure rate and a 50% error rate among emitted answers, and counting
claims instead of answers changes the unit again. A zero denominator gives an undefined value
(None with a reason, e.g. a policy that never answers has undefined selective risk), never 0.
Abstentions are never dropped after the fact: set coverage is reported both over questions that
returned a set and over all eligible questions (abstention = failure).

Intervals are two-sided Clopper–Pearson at the report's confidence, per metric (not simultaneous
across metrics or slices), and assume i.i.d. sampling units. Claims share their answer, so the
claim-level interval is optimistic when errors cluster within answers; the
record says so in its note.

Another counterexample: 100 questions whose set always covers while the selector always errs
have perfect set coverage and zero selected-answer correctness. Intervals: Clopper and Pearson
(1934).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from certification.stats.errors import StatsError
from certification.stats.intervals import (
    Proportion,
    check_count,
    check_open_unit,
    proportion_of,
)

__all__ = [
    "HeldoutQuestion",
    "HeldoutReport",
    "ProportionMetric",
    "SetSizeDistribution",
    "heldout_report",
    "proportion_metric",
]

CLAIM_NOTE = (
    "claims share their answer: the interval treats claims as independent and is too narrow "
    "when unsupported claims cluster within answers"
)


@dataclass(frozen=True)
class ProportionMetric(Proportion):
    """A named held-out :class:`Proportion`; ``unit`` is the denominator's, ``note`` a caveat."""

    name: str
    unit: str
    note: str | None = None


def proportion_metric(
    name: str,
    numerator: int,
    denominator: int,
    unit: str,
    *,
    confidence: float = 0.95,
    note: str | None = None,
) -> ProportionMetric:
    """Build a metric record with its exact interval.

    A zero denominator gives ``value`` and ``interval`` None with a reason.

    Raises:
        StatsError: on non-integer counts, numerator > denominator or a bad confidence.
    """
    k = check_count(numerator, name=f"{name} numerator")
    n = check_count(denominator, name=f"{name} denominator")
    if k > n:
        raise StatsError(f"{name}: numerator {k} exceeds denominator {n}")
    check_open_unit(confidence, name="confidence")
    p = proportion_of(
        k, n, confidence, f"no {unit} in the denominator: the proportion is undefined"
    )
    return ProportionMetric(k, n, p.value, p.interval, p.reason, name=name, unit=unit, note=note)


@dataclass(frozen=True)
class HeldoutQuestion:
    """The outcome of the frozen policy on one eligible test question.

    The caller maps labels to these fields under the spec's declared policy (by default
    ``unresolved``, ``evidence_unavailable`` and ``abstained`` labels count as errors).

    ``answer_admissible`` is None iff not emitted; ``claims`` counts the emitted answer's
    assessed claims (0 when not emitted or not assessed), ``unsupported_claims`` those labelled
    unsupported. ``set_size`` is the retained set's size (0 = empty output), None when the policy
    returned no set; ``set_covers`` (an admissible member in the set) is None iff ``set_size`` is.

    Raises:
        StatsError: on construction, if the fields contradict each other.
    """

    emitted: bool
    answer_admissible: bool | None = None
    claims: int = 0
    unsupported_claims: int = 0
    set_size: int | None = None
    set_covers: bool | None = None

    def __post_init__(self) -> None:
        """Validate the fields (see the class docstring)."""
        if self.emitted and self.answer_admissible is None:
            raise StatsError("an emitted answer needs answer_admissible (True or False)")
        if not self.emitted and (self.answer_admissible is not None or self.claims):
            raise StatsError("an abstention has no answer_admissible and no claims")
        claims = check_count(self.claims, name="claims")
        if check_count(self.unsupported_claims, name="unsupported_claims") > claims:
            raise StatsError("unsupported_claims exceeds claims")
        if (self.set_size is None) != (self.set_covers is None):
            raise StatsError("set_size and set_covers must both be given or both be None")
        if self.set_size is not None and check_count(self.set_size, name="set_size") == 0:
            if self.set_covers:
                raise StatsError("an empty set cannot cover")


@dataclass(frozen=True)
class SetSizeDistribution:
    """Raw set sizes: (size, questions) ascending, size 0 included; ``mean`` over returned sets."""

    counts: tuple[tuple[int, int], ...]
    n_sets: int
    n_no_set: int
    mean: float | None


@dataclass(frozen=True)
class HeldoutReport:
    """The held-out metrics of the test partition, each with its own denominator.

    Each metric is numerator / denominator: ``answer_rate`` emitted answers / eligible
    questions; ``emitted_answer_risk`` (selective risk) inadmissible emitted / emitted;
    ``unconditional_failure_rate`` inadmissible emitted / eligible;
    ``unsupported_claim_risk`` unsupported assessed claims / assessed claims of emitted answers;
    ``any_error_answer_rate`` emitted answers with >= 1 unsupported claim / emitted answers whose
    claims were assessed; ``set_coverage`` sets with an admissible member / questions that
    returned a set; ``set_coverage_all_eligible`` the same numerator / eligible questions
    (abstention and no set count as failure).
    """

    n_eligible: int
    confidence: float
    answer_rate: ProportionMetric
    emitted_answer_risk: ProportionMetric
    unconditional_failure_rate: ProportionMetric
    unsupported_claim_risk: ProportionMetric
    any_error_answer_rate: ProportionMetric
    set_coverage: ProportionMetric
    set_coverage_all_eligible: ProportionMetric
    set_sizes: SetSizeDistribution

    @property
    def metrics(self) -> tuple[ProportionMetric, ...]:
        """Every proportion metric, in report order."""
        return (
            self.answer_rate,
            self.emitted_answer_risk,
            self.unconditional_failure_rate,
            self.unsupported_claim_risk,
            self.any_error_answer_rate,
            self.set_coverage,
            self.set_coverage_all_eligible,
        )


def heldout_report(
    questions: Sequence[HeldoutQuestion],
    *,
    confidence: float = 0.95,
    unit: str = "eligible question",
) -> HeldoutReport:
    """Compute every held-out metric from per-question outcomes of the frozen policy.

    ``questions`` include abstentions (the answer rate and all-eligible set coverage need them).
    ``unit`` words one element of ``questions`` for the metrics over all of them:
    ``"eligible question"``, or ``"eligible candidate"`` when every candidate is its own unit.

    Raises:
        StatsError: if an element is not a :class:`HeldoutQuestion` or the confidence is bad.
    """
    check_open_unit(confidence, name="confidence")
    if any(not isinstance(q, HeldoutQuestion) for q in questions):
        raise StatsError("questions must be HeldoutQuestion records")
    eligible = len(questions)
    emitted = [q for q in questions if q.emitted]
    inadmissible = sum(1 for q in emitted if q.answer_admissible is False)
    claims = sum(q.claims for q in emitted)
    unsupported = sum(q.unsupported_claims for q in emitted)
    assessed = [q for q in emitted if q.claims > 0]
    any_error = sum(1 for q in assessed if q.unsupported_claims > 0)
    with_set = [q for q in questions if q.set_size is not None]
    covered = sum(1 for q in with_set if q.set_covers)
    sizes = Counter(int(q.set_size) for q in with_set if q.set_size is not None)

    def metric(name: str, k: int, n: int, unit: str, note: str | None = None) -> ProportionMetric:
        return proportion_metric(name, k, n, unit, confidence=confidence, note=note)

    return HeldoutReport(
        n_eligible=eligible,
        confidence=float(confidence),
        answer_rate=metric("answer_rate", len(emitted), eligible, unit),
        emitted_answer_risk=metric(
            "emitted_answer_risk", inadmissible, len(emitted), "emitted answer"
        ),
        unconditional_failure_rate=metric(
            "unconditional_failure_rate", inadmissible, eligible, unit
        ),
        unsupported_claim_risk=metric(
            "unsupported_claim_risk", unsupported, claims, "assessed claim", CLAIM_NOTE
        ),
        any_error_answer_rate=metric(
            "any_error_answer_rate", any_error, len(assessed), "emitted answer with assessed claims"
        ),
        set_coverage=metric("set_coverage", covered, len(with_set), "question returning a set"),
        set_coverage_all_eligible=metric("set_coverage_all_eligible", covered, eligible, unit),
        set_sizes=SetSizeDistribution(
            counts=tuple(sorted(sizes.items())),
            n_sets=len(with_set),
            n_no_set=eligible - len(with_set),
            mean=sum(s * c for s, c in sizes.items()) / len(with_set) if with_set else None,
        ),
    )
