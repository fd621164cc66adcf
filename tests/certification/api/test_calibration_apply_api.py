"""POST /api/projects/<slug>/calibration/runs/<id>/apply/ and ``manage.py apply_certificate``.

A run of a spec with both methods certifies t = 0.9 (mode answers scoring 0.95 are admissible,
the ones scoring 0.6 are not) and M* = 1 (one question in six has no admissible answer, alpha
0.2). Its certificate is applied to the test partition's questions sent as new traffic.
"""

from __future__ import annotations

import copy
import io
import json

import pytest
from django.core.management import CommandError, call_command

from certification.certificates import STATS_VERSION
from certification.certificates.ledger import ledger_sha256
from certification.models import CalibrationRun
from certification.services import calibration_run_execute, calibration_run_request
from labeling.services import project_create
from tests.certification.apply_world import apply_project, traffic
from tests.conftest import module_data
from tests.factories import make_spec

pytestmark = pytest.mark.django_db

BASE = "/api/projects/study/calibration/runs"


@pytest.fixture(scope="module")
def _data_once(django_db_setup, django_db_blocker, tmp_path_factory):
    with module_data(django_db_blocker, tmp_path_factory.mktemp("releases")) as write:
        yield write(lambda: apply_project(project_create(slug="study", name="Study")))


@pytest.fixture
def project(_data_once, db):
    return copy.deepcopy(_data_once)


@pytest.fixture
def data(project):
    return project


def _run(project, **fields):
    values = {"method": "both", "selector": "mode", "alpha": "0.2", "thresholds": [0.5, 0.9]}
    spec = make_spec(project, **{**values, **fields})
    return calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)


@pytest.fixture
def run(data):
    return _run(data)


def _metric(run, name):
    return next(m for m in run.result["heldout"]["report"]["metrics"] if m["name"] == name)


