"""Applying a frozen certificate: it reproduces the run's held-out figures on the test partition.

The run is computed by ``calibration_result_compute``; its certificate is then applied to the
test questions stripped of every label (as new traffic would arrive, through
``question_parse``), and the held-out figures are recounted here from the decisions and the
labels, independently of ``certification.certificates.heldout``: accepted units, errors among
them, set coverage and the set-size distribution must equal the run's own report exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certification.certificates import calibration_result_compute
from certification.certificates.apply import (
    WHOLE_SPACE_NOTE,
    InvalidQuestion,
    certificate_apply,
    certificate_freeze,
    certificate_status,
    heldout_decisions,
    question_parse,
)
from certification.certificates.contract import Contract
from certification.certificates.ledger import ledger_sha256
from certification.contract import canonical_json

from .worlds import contract

POOL = ("a", "b", "c", "d", "e")


def _world(seed: int, n_calibration: int = 600, n_test: int = 300) -> dict[str, Any]:
    """Questions with 1-6 samples from a small answer pool, random labels and scores.

    Each answer class has its own admissibility per question; 3% of candidates are pending,
    4% have no score, 5% of later samples no answer, and two questions in three flag a
    selected candidate.
    """
    rng = random.Random(seed)
    cid = 0

    def section(first: int, count: int) -> list[dict[str, Any]]:
        nonlocal cid
        questions = []
        for q in range(first, first + count):
            good = {a for a in POOL if rng.random() < 0.45}
            k = rng.randint(1, 6)
            flagged = rng.randrange(k) if rng.random() < 0.67 else None
            candidates = []
            for s in range(k):
                cid += 1
                answer = rng.choice(POOL[: rng.randint(1, 5)])
                if s and rng.random() < 0.05:  # a sample without an answer, never the first
                    answer = None
                outcome = "admissible" if answer in good else "inadmissible"
                if rng.random() < 0.03:
                    outcome = "pending"
                # scores carry signal: admissible answers tend to score higher
                base = 0.3 if outcome == "admissible" else 0.0
                score = None if rng.random() < 0.04 else round(base + 0.7 * rng.random(), 3)
                candidates.append(
                    {
                        "id": cid,
                        "item": cid,
                        "sample": s,
                        "answer": answer,
                        "selected": s == flagged,
                        "score": score,
                        "R": 0.5,
                        "C": score,
                        "outcome": outcome,
                        "resolution": cid,
                        "claims": {},
                    }
                )
            questions.append(
                {
                    "id": q,
                    "external_id": f"q{q}",
                    "group": f"g{q // 3}",
                    "slices": {},
                    "candidates": candidates,
                }
            )
        return questions

    return {
        "schema": 2,
        "project": "study",
        "calibration_partition": "calibration",
        "score_field": "acceptance_score",
        "answer_field": "canonical_form",
        "policy_version": 1,
        "partition_seed": 0,
        "partition_frozen_at": None,
        "calibration": section(1, n_calibration),
        "test": section(10_000, n_test),
    }


def _traffic(questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The test questions as a client sends them: no label, no group, through JSON."""
    return json.loads(
        json.dumps(
            [
                {
                    "id": q["external_id"],
                    "candidates": [
                        {"answer": c["answer"], "score": c["score"], "selected": c["selected"]}
                        for c in q["candidates"]
                    ],
                }
                for q in questions
            ]
        )
    )


def _certificate(terms: dict[str, Any], result: dict[str, Any]):
    return certificate_freeze(
        run_id=7, spec_sha256="s" * 64, input_sha256="i" * 64, contract=terms, result=result
    )


