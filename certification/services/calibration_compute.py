"""A calibration run's result as a pure function of its spec contract and inputs snapshot.

No database access: :func:`calibration_result_compute` reads the contract
(``certification.services.calibration.spec_content``) and the inputs snapshot
(``certification.selectors.calibration_inputs``) and calls ``certification.stats``. Everything a
run stores, and so every number a page, the API or ``manage.py certify`` shows, comes from here,
so a stored run can be rebuilt and compared (``calibration_run_rebuild``).

Units. A *unit* is one eligible question with the answer the declared selector emits (the mode,
the flagged answer, the first sample), or, with the ``each_candidate`` selector, every candidate
of every question. Its 0/1 loss comes from the candidate's resolved label under the declared
counting policy: ``unresolved``, ``evidence_unavailable``, ``abstained`` and not-yet-resolved
(``pending``) outcomes count as errors or are excluded, as the spec says; exclusions are counted
and reported, never silent. A unit without an answer (no sample, nothing selected) is never
accepted. A missing score is never accepted either (counted as ``missing_score``).

Conformal sets are per question: the question's answers (in sample order, cut by the declared
Hoeffding stopping rule when there is one) are canonicalised and ranked by frequency with the
declared tie rule; a class is admissible when every one of its samples has loss 0 (a class whose
samples disagree is counted and treated as inadmissible, which can only enlarge the sets).

Every JSON number that can be infinite is written as the string ``"inf"`` (JSON has no infinity).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from certification.stats.canonical import get_canonicaliser
from certification.stats.conformal import (
    ConformalThreshold,
    SetEvaluation,
    calibrate,
    conformal_threshold,
    evaluate_sets,
    frequency_profile,
    rank_score,
    sequential_stop,
)
from certification.stats.coverage import (
    beta_coverage,
    design_effect_unequal,
    effective_sample_size,
    icc_oneway,
    realised_coverage_spread,
    split_dependence_report,
)
from certification.stats.errors import StatsError
from certification.stats.heldout import (
    HeldoutQuestion,
    HeldoutReport,
    ProportionMetric,
    heldout_report,
)
from certification.stats.rccs import rccs
from certification.stats.selective_risk import (
    NO_CERTIFIED_OPERATING_POINT,
    Certificate,
    ThresholdCounts,
    ThresholdResult,
    certify,
    smallest_certifiable_count,
    threshold_counts,
)

#: Bump when the result's layout or any computation changes: it is part of the input hash, so
#: the next refresh recomputes runs made by older code.
STATS_VERSION = 1
#: Miscoverage levels of the "coverage and mean set size vs alpha" curve (plus the spec's alpha).
ALPHA_GRID = ("0.01", "0.02", "0.05", "0.1", "0.15", "0.2", "0.25", "0.3", "0.4", "0.5")
#: Split simulations (seed 003) are skipped above this many pooled questions: 20 i.i.d. pools x
#: 200 splits stay well under a second up to here.
SIMULATION_MAX_ROWS = 50_000
SIMULATION_DRAWS = 200
SIMULATION_POOLS = 20
#: Slices with more distinct values than this are not broken down (a free-text attribute).
MAX_SLICE_VALUES = 20

CERTIFIED = "certified"
#: The outcomes that the spec's counting policy decides (field of the contract per outcome).
POLICY_FIELDS = {
    "pending": "pending_as",
    "unresolved": "unresolved_as",
    "evidence_unavailable": "evidence_unavailable_as",
    "abstained": "abstained_as",
}
SUPPORTED = "supported"
EVIDENCE_UNAVAILABLE = "evidence_unavailable"
ADMISSIBLE = "admissible"
INADMISSIBLE = "inadmissible"


# -- JSON helpers -----------------------------------------------------------------------------
def num(value: float | int | Fraction | Decimal | None) -> float | int | str | None:
    """A JSON-safe number: ints stay ints, infinities become ``"inf"``/``"-inf"``, NaN None."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    number = float(value)
    if math.isnan(number):
        return None
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return number


def from_num(value: Any) -> float | None:
    """Inverse of :func:`num` for reading stored results (``"inf"`` -> ``math.inf``)."""
    if value is None:
        return None
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    return float(value)


def _fraction(value: Fraction | None) -> str | None:
    return None if value is None else f"{value.numerator}/{value.denominator}"


def _metric(metric: ProportionMetric) -> dict[str, Any]:
    interval = metric.interval
    return {
        "name": metric.name,
        "numerator": metric.numerator,
        "denominator": metric.denominator,
        "unit": metric.unit,
        "value": num(metric.value),
        "lower": num(interval.lower) if interval else None,
        "upper": num(interval.upper) if interval else None,
        "confidence": interval.confidence if interval else None,
        "method": interval.method if interval else None,
        "reason": metric.reason,
        "note": metric.note,
    }


