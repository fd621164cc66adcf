"""GET /api/projects/ and /api/projects/<slug>/ for every role, with token and session auth."""

from __future__ import annotations

import pytest

from labeling.models import Role
from labeling.services import project_create
from tests.conftest import native_record

pytestmark = pytest.mark.django_db

ROLES = [Role.MANAGER, Role.ADJUDICATOR, Role.ANNOTATOR]


@pytest.mark.parametrize("role", ROLES)
def test_project_list_holds_member_projects(api, import_records, role):
    import_records([native_record("q1")])
    project_create(slug="hidden", name="Hidden")

    response = api(role).get("/api/projects/")

    assert response.status_code == 200
    assert response.json()["count"] == 1
    [row] = response.json()["results"]
    assert (row["slug"], row["role"], row["question_count"], row["item_count"]) == (
        "study",
        role,
        1,
        2,
    )


def test_project_list_is_empty_for_a_non_member(api, project):
    response = api("nonmember").get("/api/projects/")

    assert response.status_code == 200
    assert response.json()["results"] == []


def test_anonymous_gets_401(api, project):
    for url in ("/api/projects/", "/api/projects/study/"):
        response = api("anonymous").get(url)
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == "Token"
        assert "detail" in response.json()


def test_session_auth_works_too(client, member, project):
    client.force_login(member(Role.ANNOTATOR))

    response = client.get("/api/projects/study/")

    assert response.status_code == 200


@pytest.mark.parametrize("role", ROLES)
def test_project_detail_returns_overview_counts(api, import_records, role):
    record = native_record("q1")
    record["candidates"][0]["text"] = "It opened in 1932."
    import_records([record])

    response = api(role).get("/api/projects/study/")

    assert response.status_code == 200
    body = response.json()
    assert body["role"] == role
    unassigned = {row["partition"]: row for row in body["partitions"]}["unassigned"]
    assert unassigned == {
        "partition": "unassigned",
        "questions": 1,
        "candidates": 2,
        "items": 2,
        "claims": 2,
        "unanchored_claims": 1,
        "source_versions": 1,
    }
    assert body["unanchored_claims"] == 1
    assert body["policy_version"] == 1
    assert body["evidence_relation"] == "source_relative"
    assert body["partition_frozen_at"] is None
    if role != Role.MANAGER:  # batch reports count other people's labels
        assert body["batches"] == []
        return
    [batch] = body["batches"]
    assert (batch["format"], batch["filename"], batch["created"]["questions"]) == (
        "native",
        "test.jsonl",
        1,
    )


@pytest.mark.parametrize("slug", ["study", "missing"])
def test_project_detail_is_404_for_non_member(api, project, slug):
    response = api("nonmember").get(f"/api/projects/{slug}/")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
