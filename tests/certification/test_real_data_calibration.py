"""Calibration runs on the shared real datasets: the README's worked examples.

GSM8K (openai/grade-school-math, first 400 test questions, K = 4 samples from four generators):
upstream's ``is_correct`` flags are imported as automatic prior labels; with overlap 1 each one
resolves as consensus. A conformal spec (mode selector, numeric canonicaliser) gives the
conformal threshold M* and the reliability level.

FaithBench (vectara/FaithBench batches 1-8, 400 summaries of 40 passages): the batch
annotators' flags are imported as prior labels; unanimous items resolve as consensus, and the
disagreements are adjudicated here with a declared rule (the worst label wins, as upstream's
``worst-label``). A selective-risk spec accepts a summary iff its HHEM-2.1 score is at least t;
a second one certifies the bounded loss "share of unsupported claims" with Hoeffding–Bentkus.

Both projects are partitioned by the real ``partition_freeze`` (seed 2026, grouped by source).
Every figure asserted here is quoted in the README.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from django.core.management import call_command

from certification.models import RunStatus
from certification.services import (
    calibration_run_execute,
    calibration_run_rebuild,
    calibration_run_request,
)
from labeling.models import (
    CandidateAnswer,
    Claim,
    EvaluatorLabel,
    Item,
    ItemStatus,
    Partition,
    PriorAnnotation,
    Project,
    ResolvedClaimLabel,
    RetrievalLink,
    Role,
)
from labeling.offsets import UNIT_CODEPOINT
from labeling.services import (
    ClaimInput,
    EvidenceInput,
    adjudication_resolve,
    membership_set,
    partition_freeze,
)
from tests.certification.stats.test_bounded import reference_p
from tests.factories import UserFactory, make_spec, start_labelling

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]

SEED = 2026
PROPORTIONS = {"dev": 0.0, "calibration": 0.5, "test": 0.5}
HHEM = "evaluator:hhem-2.1@faithbench-cf89797"
FAITHBENCH_THRESHOLDS = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95]


def _run(spec):
    run = calibration_run_request(spec=spec, trigger="manual")
    return calibration_run_execute(run_id=run.pk)


# -- GSM8K ------------------------------------------------------------------------------------
def _gsm8k(shared_data: Path) -> Project:
    path = (
        shared_data
        / "gsm8k-model-solutions"
        / "grade_school_math"
        / "data"
        / "example_model_solutions.first400.jsonl"
    )
    call_command(
        "import_workload",
        path,
        "--project",
        "gsm8k",
        "--create",
        "--format",
        "gsm8k",
        "--no-progress",
        stdout=io.StringIO(),
    )
    project = Project.objects.get(slug="gsm8k")
    partition_freeze(project=project, proportions=PROPORTIONS, seed=SEED)
    return start_labelling(project, overlap=1)


def test_gsm8k_conformal_threshold_and_reliability_level(shared_data):
    # given the 400 questions, every candidate resolved from upstream's correctness flag
    project = _gsm8k(shared_data)
    assert set(Item.objects.filter(project=project).values_list("status", flat=True)) == {
        ItemStatus.RESOLVED
    }
    spec = make_spec(
        project,
        name="gsm8k-sets",
        method="conformal_set",
        selector="mode",
        canonicaliser="numeric",
        alpha="0.4",
        delta="0.05",
        thresholds=[],
        score_field="",
        description="GSM8K test questions 1-400; 4 samples from 4 GPT-3 generators.",
    )
    # when
    run = _run(spec)
    # then
    assert run.status == RunStatus.DONE, run.error
    conformal = run.result["conformal"]
    assert conformal["counts"]["questions"] == 200
    assert conformal["counts"]["unsolvable"] == 72
    # recounted by hand (Counter, ranks with numeric classes in numeric order on ties)
    assert conformal["score_counts"] == [[1.0, 93], [2.0, 14], [3.0, 14], [4.0, 7], ["inf", 72]]
    assert conformal["threshold"] == {
        "alpha": "2/5",
        "n": 200,
        "k": 121,
        "value": 3.0,
        "infinite": False,
        "reason": None,
    }
    assert conformal["reliability"]["level"] == "93/201"
    assert conformal["reliability"]["value"] == pytest.approx(93 / 201, rel=1e-12)
    test = conformal["test_sets"]
    assert (test["covered"], test["n"], test["n_solvable"]) == (125, 200, 135)
    assert test["mean_set_size"] == pytest.approx(2.475)
    # the curve: finite sets only from alpha 0.4 on (72 of 200 questions are unsolvable)
    curve = {p["alpha"]: p for p in conformal["curve"]}
    assert curve["0.1"]["threshold"] == "inf" and curve["0.3"]["threshold"] == "inf"
    assert curve["0.5"]["threshold"] == 2.0  # M* = 1 needs 1 - alpha <= 93/201
    # the mode is emitted always; it is wrong on 105 of 200 test questions
    metrics = {m["name"]: m for m in run.result["heldout"]["report"]["metrics"]}
    assert (metrics["emitted_answer_risk"]["numerator"], metrics["answer_rate"]["numerator"]) == (
        105,
        200,
    )
    assert (metrics["set_coverage"]["numerator"], metrics["set_coverage"]["denominator"]) == (
        125,
        200,
    )
    assert calibration_run_rebuild(run=run)


def test_gsm8k_at_alpha_0_1_the_threshold_is_infinite(shared_data):
    project = _gsm8k(shared_data)
    spec = make_spec(
        project,
        name="gsm8k-strict",
        method="conformal_set",
        selector="mode",
        canonicaliser="numeric",
        alpha="0.1",
        thresholds=[],
        score_field="",
    )
    run = _run(spec)
    threshold = run.result["conformal"]["threshold"]
    assert threshold["value"] == "inf" and threshold["k"] == 181
    assert "too many unsolvable" in threshold["reason"]
    assert run.result["outcome"] == "M* = inf"


# -- FaithBench -------------------------------------------------------------------------------
SEVERITY = {"supported": 0, "not_supported": 1, "contradicted": 2}
WORST_LABEL_RULE = (
    "FaithBench worst-label rule: inadmissible if any batch annotator flagged Unwanted; each "
    "claim takes its most severe annotator label (contradicted > not_supported > supported); "
    "supported and contradicted claims cite the whole pinned passage."
)


def _faithbench(shared_data: Path) -> tuple[Project, int]:
    paths = [
        shared_data / "faithbench" / "data_for_release" / f"batch_{b}.json" for b in range(1, 9)
    ]
    call_command(
        "import_workload",
        *paths,
        "--project",
        "faithbench",
        "--create",
        "--format",
        "faithbench",
        "--no-progress",
        stdout=io.StringIO(),
    )
    project = Project.objects.get(slug="faithbench")
    partition_freeze(project=project, proportions=PROPORTIONS, seed=SEED)
    project = start_labelling(project, overlap=1)
    adjudicated = _adjudicate_worst(project)
    return project, adjudicated


def _adjudicate_worst(project: Project) -> int:
    """Resolve every disagreement with the declared worst-label rule; return how many."""
    adjudicator = UserFactory()
    membership_set(project=project, user=adjudicator, role=Role.ADJUDICATOR)
    items = Item.objects.filter(project=project, status=ItemStatus.DISAGREEMENT).select_related(
        "candidate"
    )
    count = 0
    for item in items:
        priors = list(
            PriorAnnotation.objects.filter(candidate=item.candidate).prefetch_related(
                "claim_labels"
            )
        )
        answer = (
            "inadmissible"
            if any(p.answer_label == "inadmissible" for p in priors)
            else "admissible"
        )
        source = (
            RetrievalLink.objects.filter(question_id=item.candidate.question_id)
            .select_related("source_version")
            .first()
            .source_version
        )
        passage = EvidenceInput(
            source_version_id=source.pk,
            start=0,
            end=source.length,
            quote=source.text,
            unit=UNIT_CODEPOINT,
        )
        claims = []
        for claim in Claim.objects.filter(candidate=item.candidate).order_by("index"):
            labels = [
                label.label
                for prior in priors
                for label in prior.claim_labels.all()
                if label.claim_id == claim.pk and label.label
            ]
            worst = max(labels, key=SEVERITY.__getitem__) if labels else "not_supported"
            evidence = (passage,) if worst in ("supported", "contradicted") else ()
            claims.append(ClaimInput(claim_id=claim.pk, label=worst, evidence=evidence))
        adjudication_resolve(
            project=project,
            item_id=item.pk,
            actor=adjudicator,
            expected_version=item.version,
            answer_label=answer,
            claims=claims,
            rationale=WORST_LABEL_RULE,
        )
        count += 1
    return count


def test_faithbench_selective_risk_with_hhem_as_acceptance_score(shared_data):
    # given every summary resolved: consensus of the batch annotators or the worst-label rule
    project, adjudicated = _faithbench(shared_data)
    assert adjudicated == 265
    assert not Item.objects.filter(project=project).exclude(status=ItemStatus.RESOLVED).exists()
    spec = make_spec(
        project,
        name="faithbench-hhem",
        method="selective_risk",
        selector="each_candidate",
        score_field=HHEM,
        acceptance=">=",
        thresholds=FAITHBENCH_THRESHOLDS,
        alpha="0.2",
        delta="0.05",
        description="FaithBench batches 1-8: 40 passages x 10 summarizers.",
    )
    # when
    run = _run(spec)
    # then
    assert run.status == RunStatus.DONE, run.error
    section = run.result["selective_risk"]
    assert section["counts"] == {
        "units": 200,
        "excluded": {},
        "used": 200,
        "no_answer": 0,
        "missing_score": 0,
        "errors": 130,
    }
    assert [(r["threshold"], r["accepted"], r["errors"]) for r in section["rows"]] == [
        (0.5, 178, 112),
        (0.6, 169, 103),
        (0.7, 158, 93),
        (0.8, 135, 76),
        (0.9, 104, 58),
        (0.95, 46, 21),
    ]
    # fail closed: even the best threshold's 99.17% upper bound (0.640) is far above alpha 0.2
    assert section["outcome"] == "no certified operating point"
    assert section["chosen_index"] is None
    assert section["test_level"] == pytest.approx(0.05 / 6)
    assert section["rows"][-1]["upper_bound"] == pytest.approx(0.6400992923, abs=1e-9)
    # and the frozen policy therefore emits nothing on the test partition
    metrics = {m["name"]: m for m in run.result["heldout"]["report"]["metrics"]}
    assert (metrics["answer_rate"]["numerator"], metrics["answer_rate"]["denominator"]) == (0, 200)
    assert metrics["emitted_answer_risk"]["value"] is None
    # summaries of one passage are correlated: the binomial test's i.i.d. assumption is strained
    grouping = run.result["dependence"]["grouping"]
    assert (grouping["groups"], grouping["largest_group"]) == (20, 10)
    assert grouping["icc"] == pytest.approx(0.1856248, abs=1e-6)
    assert grouping["design_effect"] == pytest.approx(2.6706231, abs=1e-6)
    assert grouping["effective_n"] == pytest.approx(74.888889, abs=1e-5)
    ledger = {row["field"]: row["value"] for row in run.result["ledger"]}
    assert "design effect 2.67" in ledger["assumptions"]
    assert run.result["rccs"]["reason"].startswith("no complete row")  # no R or C in FaithBench
    assert calibration_run_rebuild(run=run)


def test_faithbench_unsupported_claim_share_with_hoeffding_bentkus(shared_data):
    # given the same resolved FaithBench project and a bounded loss: each summary's share of
    # claims (sentences) whose resolved label is not supported
    project, _ = _faithbench(shared_data)
    spec = make_spec(
        project,
        name="faithbench-claims",
        method="selective_risk",
        selector="each_candidate",
        score_field=HHEM,
        thresholds=FAITHBENCH_THRESHOLDS,
        alpha="0.2",
        delta="0.05",
        loss={"kind": "bounded", "source": "unsupported_claim_share"},
    )
    # when
    run = _run(spec)
    # then: the loss totals and p-values, recomputed from the database rows
    assert run.status == RunStatus.DONE, run.error
    section = run.result["selective_risk"]
    assert section["p_value_test"] == "hoeffding_bentkus"
    candidates = CandidateAnswer.objects.filter(
        question__project=project, question__partition=Partition.CALIBRATION
    ).select_related("item__resolution")
    scores = dict(
        EvaluatorLabel.objects.filter(
            evaluator__name="hhem-2.1",
            evaluator__version="faithbench-cf89797",
            candidate__in=candidates,
            claim__isnull=True,
            available=True,
        ).values_list("candidate_id", "score")
    )
    losses = {}
    for candidate in candidates:
        resolution = candidate.item.resolution
        labels = list(
            ResolvedClaimLabel.objects.filter(resolution=resolution).values_list("label", flat=True)
        )
        if labels:
            losses[candidate.pk] = sum(1 for x in labels if x != "supported") / len(labels)
        else:
            losses[candidate.pk] = 0.0 if resolution.answer_label == "admissible" else 1.0
    assert len(losses) == 200
    for row, t in zip(section["rows"], FAITHBENCH_THRESHOLDS, strict=True):
        accepted = [losses[c] for c, s in scores.items() if s is not None and s >= t]
        total = math.fsum(accepted)
        assert (row["accepted"], row["loss_sum"]) == (len(accepted), pytest.approx(total))
        p = reference_p(total, len(accepted), 0.2)
        assert row["p_value"] == pytest.approx(p, rel=1e-9)
        assert row["certified"] == (p <= 0.05 / 6)
    # the figures quoted in docs/certification.md: mean shares 0.27-0.34 stay above alpha 0.2
    # (p = 1 at every threshold), so there is no certified operating point
    assert [(r["accepted"], round(r["loss_sum"], 4)) for r in section["rows"]] == [
        (178, 60.6452),
        (169, 55.4119),
        (158, 48.8619),
        (135, 38.031),
        (104, 29.431),
        (46, 12.2548),
    ]
    assert [r["p_value"] for r in section["rows"]] == [1.0] * 6
    assert section["rows"][3]["upper_bound"] == pytest.approx(0.4064478, abs=1e-6)
    assert section["outcome"] == "no certified operating point"
    assert run.result["heldout"]["bounded_loss"]["emitted"] == 0
    assert calibration_run_rebuild(run=run)
