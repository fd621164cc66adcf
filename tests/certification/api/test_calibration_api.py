"""REST API of calibration specs and runs: roles, validation, versions, runs and their report."""

from __future__ import annotations

import copy

import pytest

from certification.models import CalibrationRun, CalibrationSpec, RunStatus
from certification.services import calibration_run_execute, calibration_run_request
from labeling.services import project_create
from tests.conftest import module_data
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

BASE = "/api/projects/study/calibration"
BODY = {
    "name": "main",
    "method": "both",
    "alpha": "0.1",
    "delta": "0.05",
    "thresholds": [0.5, 0.9],
    "score_field": "acceptance_score",
    "selector": "mode",
}


@pytest.fixture(scope="module")
def _data_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """:func:`data`, written once per module (``module_data`` in tests/conftest.py)."""
    with module_data(django_db_blocker, tmp_path_factory.mktemp("releases")) as write:
        yield write(lambda: _data(project_create(slug="study", name="Study")))


@pytest.fixture
def project(_data_once, db):
    """The module's project, holding :func:`data`; each test runs in a savepoint rolled back
    after it, on a copy of the object."""
    return copy.deepcopy(_data_once)


@pytest.fixture
def data(project):
    return project


def _data(project):
    """Calibration and test answers, all resolved."""
    calibration = [
        rec(f"c{i}", [cand("a", answer="x", score=1.0, selected=True)]) for i in range(50)
    ]
    test = [rec(f"t{i}", [cand("a", answer="x", score=1.0, selected=True)]) for i in range(10)]
    return calibration_project(project, {"calibration": calibration, "test": test})


@pytest.fixture
def spec(data):
    return make_spec(data, method="both", selector="mode", thresholds=[0.5, 0.9])


@pytest.fixture
def done_run(spec):
    run = calibration_run_request(spec=spec, trigger="manual")
    return calibration_run_execute(run_id=run.pk)


# -- roles -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("role", "read", "write"),
    [
        ("annotator", 403, 403),
        ("adjudicator", 200, 403),
        ("manager", 200, 201),
        ("staff", 200, 201),
        ("nonmember", 404, 404),
        ("anonymous", 401, 401),
    ],
)
def test_roles_on_the_spec_list(data, api, role, read, write):
    client = api(role)
    assert client.get(f"{BASE}/specs/").status_code == read
    assert client.post(f"{BASE}/specs/", BODY, format="json").status_code == write


@pytest.mark.parametrize(
    ("role", "status"),
    [("annotator", 403), ("adjudicator", 200), ("manager", 200), ("nonmember", 404)],
)
def test_roles_on_reading_specs_and_runs(done_run, api, role, status):
    client = api(role)
    spec = done_run.spec
    assert client.get(f"{BASE}/specs/{spec.pk}/").status_code == status
    assert client.get(f"{BASE}/specs/{spec.pk}/runs/").status_code == status
    assert client.get(f"{BASE}/runs/{done_run.pk}/").status_code == status


@pytest.mark.parametrize("role", ["annotator", "adjudicator"])
def test_only_managers_write(spec, api, role):
    client = api(role)
    assert (
        client.patch(f"{BASE}/specs/{spec.pk}/", {"alpha": "0.2"}, format="json").status_code == 403
    )
    assert client.post(f"{BASE}/specs/{spec.pk}/revise/", {}, format="json").status_code == 403
    assert client.post(f"{BASE}/specs/{spec.pk}/runs/").status_code == 403
    assert not CalibrationRun.objects.exists()


def test_another_projects_objects_are_not_found(done_run, api):
    other = project_create(slug="other", name="Other")
    foreign = make_spec(other, name="theirs")
    foreign_run = calibration_run_request(spec=foreign, trigger="manual")
    client = api("manager")
    assert client.get(f"{BASE}/specs/{foreign.pk}/").status_code == 404
    assert client.post(f"{BASE}/specs/{foreign.pk}/runs/").status_code == 404
    assert client.get(f"{BASE}/runs/{foreign_run.pk}/").status_code == 404


# -- specs -------------------------------------------------------------------------------------
def test_create_returns_the_spec_with_its_hash(data, api):
    response = api("manager").post(f"{BASE}/specs/", BODY, format="json")
    assert response.status_code == 201
    body = response.json()
    spec = CalibrationSpec.objects.get()
    assert body["id"] == spec.pk and body["content_sha256"] == spec.content_sha256
    assert (body["version"], body["previous"], body["next_version"]) == (1, None, None)
    assert (body["alpha"], body["thresholds"], body["pending_as"]) == ("0.1", [0.5, 0.9], "exclude")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"alpha": "1.5"}, "alpha"),
        ({"delta": "0"}, "delta"),
        ({"thresholds": []}, "thresholds"),
        ({"score_field": "nope"}, "score_field"),
        ({"selector": "each_candidate"}, "selector"),
    ],
)
def test_an_invalid_field_is_named(data, api, change, field):
    response = api("manager").post(f"{BASE}/specs/", {**BODY, **change}, format="json")
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("invalid_spec", field)
    assert not CalibrationSpec.objects.exists()


