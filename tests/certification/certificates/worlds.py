"""Small hand-built contracts and inputs snapshots for the pure certificate code (no database)."""

from __future__ import annotations

from typing import Any

CONTRACT: dict[str, Any] = {
    "description": "",
    "method": "both",
    "loss": "answer_inadmissible",
    "denominator": "accepted_answers",
    "alpha": "0.1",
    "delta": "0.05",
    "thresholds": [0.5, 0.7, 0.9],
    "acceptance": ">=",
    "score_field": "acceptance_score",
    "selector": "mode",
    "utility": "answer_rate",
    "multiplicity": "bonferroni",
    "canonicaliser": "exact",
    "tie_rule": "canonical_ascending",
    "answer_field": "canonical_form",
    "stopping_delta": None,
    "partition": "calibration",
    "unresolved_as": "error",
    "evidence_unavailable_as": "error",
    "abstained_as": "error",
    "pending_as": "exclude",
    "report_confidence": "0.95",
    "seed": 0,
}


def contract(**changes: Any) -> dict[str, Any]:
    """The contract above with some fields changed."""
    return {**CONTRACT, **changes}


def _candidate(cid: int, answer: str | None, outcome: str, score: float) -> dict[str, Any]:
    return {
        "id": cid,
        "item": cid,
        "sample": 0,
        "answer": answer,
        "selected": True,
        "score": score,
        "R": 0.5,
        "C": score,
        "outcome": outcome,
        "resolution": cid,
        "claims": {},
    }


def _question(qid: int, group: str, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": qid,
        "external_id": f"q{qid}",
        "group": group,
        "slices": {"topic": "a" if qid % 2 else "b"},
        "candidates": candidates,
    }


def inputs(n_calibration: int = 40, n_test: int = 20, pending: int = 0) -> dict[str, Any]:
    """A snapshot: questions with two samples each, one in five wrong, in groups of four."""
    cid = 0

    def questions(first: int, count: int) -> list[dict[str, Any]]:
        nonlocal cid
        out = []
        for q in range(first, first + count):
            wrong = q % 5 == 0
            outcome = "inadmissible" if wrong else "admissible"
            cid += 2
            candidates = [
                _candidate(cid - 1, "x", outcome, 0.6 if wrong else 0.95),
                _candidate(cid, "y", "inadmissible", 0.3),
            ]
            out.append(_question(q, f"g{q // 4}", candidates))
        return out

    calibration = questions(1, n_calibration)
    for question in calibration[:pending]:
        question["candidates"][0]["outcome"] = "pending"
    return {
        "schema": 1,
        "project": "study",
        "calibration_partition": "calibration",
        "score_field": "acceptance_score",
        "answer_field": "canonical_form",
        "policy_version": 1,
        "partition_seed": 0,
        "partition_frozen_at": "2026-01-01T00:00:00+00:00",
        "calibration": calibration,
        "test": questions(1000, n_test),
    }
