"""The evaluator audit API: roles, the stored report, declaring an audit."""

from __future__ import annotations

import pytest

from certification.models import AuditReport
from certification.services import audit_report_configure
from labeling.models import Evaluator, Role
from labeling.services import project_create
from tests.certification.audit_helpers import audited_project

pytestmark = pytest.mark.django_db

BASE = "/api/projects/study/audits"


@pytest.fixture
def audited(project, member):
    project, judge, hhem = audited_project(project)
    audit_report_configure(project=project, evaluator=judge, actor=member(Role.MANAGER))
    return project, judge, hhem


@pytest.mark.parametrize(
    ("role", "read", "write"),
    [
        ("annotator", 403, 403),
        ("adjudicator", 200, 403),
        ("manager", 200, 200),
        ("nonmember", 404, 404),
        ("anonymous", 401, 401),
    ],
)
def test_roles(audited, api, role, read, write):
    _, judge, _ = audited
    client = api(role)
    assert client.get(f"{BASE}/{judge.pk}/").status_code == read
    body = {"human_positive": ["inadmissible"]}
    assert client.post(f"{BASE}/{judge.pk}/", body, format="json").status_code == write


def test_the_report_as_json(audited, api):
    _, judge, _ = audited
    data = api("adjudicator").get(f"{BASE}/{judge.pk}/").json()
    assert data["evaluator"] == "judge@v1"
    assert data["human_positive"] == ["inadmissible"]
    result = data["result"]
    assert result["metrics"]["matrix"]["counts"] == [[1, 1, 0], [1, 1, 0], [1, 0, 0]]
    assert result["n_pending"] == 1
    assert result["metrics"]["sensitivity"]["value"] == 0.5
    assert [s["method"] for s in result["error_rate"]["summaries"]] == [
        "human-only",
        "ppi",
        "ppi++",
        "union bound",
        "union bound (joint)",
    ]
    assert len(result["disagreements"]) == 2


def test_an_undeclared_audit_is_not_found(audited, api):
    _, _, hhem = audited
    response = api("manager").get(f"{BASE}/{hhem.pk}/")
    assert response.status_code == 404
    assert response.json()["code"] == "audit_not_configured"


def test_a_manager_declares_a_thresholded_audit(audited, api):
    _, _, hhem = audited
    body = {"score_threshold": 0.5, "flag_when": "<", "confidence": "0.9"}
    response = api("manager").post(f"{BASE}/{hhem.pk}/", body, format="json")
    assert response.status_code == 200
    assert response.json()["evaluator_positive"] == ["flag"]
    assert response.json()["result"]["declaration"]["confidence"] == "0.9"


def test_an_invalid_declaration_is_400(audited, api):
    _, _, hhem = audited
    body = {"confidence": "1.5"}
    response = api("manager").post(f"{BASE}/{hhem.pk}/", body, format="json")
    assert response.status_code == 400
    assert not AuditReport.objects.filter(evaluator=hhem).exists()


def test_another_projects_evaluator_is_not_found(audited, api):
    other = project_create(slug="other", name="Other")
    foreign = Evaluator.objects.create(project=other, name="x", version="1")
    response = api("manager").get(f"{BASE}/{foreign.pk}/")
    assert response.status_code == 404
    assert response.json()["code"] == "evaluator_not_found"


# -- audit samples -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("role", "read", "write"),
    [
        ("annotator", 403, 403),
        ("adjudicator", 200, 403),
        ("manager", 200, 201),
        ("nonmember", 404, 404),
        ("anonymous", 401, 401),
    ],
)
def test_roles_on_samples(audited, api, role, read, write):
    _, judge, _ = audited
    client = api(role)
    assert client.get(f"{BASE}/{judge.pk}/samples/").status_code == read
    body = {"size": 2, "seed": 3}
    assert client.post(f"{BASE}/{judge.pk}/samples/", body, format="json").status_code == write


def test_a_drawn_sample_as_json(audited, api):
    _, judge, _ = audited
    client = api("manager")
    created = client.post(
        f"{BASE}/{judge.pk}/samples/", {"size": 3, "seed": 7}, format="json"
    ).json()
    assert created["seed"] == 7 and len(created["members"]) == 3
    assert created["design"]["positive"]["inclusion_probability"] == pytest.approx(1 / 3)
    listed = client.get(f"{BASE}/{judge.pk}/samples/").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == created["id"]


def test_an_undeclared_audit_cannot_be_sampled(audited, api):
    _, _, hhem = audited
    response = api("manager").post(f"{BASE}/{hhem.pk}/samples/", {"size": 2, "seed": 1})
    assert response.status_code == 404
    assert response.json()["code"] == "audit_not_configured"


# -- anytime-valid figures ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("role", "status"),
    [("annotator", 403), ("adjudicator", 403), ("manager", 200), ("nonmember", 404)],
)
def test_only_managers_set_the_target(audited, api, role, status):
    _, judge, _ = audited
    response = api(role).post(f"{BASE}/{judge.pk}/target/", {"target": "0.2"}, format="json")
    assert response.status_code == status


def test_the_target_returns_the_report_with_its_stop_message(audited, api):
    _, judge, _ = audited
    client = api("manager")
    client.post(f"{BASE}/{judge.pk}/samples/", {"size": 6, "seed": 2}, format="json")
    data = client.post(f"{BASE}/{judge.pk}/target/", {"target": "0.9"}, format="json").json()
    assert data["anytime_target"] == "0.90000000"
    anytime = data["result"]["anytime"]
    assert anytime["kind"] == "anytime-valid" and anytime["target"] == 0.9
    bound = anytime["error_rate"]["upper_bound"]
    assert anytime["stop"]["stop"] is (bound < 0.9)
    assert f"upper bound {bound:.3f}" in anytime["stop"]["message"]
    assert len(anytime["planner"]) == 3
    # an adjudicator reads the same figures
    read = api("adjudicator").get(f"{BASE}/{judge.pk}/").json()
    assert read["result"]["anytime"]["stop"] == anytime["stop"]


def test_a_target_outside_the_open_unit_is_a_400_naming_the_field(audited, api):
    _, judge, _ = audited
    response = api("manager").post(f"{BASE}/{judge.pk}/target/", {"target": "1"}, format="json")
    assert response.status_code == 400
    assert "anytime_target" in str(response.json())
