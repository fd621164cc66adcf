"""The drift watch of an applied certificate, through the apply API, the run API and its page.

The run (``tests.certification.apply_world``) certifies t = 0.9 on mode answers scoring 0.95
(admissible) or 0.6 (not); its calibration partition has 60 questions. Traffic like the test
partition keeps the watch quiet; traffic whose scores fell to 0.1 raises the alarm.
"""

from __future__ import annotations

import copy
import json
import logging

import pytest

from certification.models import AppliedScore, DriftWatch
from labeling.services import project_create
from tests.certification.apply_world import apply_project, apply_run, traffic
from tests.conftest import module_data

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def _data_once(django_db_setup, django_db_blocker, tmp_path_factory):
    with module_data(django_db_blocker, tmp_path_factory.mktemp("releases")) as write:
        yield write(lambda: apply_run(apply_project(project_create(slug="study", name="Study"))))


@pytest.fixture
def run(_data_once, db):
    return copy.deepcopy(_data_once)


@pytest.fixture
def project(run):
    return run.project


def _shifted(start, count, score=0.1):
    return [
        {"id": f"n{start + i}", "candidates": [{"answer": "x", "score": score, "selected": True}]}
        for i in range(count)
    ]


def _apply(client, run, questions, capture):
    url = f"/api/projects/study/calibration/runs/{run.pk}/apply/"
    with capture(execute=True):  # the fold is sent after the apply's commit
        response = client.post(url, {"questions": questions}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_apply_records_the_scores_of_its_decisions_and_no_text(
    run, api, django_capture_on_commit_callbacks
):
    # given the run's test questions sent as new traffic (30 questions, mode answer x or y)
    questions = traffic(run)
    # when they are applied
    body = _apply(api("adjudicator"), run, questions, django_capture_on_commit_callbacks)
    # then one row per decision holds the score of the answer the selector emitted, in order
    rows = list(AppliedScore.objects.filter(run=run).order_by("seq"))
    decided = [r["selective_risk"]["decisions"][0]["score"] for r in body["decisions"]]
    assert [row.seq for row in rows] == list(range(1, 31))
    assert [row.scores for row in rows] == [[score] for score in decided]
    # and nothing else of the request: no id, answer or text
    stored = json.dumps([[row.scores, row.seq] for row in rows])
    assert not any(c.isalpha() for c in stored)
    assert {f.name for f in AppliedScore._meta.get_fields()} == {
        "id",
        "run",
        "seq",
        "scores",
        "created_at",
    }
    # and the response shows the watch as it stood before this request's fold
    assert body["drift"]["status"] == "starting"
    assert body["drift"]["decisions_recorded"] == 30
    assert body["drift"]["threshold"] == pytest.approx(100.0)
    # and the fold that followed read them against the 60 calibration questions
    watch = DriftWatch.objects.get(run=run)
    assert (watch.folded, watch.observations, watch.n_reference) == (30, 30, 60)
    assert watch.crossed_seq is None


def test_traffic_like_the_calibration_data_raises_no_alarm(
    run, api, django_capture_on_commit_callbacks
):
    client = api("manager")
    for _ in range(3):
        body = _apply(client, run, traffic(run), django_capture_on_commit_callbacks)
    assert body["drift"]["status"] == "watching"
    assert body["drift"]["decisions_folded"] == 60
    assert body["drift"]["martingale"] < body["drift"]["threshold"]
    assert body["drift"]["crossed_at"] is None


def test_a_shifted_stream_raises_the_alarm_on_the_page_and_in_the_apis(
    run, api, login, django_capture_on_commit_callbacks, caplog
):
    # given traffic like the calibration data, then traffic whose scores fell to 0.1
    client = api("adjudicator")
    _apply(client, run, traffic(run), django_capture_on_commit_callbacks)
    with caplog.at_level(logging.WARNING, logger="certification.services.drift_fold"):
        for start in range(0, 60, 20):
            body = _apply(client, run, _shifted(start, 20), django_capture_on_commit_callbacks)
    # then the alarm fired once, logged once, at a decision of the shifted stream
    alarms = [r for r in caplog.records if r.getMessage() == "drift_watch.alarm"]
    assert len(alarms) == 1
    watch = DriftWatch.objects.get(run=run)
    assert 30 < watch.crossed_seq <= 90
    assert watch.log_martingale >= 0  # stays a record of the crossing
    # and the last apply response shows it (the fold of its own decisions follows it)
    assert body["drift"]["status"] == "alarm"
    # and the run API shows it, with the time and decision at which it crossed
    report = api("adjudicator").get(f"/api/projects/study/calibration/runs/{run.pk}/").json()
    drift = report["drift"]
    assert drift["status"] == "alarm"
    assert drift["crossed_at_decision"] == watch.crossed_seq
    assert drift["crossed_at"] == watch.crossed_at.isoformat()
    assert drift["martingale"] >= drift["threshold"] == pytest.approx(100.0)
    assert "no longer looks like the calibration data" in drift["meaning"]
    # and the run page says what it means
    page = login("manager").get(f"/p/study/certification/runs/{run.pk}/")
    text = page.content.decode()
    assert page.status_code == 200
    assert 'id="drift-alarm"' in text
    assert "the certificate&#x27;s guarantee may not hold" in text
    assert f"decision {watch.crossed_seq}" in text


def test_a_run_never_applied_shows_no_traffic(run, api, login):
    drift = api("adjudicator").get(f"/api/projects/study/calibration/runs/{run.pk}/").json()
    assert drift["drift"]["status"] == "no_traffic"
    page = login("adjudicator").get(f"/p/study/certification/runs/{run.pk}/")
    assert 'data-status="no_traffic"' in page.content.decode()


def test_a_refused_body_records_nothing(run, api):
    url = f"/api/projects/study/calibration/runs/{run.pk}/apply/"
    bad = {"questions": [{"id": 1, "candidates": [{"answer": "x", "score": "high"}]}]}
    assert api("adjudicator").post(url, bad, format="json").status_code == 400
    assert not AppliedScore.objects.filter(run=run).exists()
    assert not DriftWatch.objects.filter(run=run).exists()
