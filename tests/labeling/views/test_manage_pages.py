"""Manager pages: labelling settings (locked after the start), starting labelling, members' access.

The members page itself: tests/labeling/views/test_member_pages.py.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from labeling.models import Role
from tests.factories import work_record

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
        client.post(MEMBERS, {"action": "invite", "invitee": "eve", "role": "manager"}),
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


def test_an_out_of_range_overlap_is_shown_next_to_its_field(login, project):
    response = login(Role.MANAGER).post(SETTINGS, settings_post(overlap="0"))

    assert response.status_code == 400
    assert "overlap" in response.context["form"].errors
    assert b"overlap: must be between" in response.content
    project.refresh_from_db()
    assert project.overlap == 2


def with_priors(external_id: str, votes: int) -> dict:
    """:func:`work_record` whose ``c0`` carries ``votes`` imported votes (``c1`` none)."""
    record = work_record(external_id)
    record["candidates"][0]["prior_annotations"] = [
        {"annotator": f"ds-{n}", "answer_label": "admissible"} for n in range(votes)
    ]
    return record


def preview_of(content: str) -> tuple[int, int, list[tuple[int, int, int]]]:
    opened = int(re.search(r'<strong id="start-open">(\d+)</strong>', content).group(1))
    compared = int(re.search(r'<strong id="start-compared">(\d+)</strong>', content).group(1))
    table = content[content.index('id="start-by-overlap"') :]
    rows = re.findall(
        r'<th scope="row">(\d+)[^<]*</th><td class="num">(\d+)</td><td class="num">(\d+)</td>',
        table[: table.index("</table>")],
    )
    return opened, compared, [tuple(int(v) for v in row) for row in rows]


def test_the_settings_page_says_how_many_items_the_start_leaves_open(
    login, project, import_records
):
    # given four items: one with 2 imported votes, one with 1, two with none; overlap 2
    import_records([with_priors("q1", 2), with_priors("q2", 1)])
    client = login(Role.MANAGER)

    content = client.get(SETTINGS).content.decode()

    # then the page says 3 items open and 1 compared at once, and so for each overlap
    assert preview_of(content) == (3, 1, [(1, 2, 2), (2, 3, 1), (3, 4, 0)])
    assert 'id="start-nothing-open"' not in content
    # and the start does what it said
    client.post(START)
    assert project.items.filter(status="open").count() == 3


def test_the_settings_page_warns_when_the_imported_votes_leave_annotators_nothing(
    login, project, import_records
):
    # given every item with 2 imported votes (as FaithBench) and overlap 2
    record = with_priors("q1", 2)
    record["candidates"] = record["candidates"][:1]
    import_records([record])
    client = login(Role.MANAGER)

    content = client.get(SETTINGS).content.decode()

    assert preview_of(content) == (0, 1, [(1, 0, 1), (2, 0, 1), (3, 1, 0)])
    assert 'id="start-nothing-open"' in content and "Raise the overlap" in content
