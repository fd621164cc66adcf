"""``manage.py audit_evaluator``: declare, recompute and print an evaluator's audit."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from certification.models import AuditReport, AuditSample
from tests.certification.audit_helpers import audited_project

pytestmark = pytest.mark.django_db


def _run(*args):
    out = io.StringIO()
    call_command("audit_evaluator", "--project", "study", *args, stdout=out)
    return out.getvalue()


def test_declares_with_defaults_and_prints_the_report(project):
    audited_project(project)
    text = _run("--evaluator", "judge@v1")
    assert "Audit of judge@v1 (6 items, 5 resolved, 1 pending)" in text
    assert "sensitivity  0.5000  1/2" in text
    assert "human-only" in text and "union bound" in text
    assert "Disagreements: 2" in text
    assert AuditReport.objects.get().human_positive == ["inadmissible"]


def test_threshold_and_json(project):
    audited_project(project)
    data = json.loads(_run("--evaluator", "hhem@v1", "--threshold", "0.5", "--json"))
    assert data["declaration"]["score_threshold"] == 0.5
    assert data["metrics"]["matrix"]["evaluator_labels"] == ["flag", "pass", "unavailable"]


def test_an_existing_declaration_is_reused(project):
    audited_project(project)
    _run("--evaluator", "judge@v1", "--human-positive", "inadmissible", "--confidence", "0.9")
    data = json.loads(_run("--evaluator", "judge@v1", "--json"))
    assert data["declaration"]["confidence"] == "0.9"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--evaluator", "nobody@v1"), "no evaluator 'nobody@v1'"),
        (("--evaluator", "judge@v1", "--confidence", "2"), "confidence"),
    ],
)
def test_errors(project, args, message):
    audited_project(project)
    with pytest.raises(CommandError, match=message):
        _run(*args)


def test_unknown_project(db):
    with pytest.raises(CommandError, match="no project"):
        call_command("audit_evaluator", "--project", "nope", "--evaluator", "a@b")


def test_draws_a_sample(project):
    audited_project(project)
    err = io.StringIO()
    out = io.StringIO()
    call_command(
        "audit_evaluator",
        "--project",
        "study",
        "--evaluator",
        "judge@v1",
        "--sample",
        "3",
        "--seed",
        "7",
        "--json",
        stdout=out,
        stderr=err,
    )
    data = json.loads(out.getvalue())
    assert data["sample"]["n_members"] == 3 and data["sample"]["seed"] == 7
    assert "Drew audit sample" in err.getvalue()
    assert AuditSample.objects.get().seed == 7
