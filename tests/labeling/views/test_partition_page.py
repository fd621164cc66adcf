"""The partition page: freeze the grouped split with a seed (managers only)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from labeling.models import Question, Role
from labeling.services import partition_freeze
from tests.conftest import native_record

pytestmark = pytest.mark.django_db

URL = "/p/study/partition/"


def test_url_is_the_named_route():
    assert reverse("partition-freeze", args=["study"]) == URL


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 403),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 302),
    ],
)
def test_partition_page_access_by_role(login, project, role, status):
    response = login(role).get(URL)

    assert response.status_code == status


def test_form_defaults_to_declared_proportions(login, project):
    response = login(Role.MANAGER).get(URL)

    form = response.context["form"]
    assert (form["dev"].value(), form["calibration"].value(), form["test"].value()) == (
        0.2,
        0.4,
        0.4,
    )
    assert isinstance(form["seed"].value(), int)


def test_manager_freezes_the_partition(login, project, import_records):
    import_records([native_record(f"q{i}") for i in range(5)])

    response = login(Role.MANAGER).post(
        URL, {"seed": 42, "dev": 0.2, "calibration": 0.4, "test": 0.4}
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("project-detail", args=["study"])
    project.refresh_from_db()
    assert project.partition_seed == 42
    assert project.partition_frozen_at is not None
    assert not Question.objects.filter(partition__isnull=True).exists()


def test_proportions_not_summing_to_one_become_a_form_error(login, project, import_records):
    import_records([native_record("q1")])

    response = login(Role.MANAGER).post(
        URL, {"seed": 1, "dev": 0.5, "calibration": 0.5, "test": 0.5}
    )

    assert response.status_code == 400
    assert "sum to 1" in " ".join(response.context["form"].non_field_errors())
    project.refresh_from_db()
    assert project.partition_frozen_at is None


def test_project_without_questions_is_a_form_error(login, project):
    response = login(Role.MANAGER).post(
        URL, {"seed": 1, "dev": 0.2, "calibration": 0.4, "test": 0.4}
    )

    assert response.status_code == 400
    assert "no questions" in " ".join(response.context["form"].non_field_errors())


def test_frozen_partition_shows_status_and_refuses_again(login, project, import_records):
    import_records([native_record("q1")])
    partition_freeze(project=project, proportions={"dev": 1}, seed=3)
    client = login(Role.MANAGER)

    page = client.get(URL)
    again = client.post(URL, {"seed": 9, "dev": 0.2, "calibration": 0.4, "test": 0.4})

    assert "was frozen at" in page.content.decode()
    assert '<form method="post" class="stacked">' not in page.content.decode()
    assert again.status_code == 400
    assert "frozen" in " ".join(again.context["form"].non_field_errors())
    project.refresh_from_db()
    assert project.partition_seed == 3


@pytest.mark.parametrize("role", [Role.ADJUDICATOR, Role.ANNOTATOR])
def test_non_manager_cannot_freeze(login, project, import_records, role):
    import_records([native_record("q1")])

    response = login(role).post(URL, {"seed": 1, "dev": 0.2, "calibration": 0.4, "test": 0.4})

    assert response.status_code == 403
    project.refresh_from_db()
    assert project.partition_frozen_at is None
