"""Fixtures for certification tests that need labelling data (votes) in the database."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from labeling.models import (
    Annotation,
    AnnotationRevision,
    Assignment,
    AssignmentStatus,
    ClaimLabel,
    Item,
    PriorAnnotation,
    PriorClaimLabel,
    Project,
)
from labeling.services.vote_tally import vote_tally_refresh
from tests.conftest import native_record


@pytest.fixture
def items(project: Project, import_records: Callable[..., Any]) -> list[Item]:
    """Six items (three questions × two candidates); the first candidate of each has 2 claims."""
    import_records([native_record(f"q{i}") for i in range(1, 4)])
    return list(
        Item.objects.filter(project=project)
        .select_related("candidate")
        .order_by("candidate__question__external_id", "candidate__sample_index")
    )


def _claims(item: Item) -> list[Any]:
    return list(item.candidate.claims.order_by("index"))


def _count(item: Item) -> None:
    """Count the item's votes into its project's tally, as the services do after a vote."""
    with transaction.atomic():
        vote_tally_refresh(project=item.project, item_ids=[item.pk])


@pytest.fixture
def cast_vote() -> Callable[..., Annotation]:
    """Write a submitted annotation straight into the tables (no service rules involved).

    ``cast_vote(item, user, "admissible", claims=["supported", "not_supported"])`` labels the
    item's claims in index order; a second call for the same (item, user) appends a revision.
    """

    def cast(
        item: Item,
        user: Any,
        answer: str,
        *,
        answer_reason: str | None = None,
        claims: Sequence[str | tuple[str, str]] = (),
    ) -> Annotation:
        now = timezone.now()
        annotation = Annotation.objects.filter(item=item, annotator=user).first()
        if annotation is None:
            assignment = Assignment.objects.create(
                item=item,
                annotator=user,
                slot=item.assignments.count() + 1,
                status=AssignmentStatus.SUBMITTED,
                leased_at=now,
                lease_expires_at=now + timedelta(minutes=30),
                submitted_at=now,
            )
            annotation = Annotation.objects.create(item=item, annotator=user, assignment=assignment)
        revision = AnnotationRevision.objects.create(
            annotation=annotation,
            number=annotation.revision_count + 1,
            previous=annotation.current,
            created_by=user,
            policy=item.project.policies.order_by("-version").first(),
            answer_label=answer,
            answer_reason=answer_reason,
            content_sha256="0" * 64,
        )
        for claim, label in zip(_claims(item), claims, strict=False):
            label, reason = (label, None) if isinstance(label, str) else label
            ClaimLabel.objects.create(revision=revision, claim=claim, label=label, reason=reason)
        annotation.current = revision
        annotation.revision_count += 1
        annotation.save(update_fields=["current", "revision_count"])
        _count(item)
        return annotation

    return cast


@pytest.fixture
def prior_vote() -> Callable[..., PriorAnnotation]:
    """Write an imported prior annotation: ``prior_vote(item, "p1", "admissible", claims=...)``."""

    def cast(
        item: Item, annotator: str, answer: str | None, *, claims: Sequence[str | None] = ()
    ) -> PriorAnnotation:
        prior = PriorAnnotation.objects.create(
            candidate=item.candidate, annotator=annotator, answer_label=answer, fingerprint="x"
        )
        for claim, label in zip(_claims(item), claims, strict=False):
            PriorClaimLabel.objects.create(prior_annotation=prior, claim=claim, label=label)
        _count(item)
        return prior

    return cast