def test_applying_to_the_test_questions_reproduces_the_heldout_figures(run, api):
    # given the run certifies t = 0.9 and M* = 1
    assert run.result["selective_risk"]["chosen_threshold"] == 0.9
    assert run.result["conformal"]["threshold"]["value"] == 1
    # when its test questions are sent as new traffic
    response = api("adjudicator").post(
        f"{BASE}/{run.pk}/apply/", {"questions": traffic(run)}, format="json"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    # then acceptance, errors, set coverage and set sizes are the held-out report's
    labels = {
        q["external_id"]: {c["answer"]: c["outcome"] for c in q["candidates"]}
        for q in run.inputs["test"]
    }
    accepted = [
        (r["question"], r["selective_risk"]["decisions"][0]["answer"])
        for r in body["decisions"]
        if r["selective_risk"]["decisions"][0]["decision"] == "accept"
    ]
    errors = sum(labels[q][answer] != "admissible" for q, answer in accepted)
    covered = sum(
        any(labels[r["question"]][a] == "admissible" for a in r["prediction_set"]["classes"])
        for r in body["decisions"]
    )
    sizes = sorted({r["prediction_set"]["size"] for r in body["decisions"]})
    assert (len(accepted), errors) == (25, 0)
    assert len(accepted) == _metric(run, "answer_rate")["numerator"]
    assert errors == _metric(run, "emitted_answer_risk")["numerator"]
    assert covered == _metric(run, "set_coverage")["numerator"] == 25
    assert [[1, 30]] == run.result["heldout"]["report"]["set_sizes"]["counts"]
    assert sizes == [1]
    # and every decision names its certificate
    reference = {
        "run": run.pk,
        "spec_sha256": run.spec_sha256,
        "input_sha256": run.input_sha256,
        "ledger_sha256": ledger_sha256(run.result["ledger"]),
    }
    assert body["certificate"] == {**reference, "method": "both", "threshold": 0.9, "m_star": 1}
    assert all(r["certificate"] == reference for r in body["decisions"])


@pytest.mark.parametrize(
    ("role", "status"),
    [("annotator", 403), ("adjudicator", 200), ("manager", 200), ("nonmember", 404)],
)
def test_reviewers_apply_and_annotators_do_not(run, api, role, status):
    body = {"questions": [{"id": 1, "candidates": [{"answer": "x", "score": 1}]}]}
    assert api(role).post(f"{BASE}/{run.pk}/apply/", body, format="json").status_code == status


@pytest.mark.parametrize(
    ("questions", "field", "words"),
    [
        ([{"id": "q1", "candidates": [{"answer": "x"}]},
          {"id": "q2", "candidates": [{"answer": "x", "score": "high"}]}],
         "questions[1].candidates[0].score", "question 'q2': must be a number or null"),
        ([{"id": "q1", "candidates": [{"score": 0.5}]}], "questions[0].candidates[0].answer",
         "is required"),
        ([{"id": "q1", "candidates": [{"answer": "x", "confidence": 0.5}]}],
         "questions[0].candidates[0].confidence", "unknown field"),
        ([{"id": "q1", "candidates": []}], "questions[0].candidates", "non-empty"),
        ([{"candidates": [{"answer": "x"}]}], "questions[0].id", "is required"),
        ([{"id": 3, "candidates": [{"answer": "x"}]}, {"id": 3, "candidates": [{"answer": "y"}]}],
         "questions[1].id", "is also question 0"),
        (["q1"], "questions[0]", "must be an object"),
        # a lone surrogate cannot be written back as UTF-8: refused, never echoed
        ([{"id": "a\ud800", "candidates": [{"answer": "x"}]}], "questions[0].id",
         "surrogate characters are not allowed: U+D800"),
        ([{"id": "q1", "candidates": [{"answer": "\udfff"}]}], "questions[0].candidates[0].answer",
         "surrogate characters are not allowed: U+DFFF"),
        ([{"id": "q1", "candidates": [{"id": "\udfff", "answer": "x"}]}],
         "questions[0].candidates[0].id", "surrogate"),
        ([{"id": "q1", "candidates": [{"answer": "x", "b\ud800": 1}]}],
         "questions[0].candidates[0].b\ufffd", "unknown field"),
    ],
)  # fmt: skip
def test_an_invalid_question_is_400_naming_it_and_its_field(run, api, questions, field, words):
    # json.dumps escapes a lone surrogate as \ud800, as a client's JSON would
    response = api("manager").post(
        f"{BASE}/{run.pk}/apply/",
        json.dumps({"questions": questions}),
        content_type="application/json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == field
    assert words in body["detail"]


@pytest.mark.parametrize(
    "body", [{}, {"questions": []}, {"questions": "q1"}, [1, 2], {"questions": [{}] * 1001}]
)
def test_a_malformed_or_oversized_body_is_400(run, api, body):
    response = api("manager").post(f"{BASE}/{run.pk}/apply/", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"]


@pytest.mark.parametrize("key", ["question", "foo", "x\ud800"])
def test_a_key_beside_questions_is_refused(run, api, key):
    body = {key: 1, "questions": [{"id": "q1", "candidates": [{"answer": "x"}]}]}
    response = api("manager").post(
        f"{BASE}/{run.pk}/apply/", json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400
    assert "unknown field (allowed: method, questions)" in response.json()["detail"]


def test_a_run_without_a_certified_operating_point_is_409_saying_why(data, api):
    run = _run(data, method="selective_risk", alpha="0.01", thresholds=[0.5])
    response = api("manager").post(
        f"{BASE}/{run.pk}/apply/",
        {"questions": [{"id": 1, "candidates": [{"score": 1, "selected": True}]}]},
        format="json",
    )
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "run_not_applicable"
    assert "no certified operating point" in body["detail"]
    assert run.result["selective_risk"]["reason"] in body["detail"]


def test_a_pending_run_or_one_of_older_statistics_is_409(run, api, data):
    body = {"questions": [{"id": 1, "candidates": [{"answer": "x", "score": 1}]}]}
    CalibrationRun.objects.filter(pk=run.pk).update(stats_version=STATS_VERSION - 1)
    response = api("manager").post(f"{BASE}/{run.pk}/apply/", body, format="json")
    assert response.status_code == 409
    assert f"statistics version {STATS_VERSION - 1}" in response.json()["detail"]
    CalibrationRun.objects.filter(pk=run.pk).update(stats_version=STATS_VERSION, status="pending")
    response = api("manager").post(f"{BASE}/{run.pk}/apply/", body, format="json")
    assert response.status_code == 409
    assert "is pending, not done" in response.json()["detail"]


def test_another_projects_run_is_404(run, api):
    other = project_create(slug="other", name="Other")
    foreign = calibration_run_request(spec=make_spec(other, name="theirs"), trigger="manual")
    body = {"questions": [{"id": 1, "candidates": [{"answer": "x"}]}]}
    assert api("manager").post(f"{BASE}/{foreign.pk}/apply/", body, format="json").status_code == (
        404
    )


def test_the_schema_documents_the_endpoint(api):
    schema = api("manager").get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    document = json.loads(schema.content)
    operation = document["paths"]["/api/projects/{slug}/calibration/runs/{run_id}/apply/"]["post"]
    assert operation["operationId"] == "calibration_runs_apply"
    assert {"200", "400", "403", "404", "409"} <= set(operation["responses"])
    body = document["components"]["schemas"]["CertificateApplyInputRequest"]
    assert set(body["properties"]) == {"questions", "method"}
    question = document["components"]["schemas"]["CertificateApplyQuestionRequest"]
    assert set(question["properties"]) == {"id", "candidates"}
    candidate = document["components"]["schemas"]["CertificateApplyCandidateRequest"]
    assert set(candidate["properties"]) == {"id", "answer", "score", "selected"}


# -- the command -------------------------------------------------------------------------------
def test_the_command_writes_the_same_decisions_as_the_api(run, api, tmp_path):
    questions = traffic(run)
    source = tmp_path / "questions.jsonl"
    source.write_text("\n".join(json.dumps(q) for q in questions) + "\n\n", encoding="utf-8")
    target = tmp_path / "decisions.jsonl"
    call_command(
        "apply_certificate",
        "--project",
        "study",
        "--run",
        str(run.pk),
        "--input",
        str(source),
        "--output",
        str(target),
        stderr=io.StringIO(),
    )
    written = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    response = api("manager").post(
        f"{BASE}/{run.pk}/apply/", {"questions": questions}, format="json"
    )
    assert written == response.json()["decisions"]
    assert len(written) == 30


def test_the_command_reads_stdin_and_writes_stdout(run, monkeypatch):
    line = json.dumps({"id": "new", "candidates": [{"answer": "x", "score": 0.95}]})
    monkeypatch.setattr("sys.stdin", io.StringIO(line + "\n"))
    out = io.StringIO()
    call_command("apply_certificate", "--project", "study", "--run", str(run.pk), stdout=out)
    record = json.loads(out.getvalue())
    assert record["question"] == "new"
    assert record["selective_risk"]["decisions"][0]["decision"] == "accept"
    assert record["prediction_set"]["classes"] == ["x"]


def test_the_command_names_each_bad_line_and_field_and_writes_nothing(run, tmp_path):
    source = tmp_path / "questions.jsonl"
    source.write_text(
        "\n".join(
            [
                json.dumps({"id": "ok", "candidates": [{"answer": "x"}]}),
                "{not json",
                json.dumps({"id": "bad", "candidates": [{"answer": "x", "score": True}]}),
                json.dumps({"id": "ok", "candidates": [{"answer": "y"}]}),
                json.dumps({"id": "a\ud800", "candidates": [{"answer": "x"}]}),
            ]
        ),
        encoding="utf-8",
    )
    target = tmp_path / "decisions.jsonl"
    with pytest.raises(CommandError) as refused:
        call_command(
            "apply_certificate",
            "--project",
            "study",
            "--run",
            str(run.pk),
            "--input",
            str(source),
            "--output",
            str(target),
        )
    message = str(refused.value)
    assert "line 2: not JSON" in message
    assert "line 3: candidates[0].score: must be a number or null" in message
    assert "line 4: id: 'ok' is also line 1" in message
    assert "line 5: id: surrogate characters are not allowed: U+D800" in message
    assert not target.exists()


def test_the_command_refuses_a_run_that_certifies_nothing(data):
    run = _run(data, method="selective_risk", alpha="0.01", thresholds=[0.5])
    with pytest.raises(CommandError, match="no certified operating point"):
        call_command("apply_certificate", "--project", "study", "--run", str(run.pk))


# -- a spec with both methods whose selective-risk half certifies nothing ---------------------
@pytest.fixture
def half_run(data):
    # t = 0.5 accepts the 10 wrong answers of 60 (rate 1/6 < 0.2, yet p = 0.3 > 0.05): no
    # certified operating point; M* = 1 still holds at alpha 0.2
    return _run(data, thresholds=[0.5])


def test_each_method_of_a_both_run_is_reported_on_its_own(half_run, api):
    from scipy.stats import binom

    selective = half_run.result["selective_risk"]
    assert selective["chosen_threshold"] is None
    assert selective["rows"][0]["p_value"] == pytest.approx(binom.cdf(10, 60, 0.2), rel=1e-9)
    assert half_run.result["conformal"]["threshold"]["value"] == 1
    report = api("adjudicator").get(f"{BASE}/{half_run.pk}/").json()
    assert report["methods"] == {
        "selective_risk": {
            "certified": False,
            "reason": f"no certified operating point: {selective['reason']}",
        },
        "conformal_set": {"certified": True, "reason": None},
    }


def test_apply_refuses_only_the_method_that_certifies_nothing(half_run, api):
    questions = traffic(half_run)
    url = f"{BASE}/{half_run.pk}/apply/"
    # the spec's methods together: 409, naming the one to apply alone
    both = api("manager").post(url, {"questions": questions}, format="json")
    assert both.status_code == 409
    assert "no certified operating point" in both.json()["detail"]
    assert "apply it alone with method 'conformal_set'" in both.json()["detail"]
    # the selective-risk half alone: 409
    selective = api("manager").post(
        url, {"questions": questions, "method": "selective_risk"}, format="json"
    )
    assert selective.status_code == 409
    assert "no certified operating point" in selective.json()["detail"]
    # the conformal half alone: the sets, as the held-out report counts them
    sets = api("manager").post(
        url, {"questions": questions, "method": "conformal_set"}, format="json"
    )
    assert sets.status_code == 200, sets.json()
    body = sets.json()
    assert body["certificate"]["method"] == "conformal_set"
    assert (body["certificate"]["threshold"], body["certificate"]["m_star"]) == (None, 1)
    assert all("selective_risk" not in r for r in body["decisions"])
    labels = {
        q["external_id"]: {c["answer"]: c["outcome"] for c in q["candidates"]}
        for q in half_run.inputs["test"]
    }
    covered = sum(
        any(labels[r["question"]][a] == "admissible" for a in r["prediction_set"]["classes"])
        for r in body["decisions"]
    )
    assert covered == _metric(half_run, "set_coverage")["numerator"] == 25


@pytest.mark.parametrize(
    ("method", "fields", "words"),
    [
        ("sets", {}, '"sets" is not a valid choice'),
        ("selective_risk", {"method": "conformal_set", "thresholds": []},
         "'selective_risk' is not a method of calibration run"),
    ],
)  # fmt: skip
def test_an_unknown_or_foreign_method_is_400(data, api, method, fields, words):
    run = _run(data, name="other", **fields)
    body = {"questions": [{"id": 1, "candidates": [{"answer": "x"}]}], "method": method}
    response = api("manager").post(f"{BASE}/{run.pk}/apply/", body, format="json")
    assert response.status_code == 400
    body = response.json()
    # a serializer error lists its fields, a service error names its one field
    assert "method" in {e["field"] for e in body.get("errors", [])} | {body.get("field")}
    assert words in body["detail"]


def test_the_command_applies_one_method_alone(half_run, monkeypatch):
    with pytest.raises(CommandError, match="apply it alone with method 'conformal_set'"):
        call_command("apply_certificate", "--project", "study", "--run", str(half_run.pk))
    line = json.dumps({"id": "new", "candidates": [{"answer": "x", "score": 0.95}]})
    monkeypatch.setattr("sys.stdin", io.StringIO(line + "\n"))
    out = io.StringIO()
    call_command(
        "apply_certificate",
        *("--project", "study", "--run", str(half_run.pk), "--method", "conformal_set"),
        stdout=out,
    )
    record = json.loads(out.getvalue())
    assert record["prediction_set"]["classes"] == ["x"] and "selective_risk" not in record


# -- a score beyond the float range -----------------------------------------------------------
def test_a_score_beyond_the_float_range_names_the_question_and_the_field(run, api):
    # JSON reads 1e400 as infinity: refused by the service, not as "not valid JSON"
    body = (
        '{"questions": [{"id": "q-ok", "candidates": [{"answer": "x", "score": 0.9}]}, '
        '{"id": "q-big", "candidates": [{"answer": "x", "score": 1e400}]}]}'
    )
    response = api("manager").post(f"{BASE}/{run.pk}/apply/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["field"] == "questions[1].candidates[0].score"
    assert "question 'q-big': must be a finite number" in response.json()["detail"]


# -- frequency ranks computed from the answers ------------------------------------------------
@pytest.fixture
def rank_run(data):
    # the first sample x ranks 1 (x and y once each: the lower sample index first), and is
    # wrong on 10 of 60 calibration questions: p = P[Bin(60, 0.3) <= 10] < 0.05 certifies 1
    return _run(
        data,
        name="ranks",
        method="selective_risk",
        selector="first_sample",
        score_field="frequency_rank",
        acceptance="<=",
        alpha="0.3",
        thresholds=[1],
    )


def test_frequency_ranks_are_computed_from_the_answers_as_the_import_did(rank_run, api):
    assert rank_run.result["selective_risk"]["chosen_threshold"] == 1
    url = f"{BASE}/{rank_run.pk}/apply/"
    with_scores = traffic(rank_run)
    without = copy.deepcopy(with_scores)
    for question in without:
        for candidate in question["candidates"]:
            del candidate["score"]
    # the test questions without scores decide as with the stored (imported) ranks
    given = api("manager").post(url, {"questions": with_scores}, format="json").json()
    computed = api("manager").post(url, {"questions": without}, format="json").json()
    assert computed["decisions"] == given["decisions"]
    assert {
        d["score"] for r in computed["decisions"] for d in r["selective_risk"]["decisions"]
    } == {1.0}
    # ranks by hand: y, x, x, none -> x (twice) ranks 1, y 2, no answer none
    question = {"id": "q", "candidates": [{"answer": "y"}, {"answer": "x"}, {"answer": "x"}]}
    decided = api("manager").post(url, {"questions": [question]}, format="json").json()
    [decision] = decided["decisions"][0]["selective_risk"]["decisions"]
    assert (decision["answer"], decision["score"], decision["decision"]) == ("y", 2.0, "abstain")
    assert decision["reason"] == "score_fails_threshold"


@pytest.mark.parametrize(
    ("fields", "question", "field", "words"),
    [
        ({}, {"id": "q", "candidates": [{"answer": "x"}, {"selected": True}]},
         "questions[0].candidates[1].answer", "frequency ranks are computed from the answers"),
        ({"answer_field": "text"}, {"id": "q", "candidates": [{"answer": "x"}]},
         "questions[0].candidates[0].score", "answer_field text"),
    ],
)  # fmt: skip
def test_ranks_that_cannot_be_computed_are_400(data, api, fields, question, field, words):
    run = _run(
        data,
        name="ranks",
        method="selective_risk",
        selector="first_sample",
        score_field="frequency_rank",
        acceptance="<=",
        alpha="0.3",
        thresholds=[1],
        **fields,
    )
    response = api("manager").post(
        f"{BASE}/{run.pk}/apply/", {"questions": [question]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert words in response.json()["detail"]