# -- the contract -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Contract:
    """The parts of a spec contract the computation reads, typed."""

    method: str
    loss: str
    denominator: str
    alpha: Decimal
    delta: Decimal
    thresholds: tuple[float, ...]
    acceptance: str
    score_field: str
    selector: str
    utility: str
    canonicaliser: str
    tie_rule: str
    answer_field: str
    stopping_delta: Decimal | None
    multiplicity: str
    partition: str
    policies: Mapping[str, str]
    report_confidence: Decimal
    seed: int
    description: str

    @classmethod
    def of(cls, content: Mapping[str, Any]) -> Contract:
        """Read a contract dict (``spec_content``)."""
        stopping = content.get("stopping_delta")
        return cls(
            method=content["method"],
            loss=content["loss"],
            denominator=content["denominator"],
            alpha=Decimal(content["alpha"]),
            delta=Decimal(content["delta"]),
            thresholds=tuple(float(t) for t in content["thresholds"]),
            acceptance=content["acceptance"],
            score_field=content["score_field"],
            selector=content["selector"],
            utility=content["utility"],
            canonicaliser=content["canonicaliser"],
            tie_rule=content["tie_rule"],
            answer_field=content["answer_field"],
            stopping_delta=None if stopping is None else Decimal(stopping),
            multiplicity=content["multiplicity"],
            partition=content["partition"],
            policies={key: content[key] for key in POLICY_FIELDS.values()},
            report_confidence=Decimal(content["report_confidence"]),
            seed=int(content["seed"]),
            description=content.get("description", ""),
        )

    @property
    def selective(self) -> bool:
        """Whether selective-risk certification is part of the contract."""
        return self.method in ("selective_risk", "both")

    @property
    def conformal(self) -> bool:
        """Whether conformal sets are part of the contract."""
        return self.method in ("conformal_set", "both")

    @property
    def sign(self) -> float:
        """+1 for ``>=``/``>``; -1 for ``<=``/``<`` (score <= t iff -score >= -t)."""
        return -1.0 if self.acceptance in ("<=", "<") else 1.0

    @property
    def stats_accept(self) -> str:
        """The inequality on transformed scores: ``">="`` or ``">"``."""
        return ">=" if self.acceptance in (">=", "<=") else ">"


# -- outcomes and losses ----------------------------------------------------------------------
def candidate_loss(
    candidate: Mapping[str, Any], contract: Contract
) -> tuple[int | None, str | None]:
    """The 0/1 loss of one candidate under the contract, or (None, reason) when excluded.

    ``pending``, ``unresolved``, ``evidence_unavailable`` and ``abstained`` outcomes follow the
    declared policy (error = loss 1, exclude = reason). ``admissible`` is 0; ``inadmissible``
    and any other label are 1. With the ``any_error`` loss an admissible answer with a claim
    that is not ``supported`` is 1 (claims labelled ``evidence_unavailable`` are skipped when
    that outcome is excluded).
    """
    outcome = candidate["outcome"]
    if outcome in POLICY_FIELDS:
        if contract.policies[POLICY_FIELDS[outcome]] == "exclude":
            return None, outcome
        return 1, None
    if outcome != ADMISSIBLE:
        return 1, None
    if contract.loss == "any_error":
        for label, count in candidate.get("claims", {}).items():
            if label == SUPPORTED or not count:
                continue
            if label == EVIDENCE_UNAVAILABLE and contract.policies["evidence_unavailable_as"] == (
                "exclude"
            ):
                continue
            return 1, None
    return 0, None


def claim_counts(candidate: Mapping[str, Any], contract: Contract) -> tuple[int, int, int]:
    """(assessed claims, unsupported claims, excluded claims) of a candidate's resolution."""
    assessed = unsupported = excluded = 0
    for label, count in candidate.get("claims", {}).items():
        if label == EVIDENCE_UNAVAILABLE and contract.policies["evidence_unavailable_as"] == (
            "exclude"
        ):
            excluded += count
            continue
        assessed += count
        if label != SUPPORTED:
            unsupported += count
    return assessed, unsupported, excluded


# -- questions and units ----------------------------------------------------------------------
@dataclass
class PreparedQuestion:
    """One question's ranked answers and conformal score (see the module docstring)."""

    question: Mapping[str, Any]
    samples_available: int = 0
    samples_used: int = 0
    no_answer_samples: int = 0
    classes: tuple[str, ...] = ()
    mode_candidate: Mapping[str, Any] | None = None
    score: float = math.inf
    excluded: str | None = None
    inconsistent_classes: int = 0

    @property
    def group(self) -> str:
        """The question's group key, or a group of its own when it has none."""
        return self.question["group"] or f"question:{self.question['id']}"


def prepare_question(
    question: Mapping[str, Any], contract: Contract, canon: Callable[[str], str]
) -> PreparedQuestion:
    """Canonicalise, stop, rank and score one question's answers."""
    prepared = PreparedQuestion(question=question)
    answered = [c for c in question["candidates"] if c["answer"] is not None]
    prepared.no_answer_samples = len(question["candidates"]) - len(answered)
    answers = [c["answer"] for c in answered]
    used = len(answers)
    if contract.stopping_delta is not None and answers:
        used = sequential_stop(
            answers, delta=float(contract.stopping_delta), canonicaliser=canon
        ).samples_used
    prepared.samples_available, prepared.samples_used = len(answers), used
    kept = answered[:used]
    forms = [canon(answer) for answer in answers[:used]]
    profile = frequency_profile(forms, canonicaliser="exact", tie_rule=contract.tie_rule)
    prepared.classes = profile.classes
    if profile.mode is not None:
        prepared.mode_candidate = next(
            c for c, f in zip(kept, forms, strict=True) if f == profile.mode
        )
    admissible: dict[str, bool] = {}
    inconsistent: set[str] = set()
    reasons: list[str] = []
    for candidate, form in zip(kept, forms, strict=True):
        loss, reason = candidate_loss(candidate, contract)
        if reason is not None:
            reasons.append(reason)
            continue
        ok = loss == 0
        if form in admissible and admissible[form] != ok:
            inconsistent.add(form)
            admissible[form] = False
        else:
            admissible.setdefault(form, ok)
    prepared.inconsistent_classes = len(inconsistent)
    if reasons:
        prepared.excluded = "pending" if "pending" in reasons else reasons[0]
    prepared.score = rank_score(profile, {form for form, ok in admissible.items() if ok})
    return prepared


