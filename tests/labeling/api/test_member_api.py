"""/api/projects/<slug>/members/ and invitations/, and /api/invitations/ (an account's own)."""

from __future__ import annotations

import re

import pytest
from django.core import mail

from labeling.models import Invitation, InvitationStatus, Membership, Role
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/members/"
INVITATIONS = "/api/projects/study/invitations/"
OWN = "/api/invitations/"


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 403),
        (Role.ANNOTATOR, 403),  # the list names the other annotators
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_member_and_invitation_lists_by_role(api, project, role, status):
    client = api(role)

    assert client.get(URL).status_code == status
    assert client.get(INVITATIONS).status_code == status


def test_lists_members_with_roles_and_state(client_for, manager, member, project):
    annotator = member(Role.ANNOTATOR)

    body = client_for(manager).get(URL).json()

    assert body["count"] == 2
    assert {(r["user_id"], r["username"], r["role"], r["is_active"]) for r in body["results"]} == {
        (manager.pk, manager.username, "manager", True),
        (annotator.pk, annotator.username, "annotator", True),
    }


def _invite(client, invitee, role="annotator"):
    return client.post(INVITATIONS, {"invitee": invitee, "role": role}, format="json")


def _shape(body):
    """The answer without the fields that differ by invitation (id, invitee, times)."""
    return {k: v for k, v in body.items() if k not in ("id", "invitee", "created_at", "expires_at")}


def test_the_answer_is_the_same_whether_the_account_exists(client_for, manager, project):
    existing = UserFactory(username="known")
    client = client_for(manager)

    known = _invite(client, "known")
    unknown = _invite(client, "unknown")
    new_email = _invite(client, "fresh@example.org")

    assert known.status_code == unknown.status_code == new_email.status_code == 201
    assert _shape(known.json()) == _shape(unknown.json()) == _shape(new_email.json())
    assert _shape(known.json()) == {
        "role": "annotator",
        "status": "pending",
        "invited_by": manager.username,
        "email_failed": False,
    }
    # and the manager never learns the e-mail of an account
    assert existing.email not in known.content.decode()
    assert existing.email not in client.get(INVITATIONS).content.decode()
    # nobody was added
    assert Membership.objects.filter(project=project).count() == 1


def test_an_invited_account_lists_and_accepts_its_invitation(client_for, manager, project):
    ada = UserFactory(username="ada")
    invitation_id = _invite(client_for(manager), "ada", "adjudicator").json()["id"]
    client = client_for(ada)

    # before accepting: the invitation is listed, the project is not reachable
    listed = client.get(OWN).json()
    before = client.get("/api/projects/study/")
    accepted = client.post(f"{OWN}{invitation_id}/accept/")
    after = client.get("/api/projects/study/")

    assert [(r["id"], r["project"], r["role"]) for r in listed["results"]] == [
        (invitation_id, "study", "adjudicator")
    ]
    assert before.status_code == 404
    assert accepted.status_code == 200
    assert accepted.json() == {
        "user_id": ada.pk,
        "username": "ada",
        "role": "adjudicator",
        "is_active": True,
    }
    assert after.status_code == 200
    assert client.get(OWN).json()["count"] == 0
    assert client.post(f"{OWN}{invitation_id}/accept/").status_code == 409


def test_declining_and_another_accounts_invitation(client_for, manager, project):
    UserFactory(username="ada")
    invitation_id = _invite(client_for(manager), "ada").json()["id"]

    stranger = client_for(UserFactory()).post(f"{OWN}{invitation_id}/accept/")
    declined = client_for(Invitation.objects.get().user).post(f"{OWN}{invitation_id}/decline/")

    assert stranger.status_code == 404
    assert declined.status_code == 204
    assert Invitation.objects.get().status == InvitationStatus.DECLINED
    assert not Membership.objects.filter(user__username="ada").exists()


def test_a_new_person_joins_through_the_emailed_link(client_for, manager, project, client):
    _invite(client_for(manager), "fresh@example.org")
    (message,) = mail.outbox
    link = re.search(r"http://testserver(/accounts/join/[^\s]+/)", message.body).group(1)

    response = client.post(
        link,
        {"username": "fresh", "password1": "Long-pass-phrase-1", "password2": "Long-pass-phrase-1"},
    )

    assert response.status_code == 302
    assert Membership.objects.get(user__username="fresh").role == "annotator"


