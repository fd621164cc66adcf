"""The run page's downloads of per-question test decisions (CSV and JSON)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from certification.models import CalibrationRun
from labeling.release_format import csv_cell_value
from labeling.services import project_create
from tests.certification.apply_world import apply_project, apply_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    return apply_project(project_create(slug="study", name="Study"))


@pytest.fixture
def run(project):
    return apply_run(project)


def _url(run, kind):
    return f"/p/study/certification/runs/{run.pk}/test-decisions.{kind}"


def test_the_csv_has_one_row_per_test_question_as_the_heldout_report_counts(run, login):
    response = login("adjudicator").get(_url(run, "csv"))
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        f'attachment; filename="study-run-{run.pk}-test-decisions.csv"'
    )
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8"))))
    assert len(rows) == 30
    accepted = [r for r in rows if r["decision"] == "accept"]
    assert len(accepted) == 25 and {r["loss"] for r in accepted} == {"0"}
    assert {r["reason"] for r in rows if r["decision"] == "abstain"} == {"score_fails_threshold"}
    assert sum(r["set_covers"] == "True" for r in rows) == 25
    assert {json.loads(csv_cell_value(r["set_classes_json"])) == ["x"] for r in rows} == {True}
    assert {r["run"] for r in rows} == {str(run.pk)}
    assert {r["spec_sha256"] for r in rows} == {run.spec_sha256}


def test_the_json_holds_the_decision_records(run, login):
    response = login("manager").get(_url(run, "json"))
    assert response.status_code == 200
    records = json.loads(response.content)
    assert [r["external_id"] for r in records] == [f"t{i}" for i in range(30)]
    assert records[1]["prediction_set"]["classes"] == ["x"]


def test_a_run_that_is_not_done_has_no_download(run, login):
    CalibrationRun.objects.filter(pk=run.pk).update(status="running")
    assert login("manager").get(_url(run, "json")).status_code == 404


def test_the_run_page_links_the_downloads(run, login):
    page = login("adjudicator").get(f"/p/study/certification/runs/{run.pk}/").content.decode()
    assert _url(run, "csv") in page and _url(run, "json") in page