@dataclass
class Unit:
    """One eligible unit: a question and the candidate its selector emits (None: no answer)."""

    prepared: PreparedQuestion
    candidate: Mapping[str, Any] | None
    loss: int | None = None
    excluded: str | None = None
    score: float = -math.inf
    missing_score: bool = False

    @property
    def group(self) -> str:
        """The group of the unit's question."""
        return self.prepared.group


def _selected(prepared: PreparedQuestion, selector: str) -> list[Mapping[str, Any] | None]:
    candidates = prepared.question["candidates"]
    if selector == "each_candidate":
        return list(candidates)
    if selector == "is_selected":
        flagged = [c for c in candidates if c["selected"]]
        return [flagged[0] if flagged else None]
    if selector == "first_sample":
        return [candidates[0] if candidates else None]
    if selector == "mode":
        return [prepared.mode_candidate]
    raise StatsError(f"unknown selector {selector!r}")


def make_units(prepared: Sequence[PreparedQuestion], contract: Contract) -> list[Unit]:
    """The units of a partition, with their loss (or exclusion) and transformed score."""
    units = []
    for question in prepared:
        for candidate in _selected(question, contract.selector):
            unit = Unit(prepared=question, candidate=candidate)
            if candidate is not None:
                unit.loss, unit.excluded = candidate_loss(candidate, contract)
                raw = candidate.get("score")
                if raw is None or (isinstance(raw, float) and math.isnan(raw)):
                    unit.missing_score = True
                else:
                    unit.score = contract.sign * float(raw)
            units.append(unit)
    return units


def _exclusions(reasons: Sequence[str | None]) -> dict[str, int]:
    return dict(sorted(Counter(r for r in reasons if r is not None).items()))


# -- selective risk ---------------------------------------------------------------------------
def _utility_by_accepted(accepted: Sequence[int]) -> Callable[[ThresholdResult], float]:
    def answer_rate(row: ThresholdResult) -> float:
        return float(accepted[row.index])

    return answer_rate


def _selective(units: Sequence[Unit], contract: Contract) -> tuple[dict[str, Any], Certificate]:
    used = [u for u in units if u.excluded is None]
    losses = [u.loss if u.loss is not None else 0 for u in used]
    scores = [u.score for u in used]
    thresholds = [contract.sign * t for t in contract.thresholds]
    counts = threshold_counts(scores, losses, thresholds, accept=contract.stats_accept)  # type: ignore[arg-type]
    n = counts.n
    alpha, delta = float(contract.alpha), float(contract.delta)
    method = contract.multiplicity
    if contract.denominator == "eligible_units":
        tested = ThresholdCounts(
            thresholds=counts.thresholds,
            accepted=(n,) * counts.size,
            errors=counts.errors,
            n=n,
            accept=counts.accept,
        )
        utility: Any = (
            _utility_by_accepted(counts.accepted)
            if contract.utility == "answer_rate"
            else contract.utility
        )
    else:
        tested, utility = counts, contract.utility
    certificate = certify(tested, alpha=alpha, delta=delta, method=method, utility=utility)  # type: ignore[arg-type]
    rows = []
    for j, row in enumerate(certificate.results):
        m_j = counts.accepted[j]
        denominator = tested.accepted[j]
        rows.append(
            {
                "index": j,
                "threshold": contract.thresholds[j],
                "accepted": m_j,
                "errors": counts.errors[j],
                "denominator": denominator,
                "answer_rate": num(m_j / n) if n else None,
                "risk": num(counts.errors[j] / denominator) if denominator else None,
                "p_value": num(row.p_value),
                "upper_bound": num(row.upper_bound),
                "tested": row.tested,
                "certified": row.certified,
                "note": row.note,
            }
        )
    chosen = certificate.chosen_index
    needed = smallest_certifiable_count(
        alpha=alpha,
        delta=delta,
        n_thresholds=counts.size if method == "bonferroni" else 1,
    )
    section = {
        "alpha": str(contract.alpha),
        "delta": str(contract.delta),
        "multiplicity": method,
        "denominator": contract.denominator,
        "acceptance": contract.acceptance,
        "score_field": contract.score_field,
        "n_thresholds": counts.size,
        "n": n,
        "test_level": num(certificate.test_level),
        "bound_confidence": num(certificate.bound_confidence),
        "utility": contract.utility,
        "rows": rows,
        "certified_indices": list(certificate.certified_indices),
        "chosen_index": chosen,
        "chosen_threshold": None if chosen is None else contract.thresholds[chosen],
        "outcome": certificate.outcome,
        "reason": certificate.reason,
        "smallest_certifiable_count_zero_errors": needed,
        "counts": {
            "units": len(units),
            "excluded": _exclusions([u.excluded for u in units]),
            "used": n,
            "no_answer": sum(1 for u in used if u.candidate is None),
            "missing_score": sum(1 for u in used if u.missing_score),
            "errors": sum(1 for u in used if u.candidate is not None and u.loss == 1),
        },
    }
    return section, certificate


