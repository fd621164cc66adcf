"""POST /api/projects/<slug>/assignments/<id>/skip/: give the slot back, never see it again."""

from __future__ import annotations

import pytest

from labeling.models import Assignment, AssignmentStatus, Role
from labeling.services import item_claim_next
from tests.labeling.api.conftest import labels_body

pytestmark = pytest.mark.django_db


def url(assignment_id: int) -> str:
    return f"/api/projects/study/assignments/{assignment_id}/skip/"


@pytest.fixture
def annotator(member):
    return member(Role.ANNOTATOR)


@pytest.fixture
def leased(started, annotator) -> Assignment:
    return item_claim_next(project=started, actor=annotator)


def test_skip_frees_the_slot_and_the_item_is_not_served_again(client_for, annotator, leased):
    client = client_for(annotator)
    leased.item.refresh_from_db()
    assert leased.item.assigned_count == 1

    response = client.post(url(leased.pk), {"reason": "out_of_expertise", "note": "law"})

    assert response.status_code == 200
    assert response.json() == {
        "assignment_id": leased.pk,
        "item_id": leased.item_id,
        "status": "skipped",
        "skip_reason": "out_of_expertise",
        "skip_note": "law",
        "ended_at": response.json()["ended_at"],
    }
    leased.refresh_from_db()
    leased.item.refresh_from_db()
    assert (leased.status, leased.skip_note) == (AssignmentStatus.SKIPPED, "law")
    assert leased.item.assigned_count == 0
    # the next item is another one
    assert client.post("/api/projects/study/assignments/next/").json()["item_id"] != leased.item_id


def test_an_unknown_reason_is_400(client_for, annotator, leased):
    response = client_for(annotator).post(url(leased.pk), {"reason": "bored"}, format="json")

    assert response.status_code == 400
    assert "reason" in {e["field"] for e in response.json()["errors"]}
    leased.refresh_from_db()
    assert leased.status == AssignmentStatus.LEASED


def test_skipping_a_submitted_item_is_409(client_for, annotator, leased):
    client = client_for(annotator)
    annotation_url = f"/api/projects/study/assignments/{leased.pk}/annotation/"
    client.put(annotation_url, labels_body(leased.item), format="json")

    response = client.post(url(leased.pk), {"reason": "other"}, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "invalid_transition"


def test_someone_elses_assignment_is_404(client_for, member, leased):
    response = client_for(member(Role.ANNOTATOR)).post(url(leased.pk), {"reason": "other"})

    assert response.status_code == 404
    leased.refresh_from_db()
    assert leased.status == AssignmentStatus.LEASED
