"""POST /api/projects/<slug>/disagreements/<item_id>/unresolved/: an outcome of its own."""

from __future__ import annotations

import pytest

from labeling.models import ItemStatus, Resolution, Role

pytestmark = pytest.mark.django_db


def url(item_id: int) -> str:
    return f"/api/projects/study/disagreements/{item_id}/unresolved/"


def test_marks_the_item_unresolved_with_a_reason(client_for, member, disputed):
    adjudicator = member(Role.ADJUDICATOR)
    body = {"expected_version": disputed.version, "reason": "insufficient_evidence"}

    response = client_for(adjudicator).post(url(disputed.pk), body, format="json")

    assert response.status_code == 201
    resolution = Resolution.objects.get()
    assert (resolution.status, resolution.unresolved_reason, resolution.answer_label) == (
        "unresolved",
        "insufficient_evidence",
        None,
    )
    disputed.refresh_from_db()
    assert disputed.status == ItemStatus.RESOLVED
    assert response.json()["unresolved_reason"] == "insufficient_evidence"
    assert response.json()["claims"] == []


def test_other_needs_a_rationale(client_for, member, disputed):
    client = client_for(member(Role.ADJUDICATOR))
    body = {"expected_version": disputed.version, "reason": "other"}

    refused = client.post(url(disputed.pk), body, format="json")
    accepted = client.post(url(disputed.pk), {**body, "rationale": "odd"}, format="json")

    assert refused.status_code == 400
    assert refused.json()["field"] == "rationale"
    assert accepted.status_code == 201


@pytest.mark.parametrize(
    ("body", "status", "key"),
    [
        ({"reason": "bored"}, 400, "reason"),
        ({"reason": "source_problem", "expected_version": None}, 400, "expected_version"),
    ],
)
def test_bad_bodies_are_400(api, disputed, body, status, key):
    response = api(Role.MANAGER).post(
        url(disputed.pk), {"expected_version": disputed.version, **body}, format="json"
    )

    assert response.status_code == status
    assert key in {e["field"] for e in response.json()["errors"]}


def test_a_stale_version_is_409(api, disputed):
    body = {"expected_version": disputed.version - 1, "reason": "source_problem"}

    response = api(Role.MANAGER).post(url(disputed.pk), body, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "stale_version"
    assert not Resolution.objects.exists()