def accepts(score: float, threshold: float, contract: Contract) -> bool:
    """Whether a transformed score passes a declared threshold (same rule as calibration)."""
    t = contract.sign * threshold
    return score >= t if contract.stats_accept == ">=" else score > t


# -- conformal --------------------------------------------------------------------------------
def _evaluation(evaluation: SetEvaluation) -> dict[str, Any]:
    return {
        "threshold": num(evaluation.threshold),
        "n": evaluation.n,
        "covered": evaluation.covered,
        "coverage": num(evaluation.coverage),
        "n_solvable": evaluation.n_solvable,
        "covered_solvable": evaluation.covered_solvable,
        "coverage_solvable": num(evaluation.coverage_solvable),
        "set_size_counts": [[size, count] for size, count in evaluation.set_size_counts],
        "mean_set_size": num(evaluation.mean_set_size),
        "reason": evaluation.reason,
    }


def _threshold(threshold: ConformalThreshold) -> dict[str, Any]:
    return {
        "alpha": _fraction(threshold.alpha),
        "n": threshold.n,
        "k": threshold.k,
        "value": num(threshold.threshold),
        "infinite": threshold.is_infinite,
        "reason": threshold.reason,
    }


def _stopping(prepared: Sequence[PreparedQuestion]) -> dict[str, Any]:
    available = sum(p.samples_available for p in prepared)
    used = sum(p.samples_used for p in prepared)
    return {
        "samples_available": available,
        "samples_used": used,
        "samples_saved": available - used,
        "fraction_saved": num((available - used) / available) if available else None,
        "no_answer_samples": sum(p.no_answer_samples for p in prepared),
    }


def _conformal(
    calibration: Sequence[PreparedQuestion],
    test: Sequence[PreparedQuestion],
    contract: Contract,
) -> tuple[dict[str, Any], float | None]:
    """The conformal section and M* (None when calibration is empty)."""
    cal = [p for p in calibration if p.excluded is None]
    tst = [p for p in test if p.excluded is None]
    counts = {
        "questions": len(calibration),
        "excluded": _exclusions([p.excluded for p in calibration]),
        "used": len(cal),
        "unsolvable": sum(1 for p in cal if math.isinf(p.score)),
        "inconsistent_classes": sum(p.inconsistent_classes for p in cal),
        "stopping": _stopping(calibration),
        "test_stopping": _stopping(test),
    }
    section: dict[str, Any] = {
        "alpha": str(contract.alpha),
        "canonicaliser": contract.canonicaliser,
        "tie_rule": contract.tie_rule,
        "answer_field": contract.answer_field,
        "stopping_delta": None if contract.stopping_delta is None else str(contract.stopping_delta),
        "counts": counts,
    }
    if not cal:
        section.update(
            threshold=None,
            reliability=None,
            score_counts=[],
            calibration_sets=None,
            test_sets=None,
            curve=[],
            reason="no calibration question: the conformal threshold is undefined",
        )
        return section, None
    scores = [p.score for p in cal]
    n_classes = [len(p.classes) for p in cal]
    calibration_result = calibrate(scores, contract.alpha)
    threshold = calibration_result.threshold
    reliability = calibration_result.reliability
    test_scores = [p.score for p in tst]
    test_classes = [len(p.classes) for p in tst]
    curve_scores, curve_classes, curve_on = (
        (test_scores, test_classes, "test") if tst else (scores, n_classes, "calibration")
    )
    curve = []
    alphas = sorted({Decimal(a) for a in ALPHA_GRID} | {contract.alpha})
    for a in alphas:
        at = conformal_threshold(scores, a)
        evaluation = evaluate_sets(curve_scores, curve_classes, at)
        curve.append(
            {
                "alpha": str(a),
                "threshold": num(at.threshold),
                "coverage": num(evaluation.coverage),
                "covered": evaluation.covered,
                "n": evaluation.n,
                "mean_set_size": num(evaluation.mean_set_size),
            }
        )
    section.update(
        threshold=_threshold(threshold),
        reliability={
            "n": reliability.n,
            "n_mode_admissible": reliability.n_mode_admissible,
            # unreduced, so the counts show: #{s_i <= 1} / (n + 1)
            "level": None
            if reliability.level is None
            else f"{reliability.n_mode_admissible}/{reliability.n + 1}",
            "value": num(reliability.value),
            "reason": reliability.reason,
        },
        score_counts=[[num(score), count] for score, count in calibration_result.score_counts],
        calibration_sets=_evaluation(evaluate_sets(scores, n_classes, threshold)),
        test_sets=_evaluation(evaluate_sets(test_scores, test_classes, threshold)) if tst else None,
        curve=curve,
        curve_partition=curve_on,
        reason=None,
    )
    return section, threshold.threshold