def _recount(terms: dict[str, Any], world: dict[str, Any], records: list[dict[str, Any]]):
    """The held-out figures, counted from the decisions and the snapshot's labels."""
    typed = Contract.of(terms)
    eligible = accepted = errors = covered = 0
    sizes: Counter[int] = Counter()
    for question, record in zip(world["test"], records, strict=True):
        candidates = question["candidates"]
        if typed.selective:
            decisions = record["selective_risk"]["decisions"]
        else:  # a sets-only spec: one held-out unit per question
            decisions = [None]
        for decision in decisions:
            emitted = None
            if decision is not None and decision["candidate_index"] is not None:
                emitted = candidates[decision["candidate_index"]]
            pending = emitted is not None and emitted["outcome"] == "pending"
            if typed.conformal:
                used = record["prediction_set"]["samples_used"]
                kept = [c for c in candidates if c["answer"] is not None][:used]
                pending = pending or any(c["outcome"] == "pending" for c in kept)
            if pending:
                continue
            eligible += 1
            if decision is not None and decision["decision"] == "accept":
                accepted += 1
                errors += emitted["outcome"] != "admissible"
            if typed.conformal and record["prediction_set"] is not None:
                members = record["prediction_set"]["classes"]
                sizes[len(members)] += 1
                admissible = {
                    a
                    for a in {c["answer"] for c in kept}
                    if all(c["outcome"] == "admissible" for c in kept if c["answer"] == a)
                }
                if record["prediction_set"]["whole_answer_space"] or admissible & set(members):
                    covered += 1
    return eligible, accepted, errors, covered, sorted(sizes.items())


def _metric(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in result["heldout"]["report"]["metrics"] if m["name"] == name)


CASES = [
    {"method": "selective_risk", "selector": "is_selected", "thresholds": [0.5, 0.75, 0.8]},
    {"method": "selective_risk", "selector": "first_sample", "acceptance": "<", "alpha": "0.7",
     "thresholds": [0.9, 0.7]},
    {"method": "selective_risk", "selector": "each_candidate", "alpha": "0.6",
     "thresholds": [0.3, 0.6]},
    {"method": "selective_risk", "selector": "mode", "acceptance": ">", "alpha": "0.5",
     "multiplicity": "fixed_sequence", "thresholds": [0.7, 0.4, 0.1]},
    {"method": "conformal_set", "selector": "mode", "alpha": "0.5"},
    {"method": "conformal_set", "selector": "mode", "alpha": "0.3", "tie_rule": "first_seen",
     "stopping_delta": "0.2"},
    {"method": "conformal_set", "selector": "mode", "alpha": "0.05"},
    {"method": "both", "selector": "mode", "alpha": "0.5", "thresholds": [0.2, 0.5]},
]  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("changes", CASES)
def test_applying_the_certificate_to_the_test_partition_reproduces_its_heldout_figures(
    changes, seed
):
    # given a run and its certificate
    world = _world(seed)
    terms = contract(**changes)
    result = calibration_result_compute(contract=terms, inputs=world)
    certificate = _certificate(terms, result)
    typed = Contract.of(terms)
    assert certificate.refusal is None
    # when it is applied to the test questions, labels stripped
    traffic = [question_parse(q, typed) for q in _traffic(world["test"])]
    records = certificate_apply(certificate, traffic)
    # then the decisions reproduce the held-out report exactly
    eligible, accepted, errors, covered, sizes = _recount(terms, world, records)
    report = result["heldout"]["report"]
    assert eligible == report["n_eligible"]
    if typed.selective:
        assert (accepted, eligible) == (
            _metric(result, "answer_rate")["numerator"],
            _metric(result, "answer_rate")["denominator"],
        )
        assert errors == _metric(result, "emitted_answer_risk")["numerator"]
        assert accepted > 0
    if typed.conformal:
        coverage = _metric(result, "set_coverage")
        assert (covered, eligible) == (coverage["numerator"], coverage["denominator"])
        assert [list(pair) for pair in sizes] == report["set_sizes"]["counts"]
    # and each record carries the certificate it was made under
    assert {json.dumps(r["certificate"], sort_keys=True) for r in records} == {
        json.dumps(
            {
                "run": 7,
                "spec_sha256": "s" * 64,
                "input_sha256": "i" * 64,
                "ledger_sha256": ledger_sha256(result["ledger"]),
            },
            sort_keys=True,
        )
    }


