"""The held-out section: the frozen policy applied once to each test unit, overall and by slice.

Source: the held-out report of :func:`certification.stats.heldout.heldout_report` (proportions
with exact Clopper–Pearson intervals, Clopper and Pearson (1934)). A bounded loss adds its mean
over the emitted answers with a two-sided Hoeffding–Bentkus interval (Bates et al. 2021, RCPS,
Proposition 3; each side at (1 + confidence)/2).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from certification.certificates.contract import Contract
from certification.certificates.jsonnum import num
from certification.certificates.thresholds import accepts
from certification.certificates.units import Unit, claim_counts, exclusions
from certification.stats.bounded import hoeffding_bentkus_upper_bounds
from certification.stats.heldout import (
    HeldoutQuestion,
    HeldoutReport,
    ProportionMetric,
    heldout_report,
)

#: Slices with more distinct values than this are not broken down (a free-text attribute).
MAX_SLICE_VALUES = 20
#: Metrics of the held-out report left out when the contract has no sets.
SET_METRICS = ("set_coverage", "set_coverage_all_eligible")


@dataclass
class HeldoutUnit:
    """A test unit's outcome under the frozen policy, with its slices (name -> value)."""

    slices: Mapping[str, Any]
    record: HeldoutQuestion


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


def _emitted(unit: Unit, contract: Contract, chosen_threshold: float | None) -> bool:
    """Whether the frozen policy emits the unit's answer."""
    if unit.candidate is None:
        return False
    if contract.selective:
        return chosen_threshold is not None and accepts(unit.score, chosen_threshold, contract)
    return True


def _set_outcome(
    unit: Unit, contract: Contract, m_star: float | None
) -> tuple[int | None, bool | None]:
    """The unit's set size and whether the set covers (None, None without sets)."""
    if not (contract.conformal and m_star is not None):
        return None, None
    n_classes = len(unit.prepared.classes)
    set_size = n_classes if math.isinf(m_star) else min(int(m_star), n_classes)
    # M* = inf returns every class sampled and counts as covering (the whole answer space),
    # but a question with no sampled answer gets an empty set, which covers nothing.
    return set_size, set_size > 0 and unit.prepared.score <= m_star


def heldout_units(
    units: Sequence[Unit],
    contract: Contract,
    chosen_threshold: float | None,
    m_star: float | None,
) -> tuple[list[HeldoutUnit], dict[str, int], dict[str, int]]:
    """Apply the frozen policy once to each test unit (excluded units counted apart).

    ``chosen_threshold`` (score units) and ``m_star`` (M*, possibly ``math.inf``) are None when not
    certified. Returns the records of the units not excluded, the exclusion counts by reason,
    and ``{"claims_excluded": count}``.
    """
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
        set_size, covers = _set_outcome(unit, contract, m_star)
        if _emitted(unit, contract, chosen_threshold):
            candidate = unit.candidate
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
    return records, exclusions(excluded), {"claims_excluded": claims_excluded}


def _report(report: HeldoutReport, *, sets: bool) -> dict[str, Any]:
    """A held-out report as JSON.

    Without sets in the contract the set metrics are left out (a policy that never returns a
    set is not a policy whose sets fail).
    """
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


def _unit(contract: Contract) -> str:
    """The sampling unit of the metrics over every unit: a candidate or a question."""
    return "eligible candidate" if contract.selector == "each_candidate" else "eligible question"


def _slice_value(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _policy(contract: Contract, chosen_threshold: float | None, m_star: float | None) -> str:
    """The frozen policy in words."""
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
    return "; ".join(policy)


def _slices(
    records: Sequence[HeldoutUnit], contract: Contract, confidence: float
) -> dict[str, Any]:
    """One report per value of each slice attribute (or why an attribute is not broken down)."""
    out: dict[str, Any] = {}
    keys = sorted({key for r in records for key in r.slices})
    for key in keys:
        groups: dict[str, list[HeldoutQuestion]] = defaultdict(list)
        for r in records:
            if key in r.slices:
                groups[_slice_value(r.slices[key])].append(r.record)
        if len(groups) > MAX_SLICE_VALUES:
            out[key] = {"reason": f"more than {MAX_SLICE_VALUES} values: not broken down"}
            continue
        out[key] = {
            value: _report(
                heldout_report(group, confidence=confidence, unit=_unit(contract)),
                sets=contract.conformal,
            )
            for value, group in sorted(groups.items())
        }
    return out


def bounded_loss_report(
    units: Sequence[Unit], contract: Contract, chosen_threshold: float | None
) -> dict[str, Any]:
    """The mean bounded loss of the emitted test answers, with a two-sided HB interval.

    ``chosen_threshold`` is in score units; None emits nothing. Excluded units are left out.
    Returns ``emitted`` (m), ``loss_sum``, ``value`` (the mean, None when m = 0), ``lower`` and
    ``upper`` (Hoeffding–Bentkus bounds of the mean at (1 + confidence)/2 each: lower = 1 -
    upper bound of the mean of 1 - loss), ``confidence``, ``method``, ``unit``.
    """
    losses = [
        u.bounded_loss or 0.0
        for u in units
        if u.excluded is None and _emitted(u, contract, chosen_threshold)
    ]
    m = len(losses)
    total = min(math.fsum(losses), float(m))
    confidence = float(contract.report_confidence)
    side = (1.0 + confidence) / 2.0
    upper, complement = hoeffding_bentkus_upper_bounds([total, m - total], [m, m], confidence=side)
    return {
        "name": "mean_bounded_loss",
        "emitted": m,
        "loss_sum": num(total),
        "value": num(total / m) if m else None,
        "lower": num(1.0 - complement) if m else None,
        "upper": num(upper) if m else None,
        "confidence": confidence,
        "method": "hoeffding_bentkus",
        "unit": "emitted answer",
    }


def heldout_section(
    units: Sequence[Unit],
    contract: Contract,
    chosen_threshold: float | None,
    m_star: float | None,
) -> dict[str, Any]:
    """Return the held-out section: the frozen policy's report on the test partition.

    ``chosen_threshold`` (score units) and ``m_star`` (M*, possibly ``math.inf``) are None when not
    certified. Returns ``partition``, ``policy`` (in words), ``units``, ``excluded``,
    ``claims_excluded``, ``report`` (overall) and ``slices`` (per slice attribute and value),
    JSON primitives; with a bounded loss also ``bounded_loss`` (:func:`bounded_loss_report`).

    Raises:
        StatsError: on a malformed report confidence (from ``certification.stats.heldout``).
    """
    records, excluded, extra = heldout_units(units, contract, chosen_threshold, m_star)
    confidence = float(contract.report_confidence)
    section: dict[str, Any] = {
        "partition": "test",
        "policy": _policy(contract, chosen_threshold, m_star),
        "units": len(units),
        "excluded": excluded,
        **extra,
        "report": _report(
            heldout_report(
                [r.record for r in records], confidence=confidence, unit=_unit(contract)
            ),
            sets=contract.conformal,
        ),
        "slices": _slices(records, contract, confidence),
    }
    if contract.bounded:
        section["bounded_loss"] = bounded_loss_report(units, contract, chosen_threshold)
    return section