# -- dependence and coverage variability ------------------------------------------------------
def _design_effect(values: Sequence[float], groups: Sequence[str]) -> dict[str, Any]:
    """ICC(1) of a 0/1 indicator within groups, the design effect and the effective n."""
    by_group: dict[str, list[float]] = defaultdict(list)
    for value, group in zip(values, groups, strict=True):
        by_group[group].append(value)
    sizes = [len(v) for v in by_group.values()]
    out: dict[str, Any] = {
        "n": len(values),
        "groups": len(by_group),
        "largest_group": max(sizes, default=0),
        "icc": None,
        "design_effect": None,
        "effective_n": None,
        "reason": None,
    }
    try:
        icc = icc_oneway(list(by_group.values()))
    except StatsError as exc:
        out["reason"] = str(exc)
        return out
    out["icc"] = num(icc.icc)
    if icc.icc is None:
        out["reason"] = icc.reason
        return out
    try:
        deff = design_effect_unequal(sizes, icc.icc)
    except StatsError as exc:
        out["reason"] = str(exc)
        return out
    out["design_effect"] = num(deff.value)
    out["cluster_size"] = num(deff.cluster_size)
    out["effective_n"] = num(effective_sample_size(len(values), deff))
    return out


def _coverage_variability(
    calibration: Sequence[PreparedQuestion],
    test: Sequence[PreparedQuestion],
    threshold: float | None,
    contract: Contract,
) -> dict[str, Any]:
    cal = [p for p in calibration if p.excluded is None]
    tst = [p for p in test if p.excluded is None]
    out: dict[str, Any] = {"n_calibration": len(cal), "n_test": len(tst)}
    if not cal:
        out["reason"] = "no calibration question"
        return out
    beta = beta_coverage(len(cal), contract.alpha)
    out["beta"] = {
        "a": beta.a,
        "b": beta.b,
        "mean": num(beta.mean),
        "variance": num(beta.variance),
        "sd": num(beta.sd),
        "reason": beta.reason,
    }
    if tst:
        spread = realised_coverage_spread(len(cal), len(tst), contract.alpha)
        out["realised"] = {
            "mean": num(spread.mean),
            "variance": num(spread.variance),
            "sd": num(spread.sd),
            "beta_variance": num(spread.beta_variance),
            "approximate_variance": num(spread.approximate_variance),
            "reason": spread.reason,
        }
    assert threshold is not None
    covered = [1.0 if p.score <= threshold else 0.0 for p in cal]
    out["grouping"] = _design_effect(covered, [p.group for p in cal])
    pooled = [*cal, *tst]
    groups = [p.group for p in pooled]
    if len(pooled) > SIMULATION_MAX_ROWS:
        out["simulation"] = {"reason": f"more than {SIMULATION_MAX_ROWS} questions: skipped"}
    elif len(pooled) < 4 or len(set(groups)) < 2:
        out["simulation"] = {"reason": "needs at least 4 questions in at least 2 groups"}
    else:
        try:
            report = split_dependence_report(
                [p.score for p in pooled],
                groups,
                alpha=contract.alpha,
                draws=SIMULATION_DRAWS,
                pools=SIMULATION_POOLS,
                seed=contract.seed,
            )
        except StatsError as exc:
            out["simulation"] = {"reason": str(exc)}
        else:
            out["simulation"] = {
                "seed": contract.seed,
                "draws": SIMULATION_DRAWS,
                "pools": SIMULATION_POOLS,
                "row": {
                    "sd": num(report.row.sd),
                    "excess": num(report.row.excess),
                    "mean": num(report.row.mean),
                },
                "group": {
                    "sd": num(report.group.sd),
                    "excess": num(report.group.excess),
                    "mean": num(report.group.mean),
                },
                "iid_band": [num(report.control.low), num(report.control.high)],
                "design_effect": num(report.design_effect.value) if report.design_effect else None,
                "predicted_excess": num(report.predicted_excess),
                "effective_n": num(report.effective_n),
                "lag_reason": report.lags.reason,
                "reason": None,
            }
    return out


# -- held-out report --------------------------------------------------------------------------
@dataclass
class HeldoutUnit:
    """A test unit's outcome under the frozen policy, with its slices."""

    slices: Mapping[str, Any]
    record: HeldoutQuestion


def _heldout_units(
    units: Sequence[Unit],
    contract: Contract,
    chosen_threshold: float | None,
    m_star: float | None,
) -> tuple[list[HeldoutUnit], dict[str, int], dict[str, int]]:
    """Apply the frozen policy once to each test unit (excluded units counted apart)."""
    records: list[HeldoutUnit] = []
    excluded: list[str | None] = []
    claims_excluded = 0
    for unit in units:
        reason = unit.excluded
        if reason is None and contract.conformal:
            reason = unit.prepared.excluded
        excluded.append(reason)
        if reason is not None:
            continue
        candidate = unit.candidate
        if candidate is None:
            emitted = False
        elif contract.selective:
            emitted = chosen_threshold is not None and accepts(
                unit.score, chosen_threshold, contract
            )
        else:
            emitted = True
        set_size: int | None = None
        covers: bool | None = None
        if contract.conformal and m_star is not None:
            n_classes = len(unit.prepared.classes)
            set_size = n_classes if math.isinf(m_star) else min(int(m_star), n_classes)
            covers = unit.prepared.score <= m_star
        if emitted:
            assert candidate is not None
            assessed, unsupported, skipped = claim_counts(candidate, contract)
            claims_excluded += skipped
            record = HeldoutQuestion(
                emitted=True,
                answer_admissible=unit.loss == 0,
                claims=assessed,
                unsupported_claims=unsupported,
                set_size=set_size,
                set_covers=covers,
            )
        else:
            record = HeldoutQuestion(emitted=False, set_size=set_size, set_covers=covers)
        records.append(
            HeldoutUnit(slices=unit.prepared.question.get("slices") or {}, record=record)
        )
    return records, _exclusions(excluded), {"claims_excluded": claims_excluded}