def test_revoking_an_invitation(client_for, manager, project):
    invitation_id = _invite(client_for(manager), "ada@example.org").json()["id"]

    revoked = client_for(manager).delete(f"{INVITATIONS}{invitation_id}/")
    again = client_for(manager).delete(f"{INVITATIONS}{invitation_id}/")
    listed = client_for(manager).get(INVITATIONS).json()["results"]

    assert (revoked.status_code, again.status_code) == (204, 409)
    assert [(r["id"], r["status"]) for r in listed] == [(invitation_id, "revoked")]


def test_inviting_a_member_again_or_bad_input_is_400(client_for, manager, member, project):
    annotator = member(Role.ANNOTATOR)

    taken = _invite(client_for(manager), annotator.username, "manager")
    bad = _invite(client_for(manager), "not an account!")

    assert taken.status_code == 400 and taken.json()["field"] == "invitee"
    assert bad.status_code == 400 and bad.json()["field"] == "invitee"


def test_changing_a_role_and_deactivating(client_for, manager, member, project):
    annotator = member(Role.ANNOTATOR)
    client = client_for(manager)

    promoted = client.patch(f"{URL}{annotator.pk}/", {"role": "adjudicator"}, format="json")
    deactivated = client.patch(f"{URL}{annotator.pk}/", {"is_active": False}, format="json")
    empty = client.patch(f"{URL}{annotator.pk}/", {}, format="json")

    assert promoted.status_code == 200 and promoted.json()["role"] == "adjudicator"
    assert deactivated.status_code == 200 and deactivated.json()["is_active"] is False
    assert empty.status_code == 400
    assert client_for(annotator).get("/api/projects/study/").status_code == 404
    reactivated = client.patch(f"{URL}{annotator.pk}/", {"is_active": True}, format="json")
    assert reactivated.json()["is_active"] is True


def test_removing_a_member(client_for, manager, member, project):
    annotator = member(Role.ANNOTATOR)

    response = client_for(manager).delete(f"{URL}{annotator.pk}/")

    assert response.status_code == 204
    assert not Membership.objects.filter(user=annotator).exists()
    assert client_for(manager).delete(f"{URL}{annotator.pk}/").status_code == 404


@pytest.mark.parametrize(
    ("method", "body"),
    [("patch", {"role": "annotator"}), ("patch", {"is_active": False}), ("delete", None)],
)
def test_the_last_manager_cannot_be_demoted_deactivated_or_removed(
    client_for, manager, project, method, body
):
    client = client_for(manager)

    response = getattr(client, method)(f"{URL}{manager.pk}/", body, format="json")

    assert response.status_code == 409
    assert "last active manager" in response.json()["detail"]
    membership = Membership.objects.get(user=manager)
    assert (membership.role, membership.is_active) == ("manager", True)


@pytest.mark.parametrize("beyond", [False, True], ids=["stranger", "id-beyond-64-bits"])
def test_a_user_who_is_not_a_member_is_404(client_for, manager, project, beyond):
    stranger = UserFactory()
    user_id = 2**64 if beyond else stranger.pk

    response = client_for(manager).patch(f"{URL}{user_id}/", {"role": "annotator"})

    assert response.status_code == 404
    assert not Membership.objects.filter(user=stranger).exists()


@pytest.mark.parametrize("role", [Role.ADJUDICATOR, Role.ANNOTATOR])
def test_non_managers_cannot_invite_change_or_remove(api, member, project, role):
    target = member(Role.ANNOTATOR)
    client = api(role)

    invite = _invite(client, "x", "manager")
    change = client.patch(f"{URL}{target.pk}/", {"role": "manager"}, format="json")
    remove = client.delete(f"{URL}{target.pk}/")

    assert (invite.status_code, change.status_code, remove.status_code) == (403, 403, 403)
    assert Membership.objects.get(user=target).role == "annotator"
    assert not Invitation.objects.exists()
