"""Invitations: nobody becomes a member without accepting; the answer never tells who exists."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.utils import timezone

from labeling import permissions
from labeling.exceptions import InvalidInput, InvalidTransition, NotFound, PermissionDenied
from labeling.models import Invitation, InvitationStatus, Membership, Role
from labeling.selectors import project_list_for_user
from labeling.selectors.members import invitations_for_user
from labeling.services.members import (
    invitation_accept,
    invitation_create,
    invitation_decline,
    invitation_for_token,
    invitation_join,
    invitation_revoke,
    token_hash,
)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

SITE = "http://testserver/"
PASSWORD = "a-Long-passphrase-9"


def invite(project, actor, invitee, role=Role.ANNOTATOR):
    return invitation_create(project=project, actor=actor, invitee=invitee, role=role, site=SITE)


def join_token(message) -> str:
    return re.search(r"/accounts/join/([^/\s]+)/", message.body).group(1)


def test_an_existing_account_is_invited_not_added(project, member):
    manager = member(Role.MANAGER)
    ada = UserFactory(username="ada")

    sent = invite(project, manager, "ada", Role.ADJUDICATOR)

    # then: a pending invitation, and still nothing in the project for ada
    assert sent.invitation.user == ada and sent.invitation.status == InvitationStatus.PENDING
    assert sent.email_failed is False
    assert not Membership.objects.filter(project=project, user=ada).exists()
    assert permissions.project_role(user=ada, project=project) is None
    assert list(project_list_for_user(user=ada)) == []
    assert list(invitations_for_user(user=ada)) == [sent.invitation]
    # and: ada is told by e-mail where to accept, with no join link
    (message,) = mail.outbox
    assert message.to == [ada.email]
    assert "http://testserver/" in message.body and "/accounts/join/" not in message.body
    assert sent.invitation.token_hash == ""


def test_accepting_makes_the_account_a_member_with_the_offered_role(project, member):
    manager = member(Role.MANAGER)
    ada = UserFactory(username="ada")
    invitation = invite(project, manager, "ada", Role.ADJUDICATOR).invitation

    membership = invitation_accept(invitation_id=invitation.pk, actor=ada)

    assert membership.role == Role.ADJUDICATOR and membership.is_active
    assert permissions.project_role(user=ada, project=project) == Role.ADJUDICATOR
    invitation.refresh_from_db()
    assert invitation.status == InvitationStatus.ACCEPTED and invitation.ended_at is not None
    with pytest.raises(InvalidTransition, match="accepted"):
        invitation_accept(invitation_id=invitation.pk, actor=ada)


def test_declining_grants_nothing_and_cannot_be_accepted_later(project, member):
    manager = member(Role.MANAGER)
    ada = UserFactory(username="ada")
    invitation = invite(project, manager, "ada").invitation

    invitation_decline(invitation_id=invitation.pk, actor=ada)

    assert not Membership.objects.filter(user=ada).exists()
    with pytest.raises(InvalidTransition, match="declined"):
        invitation_accept(invitation_id=invitation.pk, actor=ada)


def test_only_the_invited_account_may_accept_or_decline(project, member):
    manager = member(Role.MANAGER)
    UserFactory(username="ada")
    invitation = invite(project, manager, "ada").invitation
    someone = UserFactory()

    for respond in (invitation_accept, invitation_decline):
        with pytest.raises(NotFound):
            respond(invitation_id=invitation.pk, actor=someone)
    with pytest.raises(NotFound):
        invitation_accept(invitation_id=invitation.pk, actor=manager)
    assert not Membership.objects.filter(user=someone).exists()


def test_an_account_is_found_by_its_email_too(project, member):
    manager = member(Role.MANAGER)
    ada = UserFactory(username="ada", email="Ada@Example.org")

    sent = invite(project, manager, "ada@example.org")

    assert sent.invitation.user == ada
    assert sent.invitation.token_hash == ""


def test_a_new_email_gets_a_one_time_join_link_stored_hashed(project, member, client):
    manager = member(Role.MANAGER)

    sent = invite(project, manager, "new@example.org", Role.ANNOTATOR)

    (message,) = mail.outbox
    token = join_token(message)
    assert message.to == ["new@example.org"]
    assert sent.invitation.user is None
    assert sent.invitation.token_hash == token_hash(token) != token
    assert token not in str(Invitation.objects.values_list().get(pk=sent.invitation.pk))
    # when the person joins through the link
    membership = invitation_join(token=token, username="newbie", password=PASSWORD)
    # then the account exists with the e-mail and password, and is a member
    user = get_user_model().objects.get(username="newbie")
    assert membership.user == user and membership.role == Role.ANNOTATOR
    assert user.email == "new@example.org" and user.check_password(PASSWORD)
    # and the link is used up
    with pytest.raises(NotFound):
        invitation_join(token=token, username="another", password=PASSWORD)
    assert not get_user_model().objects.filter(username="another").exists()


@pytest.mark.parametrize(
    ("username", "password", "field"),
    [
        ("bad name!", PASSWORD, "username"),
        ("taken", PASSWORD, "username"),
        ("ok", "123", "password"),
    ],
)
def test_joining_refuses_a_bad_username_or_password_and_keeps_the_link(
    project, member, username, password, field
):
    UserFactory(username="taken")
    invite(project, member(Role.MANAGER), "new@example.org")
    token = join_token(mail.outbox[0])

    with pytest.raises(InvalidInput) as info:
        invitation_join(token=token, username=username, password=password)

    assert info.value.field == field
    assert invitation_for_token(token).status == InvitationStatus.PENDING
    assert invitation_join(token=token, username="fine", password=PASSWORD).role == "annotator"


def test_an_unknown_username_answers_like_a_known_one(project, member):
    manager = member(Role.MANAGER)
    UserFactory(username="known")

    known = invite(project, manager, "known")
    unknown = invite(project, manager, "nobody-here")

    # the results have the same shape: nothing tells whether the account exists
    for sent in (known, unknown):
        assert sent.invitation.status == InvitationStatus.PENDING
        assert sent.email_failed is False
    assert unknown.invitation.user is None and unknown.invitation.token_hash == ""
    assert not get_user_model().objects.filter(username="nobody-here").exists()


def test_an_expired_invitation_grants_nothing(project, member):
    manager = member(Role.MANAGER)
    ada = UserFactory(username="ada")
    by_account = invite(project, manager, "ada").invitation
    invite(project, manager, "new@example.org")
    token = join_token(mail.outbox[-1])
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    with pytest.raises(InvalidTransition, match="expired"):
        invitation_accept(invitation_id=by_account.pk, actor=ada)
    with pytest.raises(NotFound):
        invitation_join(token=token, username="late", password=PASSWORD)
    assert list(invitations_for_user(user=ada)) == []
    by_account.refresh_from_db()
    assert by_account.state == "expired"


def test_a_manager_revokes_a_pending_invitation(project, member):
    manager = member(Role.MANAGER)
    ada = UserFactory(username="ada")
    by_account = invite(project, manager, "ada").invitation
    by_link = invite(project, manager, "new@example.org").invitation
    token = join_token(mail.outbox[-1])

    invitation_revoke(project=project, actor=manager, invitation_id=by_account.pk)
    invitation_revoke(project=project, actor=manager, invitation_id=by_link.pk)

    with pytest.raises(InvalidTransition, match="revoked"):
        invitation_accept(invitation_id=by_account.pk, actor=ada)
    with pytest.raises(NotFound):
        invitation_join(token=token, username="x", password=PASSWORD)
    with pytest.raises(InvalidTransition):
        invitation_revoke(project=project, actor=manager, invitation_id=by_account.pk)


def test_inviting_again_replaces_the_pending_invitation(project, member):
    manager = member(Role.MANAGER)
    ada = UserFactory(username="ada", email="ada@example.org")
    first = invite(project, manager, "ada").invitation

    second = invite(project, manager, "ada@example.org", Role.MANAGER).invitation

    first.refresh_from_db()
    assert first.status == InvitationStatus.REVOKED
    assert [i.pk for i in invitations_for_user(user=ada)] == [second.pk]


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR, "nonmember"])
def test_refuses_a_non_manager(project, member, role):
    actor = UserFactory() if role == "nonmember" else member(role)

    with pytest.raises(PermissionDenied):
        invite(project, actor, "x@example.org")
    with pytest.raises(PermissionDenied):
        invitation_revoke(project=project, actor=actor, invitation_id=1)

    assert not Invitation.objects.exists() and mail.outbox == []


def test_staff_non_member_may_invite(project):
    sent = invite(project, UserFactory(is_staff=True), "x", Role.MANAGER)

    assert sent.invitation.role == Role.MANAGER


@pytest.mark.parametrize(
    ("invitee", "role", "field"),
    [
        ("ok", "boss", "role"),
        ("not-an-email@", "annotator", "invitee"),
        ("bad name!", "annotator", "invitee"),
        ("", "annotator", "invitee"),
        ("x" * 255, "annotator", "invitee"),
    ],
)
def test_refuses_bad_input_naming_the_field(project, member, invitee, role, field):
    manager = member(Role.MANAGER)

    with pytest.raises(InvalidInput) as info:
        invite(project, manager, invitee, role)

    assert info.value.field == field
    assert not Invitation.objects.exists()


def test_refuses_an_existing_member(project, member):
    manager = member(Role.MANAGER)
    annotator = member(Role.ANNOTATOR)

    with pytest.raises(InvalidInput, match="already a member"):
        invite(project, manager, annotator.username, Role.MANAGER)

    assert Membership.objects.get(project=project, user=annotator).role == Role.ANNOTATOR


def test_a_failed_email_is_reported_and_the_invitation_stands(project, member, settings, caplog):
    settings.EMAIL_BACKEND = "tests.labeling.services.test_membership_invite.FailingBackend"
    manager = member(Role.MANAGER)

    sent = invite(project, manager, "new@example.org")

    assert sent.email_failed is True
    assert Invitation.objects.get().status == InvitationStatus.PENDING
    assert any(r.getMessage() == "mail.failed" for r in caplog.records)


class FailingBackend:
    """An e-mail backend whose server is down."""

    def __init__(self, **kwargs):
        pass

    def send_messages(self, messages):
        raise ConnectionRefusedError("connection refused")