SET_METRICS = ("set_coverage", "set_coverage_all_eligible")


def _report(report: HeldoutReport, *, sets: bool) -> dict[str, Any]:
    """A held-out report as JSON; without sets in the contract the set metrics are left out
    (a policy that never returns a set is not a policy whose sets fail)."""
    sizes = report.set_sizes
    return {
        "n_eligible": report.n_eligible,
        "confidence": report.confidence,
        "metrics": [_metric(m) for m in report.metrics if sets or m.name not in SET_METRICS],
        "set_sizes": {
            "counts": [[size, count] for size, count in sizes.counts],
            "n_sets": sizes.n_sets,
            "n_no_set": sizes.n_no_set,
            "mean": num(sizes.mean),
        }
        if sets
        else None,
    }


def _slice_value(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _heldout(
    units: Sequence[Unit],
    contract: Contract,
    chosen_threshold: float | None,
    m_star: float | None,
) -> dict[str, Any]:
    records, excluded, extra = _heldout_units(units, contract, chosen_threshold, m_star)
    confidence = float(contract.report_confidence)
    policy = []
    if contract.selective:
        policy.append(
            "emit the selected answer iff "
            f"{contract.score_field} {contract.acceptance} {chosen_threshold}"
            if chosen_threshold is not None
            else "no certified operating point: the frozen policy emits nothing (fail closed)"
        )
    if contract.conformal:
        policy.append(
            "no conformal threshold: no sets"
            if m_star is None
            else f"return the top M* = {'inf' if math.isinf(m_star) else int(m_star)} "
            "canonical classes"
        )
    out: dict[str, Any] = {
        "partition": "test",
        "policy": "; ".join(policy),
        "units": len(units),
        "excluded": excluded,
        **extra,
        "report": _report(
            heldout_report([r.record for r in records], confidence=confidence),
            sets=contract.conformal,
        ),
        "slices": {},
    }
    keys = sorted({key for r in records for key in r.slices})
    for key in keys:
        groups: dict[str, list[HeldoutQuestion]] = defaultdict(list)
        for r in records:
            if key in r.slices:
                groups[_slice_value(r.slices[key])].append(r.record)
        if len(groups) > MAX_SLICE_VALUES:
            out["slices"][key] = {"reason": f"more than {MAX_SLICE_VALUES} values: not broken down"}
            continue
        out["slices"][key] = {
            value: _report(heldout_report(group, confidence=confidence), sets=contract.conformal)
            for value, group in sorted(groups.items())
        }
    return out


# -- RCCS -------------------------------------------------------------------------------------
def _rccs(units: Sequence[Unit]) -> dict[str, Any]:
    rows = [
        u for u in units if u.excluded is None and u.candidate is not None and u.loss is not None
    ]
    retrieval = [u.candidate["R"] for u in rows if u.candidate is not None]
    confidence = [u.candidate["C"] for u in rows if u.candidate is not None]
    correctness = [1 - (u.loss or 0) for u in rows]
    try:
        result = rccs(retrieval, confidence, correctness)
    except StatsError as exc:
        return {"n": 0, "n_dropped": len(rows), "reason": str(exc)}
    return {
        "rccs_correlation": num(result.rccs_correlation),
        "correlation_reason": result.correlation_reason,
        "confidence_calibration_error": num(result.confidence_calibration_error),
        "mean_rc": num(result.mean_rc),
        "n": result.n,
        "n_dropped": result.n_dropped,
        "reason": None,
    }


# -- the ledger -------------------------------------------------------------------------------
LEDGER_FIELDS = (
    ("population", "Population"),
    ("output_object", "Output object"),
    ("admission_policy", "Admission policy"),
    ("loss", "Loss"),
    ("numerator", "Numerator"),
    ("denominator", "Denominator"),
    ("conditioning", "Conditioning"),
    ("randomness", "Randomness"),
    ("parameters", "Parameters"),
    ("selection_correction", "Selection correction"),
    ("assumptions", "Assumptions"),
    ("composition_boundary", "Composition boundary"),
)

SELECTOR_TEXT = {
    "each_candidate": "every candidate answer (each is its own unit)",
    "is_selected": "the candidate flagged as selected (is_selected)",
    "mode": "the most frequent canonical answer (first sample of it)",
    "first_sample": "the first sampled candidate",
}
LOSS_TEXT = {
    "answer_inadmissible": "1 if the emitted answer's resolved label is not admissible, else 0",
    "any_error": (
        "1 if the emitted answer's resolved label is not admissible or any of its resolved claim "
        "labels is not supported, else 0"
    ),
}


def _policy_text(contract: Contract) -> str:
    words = {"error": "as an error", "exclude": "excluded (counted and reported)"}
    parts = [
        f"{name} {words[contract.policies[field_]]}"
        for name, field_ in (
            ("unresolved", "unresolved_as"),
            ("evidence_unavailable", "evidence_unavailable_as"),
            ("abstained", "abstained_as"),
            ("not-yet-resolved (pending)", "pending_as"),
        )
    ]
    return "; ".join(parts)


def _short(value: Any) -> str:
    """A stored number with 4 significant digits, for the ledger's sentences."""
    number = from_num(value)
    return "undefined" if number is None else f"{number:.4g}"


def _excluded_text(excluded: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in excluded.items()) or "none"


def ledger(
    *,
    contract: Contract,
    inputs: Mapping[str, Any],
    selective: Mapping[str, Any] | None,
    conformal: Mapping[str, Any] | None,
    dependence: Mapping[str, Any],
    pending: Mapping[str, int],
) -> list[dict[str, str]]:
    """The twelve fields of seed 000's guarantee ledger, filled from the contract and the data."""
    partition = contract.partition
    n_questions = len(inputs["calibration"])
    frozen = inputs.get("partition_frozen_at") or "not frozen"
    seed = inputs.get("partition_seed")
    policy_version = inputs.get("policy_version")
    population = (
        f"Eligible questions of the {partition!r} partition of project {inputs['project']!r}: "
        f"{n_questions} questions (partition frozen {frozen}, seed {seed}, grouped by source / "
        f"group key). Labels: resolved labels under label policy v{policy_version}."
    )
    if selective is not None:
        counts = selective["counts"]
        population += (
            f" Selective-risk units: {counts['units']}, excluded "
            f"{_excluded_text(counts['excluded'])}, used n = {counts['used']}."
        )
    if conformal is not None:
        counts = conformal["counts"]
        population += (
            f" Conformal questions: {counts['questions']}, excluded "
            f"{_excluded_text(counts['excluded'])}, used n = {counts['used']}."
        )
    if pending["calibration"]:
        population += (
            f" {pending['calibration']} candidate(s) of this partition are not resolved yet: the "
            "certificate covers only the resolved items of this snapshot."
        )
    if contract.description:
        population += f" Declared: {contract.description}"

    outputs, numerators, denominators, conditioning, parameters, corrections = (
        [],
        [],
        [],
        [],
        [],
        [],
    )
    if selective is not None:
        chosen = selective["chosen_threshold"]
        outputs.append(
            f"Selected answer: {SELECTOR_TEXT[contract.selector]}, emitted iff "
            f"{contract.score_field} {contract.acceptance} t"
            + (
                f" (certified operating point t = {chosen})"
                if chosen is not None
                else " (no certified operating point: nothing is emitted)"
            )
        )
        numerators.append("accepted answers with loss 1 (k_j, per threshold)")
        if contract.denominator == "eligible_units":
            denominators.append(
                f"all eligible units, n = {selective['n']} (unconditional failure rate)"
            )
            conditioning.append("unconditional over eligible units (acceptance in the numerator)")
        else:
            denominators.append("accepted answers (m_j, per threshold): selective risk")
            conditioning.append(
                f"conditional on acceptance ({contract.score_field} {contract.acceptance} t)"
            )
        conditioning.append(
            f"calibration-conditional: the probability of certifying any threshold whose risk "
            f"exceeds alpha is at most delta = {contract.delta} over the calibration draw"
        )
        parameters.append(
            f"alpha = {contract.alpha} (target risk), delta = {contract.delta}, "
            f"n = {selective['n']} calibration units, M = {selective['n_thresholds']} thresholds"
        )
        if contract.multiplicity == "bonferroni":
            corrections.append(
                f"Bonferroni over the whole prespecified family of M = "
                f"{selective['n_thresholds']} thresholds (per-test level delta/M = "
                f"{_short(selective['test_level'])}); the operating point is chosen among "
                f"certified thresholds by the declared utility ({contract.utility})"
            )
        else:
            corrections.append(
                "fixed-sequence testing in the family order fixed by the spec, each test at "
                f"level delta = {contract.delta}, stopping at the first failure; chosen by "
                f"{contract.utility}"
            )
    if conformal is not None:
        stopping = (
            f", Hoeffding sequential stopping at delta {contract.stopping_delta}"
            if contract.stopping_delta is not None
            else ""
        )
        outputs.append(
            "Prediction set: the top M* canonical answer classes by frequency (answer field "
            f"{contract.answer_field}, canonicaliser {contract.canonicaliser}, tie rule "
            f"{contract.tie_rule}{stopping})"
        )
        numerators.append(
            "calibration questions whose best-ranked admissible class ranks above M* "
            "(set miscoverage; no admissible sample = rank infinite)"
        )
        denominators.append(
            f"calibration questions, n = {conformal['counts']['used']}, unsolvable ones included"
        )
        conditioning.append(
            "marginal coverage over the calibration and test draw: not conditional on a "
            "question, a subgroup or the calibration set"
        )
        parameters.append(
            f"conformal alpha = {contract.alpha} (miscoverage), n = {conformal['counts']['used']}"
        )
        corrections.append("conformal: one prespecified alpha, no search (none needed)")
    claim_rule = (
        " Claims: a claim that is not 'supported' makes the answer an error."
        if contract.loss == "any_error"
        else ""
    )
    admission = (
        "Admissible = resolved answer label 'admissible' (consensus or adjudicated) under label "
        f"policy v{policy_version}. Counting policy: {_policy_text(contract)}.{claim_rule} "
        "Unavailable evidence is never turned into a correct label."
    )
    grouping = dependence.get("grouping") or {}
    deff = grouping.get("design_effect")
    losses = []
    assumed = []
    if selective is not None:
        unit = (
            "candidate answer"
            if contract.selector == "each_candidate"
            else "question (its emitted answer)"
        )
        losses.append(f"{LOSS_TEXT[contract.loss]}; range {{0, 1}}; unit: {unit}")
        assumed.append(
            "independent, identically distributed units with a binary loss (the exact binomial "
            "test of selective risk)"
        )
    if conformal is not None:
        losses.append(
            "set miscoverage: 1 if no admissible answer class is in the prediction set, else 0 "
            "(a class is admissible iff every one of its samples has loss 0 under: "
            f"{LOSS_TEXT[contract.loss]}); range {{0, 1}}; unit: question"
        )
        assumed.append("exchangeable calibration and test questions (conformal sets)")
    assumptions = (
        "; ".join(assumed).capitalize() + "; resolved labels taken as correct. The partition is "
        "grouped by shared sources / group keys (a leakage discipline, not a proof of "
        "independence)."
    )
    if deff is not None:
        assumptions += (
            f" Measured within-group correlation: ICC {_short(grouping.get('icc'))}, design "
            f"effect {_short(deff)} (effective n {_short(grouping.get('effective_n'))} of "
            f"{grouping.get('n')}): the nominal delta is optimistic when it exceeds 1."
        )
    elif grouping.get("reason"):
        assumptions += f" Within-group correlation: undefined ({grouping['reason']})."
    composition = (
        "Covers the output object exactly as produced by the frozen selector"
        + (" and acceptance rule" if selective is not None else "")
        + "; any later rewriting, truncation, reranking, a different selector or canonicaliser "
        "is outside the certificate."
        + (
            " Set coverage does not imply that the selected answer is admissible (seed 000)."
            if conformal is not None
            else ""
        )
        + " Covers only the labels in this run's inputs snapshot."
    )
    values = {
        "population": population,
        "output_object": " | ".join(outputs),
        "admission_policy": admission,
        "loss": " | ".join(losses),
        "numerator": " | ".join(numerators),
        "denominator": " | ".join(denominators),
        "conditioning": " | ".join(conditioning),
        "randomness": (
            "The draw of calibration and test questions (assumed i.i.d. from the workload); "
            "generation and evaluator variability are not modelled: answers and scores are "
            "frozen as imported, and labels as resolved in the inputs snapshot."
        ),
        "parameters": " | ".join(parameters),
        "selection_correction": " | ".join(corrections),
        "assumptions": assumptions,
        "composition_boundary": composition,
    }
    return [{"field": key, "title": title, "value": values[key]} for key, title in LEDGER_FIELDS]


# -- entry point ------------------------------------------------------------------------------
@dataclass
class _Partition:
    prepared: list[PreparedQuestion] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)


