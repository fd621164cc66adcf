"""derived_recompute_task for audits, and its wiring: each committed resolution recomputes them."""

from __future__ import annotations

import logging

import pytest
from django.apps import apps

from certification.apps import DERIVED_SCHEDULER
from certification.models import AuditReport, DerivedResultState
from certification.services import audit_report_configure
from certification.tasks import derived_recompute_task
from labeling.derived import derived_schedulers
from labeling.models import DerivedChange, DerivedKind, Role
from labeling.services import AnnotationInput, annotation_submit, item_claim_next
from tests.certification.audit_helpers import audited_project

pytestmark = pytest.mark.django_db


def test_scheduler_is_registered_once():
    # the scheduler of the derived results is registered once, by name: ready() may run again
    # (e.g. a test runner reloading apps) and still leaves one
    assert derived_schedulers() == [DERIVED_SCHEDULER]
    apps.get_app_config("certification").ready()
    assert derived_schedulers() == [DERIVED_SCHEDULER]


def test_task_logs_and_returns_for_a_missing_project(db, caplog):
    with caplog.at_level(logging.WARNING, logger="certification.services.derived"):
        assert derived_recompute_task.delay(424242, DerivedKind.AUDIT).get() == "missing"
    messages = [r.message for r in caplog.records if r.name == "certification.services.derived"]
    assert messages == ["derived.missing_project"]
    assert not AuditReport.objects.exists()


def test_the_task_recomputes_the_stored_audit(project, member):
    # given a declared audit with q3/c0 still open, then labelled, its schedule not yet run
    project, judge, _ = audited_project(project)
    report = audit_report_configure(project=project, evaluator=judge, actor=member(Role.MANAGER))
    assert report.result["n_pending"] == 1
    annotator = member(Role.ANNOTATOR)
    assignment = item_claim_next(project=project, actor=annotator)
    annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=annotator,
        data=AnnotationInput(answer_label="inadmissible", claims=()),
    )
    marks = DerivedChange.objects.filter(project=project, kind=DerivedKind.AUDIT)
    assert marks.exists()
    assert AuditReport.objects.get(pk=report.pk).input_sha256 == report.input_sha256
    # when the recomputation runs
    assert derived_recompute_task.delay(project.pk, DerivedKind.AUDIT).get() == "done"
    # then the stored audit counts the label and the audit is current
    stored = AuditReport.objects.get(pk=report.pk)
    assert stored.input_sha256 != report.input_sha256
    assert stored.result["n_pending"] == 0
    assert stored.result["metrics"]["matrix"]["binary"]["tp"] == 2
    assert not marks.exists()
    state = DerivedResultState.objects.get(project=project, kind=DerivedKind.AUDIT)
    assert state.last_error == "" and state.lease_owner == ""


def test_a_committed_resolution_recomputes_the_audit(
    project, member, django_capture_on_commit_callbacks
):
    # given a declared audit with q3/c0 still open (pending: counted apart, not compared)
    project, judge, _ = audited_project(project)
    report = audit_report_configure(project=project, evaluator=judge, actor=member(Role.MANAGER))
    assert report.result["n_pending"] == 1
    assert report.result["metrics"]["n_unresolved"] == 0
    annotator = member(Role.ANNOTATOR)
    # when the annotator labels it (overlap 1: consensus) and the transaction commits
    with django_capture_on_commit_callbacks(execute=True):
        assignment = item_claim_next(project=project, actor=annotator)
        annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=annotator,
            data=AnnotationInput(answer_label="inadmissible", claims=()),
        )
    # then the stored audit counts it: the judge flagged it, people agree (a true positive)
    stored = AuditReport.objects.get(pk=report.pk)
    assert stored.input_sha256 != report.input_sha256
    metrics = stored.result["metrics"]
    assert stored.result["n_pending"] == 0
    assert metrics["n_unresolved"] == 0
    assert metrics["matrix"]["binary"]["tp"] == 2
