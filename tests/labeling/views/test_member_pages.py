"""People pages: members (invite, role, deactivate, remove, revoke), accepting on the project
list, the join page of an e-mailed link, and the password reset that really sends."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.urls import reverse

from labeling.models import Invitation, InvitationStatus, Membership, Role
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

MEMBERS = reverse("project-members", args=["study"])
PROJECTS = reverse("project-list")
PASSWORD = "Zed-long-secret-42"


def invite(client, invitee, role="annotator", **kwargs):
    return client.post(MEMBERS, {"action": "invite", "invitee": invitee, "role": role}, **kwargs)


def join_path(message) -> str:
    return re.search(r"http://testserver(/accounts/join/[^\s]+/)", message.body).group(1)


def test_members_page_lists_members_roles_and_state(login, project, member):
    annotator = member(Role.ANNOTATOR)

    response = login(Role.MANAGER).get(MEMBERS)

    content = response.content.decode()
    assert annotator.username in content
    assert re.search(
        rf'data-user-id="{annotator.pk}".*?<option value="annotator" selected>.*?active',
        content,
        re.S,
    )


def test_the_invite_answers_the_same_whether_the_account_exists(login, project):
    UserFactory(username="ada")
    client = login(Role.MANAGER)

    known = invite(client, "ada", follow=True)
    unknown = invite(client, "nobody", follow=True)

    def message(response):
        text = re.search(r"Invitation recorded for \S+ (.*?)<", response.content.decode(), re.S)
        return text.group(1)

    assert message(known) == message(unknown)
    assert "Nobody joins before accepting" in message(known)
    assert not Membership.objects.filter(user__username="ada").exists()
    assert [i.invitee for i in Invitation.objects.order_by("pk")] == ["ada", "nobody"]


def test_an_invited_account_accepts_on_its_project_list(login, project, client):
    ada = UserFactory(username="ada")
    invite(login(Role.MANAGER), "ada", "adjudicator")
    invitation = Invitation.objects.get()
    client.force_login(ada)

    listing = client.get(PROJECTS)
    before = client.get(reverse("project-detail", args=["study"]))
    accepted = client.post(reverse("invitation-accept", args=[invitation.pk]))

    assert f'data-invitation-id="{invitation.pk}"' in listing.content.decode()
    assert before.status_code == 404  # an invitation not yet accepted grants nothing
    assert accepted.status_code == 302 and accepted["Location"] == "/p/study/"
    assert Membership.objects.get(user=ada).role == Role.ADJUDICATOR
    assert client.get(before.request["PATH_INFO"]).status_code == 200


def test_declining_on_the_project_list(login, project, client):
    ada = UserFactory(username="ada")
    invite(login(Role.MANAGER), "ada")
    invitation = Invitation.objects.get()
    client.force_login(ada)

    response = client.post(reverse("invitation-decline", args=[invitation.pk]), follow=True)

    assert b"You declined the invitation" in response.content
    assert Invitation.objects.get().status == InvitationStatus.DECLINED
    assert f'data-invitation-id="{invitation.pk}"' not in response.content.decode()
    assert not Membership.objects.filter(user=ada).exists()


def test_another_accounts_invitation_is_404(login, project, client):
    UserFactory(username="ada")
    invite(login(Role.MANAGER), "ada")
    client.force_login(UserFactory())

    response = client.post(reverse("invitation-accept", args=[Invitation.objects.get().pk]))

    assert response.status_code == 404


def test_a_new_person_joins_with_the_emailed_link_once(login, project, client):
    invite(login(Role.MANAGER), "zed@example.org")
    client.logout()
    path = join_path(mail.outbox[0])

    page = client.get(path)
    joined = client.post(path, {"username": "zed", "password1": PASSWORD, "password2": PASSWORD})
    client.logout()
    reused = client.get(path)

    assert page.status_code == 200 and b'id="join-form"' in page.content
    assert joined.status_code == 302 and joined["Location"] == "/p/study/"
    assert client.login(username="zed", password=PASSWORD)
    assert get_user_model().objects.get(username="zed").email == "zed@example.org"
    assert Membership.objects.get(user__username="zed").role == Role.ANNOTATOR
    assert reused.status_code == 404 and b'id="invalid-link"' in reused.content


def test_the_join_page_shows_errors_beside_the_fields(login, project, client):
    UserFactory(username="taken")
    invite(login(Role.MANAGER), "zed@example.org")
    path = join_path(mail.outbox[0])

    taken = client.post(path, {"username": "taken", "password1": PASSWORD, "password2": PASSWORD})
    weak = client.post(path, {"username": "zed", "password1": "123", "password2": "123"})
    differ = client.post(path, {"username": "zed", "password1": PASSWORD, "password2": "other"})

    assert taken.status_code == 400 and "username" in taken.context["form"].errors
    assert weak.status_code == 400 and "password1" in weak.context["form"].errors
    assert differ.status_code == 400 and "password2" in differ.context["form"].errors
    assert Invitation.objects.get().status == InvitationStatus.PENDING


def test_revoking_from_the_members_page(login, project):
    client = login(Role.MANAGER)
    invite(client, "zed@example.org")
    invitation = Invitation.objects.get()

    response = client.post(MEMBERS, {"action": "revoke", "invitation_id": invitation.pk})

    assert response.status_code == 302
    assert Invitation.objects.get().status == InvitationStatus.REVOKED
    assert client.get(join_path(mail.outbox[0])).status_code == 404


def test_bad_invite_input_is_shown(login, project, member):
    annotator = member(Role.ANNOTATOR)
    client = login(Role.MANAGER)

    taken = invite(client, annotator.username, "manager")
    bad = invite(client, "nope@")

    assert taken.status_code == 400 and b"already a member" in taken.content
    assert bad.status_code == 400 and b"valid e-mail" in bad.content


def test_a_failed_invitation_email_is_said(login, project, settings):
    settings.EMAIL_BACKEND = "tests.labeling.services.test_membership_invite.FailingBackend"

    response = invite(login(Role.MANAGER), "zed@example.org", follow=True)

    assert b"its e-mail could not be sent" in response.content
    assert Invitation.objects.get().status == InvitationStatus.PENDING


def test_role_change_deactivate_reactivate_remove(client, project, member):
    manager, annotator = member(Role.MANAGER), member(Role.ANNOTATOR)
    client.force_login(manager)

    def act(action, user, **extra):
        return client.post(MEMBERS, {"action": action, "user_id": user.pk, **extra})

    promoted = act("change", annotator, role="adjudicator")
    deactivated = act("deactivate", annotator)
    state_after_deactivate = Membership.objects.get(user=annotator).is_active
    reactivated = act("reactivate", annotator)
    removed = act("remove", annotator)

    assert [r.status_code for r in (promoted, deactivated, reactivated, removed)] == [302] * 4
    assert state_after_deactivate is False
    assert not Membership.objects.filter(user=annotator).exists()


@pytest.mark.parametrize(
    "post",
    [
        {"action": "change", "role": "annotator"},
        {"action": "deactivate"},
        {"action": "remove"},
    ],
)
def test_the_page_refuses_to_lose_the_last_manager(client, project, member, post):
    manager = member(Role.MANAGER)
    client.force_login(manager)

    response = client.post(MEMBERS, {**post, "user_id": manager.pk})

    assert response.status_code == 400
    assert b'id="change-error"' in response.content and b"last active manager" in response.content
    membership = Membership.objects.get(user=manager)
    assert (membership.role, membership.is_active) == (Role.MANAGER, True)


def test_an_unknown_action_is_400(login, project):
    assert login(Role.MANAGER).post(MEMBERS, {"action": "promote"}).status_code == 400


# --- password reset ----------------------------------------------------------------------------


def test_the_login_page_links_to_the_password_reset(client):
    assert reverse("password_reset").encode() in client.get(reverse("login")).content


def test_password_reset_sends_a_working_link(client):
    user = UserFactory(username="zed", email="zed@example.org")

    response = client.post(reverse("password_reset"), {"email": "zed@example.org"})

    assert response.status_code == 302
    (message,) = mail.outbox
    assert message.to == ["zed@example.org"]
    path = re.search(r"http://testserver(/accounts/reset/[^\s]+/)", message.body).group(1)
    form = client.get(path, follow=True)
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": PASSWORD, "new_password2": PASSWORD}
    )
    assert done.status_code == 302
    user.refresh_from_db()
    assert user.check_password(PASSWORD)


def test_password_reset_answers_the_same_for_an_unknown_address(client):
    response = client.post(reverse("password_reset"), {"email": "nobody@example.org"})

    assert response.status_code == 302 and mail.outbox == []


def test_password_reset_says_when_the_email_could_not_be_sent(client, settings, caplog):
    settings.EMAIL_BACKEND = "tests.labeling.services.test_membership_invite.FailingBackend"
    UserFactory(username="zed", email="zed@example.org")

    response = client.post(reverse("password_reset"), {"email": "zed@example.org"})

    assert response.status_code == 503
    assert b"The e-mail could not be sent" in response.content
    assert any(r.getMessage() == "mail.failed" for r in caplog.records)