def test_the_runs_own_heldout_decisions_match_its_report():
    world = _world(3)
    terms = contract(method="both", selector="mode", alpha="0.5", thresholds=[0.2, 0.5])
    result = calibration_result_compute(contract=terms, inputs=world)
    records = heldout_decisions(_certificate(terms, result), world)
    decisions = [r["selective_risk"]["decisions"][0] for r in records]
    used = [d for d in decisions if d["excluded"] is None]
    accepted = [d for d in used if d["decision"] == "accept"]
    sets = [r["prediction_set"] for r in records if r["prediction_set"]["excluded"] is None]
    assert len(used) == result["heldout"]["report"]["n_eligible"]
    assert len(accepted) == _metric(result, "answer_rate")["numerator"]
    assert sum(d["loss"] for d in accepted) == _metric(result, "emitted_answer_risk")["numerator"]
    assert sum(s["set_covers"] for s in sets) == _metric(result, "set_coverage")["numerator"]
    assert [r["external_id"] for r in records] == [q["external_id"] for q in world["test"]]


def test_an_infinite_m_star_says_the_set_is_the_whole_answer_space():
    world = _world(4)
    terms = contract(method="conformal_set", selector="mode", alpha="0.01")
    result = calibration_result_compute(contract=terms, inputs=world)
    assert result["conformal"]["threshold"]["value"] == "inf"
    certificate = _certificate(terms, result)
    question = {"id": 1, "candidates": [{"answer": "b"}, {"answer": "a"}, {"answer": "b"}]}
    record = certificate_apply(certificate, [question_parse(question, certificate.contract)])[0]
    assert record["prediction_set"] == {
        "m_star": "inf",
        "whole_answer_space": True,
        "classes": ["b", "a"],
        "size": 2,
        "samples_used": 3,
        "samples_available": 3,
        "note": WHOLE_SPACE_NOTE,
    }


def test_a_finite_m_star_keeps_the_top_classes_by_frequency_with_the_tie_rule():
    world = _world(1)
    terms = contract(method="conformal_set", selector="mode", alpha="0.5")
    result = calibration_result_compute(contract=terms, inputs=world)
    certificate = _certificate(terms, result)
    m_star = int(certificate.m_star)
    answers = ["c", "a", "c", "b", "a", "d", "c"]  # c x3, a x2, then b and d tied at 1
    question = {"id": "x", "candidates": [{"answer": a} for a in answers]}
    record = certificate_apply(certificate, [question_parse(question, certificate.contract)])[0]
    assert record["prediction_set"]["classes"] == ["c", "a", "b", "d"][:m_star]
    assert record["prediction_set"]["size"] == min(m_star, 4)


def test_decisions_follow_the_threshold_and_say_why_they_abstain():
    world = _world(1)
    terms = contract(method="selective_risk", selector="is_selected", thresholds=[0.5, 0.75, 0.8])
    result = calibration_result_compute(contract=terms, inputs=world)
    certificate = _certificate(terms, result)
    t = certificate.threshold
    questions = [
        {"id": "above", "candidates": [{"score": t, "selected": True, "id": "c1"}]},
        {"id": "below", "candidates": [{"score": t - 1e-9, "selected": True}]},
        {"id": "missing", "candidates": [{"selected": True}]},
        {"id": "none", "candidates": [{"score": 0.99}]},
    ]
    records = certificate_apply(
        certificate, [question_parse(q, certificate.contract) for q in questions]
    )
    first = [r["selective_risk"]["decisions"][0] for r in records]
    decided = [(d["decision"], d["reason"]) for d in first]
    assert decided == [
        ("accept", None),
        ("abstain", "score_fails_threshold"),
        ("abstain", "missing_score"),
        ("abstain", "no_answer"),
    ]
    assert records[0]["selective_risk"]["decisions"][0]["candidate_id"] == "c1"
    assert records[0]["selective_risk"]["rule"] == f"accept iff acceptance_score >= {t}"


def test_a_run_without_a_certified_operating_point_is_refused_with_its_reason():
    world = _world(1, n_calibration=20)
    terms = contract(method="selective_risk", selector="is_selected", alpha="0.01")
    result = calibration_result_compute(contract=terms, inputs=world)
    certificate = _certificate(terms, result)
    assert certificate.threshold is None
    assert certificate.refusal == certificate_status(result)
    assert certificate.refusal.startswith("no certified operating point: ")
    assert result["selective_risk"]["reason"] in certificate.refusal


