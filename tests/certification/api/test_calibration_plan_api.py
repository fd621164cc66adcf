"""The label budget plan through the REST API: shape, figures, roles, scoping and bad input."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from scipy.stats import binom

from certification.stats.conformal import conformal_index
from certification.stats.errors import StatsError
from labeling.services import project_create
from tests.conftest import module_data
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

BASE = "/api/projects/study/calibration"


@pytest.fixture(scope="module")
def _data_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """:func:`_data`, written once per module (``module_data`` in tests/conftest.py)."""
    with module_data(django_db_blocker, tmp_path_factory.mktemp("releases")) as write:
        yield write(lambda: _data(project_create(slug="study", name="Study")))


@pytest.fixture
def project(_data_once, db):
    """The module's project; each test runs in a savepoint rolled back after it."""
    return copy.deepcopy(_data_once)


def _data(project):
    """24 resolved calibration questions (2 wrong), 3 still pending, 5 test questions."""
    right = [rec(f"c{i}", [cand("a", answer="x", score=0.95, selected=True)]) for i in range(22)]
    wrong = [
        rec(f"w{i}", [cand("a", answer="x", score=0.95, selected=True, label="inadmissible")])
        for i in range(2)
    ]
    pending = [
        rec(f"p{i}", [cand("a", answer="x", score=0.95, selected=True, label=None)])
        for i in range(3)
    ]
    test = [rec(f"t{i}", [cand("a", answer="x", score=0.95, selected=True)]) for i in range(5)]
    return calibration_project(project, {"calibration": right + wrong + pending, "test": test})


@pytest.fixture
def spec(project):
    return make_spec(project, method="both", selector="mode", thresholds=[0.5, 0.9])


def first_passing(n, k, alpha, level):
    """Brute force: the first N with P[Bin(n + N, alpha) <= ceil(k (n + N) / n)] <= level."""
    return next(
        more
        for more in range(10_000)
        if binom.cdf(math.ceil(k * (n + more) / n), n + more, alpha) <= level
    )


