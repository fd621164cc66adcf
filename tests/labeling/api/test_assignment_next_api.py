"""POST /api/projects/<slug>/assignments/next/: lease the next item; 204 when there is none."""

from __future__ import annotations

import hashlib

import pytest

from labeling.models import Assignment, AssignmentStatus, Item, Role
from labeling.services import project_create
from tests.factories import WORK_SOURCE, work_record

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/assignments/next/"


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.ANNOTATOR, 200),
        (Role.ADJUDICATOR, 403),
        (Role.MANAGER, 403),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_next_access_by_role(api, started, role, status):
    response = api(role).post(URL)

    assert response.status_code == status
    assert Assignment.objects.exists() == (status == 200)


def test_next_returns_the_labelling_form_and_leases_the_item(client_for, member, started):
    # given an annotator
    user = member(Role.ANNOTATOR)

    # when they ask for the next item
    response = client_for(user).post(URL)

    # then the first item in serving order is leased to them and its form comes back
    assert response.status_code == 200
    body = response.json()
    assignment = Assignment.objects.get()
    assert (assignment.annotator, assignment.status) == (user, AssignmentStatus.LEASED)
    item = Item.objects.get(candidate__question__external_id="q1", candidate__key="c0")
    assert assignment.item == item
    assert body["assignment_id"] == assignment.pk
    assert body["assignment_status"] == "leased"
    assert body["item_id"] == item.pk
    assert body["question_text"] == work_record()["text"]
    assert body["candidate_text"] == "It opened in 1932. It spans the harbour."
    assert [(c["index"], c["text"]) for c in body["claims"]] == [
        (0, "It opened in 1932."),
        (1, "It spans the harbour."),
    ]
    [source] = body["sources"]
    assert source["text"] == WORK_SOURCE
    assert source["sha256"] == hashlib.sha256(WORK_SOURCE.encode()).hexdigest()
    assert body["policy"]["answer_labels"] == [
        "admissible",
        "inadmissible",
        "abstained",
        "evidence_unavailable",
    ]
    assert body["policy"]["cannot_decide"] == "cannot_decide"
    assert body["current"] is None
    # and nothing the annotator must not see is in it
    assert set(body) == {
        "assignment_id",
        "assignment_status",
        "lease_expires_at",
        "item_id",
        "question_text",
        "candidate_text",
        "claims",
        "sources",
        "policy",
        "current",
    }
    assert "reference" not in response.content.decode()  # question metadata


def test_a_second_tab_gets_the_same_lease(client_for, member, started):
    client = client_for(member(Role.ANNOTATOR))

    first = client.post(URL).json()
    second = client.post(URL).json()

    assert second["assignment_id"] == first["assignment_id"]
    assert second["lease_expires_at"] == first["lease_expires_at"]
    assert Assignment.objects.count() == 1


def test_no_work_is_204_with_an_empty_body(client_for, member, project, import_records, manager):
    from labeling.services import project_labelling_start

    import_records([work_record("q1")])
    project_labelling_start(project=project, actor=manager)
    user = member(Role.ANNOTATOR)
    client = client_for(user)
    for _ in range(2):  # the two items of q1
        assignment_id = client.post(URL).json()["assignment_id"]
        client.post(
            f"/api/projects/study/assignments/{assignment_id}/skip/",
            {"reason": "other"},
            format="json",
        )

    response = client.post(URL)

    assert response.status_code == 204
    assert response.content == b""


def test_before_labelling_starts_it_is_409(api, project, import_records):
    import_records([work_record("q1")])

    response = api(Role.ANNOTATOR).post(URL)

    assert response.status_code == 409
    assert response.json()["code"] == "invalid_transition"
    assert not Assignment.objects.exists()


def test_session_auth_works_too(client, member, started):
    client.force_login(member(Role.ANNOTATOR))

    response = client.post(URL)

    assert response.status_code == 200
    assert Assignment.objects.count() == 1


def test_another_projects_slug_is_404_for_its_non_members(api, started):
    project_create(slug="elsewhere", name="Elsewhere")

    response = api(Role.ANNOTATOR).post("/api/projects/elsewhere/assignments/next/")

    assert response.status_code == 404
    assert response.json() == {
        "detail": "no project 'elsewhere'",
        "code": "not_found",
        "errors": [{"field": None, "reason": "no project 'elsewhere'"}],
    }
