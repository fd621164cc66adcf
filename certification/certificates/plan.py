"""The label budget plan of a spec on its current inputs, as JSON primitives (no Django).

The counts are those of the certificate itself: the calibration partition is prepared and cut
into units exactly as a run does (:mod:`~certification.certificates.units`), the selective-risk
section is computed (:func:`~certification.certificates.thresholds.selective_section`), and
its per-threshold denominators and errors are planned with :mod:`certification.stats.planning`.
A plan is not a certificate: it assumes the observed rates hold for the labels still to come.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from certification.certificates.contract import Contract
from certification.certificates.jsonnum import num
from certification.certificates.thresholds import selective_section
from certification.certificates.units import PreparedQuestion, make_units, prepare_question
from certification.stats.canonical import get_canonicaliser
from certification.stats.errors import StatsError
from certification.stats.planning import (
    MAX_ADDITIONAL,
    ConformalPlan,
    SelectivePlan,
    conformal_plan,
    selective_plan,
)
from certification.stats.selective_risk import Method
from labeling.vocabulary import PENDING

#: What every plan says first, on the page and in the API.
NOT_A_CERTIFICATE = (
    "A plan is not a certificate: it assumes the rates observed on the resolved calibration "
    "labels hold for the labels still to come. The certificate is computed only from real "
    "labels, when a run counts them."
)


#: Why a bounded loss gets no selective-risk plan.
BOUNDED_NOT_PLANNED = (
    "the planner covers 0/1 losses, whose certificate is the exact binomial test; this spec's "
    "loss is bounded in [0, 1] and certified with the Hoeffding-Bentkus p-value, which it does "
    "not plan"
)


def _selective(
    prepared: Sequence[PreparedQuestion], terms: Contract, n_more: int | None
) -> dict[str, Any]:
    if terms.bounded:
        raise StatsError(BOUNDED_NOT_PLANNED)
    section, _ = selective_section(make_units(prepared, terms), terms)
    rows = section["rows"]
    plan: SelectivePlan = selective_plan(
        n=section["n"],
        denominators=[row["denominator"] for row in rows],
        errors=[row["errors"] for row in rows],
        alpha=float(terms.alpha),
        delta=float(terms.delta),
        method=cast(Method, terms.multiplicity),
        n_more=n_more,
        names=[f"{terms.score_field} {terms.acceptance} {row['threshold']}" for row in rows],
    )
    unit = "candidate" if terms.selector == "each_candidate" else "question"
    denominator = "accepted answers" if terms.denominator == "accepted_answers" else f"{unit}s"
    return {
        "alpha": section["alpha"],
        "delta": section["delta"],
        "multiplicity": section["multiplicity"],
        "denominator": section["denominator"],
        "unit": unit,
        "n": plan.n,
        "n_thresholds": plan.n_thresholds,
        "test_level": num(plan.test_level),
        "zero_error_minimum": plan.zero_error_minimum,
        "zero_error_text": f"even with zero errors a threshold needs at least "
        f"{plan.zero_error_minimum} {denominator}",
        "probability_is_bound": plan.probability_is_bound,
        "certified_now": sum(1 for row in plan.rows if row.certified_now),
        # the threshold needing the fewest additional units (the first of equals), or None
        "fewest_index": plan.fewest_index,
        "fewest_threshold": None
        if plan.fewest_index is None
        else rows[plan.fewest_index]["threshold"],
        "fewest_additional": None
        if plan.fewest_index is None
        else plan.rows[plan.fewest_index].additional,
        "fewest_probability": None
        if plan.fewest_index is None
        else num(plan.rows[plan.fewest_index].probability_at_plan),
        "fewest_for_chance": [
            {
                "target": size.target,
                "additional": size.additional,
                "probability": num(size.probability),
            }
            for size in plan.fewest_for_chance
        ],
        "rows": [
            {
                "index": row.index,
                "threshold": rows[row.index]["threshold"],
                "denominator": row.denominator,
                "errors": row.errors,
                "rate": num(row.rate),
                "p_value": rows[row.index]["p_value"],
                "certified_now": row.certified_now,
                "additional": row.additional,
                "planned_denominator": row.planned_denominator,
                "planned_errors": row.planned_errors,
                "probability_at_plan": num(row.probability_at_plan),
                "probability_at_n_more": num(row.probability_at_n_more),
                "never": row.never,
                "reason": row.reason,
            }
            for row in plan.rows
        ],
    }


def _conformal(
    prepared: Sequence[PreparedQuestion], terms: Contract, n_more: int | None
) -> dict[str, Any]:
    used = [p for p in prepared if p.excluded is None]
    plan: ConformalPlan = conformal_plan(
        n=len(used),
        n_finite=sum(1 for p in used if not math.isinf(p.score)),
        n_mode_admissible=sum(1 for p in used if p.score <= 1),
        alpha=terms.alpha,
        n_more=n_more,
    )
    return {
        "alpha": str(terms.alpha),
        "n": plan.n,
        "n_finite": plan.n_finite,
        "n_mode_admissible": plan.n_mode_admissible,
        "k": plan.k,
        "finite_now": plan.finite_now,
        "minimum_n": plan.minimum_n,
        "additional": plan.additional,
        "planned_n": plan.planned_n,
        "probability_at_plan": num(plan.probability_at_plan),
        "probability_at_n_more": num(plan.probability_at_n_more),
        # unreduced, so the counts show: #{s_i <= 1} / (n + 1)
        "reliability_now": None
        if plan.reliability_now is None
        else f"{plan.n_mode_admissible}/{plan.n + 1}",
        "reliability_now_value": num(plan.reliability_now),
        "expected_reliability_at_plan": num(plan.expected_reliability_at_plan),
        "expected_reliability_at_n_more": num(plan.expected_reliability_at_n_more),
        "never": plan.never,
        "reason": plan.reason,
    }


def plan_compute(
    *, contract: Mapping[str, Any], inputs: Mapping[str, Any], n_more: int | None = None
) -> dict[str, Any]:
    """Plan the calibration labels a spec needs, from the inputs snapshot of its current labels.

    Only the calibration partition of ``inputs`` is read; ``n_more`` lies in
    [0, ``MAX_ADDITIONAL``]. Returns ``notice`` (:data:`NOT_A_CERTIFICATE`), ``is_certificate``
    (False), ``n_more``, ``budget``, ``pending`` (calibration candidates not resolved yet),
    ``questions``, ``candidates_per_question``, and the ``selective_risk`` and ``conformal`` plans
    (None for a method the spec does not use).

    Raises:
        StatsError: on malformed inputs or an ``n_more`` above the budget.
    """
    terms = Contract.of(contract)
    canon = get_canonicaliser(terms.canonicaliser)
    prepared = [prepare_question(q, terms, canon) for q in inputs["calibration"]]
    calibration = inputs["calibration"]
    pending = sum(1 for q in calibration for c in q["candidates"] if c["outcome"] == PENDING)
    candidates = sum(len(q["candidates"]) for q in calibration)
    return {
        "notice": NOT_A_CERTIFICATE,
        "is_certificate": False,
        "n_more": n_more,
        "budget": MAX_ADDITIONAL,
        "pending": pending,
        "questions": len(calibration),
        "candidates_per_question": num(candidates / len(calibration)) if calibration else None,
        "selective_risk": _selective(prepared, terms, n_more) if terms.selective else None,
        "conformal": _conformal(prepared, terms, n_more) if terms.conformal else None,
    }
