"""POST /api/projects/<slug>/partition/: managers only; 409 once frozen."""

from __future__ import annotations

import pytest

from labeling.models import Question, Role
from tests.conftest import native_record

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/partition/"


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
def test_partition_access_by_role(api, project, import_records, role, status):
    import_records([native_record("q1")])

    response = api(role).post(URL, {"seed": 4}, format="json")

    assert response.status_code == status
    project.refresh_from_db()
    assert (project.partition_frozen_at is not None) == (status == 200)


def test_freeze_uses_default_proportions_and_reports_counts(api, project, import_records):
    import_records([native_record(f"q{i}") for i in range(10)])

    response = api(Role.MANAGER).post(URL, {"seed": 11}, format="json")

    body = response.json()
    assert body["seed"] == 11
    assert body["proportions"] == {"dev": 0.2, "calibration": 0.4, "test": 0.4}
    assert sum(body["questions"].values()) == 10
    assert not Question.objects.filter(partition__isnull=True).exists()


def test_second_freeze_is_409(api, project, import_records):
    import_records([native_record("q1")])
    client = api(Role.MANAGER)
    client.post(URL, {"seed": 1}, format="json")

    response = client.post(URL, {"seed": 2}, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "invalid_transition"
    project.refresh_from_db()
    assert project.partition_seed == 1


def test_bad_proportions_are_400(api, project, import_records):
    import_records([native_record("q1")])

    response = api(Role.MANAGER).post(
        URL, {"seed": 1, "proportions": {"dev": 0.7, "test": 0.7}}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    project.refresh_from_db()
    assert project.partition_frozen_at is None


def test_missing_seed_is_400(api, project):
    response = api(Role.MANAGER).post(URL, {}, format="json")

    assert response.status_code == 400
    assert "seed" in {e["field"] for e in response.json()["errors"]}
