"""The audit API with an active sample: the design choice, the recorded draw, the estimate."""

from __future__ import annotations

import pytest

from certification.models import AuditSample
from certification.services import audit_report_configure
from labeling.models import Role
from tests.certification.audit_helpers import scored_project

pytestmark = pytest.mark.django_db

BASE = "/api/projects/study/audits"


@pytest.fixture
def scored(project, member):
    project, hhem = scored_project(project, open_items=2)
    audit_report_configure(
        project=project, evaluator=hhem, actor=member(Role.MANAGER), score_threshold=0.5
    )
    return project, hhem


def test_a_manager_draws_an_active_sample(scored, api):
    _, hhem = scored
    client = api("manager")
    body = {"size": 40, "seed": 4, "kind": "active", "floor": 0.5}
    created = client.post(f"{BASE}/{hhem.pk}/samples/", body, format="json").json()
    assert created["kind"] == "active" and created["size"] == 40
    assert created["design"]["floor"] == 0.5 and created["design"]["budget"] == 40
    assert {m["inclusion_probability"] for m in created["members"]} == {1.0}
    report = client.get(f"{BASE}/{hhem.pk}/").json()["result"]
    assert report["sample"]["kind"] == "active"
    assert report["active"]["status"] == "pending" and report["active"]["n_resolved"] == 38


def test_an_adjudicator_sees_no_probability_of_an_open_item(scored, api):
    project, hhem = scored
    api("manager").post(
        f"{BASE}/{hhem.pk}/samples/", {"size": 40, "seed": 4, "kind": "active"}, format="json"
    )
    listed = api("adjudicator").get(f"{BASE}/{hhem.pk}/samples/").json()["results"][0]
    hidden = [m for m in listed["members"] if m["inclusion_probability"] is None]
    # the two open items (and nothing a person may still decide) are hidden
    assert len(hidden) == 2 and all(m["stratum"] is None for m in hidden)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "greedy"}, "kind"),
        ({"kind": "active", "floor": 2}, "floor"),
        ({"kind": "active", "slice_dimension": "domain"}, "slice_dimension"),
    ],
)
def test_bad_designs_are_400_naming_the_field(scored, api, body, field):
    _, hhem = scored
    response = api("manager").post(
        f"{BASE}/{hhem.pk}/samples/", {"size": 5, "seed": 1, **body}, format="json"
    )
    assert response.status_code == 400
    assert field in response.content.decode()
    assert not AuditSample.objects.exists()


def test_annotators_cannot_draw(scored, api):
    _, hhem = scored
    response = api("annotator").post(
        f"{BASE}/{hhem.pk}/samples/", {"size": 5, "seed": 1, "kind": "active"}, format="json"
    )
    assert response.status_code == 403


def test_the_blind_queue_serves_members_first_without_evaluator_data(scored, api):
    project, hhem = scored
    api("manager").post(
        f"{BASE}/{hhem.pk}/samples/", {"size": 40, "seed": 4, "kind": "active"}, format="json"
    )
    members = set(AuditSample.objects.get().members.values_list("item_id", flat=True))
    claimed = api("annotator").post("/api/projects/study/assignments/next/")
    assert claimed.status_code == 200
    assert claimed.json()["item_id"] in members
    text = claimed.content.decode()
    assert "inclusion_probability" not in text and "hhem" not in text and "score" not in text