def test_a_misspelt_field_is_refused_not_defaulted(data, api):
    response = api("manager").post(
        f"{BASE}/specs/", {**BODY, "aplha": "0.05", "unresolved": "exclude"}, format="json"
    )
    assert response.status_code == 400
    assert {e["field"] for e in response.json()["errors"]} >= {"aplha", "unresolved"}
    assert not CalibrationSpec.objects.exists()


def test_patch_changes_an_unused_spec_and_refuses_a_used_one(spec, api):
    client = api("manager")
    response = client.patch(f"{BASE}/specs/{spec.pk}/", {"alpha": "0.2"}, format="json")
    assert response.status_code == 200 and response.json()["alpha"] == "0.2"
    calibration_run_request(spec=spec, trigger="manual")
    response = client.patch(f"{BASE}/specs/{spec.pk}/", {"alpha": "0.3"}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "spec_frozen"


def test_revise_makes_a_new_version(done_run, api):
    spec = done_run.spec
    client = api("manager")
    response = client.post(f"{BASE}/specs/{spec.pk}/revise/", {"alpha": "0.2"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert (body["version"], body["previous"], body["alpha"]) == (2, spec.pk, "0.2")
    # the old one names its successor, and cannot be revised twice
    assert client.get(f"{BASE}/specs/{spec.pk}/").json()["next_version"] == body["id"]
    again = client.post(f"{BASE}/specs/{spec.pk}/revise/", {}, format="json")
    assert again.status_code == 409


def test_list_is_paginated(spec, api):
    body = api("adjudicator").get(f"{BASE}/specs/").json()
    assert body["count"] == 1 and body["results"][0]["id"] == spec.pk


# -- runs --------------------------------------------------------------------------------------
def test_starting_a_run_is_accepted_and_idempotent(spec, api, django_capture_on_commit_callbacks):
    client = api("manager")
    with django_capture_on_commit_callbacks(execute=True):
        first = client.post(f"{BASE}/specs/{spec.pk}/runs/")
    assert first.status_code == 202 and first.json()["status"] == "pending"
    # eager Celery in tests: the run was computed once the request's transaction committed
    run = CalibrationRun.objects.get(pk=first.json()["id"])
    assert run.status == RunStatus.DONE
    again = client.post(f"{BASE}/specs/{spec.pk}/runs/")
    assert again.status_code == 202 and again.json()["id"] == run.pk
    listed = client.get(f"{BASE}/specs/{spec.pk}/runs/").json()
    assert [r["id"] for r in listed["results"]] == [run.pk]


def test_the_run_report(done_run, api):
    body = api("adjudicator").get(f"{BASE}/runs/{done_run.pk}/").json()
    assert body["run"]["status"] == "done" and body["run"]["input_sha256"] == done_run.input_sha256
    assert body["spec"]["id"] == done_run.spec_id
    result = body["result"]
    assert result["selective_risk"]["chosen_threshold"] == 0.5  # ties: the earlier one
    assert result["conformal"]["threshold"]["value"] == 1.0
    assert [row["field"] for row in result["ledger"]] == [
        "population",
        "output_object",
        "admission_policy",
        "loss",
        "numerator",
        "denominator",
        "conditioning",
        "randomness",
        "parameters",
        "selection_correction",
        "assumptions",
        "composition_boundary",
    ]
    metric = result["heldout"]["report"]["metrics"][0]
    assert {"numerator", "denominator", "unit", "lower", "upper"} <= set(metric)
    assert "inputs" not in body


def test_the_inputs_snapshot_is_for_managers_only(done_run, api):
    url = f"{BASE}/runs/{done_run.pk}/?include=inputs"
    assert api("adjudicator").get(url).status_code == 403
    body = api("manager").get(url).json()
    assert body["inputs"] == done_run.inputs
    assert len(body["inputs"]["calibration"]) == 50


def test_a_pending_run_has_no_result(spec, api):
    run = calibration_run_request(spec=spec, trigger="manual")
    body = api("manager").get(f"{BASE}/runs/{run.pk}/").json()
    assert body["run"]["status"] == "pending" and body["result"] is None
