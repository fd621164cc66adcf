"""Invariants enforced by the database itself, not only by Python code."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from labeling.models import (
    CandidateAnswer,
    Claim,
    Evaluator,
    EvaluatorLabel,
    Item,
    LabelPolicy,
    Membership,
    Question,
    SourceDocument,
    SourceVersion,
)
from tests.conftest import native_record

pytestmark = pytest.mark.django_db


def violates(**_: object):
    return pytest.raises(IntegrityError)


@pytest.fixture
def candidate(project, import_records) -> CandidateAnswer:
    import_records([native_record()])
    return CandidateAnswer.objects.get(key="c0")


def test_question_external_id_unique_per_project(project, candidate):
    with violates(), transaction.atomic():
        Question.objects.create(project=project, external_id="q1", text="x", fingerprint="f")


def test_question_partition_must_be_known(project):
    with violates(), transaction.atomic():
        Question.objects.create(
            project=project, external_id="z", text="x", partition="train", fingerprint="f"
        )


def test_claim_needs_span_unless_unanchored(candidate):
    with violates(), transaction.atomic():
        Claim.objects.create(candidate=candidate, index=9, text="x", unanchored=False)
    with violates(), transaction.atomic():
        Claim.objects.create(
            candidate=candidate, index=9, text="x", unanchored=True, start=0, end=1
        )
    with violates(), transaction.atomic():
        Claim.objects.create(candidate=candidate, index=9, text="x", start=5, end=2)


def test_candidate_confidence_and_retrieval_score_in_unit_interval(candidate):
    with violates(), transaction.atomic():
        CandidateAnswer.objects.filter(pk=candidate.pk).update(confidence=1.2)
    with violates(), transaction.atomic():
        CandidateAnswer.objects.filter(pk=candidate.pk).update(retrieval_score=-0.1)


def test_one_item_per_candidate(project, candidate):
    with violates(), transaction.atomic():
        Item.objects.create(project=project, candidate=candidate)


def test_source_version_sha_and_length_checked(project):
    doc = SourceDocument.objects.create(project=project, key="k")
    with violates(), transaction.atomic():
        SourceVersion.objects.create(document=doc, text="abc", sha256="short", length=3)
    with violates(), transaction.atomic():
        SourceVersion.objects.create(document=doc, text="abc", sha256="a" * 64, length=4)


def test_unavailable_evaluator_label_carries_no_verdict(project, candidate):
    evaluator = Evaluator.objects.create(project=project, name="j", version="1")
    with violates(), transaction.atomic():
        EvaluatorLabel.objects.create(
            evaluator=evaluator, candidate=candidate, available=False, label="admissible"
        )
    with violates(), transaction.atomic():
        EvaluatorLabel.objects.create(evaluator=evaluator, candidate=candidate, available=True)


def test_one_evaluator_label_per_target(project, candidate):
    evaluator = Evaluator.objects.create(project=project, name="j", version="1")
    EvaluatorLabel.objects.create(evaluator=evaluator, candidate=candidate, label="admissible")
    with violates(), transaction.atomic():
        EvaluatorLabel.objects.create(
            evaluator=evaluator, candidate=candidate, label="inadmissible"
        )
    claim = candidate.claims.first()
    EvaluatorLabel.objects.create(
        evaluator=evaluator, candidate=candidate, claim=claim, label="supported"
    )
    with violates(), transaction.atomic():
        EvaluatorLabel.objects.create(
            evaluator=evaluator, candidate=candidate, claim=claim, label="contradicted"
        )


def test_membership_role_and_uniqueness(project, member):
    user = member("annotator")
    with violates(), transaction.atomic():
        Membership.objects.create(project=project, user=user, role="adjudicator")
    with violates(), transaction.atomic():
        Membership.objects.filter(user=user).update(role="owner")


def test_policy_versions_unique(project):
    with violates(), transaction.atomic():
        LabelPolicy.objects.create(project=project, version=1)
