"""/api/projects/<slug>/members/: list and invite (GET/POST), change a role (PATCH <user_id>/)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from labeling.models import Membership, Role
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/members/"


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
def test_member_list_access_by_role(api, project, role, status):
    assert api(role).get(URL).status_code == status


def test_lists_members_with_roles(client_for, manager, member, project):
    annotator = member(Role.ANNOTATOR)

    body = client_for(manager).get(URL).json()

    assert body["count"] == 2
    assert {(r["user_id"], r["username"], r["role"]) for r in body["results"]} == {
        (manager.pk, manager.username, "manager"),
        (annotator.pk, annotator.username, "annotator"),
    }


def test_inviting_a_new_username_creates_an_account_and_a_one_time_link(
    client_for, manager, project
):
    response = client_for(manager).post(
        URL, {"username": "newbie", "email": "n@example.org", "role": "annotator"}, format="json"
    )

    assert response.status_code == 201
    body = response.json()
    user = get_user_model().objects.get(username="newbie")
    assert not user.has_usable_password()
    assert Membership.objects.get(project=project, user=user).role == "annotator"
    assert body["user_id"] == user.pk
    assert body["created_user"] is True
    assert body["set_password_url"].startswith("http://testserver/accounts/reset/")


def test_inviting_an_existing_user_adds_them_without_a_link(client_for, manager, project):
    existing = UserFactory(username="known")

    response = client_for(manager).post(
        URL, {"username": "known", "role": "adjudicator"}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["created_user"] is False
    assert response.json()["set_password_url"] is None
    assert Membership.objects.get(user=existing).role == "adjudicator"
    # a manager never learns the email of an account they add
    assert existing.email not in response.content.decode()
    assert existing.email not in client_for(manager).get(URL).content.decode()


def test_inviting_a_member_again_is_400(client_for, manager, member, project):
    annotator = member(Role.ANNOTATOR)

    response = client_for(manager).post(
        URL, {"username": annotator.username, "role": "manager"}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["field"] == "username"


def test_changing_a_role(client_for, manager, member, project):
    annotator = member(Role.ANNOTATOR)

    response = client_for(manager).patch(
        f"{URL}{annotator.pk}/", {"role": "adjudicator"}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["role"] == "adjudicator"
    assert Membership.objects.get(user=annotator).role == "adjudicator"


def test_the_last_manager_cannot_be_demoted(client_for, manager, project):
    response = client_for(manager).patch(
        f"{URL}{manager.pk}/", {"role": "annotator"}, format="json"
    )

    assert response.status_code == 409
    assert Membership.objects.get(user=manager).role == "manager"


@pytest.mark.parametrize("beyond", [False, True], ids=["stranger", "id-beyond-64-bits"])
def test_a_user_who_is_not_a_member_is_404(client_for, manager, project, beyond):
    stranger = UserFactory()
    user_id = 2**64 if beyond else stranger.pk

    response = client_for(manager).patch(f"{URL}{user_id}/", {"role": "annotator"})

    assert response.status_code == 404
    assert not Membership.objects.filter(user=stranger).exists()


@pytest.mark.parametrize("role", [Role.ADJUDICATOR, Role.ANNOTATOR])
def test_non_managers_cannot_invite_or_change(api, member, project, role):
    target = member(Role.ANNOTATOR)
    client = api(role)

    invite = client.post(URL, {"username": "x", "role": "manager"}, format="json")
    change = client.patch(f"{URL}{target.pk}/", {"role": "manager"}, format="json")

    assert (invite.status_code, change.status_code) == (403, 403)
    assert Membership.objects.get(user=target).role == "annotator"
    assert not get_user_model().objects.filter(username="x").exists()
