"""audit_report_configure / audit_report_recompute / audit_reports_refresh."""

from __future__ import annotations

import pytest
from scipy.stats import beta

from certification.exceptions import InvalidAudit
from certification.models import AuditReport
from certification.services import (
    audit_report_configure,
    audit_report_recompute,
    audit_reports_refresh,
)
from labeling.exceptions import NotFound, PermissionDenied
from labeling.models import Role
from labeling.services import project_create
from tests.certification.audit_helpers import audited_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def audited(project):
    return audited_project(project)


@pytest.fixture
def manager(member):
    return member(Role.MANAGER)


def test_judge_matrix_keeps_unavailable_and_unresolved(audited, manager):
    project, judge, _ = audited
    # when
    report = audit_report_configure(project=project, evaluator=judge, actor=manager)
    # then
    metrics = report.result["metrics"]
    assert metrics["matrix"]["evaluator_labels"] == ["admissible", "inadmissible", "unavailable"]
    # q3/c0 is still open: pending, counted apart and never shown as "unresolved"
    assert report.result["n_pending"] == 1
    assert metrics["matrix"]["human_labels"] == ["admissible", "inadmissible", "unresolved"]
    assert metrics["matrix"]["counts"] == [[1, 1, 0], [1, 1, 0], [1, 0, 0]]
    binary = metrics["matrix"]["binary"]
    assert (binary["tp"], binary["fp"], binary["fn"], binary["tn"]) == (1, 1, 1, 1)
    assert binary["unavailable_negative"] == 1 and binary["unresolved_flagged"] == 0
    assert (metrics["n_total"], metrics["n_compared"]) == (5, 4)
    assert metrics["sensitivity"]["numerator"] == 1
    assert metrics["sensitivity"]["denominator"] == 2
    assert metrics["sensitivity"]["interval"]["lower"] == pytest.approx(0.012579, abs=1e-6)
    assert metrics["mcnemar"]["p_value"] == 1.0
    assert report.result["n_items"] == 6 and report.result["n_resolved"] == 5
    assert len(report.input_sha256) == 64 and report.computed_at is not None


def test_score_only_evaluator_is_flagged_at_the_declared_threshold(audited, manager):
    project, _, hhem = audited
    # when
    report = audit_report_configure(
        project=project, evaluator=hhem, actor=manager, score_threshold=0.5, flag_when="<"
    )
    # then
    assert report.evaluator_positive == ["flag"]
    metrics = report.result["metrics"]
    assert metrics["matrix"]["evaluator_labels"] == ["flag", "pass", "unavailable"]
    assert metrics["sensitivity"]["value"] == 1.0
    assert metrics["specificity"]["value"] == 1.0
    assert metrics["npv"]["value"] == 1.0
    assert report.result["disagreements"] == []


def test_undefined_statistics_are_reported_as_undefined(audited, manager):
    project, judge, _ = audited
    # when people never say "abstained", sensitivity for that positive set has no denominator
    report = audit_report_configure(
        project=project, evaluator=judge, actor=manager, human_positive=["abstained"]
    )
    # then
    sensitivity = report.result["metrics"]["sensitivity"]
    assert sensitivity["value"] is None
    assert sensitivity["reason"] == "no human positives among the compared items"


def test_slices_by_domain_question_type_and_generator(audited, manager):
    project, judge, _ = audited
    report = audit_report_configure(project=project, evaluator=judge, actor=manager)
    slices = report.result["slices"]
    assert set(slices) == {"domain", "question_type", "generator"}
    by_domain = {row["slice"]: row["metrics"] for row in slices["domain"]}
    assert by_domain["med"]["n_compared"] == 4
    assert by_domain["law"]["n_compared"] == 0
    assert (
        by_domain["law"]["accuracy"]["reason"]
        == "no item with both an evaluator label and a resolved human label"
    )


def test_disagreement_list(audited, manager):
    project, judge, _ = audited
    report = audit_report_configure(project=project, evaluator=judge, actor=manager)
    assert report.result["disagreement_columns"] == [
        "item",
        "evaluator_label",
        "human_label",
        "kind",
        "adjudicator_rationale",
    ]
    assert report.result["disagreements"] == [
        ["q1/c1", "inadmissible", "admissible", "false positive", ""],
        ["q2/c0", "admissible", "inadmissible", "false negative", ""],
    ]


