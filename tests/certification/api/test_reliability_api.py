"""The reliability API and page: managers only, the stored figures, freshness, the schema."""

from __future__ import annotations

import pytest
from django.utils.html import escape
from rest_framework.test import APIClient

from certification.services import reliability_recompute
from certification.stats.reliability import NOT_IDENTIFIED
from labeling.models import Role
from labeling.services.tokens import api_token_create
from tests.certification.services.test_reliability_recompute import (  # noqa: F401
    ADM,
    INADM,
    world,
)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/reliability/"


@pytest.fixture
def api(member):
    def make(role):
        user = member(role)
        client = APIClient()
        client.credentials(
            HTTP_AUTHORIZATION=f"Token {api_token_create(user=user, name='t').secret}"
        )
        return client, user

    return make


def test_before_the_first_computation_everything_is_empty(project, api):
    client, _ = api(Role.MANAGER)
    body = client.get(URL).json()
    assert body["computed_at"] is None and body["people"] == []
    assert body["freshness"]["kind"] == "reliability"
    assert body["freshness"]["covered_generation"] == 0


def test_managers_read_the_figures_with_names(project, world, api):  # noqa: F811
    reliability_recompute(project_id=project.pk)
    client, _ = api(Role.MANAGER)
    body = client.get(URL).json()
    people = {p["name"]: p for p in body["people"]}
    bob = people[world["bob"].username]
    assert bob["rater"] == f"user:{world['bob'].pk}"
    accuracy = bob["levels"]["answer"]["resolutions"]["accuracy"]
    assert (accuracy["numerator"], accuracy["denominator"]) == (2, 4)
    assert body["threshold"] == 0.8 and body["confidence"] == 0.95
    # kappa on 4 resolved items: given, its interval flagged as not meaningful (k labels need
    # about 2k² units), as on the agreement panel
    kappa = bob["levels"]["answer"]["resolutions"]["kappa"]
    assert kappa["value"] is not None
    assert kappa["interval_reason"].startswith("not meaningful")
    assert set(body["dawid_skene"]) == {"answer", "claim"}
    model = body["dawid_skene"]["answer"]
    assert model["reason"] is None and model["converged"] is True
    assert model["change"] < model["tol"] == 1e-6 and model["max_iter"] == 10_000
    # computed outside the background job: the import's change is not covered, and the
    # figures do not claim to be current
    assert body["freshness"]["current"] is False
    assert body["freshness"]["newer_changes"] >= 1


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR])
def test_other_roles_are_refused(project, api, role):
    client, _ = api(role)
    assert client.get(URL).status_code == 403
    assert client.post(URL + "recompute/").status_code == 403


def test_the_page_shows_people_flags_alpha_and_the_model(project, world, login):  # noqa: F811
    reliability_recompute(project_id=project.pk)
    page = login("manager").get("/p/study/certification/reliability/")
    assert page.status_code == 200
    html = page.content.decode()
    assert world["bob"].username in html
    assert 'id="reliability-people"' in html and 'id="reliability-alpha"' in html
    assert "Model estimate (Dawid–Skene)" in html
    assert "(2/4)" in html  # bob's accuracy against the resolutions, as k/n
    assert "[1.000, 1.000]" not in html  # no zero-width interval claiming certainty
    assert "annotators answer independently of each other given the true label" in html


def test_the_page_before_any_computation_says_so(project, login):
    page = login("manager").get("/p/study/certification/reliability/")
    assert page.status_code == 200
    assert 'id="no-reliability"' in page.content.decode()


def test_the_response_matches_the_openapi_schema(project, world, api, client):  # noqa: F811
    reliability_recompute(project_id=project.pk)
    schema = client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/projects/{slug}/reliability/"]["get"]
    assert {"200", "403", "404"} <= set(operation["responses"])
    assert "/api/projects/{slug}/reliability/recompute/" in schema["paths"]
    component = schema["components"]["schemas"]["ReliabilityReport"]
    manager, _ = api(Role.MANAGER)
    body = manager.get(URL).json()
    assert set(component["properties"]) == set(body)
    person = schema["components"]["schemas"]["ReliabilityPerson"]
    assert set(person["properties"]) == set(body["people"][0])


def _json_schema(node):
    """OpenAPI 3.0 ``nullable`` as JSON Schema (``anyOf`` with null); refs kept."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def test_the_whole_response_validates_against_its_schema(project, world, api, client):  # noqa: F811
    import jsonschema

    reliability_recompute(project_id=project.pk)
    schema = client.get("/api/schema/", {"format": "json"}).json()
    manager, _ = api(Role.MANAGER)
    body = manager.get(URL).json()
    document = {
        "$ref": "#/components/schemas/ReliabilityReport",
        "components": _json_schema(schema["components"]),
    }
    jsonschema.validate(body, document)
    # and the check bites: a wrong type deep inside is refused
    body["people"][0]["levels"]["answer"]["disputed"]["numerator"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, document)


def test_a_model_stopped_at_its_cap_says_so_in_the_api_and_on_the_page(
    project,
    world,  # noqa: F811
    api,
    login,
    monkeypatch,
):
    # given an iteration cap of 1: EM stops before its posteriors settle
    monkeypatch.setattr("certification.services.reliability.DAWID_SKENE_MAX_ITER", 1)
    reliability_recompute(project_id=project.pk)
    client, _ = api(Role.MANAGER)
    model = client.get(URL).json()["dawid_skene"]["answer"]
    assert (model["converged"], model["iterations"], model["max_iter"]) == (False, 1, 1)
    assert model["change"] >= model["tol"]
    html = login("manager").get("/p/study/certification/reliability/").content.decode()
    assert "Not converged:" in html and "cap of 1 iterations" in html


def test_one_annotator_gives_no_model_and_the_reason_in_the_api_and_on_the_page(
    project, items, cast_vote, api, login
):
    annotator = UserFactory()
    for index, label in enumerate((ADM, INADM)):
        cast_vote(items[index], annotator, label)
    reliability_recompute(project_id=project.pk)
    client, _ = api(Role.MANAGER)
    assert client.get(URL).json()["dawid_skene"]["answer"] == {"reason": NOT_IDENTIFIED}
    html = login("manager").get("/p/study/certification/reliability/").content.decode()
    assert f"No estimate: {escape(NOT_IDENTIFIED)}." in html
