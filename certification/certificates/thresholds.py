"""The selective-risk section: threshold counts, the certificate and the chosen operating point.

Source: the selective-risk certificate of :mod:`certification.stats.selective_risk`
(Learn-then-Test, Angelopoulos, Bates, Candès, Jordan and Lei (2021), "Learn then Test:
Calibrating predictive algorithms to achieve risk control", arXiv:2110.01052, with exact binomial
p-values and Bonferroni or fixed-sequence multiplicity control). A bounded loss in [0, 1] is tested
with the Hoeffding–Bentkus p-value instead (the same paper, section 3); its section says so
(``p_value_test``) and its rows carry the accepted loss totals. Beside the fixed-n test, the
section carries the anytime-valid test of the same family (``anytime``,
:mod:`certification.stats.sequential.selective`): betting e-processes over the units in the
spec's seeded random order, with the same multiplicity, valid at every prefix at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, cast

from certification.certificates.contract import Contract, loss_content
from certification.certificates.jsonnum import num
from certification.certificates.units import Unit, exclusions
from certification.stats.selective_risk import (
    Acceptance,
    Certificate,
    Method,
    ThresholdCounts,
    ThresholdResult,
    certify,
    smallest_certifiable_count,
    threshold_counts,
)
from certification.stats.sequential.selective import (
    AnytimeSelectiveTest,
    Denominator,
    anytime_selective_test,
)


def _utility_by_accepted(accepted: Sequence[int]) -> Callable[[ThresholdResult], float]:
    def answer_rate(row: ThresholdResult) -> float:
        return float(accepted[row.index])

    return answer_rate


def _tested_counts(counts: ThresholdCounts, contract: Contract) -> tuple[ThresholdCounts, Any]:
    """The counts the certificate tests and its utility (eligible units: n per threshold)."""
    if contract.denominator != "eligible_units":
        return counts, contract.utility
    n = counts.n
    tested = ThresholdCounts(
        thresholds=counts.thresholds,
        accepted=(n,) * counts.size,
        errors=counts.errors,
        n=n,
        accept=counts.accept,
        loss_sums=counts.loss_sums,
    )
    utility: Any = (
        _utility_by_accepted(counts.accepted)
        if contract.utility == "answer_rate"
        else contract.utility
    )
    return tested, utility


def _rows(
    certificate: Certificate,
    counts: ThresholdCounts,
    tested: ThresholdCounts,
    contract: Contract,
) -> list[dict[str, Any]]:
    """One JSON row per threshold, in family order."""
    n = counts.n
    rows = []
    for j, row in enumerate(certificate.results):
        m_j = counts.accepted[j]
        denominator = tested.accepted[j]
        total = counts.errors[j] if counts.loss_sums is None else counts.loss_sums[j]
        out = {
            "index": j,
            "threshold": contract.thresholds[j],
            "accepted": m_j,
            "errors": counts.errors[j],
            "denominator": denominator,
            "answer_rate": num(m_j / n) if n else None,
            "risk": num(total / denominator) if denominator else None,
            "p_value": num(row.p_value),
            "upper_bound": num(row.upper_bound),
            "tested": row.tested,
            "certified": row.certified,
            "note": row.note,
        }
        if counts.loss_sums is not None:
            out["loss_sum"] = num(total)
        rows.append(out)
    return rows


def _unit_counts(
    units: Sequence[Unit], used: Sequence[Unit], n: int, contract: Contract
) -> dict[str, Any]:
    """Unit counts; ``errors`` counts losses of 1 (bounded losses: above 0, with their total)."""
    answered = [u for u in used if u.candidate is not None]
    counts: dict[str, Any] = {
        "units": len(units),
        "excluded": exclusions([u.excluded for u in units]),
        "used": n,
        "no_answer": len(used) - len(answered),
        "missing_score": sum(1 for u in used if u.missing_score),
    }
    if contract.bounded:
        counts["errors"] = sum(1 for u in answered if (u.bounded_loss or 0.0) > 0)
        counts["loss_sum"] = num(math.fsum(u.bounded_loss or 0.0 for u in answered))
    else:
        counts["errors"] = sum(1 for u in answered if u.loss == 1)
    return counts


#: What each unit contributes to the anytime test, per denominator (A: accepted, L: its loss).
TESTED_VARIABLE = {
    "accepted_answers": "A·L + (1 − A)·alpha: an accepted unit's loss, alpha for a rejected one",
    "eligible_units": "A·L: an accepted unit's loss, 0 for a rejected one",
}


def _anytime(test: AnytimeSelectiveTest, chosen: int | None, contract: Contract) -> dict[str, Any]:
    """The anytime-valid test as JSON primitives; ``chosen`` is the fixed-n operating point."""
    rows = [
        {
            "index": row.index,
            "threshold": contract.thresholds[row.index],
            "wealth": num(row.wealth),
            "max_wealth": num(row.max_wealth),
            "crossed_at": row.crossed_at,
            "tested": row.tested,
            "certified": row.certified,
            "certified_at": row.certified_at,
        }
        for row in test.results
    ]
    return {
        "kind": "anytime-valid",
        "test": "betting e-process (Waudby-Smith and Ramdas 2024), H0: risk > alpha",
        "tested_variable": TESTED_VARIABLE[test.denominator],
        "multiplicity": test.method,
        "level": num(test.level),
        "evidence_threshold": num(test.evidence_threshold),
        "n": test.n,
        "seed": test.seed,
        "order": test.order,
        "assumption": test.assumption,
        "rows": rows,
        "certified_indices": list(test.certified_indices),
        "chosen": None if chosen is None else rows[chosen],
    }


def selective_section(
    units: Sequence[Unit], contract: Contract
) -> tuple[dict[str, Any], Certificate]:
    """Certify the prespecified thresholds on the calibration units.

    Returns the section as JSON primitives (``rows``, ``chosen_threshold``, ``counts``, ...) and
    the :class:`~certification.stats.selective_risk.Certificate`.

    Raises:
        StatsError: on malformed thresholds, alpha or delta (from ``certification.stats``).
    """
    used = [u for u in units if u.excluded is None]
    losses: list[float] | list[int] = (
        [u.bounded_loss if u.bounded_loss is not None else 0.0 for u in used]
        if contract.bounded
        else [u.loss if u.loss is not None else 0 for u in used]
    )
    scores = [u.score for u in used]
    thresholds = [contract.sign * t for t in contract.thresholds]
    accept = cast(Acceptance, contract.stats_accept)
    counts = threshold_counts(scores, losses, thresholds, accept=accept, bounded=contract.bounded)
    n = counts.n
    alpha, delta = float(contract.alpha), float(contract.delta)
    # the spec's multiplicity is validated when the spec is written (``spec_clean``)
    method = cast(Method, contract.multiplicity)
    tested, utility = _tested_counts(counts, contract)
    certificate = certify(tested, alpha=alpha, delta=delta, method=method, utility=utility)
    chosen = certificate.chosen_index
    needed = smallest_certifiable_count(
        alpha=alpha,
        delta=delta,
        n_thresholds=counts.size if method == "bonferroni" else 1,
    )
    anytime = anytime_selective_test(
        scores,
        losses,
        thresholds,
        accept=accept,
        alpha=alpha,
        delta=delta,
        method=method,
        denominator=cast(Denominator, contract.denominator),
        seed=contract.seed,
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
        "rows": _rows(certificate, counts, tested, contract),
        "certified_indices": list(certificate.certified_indices),
        "chosen_index": chosen,
        "chosen_threshold": None if chosen is None else contract.thresholds[chosen],
        "outcome": certificate.outcome,
        "reason": certificate.reason,
        "smallest_certifiable_count_zero_errors": needed,
        "counts": _unit_counts(units, used, n, contract),
        "anytime": _anytime(anytime, chosen, contract),
    }
    if contract.bounded:
        section["p_value_test"] = certificate.test
        section["loss"] = loss_content(contract.loss, contract.loss_field)
    return section, certificate


def accepts(score: float, threshold: float, contract: Contract) -> bool:
    """Return whether a sign-transformed score passes a threshold (in the score field's units)."""
    t = contract.sign * threshold
    return score >= t if contract.stats_accept == ">=" else score > t
