"""Evaluator audit pages through the Django test client: roles, the report, the CSV, the form."""

from __future__ import annotations

import csv
import io

import pytest

from certification.models import AuditReport, AuditSample
from certification.services import audit_report_configure
from labeling.models import Evaluator, Role
from labeling.services import project_create
from tests.certification.audit_helpers import audited_project

pytestmark = pytest.mark.django_db

BASE = "/p/study/certification/audits"


@pytest.fixture
def audited(project, member):
    project, judge, hhem = audited_project(project)
    audit_report_configure(project=project, evaluator=judge, actor=member(Role.MANAGER))
    return project, judge, hhem


def _pages(judge):
    return [f"{BASE}/", f"{BASE}/{judge.pk}/", f"{BASE}/{judge.pk}/disagreements.csv"]


@pytest.mark.parametrize(
    ("role", "status"),
    [("annotator", 404), ("adjudicator", 200), ("manager", 200), ("nonmember", 404)],
)
def test_who_sees_the_audit_pages(audited, login, role, status):
    client = login(role)
    _, judge, _ = audited
    assert [client.get(url).status_code for url in _pages(judge)] == [status] * 3


def test_anonymous_users_are_sent_to_the_login(audited, client):
    for url in _pages(audited[1]):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_page_shows_matrix_metrics_estimates_slices_and_disagreements(audited, login):
    _, judge, _ = audited
    response = login("adjudicator").get(f"{BASE}/{judge.pk}/")
    html = response.content.decode()
    assert 'id="confusion-matrix"' in html and "unresolved" in html and "unavailable" in html
    assert "Sensitivity TP/(TP+FN)" in html and "0.500" in html
    assert "human-only" in html and "ppi++" in html and "union bound" in html
    assert "finite-sample exact" in html and "asymptotic (CLT)" in html
    assert "<h3>domain</h3>" in html and "med" in html
    assert "q1/c1" in html and "false positive" in html
    # read-only for adjudicators: no declaration form
    assert 'id="audit-declaration"' not in html


def test_an_undeclared_evaluator_shows_the_form_to_managers(audited, login):
    _, _, hhem = audited
    html = login("manager").get(f"{BASE}/{hhem.pk}/").content.decode()
    assert 'id="not-declared"' in html and 'id="audit-declaration"' in html
    assert login("manager").get(f"{BASE}/{hhem.pk}/disagreements.csv").status_code == 404


def test_the_csv_lists_the_disagreements(audited, login):
    _, judge, _ = audited
    response = login("manager").get(f"{BASE}/{judge.pk}/disagreements.csv")
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows == [
        ["item", "evaluator_label", "human_label", "kind", "adjudicator_rationale"],
        ["q1/c1", "inadmissible", "admissible", "false positive", ""],
        ["q2/c0", "admissible", "inadmissible", "false negative", ""],
    ]


def test_a_manager_declares_a_thresholded_audit(audited, login):
    _, _, hhem = audited
    form = {
        "human_positive": "inadmissible",
        "evaluator_positive": "",
        "score_threshold": "0.5",
        "flag_when": "<",
        "confidence": "0.9",
    }
    response = login("manager").post(f"{BASE}/{hhem.pk}/", form)
    assert response.status_code == 302
    report = AuditReport.objects.get(evaluator=hhem)
    assert report.score_threshold == 0.5 and report.evaluator_positive == ["flag"]
    assert report.result["metrics"]["sensitivity"]["value"] == 1.0


def test_an_invalid_declaration_is_shown_on_the_form(audited, login):
    _, _, hhem = audited
    form = {"human_positive": " , ", "flag_when": "<", "confidence": "0.95"}
    response = login("manager").post(f"{BASE}/{hhem.pk}/", form)
    assert response.status_code == 400
    assert "declare at least one positive label" in response.content.decode()
    assert not AuditReport.objects.filter(evaluator=hhem).exists()


@pytest.mark.parametrize(("role", "status"), [("annotator", 404), ("adjudicator", 403)])
def test_only_managers_declare(audited, login, role, status):
    _, _, hhem = audited
    form = {"human_positive": "inadmissible", "flag_when": "<", "confidence": "0.95"}
    assert login(role).post(f"{BASE}/{hhem.pk}/", form).status_code == status
    assert not AuditReport.objects.filter(evaluator=hhem).exists()