def _pending(questions: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for q in questions for c in q["candidates"] if c["outcome"] == "pending")


def calibration_result_compute(
    *, contract: Mapping[str, Any], inputs: Mapping[str, Any]
) -> dict[str, Any]:
    """Compute every statistic of a run from the contract and the inputs snapshot.

    Args:
        contract: the spec's canonical contract (``spec_content``).
        inputs: the snapshot (``calibration_inputs``).

    Returns:
        The result as JSON primitives: ``selective_risk``, ``conformal``, ``rccs``,
        ``dependence``, ``heldout``, ``ledger``, ``pending``, ``outcome`` and
        ``stats_version``. Sections of a method the spec does not use are None.

    Raises:
        StatsError: on malformed inputs (e.g. an unknown canonicaliser).
    """
    terms = Contract.of(contract)
    canon = get_canonicaliser(terms.canonicaliser)
    parts: dict[str, _Partition] = {}
    for key in ("calibration", "test"):
        part = _Partition()
        part.prepared = [prepare_question(q, terms, canon) for q in inputs[key]]
        part.units = make_units(part.prepared, terms)
        parts[key] = part
    cal, test = parts["calibration"], parts["test"]

    selective_section: dict[str, Any] | None = None
    chosen: float | None = None
    outcome_parts: list[str] = []
    if terms.selective:
        selective_section, certificate = _selective(cal.units, terms)
        chosen = selective_section["chosen_threshold"]
        outcome_parts.append(
            CERTIFIED if certificate.is_certified else NO_CERTIFIED_OPERATING_POINT
        )
    conformal_section: dict[str, Any] | None = None
    m_star: float | None = None
    if terms.conformal:
        conformal_section, m_star = _conformal(cal.prepared, test.prepared, terms)
        if m_star is None:
            outcome_parts.append("no conformal threshold")
        else:
            outcome_parts.append(f"M* = {'inf' if math.isinf(m_star) else int(m_star)}")

    dependence: dict[str, Any] = {}
    if terms.conformal:
        dependence = _coverage_variability(cal.prepared, test.prepared, m_star, terms)
    else:
        used = [u for u in cal.units if u.excluded is None and u.candidate is not None]
        dependence = {
            "grouping": _design_effect([float(u.loss or 0) for u in used], [u.group for u in used])
        }
    pending = {"calibration": _pending(inputs["calibration"]), "test": _pending(inputs["test"])}
    return {
        "stats_version": STATS_VERSION,
        "outcome": "; ".join(outcome_parts),
        "pending": pending,
        "covers_only_resolved": terms.policies["pending_as"] == "exclude"
        and pending["calibration"] > 0,
        "selective_risk": selective_section,
        "conformal": conformal_section,
        "rccs": _rccs(cal.units),
        "dependence": dependence,
        "heldout": _heldout(test.units, terms, chosen, m_star),
        "ledger": ledger(
            contract=terms,
            inputs=inputs,
            selective=selective_section,
            conformal=conformal_section,
            dependence=dependence,
            pending=pending,
        ),
    }
