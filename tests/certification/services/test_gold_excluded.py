"""Gold items never reach certification: agreement, calibration, audits and releases.

Each test builds a project where a gold item sits beside regular items, labelled (where it can
be) differently from the others, and counts what each input holds.
"""

from __future__ import annotations

import json

import pytest

from certification.models import AgreementReport, BuildStatus
from certification.selectors import release_content_build
from certification.selectors.audit import audit_rows
from certification.selectors.calibration import calibration_inputs
from certification.services import agreement_recompute
from certification.services.releases import release_export, release_freeze, release_rebuild
from labeling.models import Annotation, Claim, Evaluator, Item, ItemStatus, LabelPolicy, Role
from labeling.services import item_claim_next, membership_set
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput
from tests.factories import UserFactory, calibration_project, make_spec
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db


def gold_candidate(key, **fields):
    candidate = cand(key, answer="x", label=None, **fields)
    candidate["gold"] = {"answer_label": "inadmissible", "claim_labels": []}
    return candidate


@pytest.fixture
def calibrated(project):
    """Three resolved calibration questions and a fourth whose candidate is gold; one test."""
    evaluator = ("judge", "v1", 0.5)
    calibration = [
        rec(f"c{i}", [cand("a", answer="x", score=0.9, selected=True, evaluator=evaluator)])
        for i in range(3)
    ] + [rec("cg", [gold_candidate("a", score=0.9, selected=True, evaluator=evaluator)])]
    test = [rec("t0", [cand("a", answer="x", score=0.9, selected=True)])]
    calibration_project(project, {"calibration": calibration, "test": test})
    (gold,) = Item.objects.filter(status=ItemStatus.GOLD)
    return gold


def test_calibration_inputs_leave_gold_items_out(project, calibrated):
    spec = make_spec(project)

    inputs = calibration_inputs(spec=spec)

    items = [c["item"] for q in inputs["calibration"] for c in q["candidates"]]
    assert len(items) == 3 and calibrated.pk not in items
    assert "cg" not in [q["external_id"] for q in inputs["calibration"] if q["candidates"]]


def test_rccs_leaves_gold_items_out(project, calibrated):
    from certification.selectors import rccs_report_get
    from labeling.models import CandidateAnswer

    # every candidate gets both scores, the gold one too
    CandidateAnswer.objects.filter(question__project=project).update(
        retrieval_score=0.5, confidence=0.5
    )

    report = rccs_report_get(project=project)

    # three resolved calibration answers and the test one: the gold answer is not counted
    assert report["counts"]["candidates"] == 4
    assert sum(report["counts"]["outcomes"].values()) == 4


def test_audits_leave_gold_items_out(project, calibrated):
    evaluator = Evaluator.objects.get(project=project)

    rows = audit_rows(evaluator=evaluator)

    assert len(rows) == 3 and calibrated.pk not in [r.item_id for r in rows]


def test_releases_leave_gold_items_out_and_rebuild_identically(
    project, calibrated, tmp_path, django_capture_on_commit_callbacks
):
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    with django_capture_on_commit_callbacks(execute=True):
        release = release_freeze(project=project, actor=manager, version="1")
    assert release_content_build(release).status == BuildStatus.DONE
    lines = (release_export(release=release, directory=tmp_path) / "labels.jsonl").read_bytes()
    questions = [json.loads(line)["question"]["id"] for line in lines.splitlines()]

    assert sorted(questions) == ["c0", "c1", "c2", "t0"]
    with django_capture_on_commit_callbacks(execute=True):
        rebuild = release_rebuild(release=release, actor=manager)
    rebuild.refresh_from_db()
    assert rebuild.matches is True, rebuild.mismatches


def test_agreement_counts_no_gold_label(project, member, import_records):
    # Given one regular item and one gold item, both labelled by two annotators, who agree on
    # the regular item and disagree on the gold one
    from tests.conftest import native_record
    from tests.factories import start_labelling

    record = native_record("q1")
    record["candidates"] = record["candidates"][:1]
    gold = native_record("q2")
    gold["candidates"] = gold["candidates"][1:]  # c1, no claims
    gold["candidates"][0]["gold"] = {"answer_label": "admissible"}
    import_records([record, gold])
    LabelPolicy.objects.filter(project=project).update(gold_rate=1.0)
    start_labelling(project)
    gold_votes = iter(["admissible", "inadmissible"])
    for _ in range(2):
        annotator = member("annotator")
        while (a := item_claim_next(project=project, actor=annotator)) is not None:
            claims = Claim.objects.filter(candidate__item=a.item_id).values_list("pk", flat=True)
            annotation_submit(
                project=project,
                assignment_id=a.pk,
                actor=annotator,
                data=AnnotationInput(
                    answer_label=next(gold_votes) if a.gold else "admissible",
                    claims=tuple(ClaimInput(claim_id=c, label="not_supported") for c in claims),
                ),
            )

    assert Annotation.objects.filter(assignment__gold=True).count() == 2
    report = agreement_recompute(project_id=project.pk)

    # Then the answer level holds one unit (the regular item) with two votes: perfect agreement
    answer = AgreementReport.objects.get(pk=report.pk).answer
    assert answer["n_units"] == 1, answer
    assert answer["n_votes"] == 2, answer