def test_another_projects_evaluator_is_not_found(audited, login):
    other = project_create(slug="other", name="Other")
    foreign = Evaluator.objects.create(project=other, name="x", version="1")
    client = login("manager")
    assert client.get(f"{BASE}/{foreign.pk}/").status_code == 404
    assert client.get(f"{BASE}/{foreign.pk}/disagreements.csv").status_code == 404


def test_the_list_shows_every_evaluator_version(audited, login):
    html = login("adjudicator").get(f"{BASE}/").content.decode()
    assert "judge@v1" in html and "hhem@v1" in html and "not declared yet" in html


# -- audit samples -----------------------------------------------------------------------------
def test_a_manager_draws_a_sample_from_the_page(audited, login):
    _, judge, _ = audited
    client = login("manager")
    response = client.post(f"{BASE}/{judge.pk}/samples/", {"size": "3", "seed": "7"})
    assert response.status_code == 302
    sample = AuditSample.objects.get()
    assert (sample.size, sample.seed, sample.members.count()) == (3, 7, 3)
    html = client.get(f"{BASE}/{judge.pk}/").content.decode()
    assert 'id="audit-samples"' in html and 'id="sample-in-use"' in html


def test_an_invalid_sample_is_a_message_not_an_error(audited, login):
    _, judge, _ = audited
    client = login("manager")
    response = client.post(f"{BASE}/{judge.pk}/samples/", {"size": "99", "seed": "7"}, follow=True)
    assert response.status_code == 200
    assert "No sample drawn" in response.content.decode()
    assert not AuditSample.objects.exists()


@pytest.mark.parametrize(("role", "status"), [("annotator", 404), ("adjudicator", 403)])
def test_only_managers_draw_samples(audited, login, role, status):
    _, judge, _ = audited
    response = login(role).post(f"{BASE}/{judge.pk}/samples/", {"size": "2", "seed": "1"})
    assert response.status_code == status
    assert not AuditSample.objects.exists()


# -- anytime-valid figures ---------------------------------------------------------------------
def test_a_manager_sets_a_target_and_the_page_says_whether_to_stop(audited, login):
    _, judge, _ = audited
    client = login("manager")
    client.post(f"{BASE}/{judge.pk}/samples/", {"size": "6", "seed": "2"})
    # when the manager sets a target of 0.9 on the page
    response = client.post(f"{BASE}/{judge.pk}/target/", {"anytime_target": "0.9"})
    assert response.status_code == 302
    report = AuditReport.objects.get(evaluator=judge)
    assert str(report.anytime_target) == "0.90000000"
    # then the page shows the stored stop message, the figures' kinds and the planner
    html = client.get(f"{BASE}/{judge.pk}/").content.decode()
    stop = report.result["anytime"]["stop"]
    assert 'id="anytime-stop"' in html and stop["message"] in html
    assert "anytime-valid" in html and "fixed-n" in html
    assert 'id="anytime-planner"' in html and "random permutation fixed by its seed" in html
    assert 'id="audit-target-form"' in html


def test_an_invalid_target_is_a_message_not_an_error(audited, login):
    _, judge, _ = audited
    response = login("manager").post(
        f"{BASE}/{judge.pk}/target/", {"anytime_target": "1.5"}, follow=True
    )
    assert response.status_code == 200
    assert "Target not set" in response.content.decode()
    assert AuditReport.objects.get(evaluator=judge).anytime_target is None


@pytest.mark.parametrize(("role", "status"), [("annotator", 404), ("adjudicator", 403)])
def test_only_managers_set_targets(audited, login, role, status):
    _, judge, _ = audited
    response = login(role).post(f"{BASE}/{judge.pk}/target/", {"anytime_target": "0.2"})
    assert response.status_code == status
    assert AuditReport.objects.get(evaluator=judge).anytime_target is None


def test_without_a_sample_the_page_says_why_there_is_no_sequence(audited, login):
    _, judge, _ = audited
    html = login("adjudicator").get(f"{BASE}/{judge.pk}/").content.decode()
    assert 'id="anytime-undefined"' in html and "needs an audit sample" in html
    assert 'id="audit-target-form"' not in html