def test_error_rate_three_ways_with_assumptions(audited, manager):
    project, judge, _ = audited
    report = audit_report_configure(project=project, evaluator=judge, actor=manager)
    error_rate = report.result["error_rate"]
    methods = [s["method"] for s in error_rate["summaries"]]
    assert methods == ["human-only", "ppi", "ppi++", "union bound", "union bound (joint)"]
    assumptions = {s["method"]: s["assumption"] for s in error_rate["summaries"]}
    assert assumptions["human-only"] == "finite-sample exact"
    assert assumptions["ppi"] == "asymptotic (CLT)"
    assert assumptions["union bound"] == "finite-sample exact"
    # 5 audited (resolved) items of 6; 2 human errors
    assert error_rate["n_population"] == 6 and error_rate["n_audited"] == 5
    assert error_rate["human_only"]["n_errors"] == 2
    assert error_rate["human_only"]["estimate"] == pytest.approx(2 / 5)
    assert "simple random sample" in error_rate["sample_assumption"]
    # the joint form: 4 of 6 flagged (inadmissible or unavailable), as in the conditional
    # form; 1 unflagged error among the 5 audited; each Clopper-Pearson upper at 1 - 0.05/2,
    # beta.ppf(0.975, k + 1, n - k)
    joint = error_rate["union_joint"]
    assert (joint["n_flagged"], joint["n_audited"], joint["n_joint_missed"]) == (4, 5, 1)
    assert error_rate["union"]["n_flagged"] == 4
    expected = beta.ppf(0.975, 4 + 1, 6 - 4) + beta.ppf(0.975, 1 + 1, 5 - 1)
    assert joint["upper_bound"] == pytest.approx(min(1.0, expected), abs=1e-12)
    assert joint["reason"] is None


def test_recompute_is_idempotent(audited, manager):
    project, judge, _ = audited
    report = audit_report_configure(project=project, evaluator=judge, actor=manager)
    # when
    again = audit_report_recompute(report_id=report.pk)
    # then
    stored = AuditReport.objects.get(pk=report.pk)
    assert again.input_sha256 == report.input_sha256 == stored.input_sha256
    assert stored.computed_at == report.computed_at


def test_redeclaring_changes_the_hash_and_keeps_one_report(audited, manager):
    project, judge, _ = audited
    first = audit_report_configure(project=project, evaluator=judge, actor=manager)
    second = audit_report_configure(
        project=project, evaluator=judge, actor=manager, confidence="0.9"
    )
    assert first.pk == second.pk
    assert first.input_sha256 != second.input_sha256
    assert AuditReport.objects.filter(evaluator=judge).count() == 1


def test_refresh_recomputes_every_declared_audit(audited, manager):
    project, judge, hhem = audited
    audit_report_configure(project=project, evaluator=judge, actor=manager)
    audit_report_configure(project=project, evaluator=hhem, actor=manager, score_threshold=0.5)
    AuditReport.objects.update(input_sha256="")
    # when
    reports = audit_reports_refresh(project_id=project.pk)
    # then
    assert sorted(r.evaluator_id for r in reports) == sorted([judge.pk, hhem.pk])
    assert all(len(r.input_sha256) == 64 for r in AuditReport.objects.all())


def test_refresh_of_a_missing_project_raises(db):
    with pytest.raises(NotFound):
        audit_reports_refresh(project_id=424242)


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR])
def test_only_managers_declare(audited, member, role):
    project, judge, _ = audited
    with pytest.raises(PermissionDenied):
        audit_report_configure(project=project, evaluator=judge, actor=member(role))
    assert not AuditReport.objects.exists()


def test_an_evaluator_of_another_project_is_not_found(audited, manager):
    project, judge, _ = audited
    other = project_create(slug="other", name="Other", manager=manager)
    with pytest.raises(NotFound):
        audit_report_configure(project=other, evaluator=judge, actor=manager)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"human_positive": [" "]}, "human_positive"),
        ({"human_positive": ["nope"]}, "human_positive"),
        ({"evaluator_positive": ["nope"]}, "evaluator_positive"),
        ({"score_threshold": float("nan")}, "score_threshold"),
        ({"flag_when": "=="}, "flag_when"),
        ({"confidence": "1"}, "confidence"),
        ({"confidence": "abc"}, "confidence"),
    ],
)
def test_invalid_declarations_are_refused(audited, manager, fields, field):
    project, judge, _ = audited
    with pytest.raises(InvalidAudit) as excinfo:
        audit_report_configure(project=project, evaluator=judge, actor=manager, **fields)
    assert excinfo.value.field == field
