"""A calibration run's result as a pure function of its spec contract and inputs snapshot.

No database access: :func:`calibration_result_compute` reads the contract
(``certification.contract.spec_content``) and the inputs snapshot
(``certification.selectors.calibration_inputs``) and calls ``certification.stats``. Everything a
run stores, and so every number a page, the API or ``manage.py certify`` shows, comes from here,
so a stored run can be rebuilt and compared (``calibration_run_rebuild``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from certification.certificates.contract import Contract
from certification.certificates.dependence import coverage_variability, design_effect
from certification.certificates.heldout import heldout_section
from certification.certificates.ledger import ledger
from certification.certificates.rccs import rccs_section
from certification.certificates.sets import conformal_section
from certification.certificates.thresholds import selective_section
from certification.certificates.units import PreparedQuestion, Unit, make_units, prepare_question
from certification.certificates.version import STATS_VERSION
from certification.stats.canonical import get_canonicaliser
from certification.stats.selective_risk import NO_CERTIFIED_OPERATING_POINT
from labeling.vocabulary import PENDING

CERTIFIED = "certified"


@dataclass
class _Partition:
    prepared: list[PreparedQuestion] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)


def _pending(questions: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for q in questions for c in q["candidates"] if c["outcome"] == PENDING)


def _partitions(terms: Contract, inputs: Mapping[str, Any]) -> tuple[_Partition, _Partition]:
    """The calibration and test partitions, prepared and cut into units."""
    canon = get_canonicaliser(terms.canonicaliser)
    parts = []
    for key in ("calibration", "test"):
        part = _Partition()
        part.prepared = [prepare_question(q, terms, canon) for q in inputs[key]]
        part.units = make_units(part.prepared, terms)
        parts.append(part)
    return parts[0], parts[1]


def _m_star_text(m_star: float | None) -> str:
    if m_star is None:
        return "no conformal threshold"
    return f"M* = {'inf' if math.isinf(m_star) else int(m_star)}"


def _dependence(
    cal: _Partition, test: _Partition, m_star: float | None, terms: Contract
) -> dict[str, Any]:
    """Coverage variability with sets; otherwise the design effect of the losses."""
    if terms.conformal:
        return coverage_variability(cal.prepared, test.prepared, m_star, terms)
    used = [u for u in cal.units if u.excluded is None and u.candidate is not None]
    losses = [float((u.bounded_loss if terms.bounded else u.loss) or 0) for u in used]
    return {"grouping": design_effect(losses, [u.group for u in used])}


def calibration_result_compute(
    *, contract: Mapping[str, Any], inputs: Mapping[str, Any]
) -> dict[str, Any]:
    """Compute every statistic of a run from the contract and the inputs snapshot.

    Returns JSON primitives: ``selective_risk``, ``conformal``, ``rccs``, ``dependence``,
    ``heldout``, ``ledger``, ``pending``, ``outcome`` and ``stats_version``; a method the spec
    does not use has None.

    Raises:
        StatsError: on malformed inputs (e.g. an unknown canonicaliser).
    """
    terms = Contract.of(contract)
    cal, test = _partitions(terms, inputs)

    selective: dict[str, Any] | None = None
    chosen: float | None = None
    outcome_parts: list[str] = []
    if terms.selective:
        selective, certificate = selective_section(cal.units, terms)
        chosen = selective["chosen_threshold"]
        outcome_parts.append(
            CERTIFIED if certificate.is_certified else NO_CERTIFIED_OPERATING_POINT
        )
    conformal: dict[str, Any] | None = None
    m_star: float | None = None
    if terms.conformal:
        conformal, m_star = conformal_section(cal.prepared, test.prepared, terms)
        outcome_parts.append(_m_star_text(m_star))

    dependence = _dependence(cal, test, m_star, terms)
    pending = {"calibration": _pending(inputs["calibration"]), "test": _pending(inputs["test"])}
    return {
        "stats_version": STATS_VERSION,
        "outcome": "; ".join(outcome_parts),
        "pending": pending,
        "covers_only_resolved": terms.policies["pending_as"] == "exclude"
        and pending["calibration"] > 0,
        "selective_risk": selective,
        "conformal": conformal,
        "rccs": rccs_section(cal.units),
        "dependence": dependence,
        "heldout": heldout_section(test.units, terms, chosen, m_star),
        "ledger": ledger(
            contract=terms,
            inputs=inputs,
            selective=selective,
            conformal=conformal,
            dependence=dependence,
            pending=pending,
        ),
    }
