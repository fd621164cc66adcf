"""RCCS as a report of its own: API and page over a project's resolved labels (test client)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr

from labeling.services import project_create
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/rccs/"
PAGE = "/p/study/certification/rccs/"

# (key, label, R, C) per candidate; None label = not labelled yet (pending)
CALIBRATION = [
    ("c1", "admissible", 0.9, 1.0),
    ("c2", "admissible", 0.8, 0.5),
    ("c3", "inadmissible", 0.5, 0.8),
    ("c4", "inadmissible", 0.3, 0.2),
    ("c5", "admissible", 0.7, 0.9),
    ("c6", "abstained", 0.6, 0.6),
    ("c7", None, 0.4, 0.4),
    ("c8", "admissible", 0.95, None),
]
TEST = [("t1", "inadmissible", 0.9, 0.9), ("t2", "admissible", 0.6, 0.7)]


def _records(rows, prefix):
    return [
        rec(f"{prefix}{i}", [cand(key, answer="x", label=label, retrieval=r, confidence=c)])
        for i, (key, label, r, c) in enumerate(rows)
    ]


@pytest.fixture
def scored(project):
    calibration_project(
        project, {"calibration": _records(CALIBRATION, "qc"), "test": _records(TEST, "qt")}
    )
    return project


def _expected(rows):
    used = [(r, c, 1.0 if label == "admissible" else 0.0) for _, label, r, c in rows]
    used = [u for u in used if u[1] is not None]
    rc = np.array([r * c for r, c, _ in used])
    a = np.array([x for _, _, x in used])
    return len(used), pearsonr(rc, a).statistic, float(np.mean(np.abs(rc - a))), float(rc.mean())


def test_api_computes_rccs_from_the_current_resolved_labels(scored, api):
    # given: admissible/inadmissible candidates of both partitions; c8 lacks a confidence
    rows = [x for x in CALIBRATION + TEST if x[1] in ("admissible", "inadmissible")]
    n, r, error, mean_rc = _expected(rows)
    # when
    response = api("adjudicator").get(URL)
    # then
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["partition"] is None
    assert body["counts"] == {
        "candidates": 10,
        "with_retrieval": 10,
        "with_confidence": 9,
        "with_both": 9,
        "outcomes": {"abstained": 1, "admissible": 5, "inadmissible": 3, "pending": 1},
        "with_correctness": 8,
    }
    assert body["rccs"]["n"] == n == 7 and body["rccs"]["n_dropped"] == 1
    assert body["rccs"]["rccs_correlation"] == pytest.approx(r, rel=1e-12)
    assert body["rccs"]["confidence_calibration_error"] == pytest.approx(error, rel=1e-12)
    assert body["rccs"]["mean_rc"] == pytest.approx(mean_rc, rel=1e-12)


def test_api_restricts_to_one_partition(scored, api):
    rows = [x for x in CALIBRATION if x[1] in ("admissible", "inadmissible")]
    n, r, error, _ = _expected(rows)
    body = api("manager").get(URL, {"partition": "calibration"}).json()
    assert body["partition"] == "calibration" and body["counts"]["candidates"] == 8
    assert body["rccs"]["n"] == n == 5
    assert body["rccs"]["rccs_correlation"] == pytest.approx(r, rel=1e-12)
    assert body["rccs"]["confidence_calibration_error"] == pytest.approx(error, rel=1e-12)


def test_api_says_when_the_correlation_is_undefined(scored, api):
    # the test partition has 2 usable rows: a correlation needs 3
    body = api("manager").get(URL, {"partition": "test"}).json()
    assert body["rccs"]["n"] == 2 and body["rccs"]["rccs_correlation"] is None
    assert "3" in body["rccs"]["correlation_reason"]


def test_api_refuses_a_project_without_scores_with_a_clear_404(project, api):
    calibration_project(project, {"calibration": [rec("q1", [cand("a", answer="x")])]})
    response = api("manager").get(URL)
    assert response.status_code == 404
    body = response.json()
    assert body["code"] == "rccs_not_available"
    assert "retrieval score and a confidence" in body["detail"]


def test_api_refuses_an_unknown_partition_naming_it(scored, api):
    response = api("manager").get(URL, {"partition": "train"})
    assert response.status_code == 400
    assert "partition" in {e.get("field") for e in response.json()["errors"]}


@pytest.mark.parametrize(("role", "status"), [("annotator", 403), ("nonmember", 404)])
def test_api_is_for_reviewers(scored, api, role, status):
    assert api(role).get(URL).status_code == status


def test_another_projects_rccs_is_not_reached(scored, api):
    project_create(slug="other", name="Other")
    assert api("manager").get("/api/projects/other/rccs/").status_code == 404


def test_page_shows_figures_inputs_and_counts(scored, login):
    rows = [x for x in CALIBRATION + TEST if x[1] in ("admissible", "inadmissible")]
    _, r, _, _ = _expected(rows)
    response = login("adjudicator").get(PAGE)
    assert response.status_code == 200
    body = response.content.decode()
    assert f'id="rccs-correlation">{r:.4g}<' in body
    assert 'id="rccs-n">7<' in body
    assert "10 candidate answers; 10 with a retrieval score, 9 with a confidence" in body
    assert "abstained 1 · admissible 5 · inadmissible 3 · pending 1" in body


def test_page_says_why_there_is_no_rccs(project, login):
    calibration_project(project, {"calibration": [rec("q1", [cand("a", answer="x")])]})
    response = login("manager").get(PAGE)
    assert response.status_code == 200
    assert 'id="rccs-unavailable"' in response.content.decode()


def test_page_refuses_an_unknown_partition(scored, login):
    response = login("manager").get(PAGE, {"partition": "train"})
    assert response.status_code == 400 and "partition" in response.context["form"].errors


@pytest.mark.parametrize("role", ["annotator", "nonmember"])
def test_page_does_not_exist_for_annotators_and_non_members(scored, login, role):
    assert login(role).get(PAGE).status_code == 404


def test_the_calibration_page_links_to_rccs_and_the_calculator(scored, login):
    body = login("manager").get("/p/study/certification/").content.decode()
    assert f'href="{PAGE}"' in body and 'href="/certification/coverage-calculator/"' in body
