"""Applying certificates on the shared real datasets reproduces the runs' held-out figures.

GSM8K (conformal sets, numeric canonicaliser, alpha 0.4) and FaithBench (selective risk on the
HHEM-2.1 score, each summary a unit): each run's certificate is applied, through the service the
API calls, to its own test questions sent without labels, and the held-out report is recounted
from the decisions and the resolved labels.
"""

from __future__ import annotations

import pytest

from certification.services import calibration_run_apply
from certification.stats.canonical import get_canonicaliser
from tests.certification.apply_world import traffic
from tests.certification.test_real_data_calibration import (
    FAITHBENCH_THRESHOLDS,
    HHEM,
    _faithbench,
    _gsm8k,
    _run,
)
from tests.factories import make_spec

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]


def _metric(run, name):
    return next(m for m in run.result["heldout"]["report"]["metrics"] if m["name"] == name)


def test_gsm8k_prediction_sets_reproduce_the_heldout_coverage_and_sizes(shared_data):
    project = _gsm8k(shared_data)
    spec = make_spec(
        project,
        name="gsm8k-sets",
        method="conformal_set",
        selector="mode",
        canonicaliser="numeric",
        alpha="0.4",
        thresholds=[],
        score_field="",
    )
    run = _run(spec)
    decided = calibration_run_apply(run=run, actor=None, questions=traffic(run))["decisions"]
    # admissible classes per test question, from the resolved labels (numeric canonical forms)
    canon = get_canonicaliser("numeric")
    covered = 0
    sizes: dict[int, int] = {}
    for question, record in zip(run.inputs["test"], decided, strict=True):
        sampled = record["prediction_set"]
        used = [c for c in question["candidates"] if c["answer"] is not None][
            : sampled["samples_used"]
        ]
        classes = {canon(c["answer"]) for c in used}
        admissible = {
            a
            for a in classes
            if all(c["outcome"] == "admissible" for c in used if canon(c["answer"]) == a)
        }
        covered += bool(admissible & set(sampled["classes"]))
        sizes[sampled["size"]] = sizes.get(sampled["size"], 0) + 1
    coverage = _metric(run, "set_coverage")
    assert (covered, len(decided)) == (coverage["numerator"], coverage["denominator"])
    assert (
        sorted([size, n] for size, n in sizes.items())
        == run.result["heldout"]["report"]["set_sizes"]["counts"]
    )
    assert (record["prediction_set"]["m_star"], covered, len(decided)) == (3, 125, 200)


def test_faithbench_decisions_reproduce_the_heldout_acceptance_and_errors(shared_data):
    project, _ = _faithbench(shared_data)
    spec = make_spec(
        project,
        name="faithbench-hhem",
        method="selective_risk",
        selector="each_candidate",
        score_field=HHEM,
        thresholds=FAITHBENCH_THRESHOLDS,
        alpha="0.7",
        delta="0.05",
    )
    run = _run(spec)
    assert run.result["selective_risk"]["chosen_threshold"] is not None
    decided = calibration_run_apply(run=run, actor=None, questions=traffic(run))["decisions"]
    accepted = errors = 0
    for question, record in zip(run.inputs["test"], decided, strict=True):
        for decision in record["selective_risk"]["decisions"]:
            if decision["decision"] == "accept":
                accepted += 1
                candidate = question["candidates"][decision["candidate_index"]]
                errors += candidate["outcome"] != "admissible"
    assert accepted == _metric(run, "answer_rate")["numerator"]
    assert errors == _metric(run, "emitted_answer_risk")["numerator"]
    assert (run.result["selective_risk"]["chosen_threshold"], accepted, errors) == (0.6, 155, 74)
