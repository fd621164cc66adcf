"""Anytime-valid audit figures: labelling may stop as soon as the evidence suffices.

Confidence sequences by betting (:mod:`certification.stats.sequential`), valid at every sample
size at once, beside the fixed-n figures of :mod:`certification.services.audit`. A sequence needs
a label-independent order: the sample's members are taken in a permutation by item id drawn from
``numpy.random.default_rng([seed, 1])``, and the figures use the longest prefix whose members are
all resolved, never the order labels came back in (disagreements take longer and are more often
errors). An unresolved item counts as an error.

Figures (:func:`anytime_json`): the workload error rate (per stratum at delta/H, without
replacement, combined by N_h/N); the judge's false positive and negative rates (audited items
treated as i.i.d. draws from the population); with a target, the stop message and a planner. An
active sample takes the whole workload in a seeded permutation with the active summand
f_t + (Y_t - f_t) xi_t / pi_t, whose range the design fixes before any label
(``active_observation_range``); it has no judge rates and no planner.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from certification.models import AuditReport, SampleKind
from certification.selectors import AuditRow
from certification.services.audit_design import (
    ActiveDesign,
    SampleDesign,
    evaluator_verdict,
    to_json,
)

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

FIXED_N = "fixed-n"
ANYTIME = "anytime-valid"
#: The assumed true rates of the planner, as fractions of the target.
PLANNER_FRACTIONS = (0.25, 0.5, 0.75)
ORDER_NOTE = (
    "members are taken in the sample's sequential order, a random permutation fixed by its "
    "seed when it was drawn; the figures use the longest prefix of that order whose members are "
    "all resolved, never the order in which labels came back"
)
ACTIVE_ORDER_NOTE = (
    "every item judged when the active sample was drawn is taken in a random permutation fixed "
    "by the sample's seed; an item not drawn contributes the evaluator's prediction at once, a "
    "drawn one its inverse-probability-weighted label once resolved; the figures use the "
    "longest prefix whose drawn items are all resolved, never the order in which labels came "
    "back"
)


def sequential_order(design: SampleDesign) -> list[int]:
    """Return the sample's member item ids in its sequential order (fixed by the seed).

    A permutation of the members sorted by item id, from ``default_rng([seed, 1])``: the same
    sample always gives the same order, and the order depends on nothing but the seed.
    """
    return _permutation(list(design.members), design.seed)


def _permutation(item_ids: Sequence[int], seed: int) -> list[int]:
    """Return the item ids sorted, then permuted by ``default_rng([seed, 1])``."""
    import numpy as np

    ordered = sorted(item_ids)
    permutation = np.random.default_rng([seed, 1]).permutation(len(ordered))
    return [ordered[int(i)] for i in permutation]


def _prefix(order: Sequence[int], rows: dict[int, AuditRow]) -> list[AuditRow]:
    """The longest prefix of ``order`` whose items are resolved (a deleted item ends it too)."""
    prefix = []
    for item_id in order:
        row = rows.get(item_id)
        if row is None or not row.resolved:
            break
        prefix.append(row)
    return prefix


def _judge_rates(
    report: AuditReport, prefix: Sequence[AuditRow], delta: float, design: SampleDesign
) -> dict[str, Any]:
    import numpy as np

    from certification.stats.sequential import betting_cs

    positive_h = set(report.human_positive)
    positive_e = set(report.evaluator_positive)
    rates: dict[str, Any] = {}
    for name, human_class, judge_wrong in (
        ("false_positive_rate", False, True),
        ("false_negative_rate", True, False),
    ):
        x = [
            float((verdict in positive_e) == judge_wrong)
            for row in prefix
            if row.human_label is not None and (row.human_label in positive_h) == human_class
            if (verdict := evaluator_verdict(report, row)) is not None
        ]
        cs = betting_cs(np.array(x), alpha=delta)
        rates[name] = {
            "kind": ANYTIME,
            "n": cs.n,
            "k": int(sum(x)),
            "estimate": sum(x) / len(x) if x else None,
            "lower": cs.final_lower,
            "upper": cs.final_upper,
        }
    probabilities = list(design.members.values())
    rates["inclusion_probability_range"] = [min(probabilities), max(probabilities)]
    rates["assumption"] = (
        "the audited items of each human class, in the sequential order, are treated as i.i.d. "
        "draws (exact when all inclusion probabilities are equal); items with an unavailable "
        "verdict are left out"
    )
    return rates


def audit_figure_kinds(result: dict[str, Any]) -> dict[str, Any]:
    """Return the design of an audit result's sample and the kind of each figure it computed.

    Keys: ``design`` (``stratified``, ``active``, or None without a sample: every resolved item
    counts) and ``figures`` (the result's key of each computed figure -> :data:`FIXED_N` or
    :data:`ANYTIME`; a figure that gives only a reason, or waits for members, is left out).
    Reads the stored JSON only: a release records it beside the result it freezes.
    """
    sample = result.get("sample")
    figures = {}
    if result.get("error_rate") and "reason" not in result["error_rate"]:
        figures["error_rate"] = FIXED_N
    if (result.get("active") or {}).get("status") == "done":
        figures["active"] = FIXED_N
    if result.get("anytime") and "reason" not in result["anytime"]:
        figures["anytime"] = ANYTIME
    return {"design": None if sample is None else sample["kind"], "figures": figures}


def _stop(upper_bound: float, target: float | None) -> dict[str, Any] | None:
    if target is None:
        return None
    stop = upper_bound < target
    if stop:
        message = (
            f"You may stop now: the anytime-valid upper bound {upper_bound:.3f} is below your "
            f"target {target:g}."
        )
    else:
        message = (
            f"Keep labelling: the anytime-valid upper bound {upper_bound:.3f} is "
            f"{upper_bound - target:.3f} above your target {target:g}."
        )
    return {"stop": stop, "target": target, "upper_bound": upper_bound, "message": message}


def _active_anytime(
    report: AuditReport, by_id: dict[int, AuditRow], design: ActiveDesign, target: float | None
) -> dict[str, Any]:
    """The anytime-valid error rate of an active sample (see the module docstring)."""
    from certification.stats.ppi import active_observation_range
    from certification.stats.sequential import active_betting_bounds

    positive_h = set(report.human_positive)
    predictions, inclusion, drawn, errors = [], [], [], []
    for item_id in _permutation(list(design.population), design.seed):
        pi, f = design.population[item_id]
        error = 0.0
        if item_id in design.members:
            row = by_id.get(item_id)
            if row is None or not row.resolved:
                break
            error = float(row.human_label is None or row.human_label in positive_h)
        predictions.append(f)
        inclusion.append(pi)
        drawn.append(item_id in design.members)
        errors.append(error)
    lower, upper = active_observation_range(
        [f for _, f in design.population.values()],
        [pi for pi, _ in design.population.values()],
        floor=design.floor,
    )
    bound = active_betting_bounds(
        predictions,
        inclusion,
        drawn,
        errors,
        lower=lower,
        upper=upper,
        alpha=1.0 - float(report.confidence),
    )
    resolved = sum(1 for pk in design.members if pk in by_id and by_id[pk].resolved)
    return {
        "kind": ANYTIME,
        "design": SampleKind.ACTIVE.value,
        "order": ACTIVE_ORDER_NOTE,
        "n_prefix": bound.n,
        "n_waiting": resolved - bound.n_labelled,
        "error_rate": {"kind": ANYTIME, **to_json(bound)},
        "judge": None,
        "target": target,
        "stop": _stop(bound.upper_bound, target),
        "planner": None,
    }


def anytime_json(
    report: AuditReport,
    rows: Sequence[AuditRow],
    design: SampleDesign | ActiveDesign | None,
) -> dict[str, Any]:
    """Compute the audit's anytime-valid figures as JSON (no database access).

    Keys: ``kind`` (:data:`ANYTIME`), ``design`` (the sample's kind, ``stratified`` or
    ``active``), ``order`` (how the sequence is ordered), ``n_prefix`` (resolved members in the
    prefix; for an active sample, the workload's items in it, drawn or not), ``n_waiting``
    (resolved members after it), ``error_rate`` (the stratified bounds,
    :class:`~certification.stats.sequential.StratifiedSequenceBound` as JSON; for an active
    sample :class:`~certification.stats.sequential.ActiveSequenceBound` as JSON with its
    ``kind``), ``judge`` (false positive / negative rate sequences; None for an active
    sample), ``target``, ``stop`` (the message, or None without a target) and ``planner``
    (simulated labels to stop, or None); or ``{"kind": ..., "reason": ...}`` without an audit
    sample or labelled item.
    """
    import numpy as np

    from certification.stats.sequential import stopping_plan, stratified_betting_bounds

    if design is None:
        return {
            "kind": ANYTIME,
            "reason": "needs an audit sample: its seeded order makes the sequence independent "
            "of the labels",
        }
    if not rows:
        return {"kind": ANYTIME, "reason": "the evaluator labelled no item"}
    target = None if report.anytime_target is None else float(report.anytime_target)
    by_id = {r.item_id: r for r in rows}
    if isinstance(design, ActiveDesign):
        return _active_anytime(report, by_id, design, target)
    delta = 1.0 - float(report.confidence)
    prefix = _prefix(sequential_order(design), by_id)
    positive_h = set(report.human_positive)
    strata = [design.strata.get(r.item_id, "(labelled after the draw)") for r in rows]
    populations = {key: strata.count(key) for key in sorted(set(strata))}
    in_design = {design.strata[pk] for pk in design.members if pk in by_id}
    observations: dict[str, np.ndarray | None] = {
        key: (np.zeros(0) if key in in_design else None) for key in populations
    }
    for key in in_design:
        observations[key] = np.array(
            [
                float(r.human_label is None or r.human_label in positive_h)
                for r in prefix
                if design.strata[r.item_id] == key
            ]
        )
    bound = stratified_betting_bounds(observations, populations, alpha=delta)
    resolved_members = sum(1 for pk in design.members if pk in by_id and by_id[pk].resolved)
    planner = None
    if target is not None:
        planner = [
            to_json(
                stopping_plan(
                    target * fraction,
                    target=target,
                    delta=delta,
                    population=len(rows),
                    seed=design.seed,
                )
            )
            for fraction in PLANNER_FRACTIONS
        ]
    return {
        "kind": ANYTIME,
        "design": SampleKind.STRATIFIED.value,
        "order": ORDER_NOTE,
        "n_prefix": len(prefix),
        "n_waiting": resolved_members - len(prefix),
        "error_rate": to_json(bound),
        "judge": _judge_rates(report, prefix, delta, design),
        "target": target,
        "stop": _stop(bound.upper_bound, target),
        "planner": planner,
    }
