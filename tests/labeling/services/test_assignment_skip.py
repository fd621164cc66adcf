"""assignment_skip: the slot goes back, the skipper never sees the item again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.exceptions import (
    InvalidInput,
    InvalidTransition,
    LeaseExpired,
    NotFound,
    PermissionDenied,
)
from labeling.models import Annotation, Assignment, AssignmentStatus, Claim, Item, Role, SkipReason
from labeling.services import (
    assignment_skip,
    assignments_release_expired,
    item_claim_next,
    membership_set,
    project_create,
    project_labelling_start,
)
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput
from tests.conftest import native_record


@pytest.fixture
def queue(project, member, import_records):
    """Start labelling one question (two items, overlap 2); return the item ids in order."""
    import_records([native_record("q1")])
    project_labelling_start(project=project, actor=member("manager"))
    return list(Item.objects.order_by("queue_position").values_list("pk", flat=True))


def submit(project, assignment, actor):
    claims = tuple(
        ClaimInput(claim_id=pk, label="not_supported")
        for pk in Claim.objects.filter(candidate__item=assignment.item_id).values_list(
            "pk", flat=True
        )
    )
    return annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=actor,
        data=AnnotationInput(answer_label="admissible", claims=claims),
    )


def test_skipping_gives_the_slot_back_and_records_the_reason(project, member, queue):
    # given an annotator holding item 1
    annotator = member("annotator")
    held = item_claim_next(project=project, actor=annotator)

    # when they skip it
    skipped = assignment_skip(
        project=project,
        assignment_id=held.pk,
        actor=annotator,
        reason=SkipReason.SOURCE_UNREADABLE,
        note="the PDF is scanned",
    )

    # then the assignment is skipped with its reason and end time, and the slot is free
    row = Assignment.objects.get(pk=held.pk)
    assert skipped.pk == held.pk
    assert (row.status, row.skip_reason, row.skip_note) == (
        AssignmentStatus.SKIPPED,
        "source_unreadable",
        "the PDF is scanned",
    )
    assert row.ended_at is not None
    item = Item.objects.get(pk=queue[0])
    assert (item.assigned_count, item.version) == (0, 2)


def test_the_skipper_never_gets_the_item_again_but_others_do(project, member, queue):
    # given an annotator who skipped item 1
    annotator, other = member("annotator"), member("annotator")
    held = item_claim_next(project=project, actor=annotator)
    assignment_skip(project=project, assignment_id=held.pk, actor=annotator, reason="other")

    # when they ask again, they get item 2; after that, nothing (item 1 stays skipped)
    second = item_claim_next(project=project, actor=annotator)
    assert second.item_id == queue[1]
    submit(project, second, annotator)
    assert item_claim_next(project=project, actor=annotator) is None

    # and another annotator gets item 1 in the freed slot 1
    given = item_claim_next(project=project, actor=other)
    assert (given.item_id, given.slot) == (queue[0], 1)


def test_a_submit_after_skipping_is_refused(project, member, queue):
    annotator = member("annotator")
    held = item_claim_next(project=project, actor=annotator)
    assignment_skip(project=project, assignment_id=held.pk, actor=annotator, reason="other")

    with pytest.raises(LeaseExpired, match="skipped"):
        submit(project, held, annotator)
    assert not Annotation.objects.exists()


def test_skipping_twice_returns_the_skip_unchanged(project, member, queue):
    annotator = member("annotator")
    held = item_claim_next(project=project, actor=annotator)
    first = assignment_skip(
        project=project, assignment_id=held.pk, actor=annotator, reason="unclear_question"
    )

    again = assignment_skip(
        project=project, assignment_id=held.pk, actor=annotator, reason="other", note="x"
    )

    assert (again.skip_reason, again.ended_at) == ("unclear_question", first.ended_at)
    assert Item.objects.get(pk=queue[0]).assigned_count == 0


def test_skipping_an_expired_lease_records_it_without_touching_the_count(project, member, queue):
    # given a lease that expired and was released, and the slot taken by someone else
    annotator, other = member("annotator"), member("annotator")
    held = item_claim_next(project=project, actor=annotator)
    assignments_release_expired(now=timezone.now() + timedelta(hours=1))
    item_claim_next(project=project, actor=other)
    assert Item.objects.get(pk=queue[0]).assigned_count == 1

    # when the old holder skips it
    assignment_skip(project=project, assignment_id=held.pk, actor=annotator, reason="other")

    # then it is recorded as skipped (never served to them again); the count is unchanged
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.SKIPPED
    assert Item.objects.get(pk=queue[0]).assigned_count == 1
    assert item_claim_next(project=project, actor=annotator).item_id == queue[1]


def test_a_submitted_assignment_cannot_be_skipped(project, member, queue):
    annotator = member("annotator")
    held = item_claim_next(project=project, actor=annotator)
    submit(project, held, annotator)

    with pytest.raises(InvalidTransition, match="revise"):
        assignment_skip(project=project, assignment_id=held.pk, actor=annotator, reason="other")
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.SUBMITTED
    assert Item.objects.get(pk=queue[0]).assigned_count == 1


def test_another_annotators_assignment_is_not_found(project, member, queue):
    owner, other = member("annotator"), member("annotator")
    held = item_claim_next(project=project, actor=owner)

    with pytest.raises(NotFound):
        assignment_skip(project=project, assignment_id=held.pk, actor=other, reason="other")
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.LEASED


def test_an_assignment_of_another_project_is_not_found(project, member, queue):
    # given the annotator is also an annotator of a second project
    annotator = member("annotator")
    held = item_claim_next(project=project, actor=annotator)
    other = project_create(slug="other", name="Other")
    membership_set(project=other, user=annotator, role=Role.ANNOTATOR)

    # when they skip this project's assignment through the other project, then it is not found
    with pytest.raises(NotFound):
        assignment_skip(project=other, assignment_id=held.pk, actor=annotator, reason="other")
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.LEASED


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"reason": "bored"}, "reason"), ({"reason": "other", "note": "x" * 2001}, "note")],
)
def test_invalid_input_is_refused_naming_the_field(project, member, queue, kwargs, field):
    annotator = member("annotator")
    held = item_claim_next(project=project, actor=annotator)
    with pytest.raises(InvalidInput, match=rf"^{field}:"):
        assignment_skip(project=project, assignment_id=held.pk, actor=annotator, **kwargs)
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.LEASED


@pytest.mark.parametrize("role", ["manager", "adjudicator"])
def test_only_annotators_skip(project, member, queue, role):
    annotator = member("annotator")
    held = item_claim_next(project=project, actor=annotator)
    with pytest.raises(PermissionDenied):
        assignment_skip(project=project, assignment_id=held.pk, actor=member(role), reason="other")
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.LEASED
