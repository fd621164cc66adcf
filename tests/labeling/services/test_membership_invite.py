"""membership_invite: add an existing user or create an account with a one-time link."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.urls import resolve

from labeling.exceptions import InvalidInput, PermissionDenied
from labeling.models import Membership, Role
from labeling.services.projects import membership_invite
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_adds_an_existing_user_without_a_link(project, member):
    manager = member(Role.MANAGER)
    existing = UserFactory(username="ada")

    invite = membership_invite(project=project, actor=manager, username="ada", role="annotator")

    assert invite.created_user is False
    assert invite.set_password_path is None
    assert Membership.objects.get(project=project, user=existing).role == Role.ANNOTATOR
    # the existing password still works
    assert existing.check_password("pw-secret")


def test_creates_an_account_with_an_unusable_password_and_a_working_one_time_link(
    project, member, client
):
    manager = member(Role.MANAGER)

    invite = membership_invite(
        project=project,
        actor=manager,
        username="newbie",
        email="newbie@example.org",
        role=Role.ADJUDICATOR,
    )

    user = get_user_model().objects.get(username="newbie")
    assert invite.created_user is True
    assert user.email == "newbie@example.org"
    assert not user.has_usable_password()
    assert invite.membership.role == Role.ADJUDICATOR
    match = resolve(invite.set_password_path)
    assert match.url_name == "password_reset_confirm"
    assert default_token_generator.check_token(user, match.kwargs["token"])
    # when the person follows the link and sets a password
    page = client.get(invite.set_password_path, follow=True)
    assert page.status_code == 200
    response = client.post(
        page.redirect_chain[-1][0],
        {"new_password1": "a-Long-passphrase-9", "new_password2": "a-Long-passphrase-9"},
    )
    # then the password is set and the link no longer works
    assert response.status_code == 302
    user.refresh_from_db()
    assert user.check_password("a-Long-passphrase-9")
    assert not default_token_generator.check_token(user, match.kwargs["token"])


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR, "nonmember"])
def test_refuses_a_non_manager(project, member, role):
    actor = UserFactory() if role == "nonmember" else member(role)

    with pytest.raises(PermissionDenied):
        membership_invite(project=project, actor=actor, username="x", role=Role.ANNOTATOR)

    assert not get_user_model().objects.filter(username="x").exists()


def test_staff_non_member_may_invite(project):
    staff = UserFactory(is_staff=True)

    invite = membership_invite(project=project, actor=staff, username="x", role=Role.MANAGER)

    assert invite.membership.role == Role.MANAGER


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"username": "ok", "role": "boss"}, "role"),
        ({"username": "ok", "email": "not-an-email", "role": "annotator"}, "email"),
        ({"username": "bad name!", "role": "annotator"}, "username"),
        ({"username": "", "role": "annotator"}, "username"),
    ],
)
def test_refuses_bad_input_naming_the_field(project, member, kwargs, field):
    manager = member(Role.MANAGER)

    with pytest.raises(InvalidInput) as info:
        membership_invite(project=project, actor=manager, **kwargs)

    assert info.value.field == field
    assert info.value.message.startswith(f"{field}:")
    assert Membership.objects.filter(project=project).count() == 1


def test_refuses_an_existing_member(project, member):
    manager = member(Role.MANAGER)
    annotator = member(Role.ANNOTATOR)

    with pytest.raises(InvalidInput, match="already a member"):
        membership_invite(
            project=project, actor=manager, username=annotator.username, role=Role.MANAGER
        )

    assert Membership.objects.get(project=project, user=annotator).role == Role.ANNOTATOR
