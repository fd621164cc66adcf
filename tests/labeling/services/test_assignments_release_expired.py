"""assignments_release_expired and its beat task: run-out leases give their slot back, logged."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from labeling.celery import app
from labeling.exceptions import LeaseExpired
from labeling.models import Annotation, Assignment, AssignmentStatus, Claim, Item, Role
from labeling.services import (
    assignments_release_expired,
    item_claim_next,
    membership_set,
    project_create,
    project_labelling_configure,
    project_labelling_start,
)
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput
from labeling.tasks import assignments_release_expired_task
from tests.conftest import native_record


@pytest.fixture
def queue(project, member, import_records):
    """Start labelling one question (two items, overlap 2, 10-minute leases); item ids in order."""
    import_records([native_record("q1")])
    manager = member("manager")
    project_labelling_configure(project=project, actor=manager, lease_minutes=10)
    project_labelling_start(project=project, actor=manager)
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


def test_releases_only_leases_that_ran_out_and_logs_each(project, member, queue, caplog):
    # given a1 and a2 leased item 1 and a2's lease was taken five minutes later
    a1, a2 = member("annotator"), member("annotator")
    first = item_claim_next(project=project, actor=a1)
    second = item_claim_next(project=project, actor=a2)
    Assignment.objects.filter(pk=second.pk).update(
        leased_at=second.leased_at + timedelta(minutes=5),
        lease_expires_at=second.lease_expires_at + timedelta(minutes=5),
    )
    later = first.lease_expires_at + timedelta(seconds=1)

    # when the release runs just after a1's lease ended
    with caplog.at_level(logging.INFO, logger="labeling.services.leases"):
        released = assignments_release_expired(now=later)

    # then a1's lease is expired, its slot free; a2's lease is untouched
    assert released == 1
    rows = {a.pk: a for a in Assignment.objects.all()}
    assert (rows[first.pk].status, rows[first.pk].ended_at) == (AssignmentStatus.EXPIRED, later)
    assert rows[second.pk].status == AssignmentStatus.LEASED
    item = Item.objects.get(pk=queue[0])
    assert item.assigned_count == 1
    events = [r for r in caplog.records if r.msg == "assignment.lease_expired"]
    assert [(r.assignment_id, r.item_id, r.project_id, r.annotator_id, r.slot) for r in events] == [
        (first.pk, queue[0], project.pk, a1.pk, 1)
    ]
    assert events[0].lease_expires_at == first.lease_expires_at.isoformat()


def test_running_twice_releases_nothing_more(project, member, queue):
    item_claim_next(project=project, actor=member("annotator"))
    later = timezone.now() + timedelta(hours=1)
    assert assignments_release_expired(now=later) == 1
    assert assignments_release_expired(now=later) == 0
    assert Item.objects.get(pk=queue[0]).assigned_count == 0


def test_a_lease_at_its_exact_end_is_released_and_one_before_is_not(project, member, queue):
    held = item_claim_next(project=project, actor=member("annotator"))
    assert assignments_release_expired(now=held.lease_expires_at - timedelta(microseconds=1)) == 0
    assert assignments_release_expired(now=held.lease_expires_at) == 1


def test_the_released_slot_goes_to_another_annotator_and_the_late_submit_is_refused(
    project, member, queue
):
    # given a1's lease of item 1 released by the task, then a2 and a3 take item 1
    a1, a2, a3 = (member("annotator") for _ in range(3))
    old = item_claim_next(project=project, actor=a1)
    assignments_release_expired(now=timezone.now() + timedelta(minutes=11))
    took = [item_claim_next(project=project, actor=a) for a in (a2, a3)]

    # then a2 reuses a1's slot 1 and a3 takes slot 2
    assert [(t.item_id, t.slot) for t in took] == [(queue[0], 1), (queue[0], 2)]

    # when a1 submits late, then it is refused and nothing is written
    with pytest.raises(LeaseExpired, match="your labels were not saved"):
        submit(project, old, a1)
    for t, actor in zip(took, (a2, a3), strict=True):
        submit(project, t, actor)
    assert sorted(
        Annotation.objects.filter(item_id=queue[0]).values_list("annotator", flat=True)
    ) == [
        a2.pk,
        a3.pk,
    ]


def test_a_run_out_lease_not_yet_released_may_still_submit(project, member, queue):
    # given a1's lease ran out but no release or claim met it yet
    a1 = member("annotator")
    held = item_claim_next(project=project, actor=a1)
    Assignment.objects.filter(pk=held.pk).update(
        leased_at=held.leased_at - timedelta(hours=1),
        lease_expires_at=held.leased_at - timedelta(minutes=30),
    )

    # when a1 submits, then it is accepted and the release finds nothing to release
    submit(project, held, a1)
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.SUBMITTED
    assert assignments_release_expired() == 0
    assert Item.objects.get(pk=queue[0]).assigned_count == 1


def test_submitted_and_skipped_assignments_are_left_alone(project, member, queue):
    a1 = member("annotator")
    held = item_claim_next(project=project, actor=a1)
    submit(project, held, a1)
    assert assignments_release_expired(now=timezone.now() + timedelta(days=1)) == 0
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.SUBMITTED


def test_releases_leases_of_every_project(project, member, queue, import_records):
    # given a second started project where the same annotator holds a lease
    other = project_create(slug="other", name="Other")
    annotator, manager = member("annotator"), member("manager")
    membership_set(project=other, user=annotator, role=Role.ANNOTATOR)
    membership_set(project=other, user=manager, role=Role.MANAGER)
    import_records([native_record("x1")], target=other)
    project_labelling_start(project=other, actor=manager)
    item_claim_next(project=project, actor=annotator)
    item_claim_next(project=other, actor=annotator)

    # when the release runs after both leases ran out, then both are released
    assert assignments_release_expired(now=timezone.now() + timedelta(hours=1)) == 2
    assert not Assignment.objects.filter(status=AssignmentStatus.LEASED).exists()


def test_the_task_releases_and_returns_the_count(project, member, queue):
    held = item_claim_next(project=project, actor=member("annotator"))
    Assignment.objects.filter(pk=held.pk).update(
        leased_at=held.leased_at - timedelta(hours=1),
        lease_expires_at=held.leased_at - timedelta(minutes=1),
    )

    result = assignments_release_expired_task.delay()

    assert result.get() == 1
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.EXPIRED


def test_beat_runs_the_task_every_minute():
    entry = settings.CELERY_BEAT_SCHEDULE["assignments-release-expired"]
    assert entry["task"] == assignments_release_expired_task.name
    assert entry["task"] in app.tasks
    assert entry["schedule"] == 60.0
