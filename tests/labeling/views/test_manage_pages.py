"""Manager pages: labelling settings (locked after the start), starting labelling, members."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import resolve, reverse

from labeling.models import Membership, Role
from tests.factories import UserFactory, work_record

pytestmark = pytest.mark.django_db

SETTINGS = reverse("project-settings", args=["study"])
START = reverse("project-labelling-start", args=["study"])
MEMBERS = reverse("project-members", args=["study"])


def settings_post(**overrides) -> dict[str, str]:
    data = {
        "overlap": "3",
        "lease_minutes": "45",
        "serving_order": "seeded_random",
        "serving_seed": "7",
        "allow_self_adjudication": "on",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        ("staff", 200),
        (Role.ADJUDICATOR, 403),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 302),
    ],
)
def test_manager_pages_by_role(login, project, role, status):
    client = login(role)

    assert client.get(SETTINGS).status_code == status
    assert client.get(MEMBERS).status_code == status


@pytest.mark.parametrize("role", [Role.ADJUDICATOR, Role.ANNOTATOR])
def test_non_managers_cannot_change_settings_start_or_invite(login, project, role):
    client = login(role)

    responses = [
        client.post(SETTINGS, settings_post()),
        client.post(START),
        client.post(MEMBERS, {"action": "invite", "username": "eve", "role": "manager"}),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403]
    project.refresh_from_db()
    assert (project.overlap, project.labelling_started_at) == (2, None)
    assert not get_user_model().objects.filter(username="eve").exists()


# --- settings --------------------------------------------------------------------------------


def test_settings_are_saved_before_the_start(login, project):
    client = login(Role.MANAGER)

    response = client.post(SETTINGS, settings_post())

    assert response.status_code == 302
    project.refresh_from_db()
    assert (project.overlap, project.lease_minutes) == (3, 45)
    assert (project.serving_order, project.serving_seed) == ("seeded_random", 7)
    assert project.allow_self_adjudication is True
    page = client.get(SETTINGS).content.decode()
    assert 'id="start-labelling"' in page
    assert 'name="overlap"' in page and "disabled" not in page.split('name="overlap"')[1][:80]


def test_invalid_settings_are_shown_on_the_form(login, project):
    response = login(Role.MANAGER).post(
        SETTINGS, settings_post(serving_seed="", serving_order="seeded_random")
    )

    assert response.status_code == 400
    assert b"seed" in response.content
    project.refresh_from_db()
    assert project.overlap == 2


def test_start_labelling_then_overlap_and_order_are_locked(login, project, import_records):
    import_records([work_record("q1")])
    client = login(Role.MANAGER)

    started = client.post(START)
    page = client.get(SETTINGS)
    # a post that tries to change the locked fields changes only the open ones
    changed = client.post(SETTINGS, settings_post(overlap="5", serving_order="partition"))

    assert started.status_code == 302
    project.refresh_from_db()
    assert project.labelling_started_at is not None
    content = page.content.decode()
    assert 'id="settings-locked"' in content
    for name in ("overlap", "serving_order", "serving_seed"):
        tag = re.search(rf'<(input|select)[^>]*name="{name}"[^>]*>', content).group(0)
        assert "disabled" in tag, name
    lease = re.search(r'<input[^>]*name="lease_minutes"[^>]*>', content).group(0)
    assert "disabled" not in lease
    assert 'id="start-labelling"' not in content
    assert changed.status_code == 302
    project.refresh_from_db()
    assert (project.overlap, project.serving_order) == (2, "partition")
    assert project.lease_minutes == 45


def test_starting_twice_says_it_already_started(login, project):
    client = login(Role.MANAGER)
    client.post(START)

    response = client.post(START, follow=True)

    assert b"already started" in response.content


# --- members ---------------------------------------------------------------------------------


def test_members_page_lists_members_and_roles(login, project, member):
    annotator = member(Role.ANNOTATOR)

    response = login(Role.MANAGER).get(MEMBERS)

    content = response.content.decode()
    assert annotator.username in content
    assert re.search(
        rf'data-user-id="{annotator.pk}".*?<option value="annotator" selected>', content, re.S
    )


def test_inviting_an_existing_user_adds_them(login, project):
    existing = UserFactory(username="ada")

    response = login(Role.MANAGER).post(
        MEMBERS, {"action": "invite", "username": "ada", "role": "adjudicator"}, follow=True
    )

    assert Membership.objects.get(project=project, user=existing).role == Role.ADJUDICATOR
    assert b"ada added as adjudicator" in response.content
    assert b"password_reset" not in response.content and b"/reset/" not in response.content


def test_inviting_a_new_person_shows_a_one_time_set_password_link_once(login, project, client):
    manager_client = login(Role.MANAGER)

    response = manager_client.post(
        MEMBERS,
        {"action": "invite", "username": "newbie", "email": "n@example.org", "role": "annotator"},
        follow=True,
    )
    again = manager_client.get(MEMBERS)

    content = response.content.decode()
    link = re.search(r"(http://testserver/accounts/reset/[^\s<]+)", content).group(1)
    assert "set-password-link" in content
    assert link not in again.content.decode()
    assert resolve(link.removeprefix("http://testserver")).url_name == "password_reset_confirm"
    user = get_user_model().objects.get(username="newbie")
    assert not user.has_usable_password()
    assert Membership.objects.get(project=project, user=user).role == Role.ANNOTATOR


def test_inviting_an_existing_member_or_bad_input_shows_the_error(login, project, member):
    annotator = member(Role.ANNOTATOR)
    client = login(Role.MANAGER)

    taken = client.post(
        MEMBERS, {"action": "invite", "username": annotator.username, "role": "manager"}
    )
    bad_email = client.post(
        MEMBERS, {"action": "invite", "username": "x", "email": "nope", "role": "manager"}
    )

    assert taken.status_code == 400 and b"already a member" in taken.content
    assert bad_email.status_code == 400 and b"valid email" in bad_email.content
    assert Membership.objects.get(user=annotator).role == Role.ANNOTATOR


def test_changing_a_role_and_refusing_to_demote_the_last_manager(client, project, member):
    manager, annotator = member(Role.MANAGER), member(Role.ANNOTATOR)
    client.force_login(manager)

    promoted = client.post(
        MEMBERS, {"action": "change", "user_id": annotator.pk, "role": "adjudicator"}
    )
    demoted = client.post(MEMBERS, {"action": "change", "user_id": manager.pk, "role": "annotator"})

    assert promoted.status_code == 302
    assert Membership.objects.get(user=annotator).role == Role.ADJUDICATOR
    assert demoted.status_code == 400
    assert b'id="change-error"' in demoted.content and b"last manager" in demoted.content
    assert Membership.objects.get(user=manager).role == Role.MANAGER


def test_set_password_page_uses_the_site_template_and_the_link_works_once(project, client):
    from labeling.services.projects import membership_invite

    invite = membership_invite(
        project=project, actor=UserFactory(is_staff=True), username="zed", role="annotator"
    )

    page = client.get(invite.set_password_path, follow=True)
    form_url = page.redirect_chain[-1][0]
    done = client.post(
        form_url, {"new_password1": "Zed-long-secret-42", "new_password2": "Zed-long-secret-42"}
    )
    reused = client.get(invite.set_password_path, follow=True)

    assert b'id="set-password-form"' in page.content
    assert done.status_code == 302
    assert client.login(username="zed", password="Zed-long-secret-42")
    assert b'id="invalid-link"' in reused.content


def test_an_out_of_range_overlap_is_shown_next_to_its_field(login, project):
    response = login(Role.MANAGER).post(SETTINGS, settings_post(overlap="0"))

    assert response.status_code == 400
    assert "overlap" in response.context["form"].errors
    assert b"overlap: must be between" in response.content
    project.refresh_from_db()
    assert project.overlap == 2
