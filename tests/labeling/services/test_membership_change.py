"""Members: change role, deactivate, reactivate, remove; the last active manager always stays."""

from __future__ import annotations

import pytest

from labeling import permissions
from labeling.exceptions import InvalidInput, InvalidTransition, NotFound, PermissionDenied
from labeling.models import Annotation, Assignment, AssignmentStatus, Item, Membership, Role
from labeling.services import annotation_submit, item_claim_next
from labeling.services.members import (
    membership_change,
    membership_deactivate,
    membership_reactivate,
    membership_remove,
    membership_set,
)
from tests.factories import UserFactory, start_labelling, work_record
from tests.worlds import own_labels

pytestmark = pytest.mark.django_db


def test_manager_changes_a_role(project, member):
    manager = member(Role.MANAGER)
    annotator = member(Role.ANNOTATOR)

    membership = membership_change(
        project=project, actor=manager, user_id=annotator.pk, role=Role.ADJUDICATOR
    )

    assert membership.role == Role.ADJUDICATOR
    assert Membership.objects.get(project=project, user=annotator).role == Role.ADJUDICATOR


@pytest.mark.parametrize("how", ["demote", "deactivate", "remove", "set"])
def test_the_last_active_manager_stays(project, member, how):
    manager = member(Role.MANAGER)
    member(Role.ANNOTATOR)

    with pytest.raises(InvalidTransition, match="last active manager"):
        if how == "demote":
            membership_change(
                project=project, actor=manager, user_id=manager.pk, role=Role.ANNOTATOR
            )
        elif how == "deactivate":
            membership_deactivate(project=project, actor=manager, user_id=manager.pk)
        elif how == "remove":
            membership_remove(project=project, actor=manager, user_id=manager.pk)
        else:  # the trusted path of the admin and the command line
            membership_set(project=project, user=manager, role=Role.ADJUDICATOR)

    membership = Membership.objects.get(project=project, user=manager)
    assert (membership.role, membership.is_active) == (Role.MANAGER, True)


def test_a_deactivated_manager_does_not_count_as_the_remaining_one(project, member):
    first, second = member(Role.MANAGER), member(Role.MANAGER)
    membership_deactivate(project=project, actor=first, user_id=second.pk)

    with pytest.raises(InvalidTransition):
        membership_change(project=project, actor=first, user_id=first.pk, role=Role.ANNOTATOR)
    # and a deactivated manager may be changed or removed freely
    membership_remove(project=project, actor=first, user_id=second.pk)
    assert list(Membership.objects.filter(project=project).values_list("user", flat=True)) == [
        first.pk
    ]


def test_a_manager_may_step_down_when_another_remains(project, member):
    first, second = member(Role.MANAGER), member(Role.MANAGER)

    membership_change(project=project, actor=first, user_id=first.pk, role=Role.ANNOTATOR)

    assert Membership.objects.get(project=project, user=first).role == Role.ANNOTATOR
    assert Membership.objects.get(project=project, user=second).role == Role.MANAGER


def test_refuses_non_managers_unknown_members_and_roles(project, member):
    manager, annotator = member(Role.MANAGER), member(Role.ANNOTATOR)

    with pytest.raises(PermissionDenied):
        membership_change(project=project, actor=annotator, user_id=annotator.pk, role="manager")
    for service in (membership_deactivate, membership_reactivate, membership_remove):
        with pytest.raises(PermissionDenied):
            service(project=project, actor=annotator, user_id=manager.pk)
        with pytest.raises(NotFound):
            service(project=project, actor=manager, user_id=UserFactory().pk)
    with pytest.raises(NotFound):
        membership_change(project=project, actor=manager, user_id=UserFactory().pk, role="manager")
    with pytest.raises(InvalidInput):
        membership_change(project=project, actor=manager, user_id=annotator.pk, role="boss")


@pytest.fixture
def labelling(project, import_records):
    """A started project with a manager and an annotator who submitted one item and holds a
    lease on another."""
    import_records([work_record("q1"), work_record("q2")])
    project = start_labelling(project, overlap=2)
    manager = project.memberships.get(role=Role.MANAGER).user
    annotator = UserFactory()
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    done = item_claim_next(project=project, actor=annotator)
    annotation_submit(
        project=project, assignment_id=done.pk, actor=annotator, data=own_labels(done.item)
    )
    leased = item_claim_next(project=project, actor=annotator)
    return project, manager, annotator, leased


@pytest.mark.parametrize("service", [membership_deactivate, membership_remove])
def test_leaving_gives_every_lease_back_and_keeps_the_labels(labelling, service):
    project, manager, annotator, leased = labelling
    count_before = Item.objects.get(pk=leased.item_id).assigned_count

    service(project=project, actor=manager, user_id=annotator.pk)

    leased.refresh_from_db()
    assert leased.status == AssignmentStatus.EXPIRED and leased.ended_at is not None
    assert Item.objects.get(pk=leased.item_id).assigned_count == count_before - 1
    assert not Assignment.objects.filter(annotator=annotator, status="leased").exists()
    # their submitted label stays, attributed to them
    assert Annotation.objects.filter(annotator=annotator, item__project=project).count() == 1
    # and they have no role any more: no item, no project
    assert permissions.project_role(user=annotator, project=project) is None
    with pytest.raises((PermissionDenied, NotFound)):
        item_claim_next(project=project, actor=annotator)


def test_a_reactivated_member_has_their_role_again(labelling):
    project, manager, annotator, _ = labelling
    membership_deactivate(project=project, actor=manager, user_id=annotator.pk)

    membership = membership_reactivate(project=project, actor=manager, user_id=annotator.pk)

    assert membership.is_active and membership.role == Role.ANNOTATOR
    assert permissions.project_role(user=annotator, project=project) == Role.ANNOTATOR
    assert item_claim_next(project=project, actor=annotator) is not None
