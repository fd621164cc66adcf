"""GET/PATCH /api/projects/<slug>/settings/ and POST .../labelling/start/ (managers)."""

from __future__ import annotations

import pytest

from labeling.models import Item, LabelPolicy, Role
from tests.factories import work_record

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/settings/"
START = "/api/projects/study/labelling/start/"


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 403),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_settings_access_by_role(api, project, role, status):
    client = api(role)

    assert client.get(URL).status_code == status
    assert client.patch(URL, {"lease_minutes": 10}, format="json").status_code == status
    project.refresh_from_db()
    assert project.lease_minutes == (10 if status == 200 else 30)


def test_get_returns_the_defaults(api, project):
    assert api(Role.MANAGER).get(URL).json() == {
        "overlap": 2,
        "lease_minutes": 30,
        "serving_order": "partition",
        "serving_seed": None,
        "allow_self_adjudication": False,
        "labelling_started_at": None,
    }


def test_patch_changes_only_the_given_settings(api, project):
    response = api(Role.MANAGER).patch(
        URL, {"overlap": 3, "serving_order": "seeded_random", "serving_seed": 9}, format="json"
    )

    assert response.status_code == 200
    project.refresh_from_db()
    assert (project.overlap, project.serving_order, project.serving_seed) == (
        3,
        "seeded_random",
        9,
    )
    assert project.lease_minutes == 30
    assert response.json()["overlap"] == 3


@pytest.mark.parametrize(
    ("body", "key"),
    [({"overlap": 0}, "overlap"), ({"serving_order": "alphabetical"}, "serving_order")],
)
def test_invalid_settings_are_400(api, project, body, key):
    response = api(Role.MANAGER).patch(URL, body, format="json")

    assert response.status_code == 400
    assert key in {e["field"] for e in response.json()["errors"]}


def test_start_freezes_policy_and_queues_items_then_locks_overlap(api, project, import_records):
    import_records([work_record("q1")])
    client = api(Role.MANAGER)
    client.patch(URL, {"overlap": 3}, format="json")

    started = client.post(START)

    assert started.status_code == 200
    assert started.json()["labelling_started_at"] is not None
    assert LabelPolicy.objects.get(project=project).frozen_at is not None
    assert set(Item.objects.values_list("overlap", flat=True)) == {3}
    # overlap is fixed now; the lease may still change
    locked = client.patch(URL, {"overlap": 2}, format="json")
    assert locked.status_code == 409
    assert locked.json()["code"] == "invalid_transition"
    assert client.patch(URL, {"lease_minutes": 5}, format="json").status_code == 200
    # and a second start is a conflict
    again = client.post(START)
    assert again.status_code == 409


@pytest.mark.parametrize(("role", "status"), [(Role.ADJUDICATOR, 403), (Role.ANNOTATOR, 403)])
def test_only_managers_start_labelling(api, project, role, status):
    assert api(role).post(START).status_code == status
    project.refresh_from_db()
    assert project.labelling_started_at is None


@pytest.mark.parametrize(
    ("body", "stored"),
    [
        ({"allow_self_adjudication": True}, True),
        ({"allow_self_adjudication": False}, False),
        ({"allow_self_adjudication": 1}, None),
        ({"allow_self_adjudication": "true"}, None),
        ({"allow_self_adjudication": 0}, None),
        ({"allow_self_adjudication": "yes"}, None),
    ],
)
def test_a_boolean_is_true_or_false_and_nothing_else(api, project, body, stored):
    response = api(Role.MANAGER).patch(URL, body, format="json")
    project.refresh_from_db()
    if stored is None:
        assert response.status_code == 400
        assert response.json()["errors"] == [
            {"field": "allow_self_adjudication", "reason": "Must be true or false."}
        ]
        assert project.allow_self_adjudication is False
    else:
        assert response.status_code == 200, response.content
        assert project.allow_self_adjudication is stored