def test_a_spec_that_certifies_nothing_reads_how_many_more_labels_it_needs(spec, api):
    response = api("manager").get(f"{BASE}/specs/{spec.pk}/plan/")
    assert response.status_code == 200
    body = response.json()
    assert body["is_certificate"] is False and body["notice"].startswith(
        "A plan is not a certificate"
    )
    assert body["spec"] == {
        "id": spec.pk,
        "name": "main",
        "version": 1,
        "content_sha256": spec.content_sha256,
    }
    assert (body["pending"], body["n_more"], body["budget"]) == (3, None, 100_000)
    assert (body["questions"], body["candidates_per_question"]) == (27, 1)
    s = body["selective_risk"]
    # both thresholds accept all 24 resolved questions, 2 of them wrong (rate 1/12 < 0.1)
    assert [(r["denominator"], r["errors"], r["certified_now"]) for r in s["rows"]] == [
        (24, 2, False),
        (24, 2, False),
    ]
    needed = first_passing(24, 2, 0.1, 0.025)
    assert [r["additional"] for r in s["rows"]] == [needed, needed]
    assert (s["certified_now"], s["fewest_index"], s["fewest_additional"]) == (0, 0, needed)
    assert s["rows"][0]["planned_denominator"] == 24 + needed
    assert s["zero_error_minimum"] == 36 and s["unit"] == "question"
    assert s["rows"][0]["p_value"] == pytest.approx(binom.cdf(2, 24, 0.1), rel=1e-12)
    c = body["conformal"]
    # k = ceil(25 * 0.9) = 23 > 22 solvable: M* infinite now; finite once 22 + floor(22 N / 24)
    # reaches k(24 + N)
    expected = next(m for m in range(1000) if 22 + m * 22 // 24 >= conformal_index(24 + m, "0.1"))
    assert (c["finite_now"], c["k"], c["n_finite"], c["additional"]) == (False, 23, 22, expected)
    assert c["reliability_now"] == "22/25"


def test_the_chance_with_n_more_is_the_exact_binomial(spec, api):
    body = api("adjudicator").get(f"{BASE}/specs/{spec.pk}/plan/", {"n_more": 50}).json()
    assert body["n_more"] == 50
    # every new question is accepted; errors ~ Bin(50, 2/24); certify iff 2 + E <= e_max(74)
    e_max = max(e for e in range(75) if binom.cdf(e, 74, 0.1) <= 0.025)
    expected = binom.cdf(e_max - 2, 50, 2 / 24)
    assert body["selective_risk"]["rows"][0]["probability_at_n_more"] == pytest.approx(
        expected, rel=1e-12
    )
    needed = conformal_index(74, "0.1") - 22
    finite = binom.sf(needed - 1, 50, 22 / 24)
    assert body["conformal"]["probability_at_n_more"] == pytest.approx(finite, rel=1e-12)
    assert body["conformal"]["expected_reliability_at_n_more"] == pytest.approx(
        22 * 74 / (24 * 75), rel=1e-12
    )


@pytest.mark.parametrize(
    ("role", "status"),
    [
        ("annotator", 403),
        ("adjudicator", 200),
        ("manager", 200),
        ("staff", 200),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_who_reads_the_plan_is_who_reads_the_spec(spec, api, role, status):
    client = api(role)
    assert client.get(f"{BASE}/specs/{spec.pk}/plan/").status_code == status
    if role != "anonymous":
        assert client.get(f"{BASE}/specs/{spec.pk}/").status_code == status


def test_another_projects_spec_is_not_found(spec, api):
    foreign = make_spec(project_create(slug="other", name="Other"), name="theirs")
    assert api("manager").get(f"{BASE}/specs/{foreign.pk}/plan/").status_code == 404
    assert api("manager").get(f"{BASE}/specs/{spec.pk + 1000}/plan/").status_code == 404


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ({"n_more": "ten"}, "n_more"),
        ({"n_more": "-1"}, "n_more"),
        ({"n_more": "100001"}, "n_more"),
        ({"n_more": ""}, "n_more"),
        ({"nmore": "5"}, "nmore"),
    ],
)
def test_bad_query_is_a_400_naming_the_parameter(spec, api, query, name):
    response = api("manager").get(f"{BASE}/specs/{spec.pk}/plan/", query)
    assert response.status_code == 400
    assert name in str(response.json())


def test_the_schema_documents_the_plan(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/projects/{slug}/calibration/specs/{spec_id}/plan/"]["get"]
    assert operation["operationId"] == "calibration_specs_plan"
    assert {"200", "400", "403", "404"} <= set(operation["responses"])
    (n_more,) = [p for p in operation["parameters"] if p["name"] == "n_more"]
    assert (n_more["schema"]["minimum"], n_more["schema"]["maximum"]) == (0, 100_000)
    assert "CalibrationPlan" in schema["components"]["schemas"]


def test_the_largest_budget_is_answered(spec, api):
    # n_more at its maximum: the exact sum still runs (each new question is accepted here)
    body = api("manager").get(f"{BASE}/specs/{spec.pk}/plan/", {"n_more": 100_000}).json()
    total = 24 + 100_000
    cdf = binom.cdf(np.arange(total + 1), total, 0.1)
    e_max = int(np.flatnonzero(cdf <= 0.025)[-1])
    expected = binom.cdf(e_max - 2, 100_000, 2 / 24)
    assert body["selective_risk"]["rows"][0]["probability_at_n_more"] == pytest.approx(
        expected, rel=1e-9, abs=1e-12
    )


def test_a_statistics_error_on_the_inputs_is_a_409_not_a_500(spec, api, monkeypatch):
    # the inputs are validated when imported; a statistic failing on them anyway (as it would
    # fail a run) is reported, not raised
    def failing(**kwargs):
        raise StatsError("scores must not contain NaN")

    monkeypatch.setattr("certification.certificates.plan.plan_compute", failing)
    response = api("manager").get(f"{BASE}/specs/{spec.pk}/plan/")
    assert response.status_code == 409
    assert response.json()["code"] == "plan_unavailable"
    assert "scores must not contain NaN" in response.json()["detail"]


def test_a_bounded_loss_spec_says_it_is_not_planned(project, api):
    # a bounded loss is certified with the Hoeffding-Bentkus p-value, which the planner (exact
    # binomial) does not cover: a 409 saying so, and the page says the same
    bounded = make_spec(
        project,
        name="bounded",
        loss={"kind": "bounded", "source": "unsupported_claim_share"},
        thresholds=[0.5],
    )
    response = api("manager").get(f"{BASE}/specs/{bounded.pk}/plan/")
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "plan_unavailable"
    assert "Hoeffding-Bentkus" in response.json()["detail"]
