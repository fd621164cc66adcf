"""membership_change: managers change roles; the last manager stays."""

from __future__ import annotations

import pytest

from labeling.exceptions import InvalidInput, InvalidTransition, NotFound, PermissionDenied
from labeling.models import Membership, Role
from labeling.services.projects import membership_change
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_manager_changes_a_role(project, member):
    manager = member(Role.MANAGER)
    annotator = member(Role.ANNOTATOR)

    membership = membership_change(
        project=project, actor=manager, user_id=annotator.pk, role=Role.ADJUDICATOR
    )

    assert membership.role == Role.ADJUDICATOR
    assert Membership.objects.get(project=project, user=annotator).role == Role.ADJUDICATOR


def test_last_manager_cannot_be_demoted(project, member):
    manager = member(Role.MANAGER)

    with pytest.raises(InvalidTransition, match="last manager"):
        membership_change(project=project, actor=manager, user_id=manager.pk, role=Role.ANNOTATOR)

    assert Membership.objects.get(project=project, user=manager).role == Role.MANAGER


def test_a_manager_may_step_down_when_another_remains(project, member):
    first, second = member(Role.MANAGER), member(Role.MANAGER)

    membership_change(project=project, actor=first, user_id=first.pk, role=Role.ANNOTATOR)

    assert Membership.objects.get(project=project, user=first).role == Role.ANNOTATOR
    assert Membership.objects.get(project=project, user=second).role == Role.MANAGER


def test_refuses_non_managers_unknown_members_and_roles(project, member):
    manager, annotator = member(Role.MANAGER), member(Role.ANNOTATOR)

    with pytest.raises(PermissionDenied):
        membership_change(project=project, actor=annotator, user_id=annotator.pk, role="manager")
    with pytest.raises(NotFound):
        membership_change(project=project, actor=manager, user_id=UserFactory().pk, role="manager")
    with pytest.raises(InvalidInput):
        membership_change(project=project, actor=manager, user_id=annotator.pk, role="boss")