@pytest.mark.parametrize(
    ("question", "field"),
    [
        ([], ""),
        ({"candidates": [{"answer": "a"}]}, "id"),
        ({"id": True, "candidates": [{"answer": "a"}]}, "id"),
        ({"id": "", "candidates": [{"answer": "a"}]}, "id"),
        ({"id": 1}, "candidates"),
        ({"id": 1, "candidates": []}, "candidates"),
        ({"id": 1, "candidates": [{"answer": "a"}], "group": "g"}, "group"),
        ({"id": 1, "candidates": ["a"]}, "candidates[0]"),
        ({"id": 1, "candidates": [{"answer": "a"}, {"score": 0.5}]}, "candidates[1].answer"),
        ({"id": 1, "candidates": [{"answer": 3}]}, "candidates[0].answer"),
        ({"id": 1, "candidates": [{"answer": "a", "score": "0.5"}]}, "candidates[0].score"),
        ({"id": 1, "candidates": [{"answer": "a", "score": math.inf}]}, "candidates[0].score"),
        ({"id": 1, "candidates": [{"answer": "a", "score": True}]}, "candidates[0].score"),
        ({"id": 1, "candidates": [{"answer": "a", "score": 10**400}]}, "candidates[0].score"),
        ({"id": 1, "candidates": [{"answer": "a", "selected": 1}]}, "candidates[0].selected"),
        ({"id": 1, "candidates": [{"answer": "a", "label": "admissible"}]}, "candidates[0].label"),
    ],
)
def test_question_parse_names_the_field_it_refuses(question, field):
    with pytest.raises(InvalidQuestion) as refused:
        question_parse(question, Contract.of(contract(method="both", selector="mode")))
    assert refused.value.field == field


def test_an_answer_is_optional_when_the_spec_reads_only_scores():
    terms = Contract.of(contract(method="selective_risk", selector="is_selected"))
    parsed = question_parse({"id": 1, "candidates": [{"score": 1, "selected": True}]}, terms)
    assert parsed["candidates"] == [
        {"id": None, "sample": 0, "answer": None, "selected": True, "score": 1.0}
    ]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
CANDIDATE = st.fixed_dictionaries(
    {}, optional={"answer": JSON, "score": JSON, "selected": JSON, "id": JSON, "x": JSON}
)
QUESTION = st.fixed_dictionaries(
    {}, optional={"id": JSON, "candidates": st.lists(CANDIDATE, max_size=3) | JSON}
)


@settings(max_examples=300, deadline=None)
@given(question=QUESTION | JSON)
def test_question_parse_refuses_any_malformed_json_with_invalid_question_only(question):
    terms = Contract.of(contract(method="both", selector="mode"))
    try:
        parsed = question_parse(question, terms)
    except InvalidQuestion as refused:
        assert refused.reason
    else:
        assert all(isinstance(c["score"], float | None) for c in parsed["candidates"])


def test_the_ledger_reference_is_the_sha256_of_the_canonical_ledger():
    result = calibration_result_compute(contract=contract(), inputs=_world(1, 50, 10))
    expected = hashlib.sha256(canonical_json(result["ledger"]).encode("utf-8")).hexdigest()
    assert ledger_sha256(result["ledger"]) == expected


def test_heldout_decisions_carry_the_bounded_loss_the_report_averages():
    world = _world(5)
    for question in world["test"] + world["calibration"]:
        for c in question["candidates"]:
            # one claim in three unsupported on inadmissible answers, none on admissible ones
            bad = c["outcome"] == "inadmissible"
            c["claims"] = {"supported": 2, "not_supported": 1} if bad else {"supported": 3}
    loss = {"kind": "bounded", "source": "unsupported_claim_share"}
    terms = contract(method="selective_risk", selector="mode", loss=loss, alpha="0.3",
                     thresholds=[0.7, 0.4])  # fmt: skip
    result = calibration_result_compute(contract=terms, inputs=world)
    certificate = _certificate(terms, result)
    assert certificate.refusal is None
    decisions = [r["selective_risk"]["decisions"][0] for r in heldout_decisions(certificate, world)]
    accepted = [d for d in decisions if d["decision"] == "accept" and d["excluded"] is None]
    bounded = result["heldout"]["bounded_loss"]
    assert len(accepted) == bounded["emitted"] > 0
    assert math.isclose(sum(d["bounded_loss"] for d in accepted), bounded["loss_sum"])
    assert {d["bounded_loss"] for d in accepted} <= {0.0, 1 / 3}
