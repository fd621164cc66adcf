"""derived_recompute_task for agreement, and its wiring: a committed resolution yields a report."""

from __future__ import annotations

import logging

import pytest
from django.apps import apps
from django.db import transaction

from certification.apps import DERIVED_SCHEDULER
from certification.models import AgreementReport, DerivedResultState, ReliabilityReport
from certification.tasks import derived_recompute_task
from labeling.derived import derived_schedulers
from labeling.models import DerivedChange, DerivedKind, Item, ItemStatus, ResolutionStatus, Role
from labeling.services import (
    AnnotationInput,
    ClaimInput,
    adjudication_resolve,
    annotation_submit,
    item_claim_next,
    project_labelling_start,
)
from labeling.signals import announce_resolutions
from tests.conftest import native_record

pytestmark = pytest.mark.django_db


# -- the task ----------------------------------------------------------------------------------
def test_task_stores_the_report(project, items, cast_vote, member):
    cast_vote(items[0], member(Role.ANNOTATOR), "admissible")
    # given the vote marked the agreement stale (its after-commit schedule not run here)
    marks = DerivedChange.objects.filter(project=project, kind=DerivedKind.AGREEMENT)
    top = max(marks.values_list("pk", flat=True))
    # when (eager Celery in tests, as in development)
    outcome = derived_recompute_task.delay(project.pk, DerivedKind.AGREEMENT).get()
    # then
    assert outcome == "done"
    report = AgreementReport.objects.get(project=project)
    assert report.answer["n_votes"] == 1
    state = DerivedResultState.objects.get(project=project, kind=DerivedKind.AGREEMENT)
    assert state.covered_generation == top
    assert state.lease_owner == "" and state.enqueued_at is None
    assert state.computed_at is not None and state.last_error == ""
    assert not marks.exists()


def test_task_logs_and_returns_for_a_missing_project(db, caplog):
    with caplog.at_level(logging.WARNING, logger="certification.services.derived"):
        assert derived_recompute_task.delay(424242, DerivedKind.AGREEMENT).get() == "missing"
    assert [r.message for r in caplog.records] == ["derived.missing_project"]
    assert caplog.records[0].project_id == 424242
    assert caplog.records[0].kind == DerivedKind.AGREEMENT
    assert not AgreementReport.objects.exists()
    assert not DerivedResultState.objects.exists()


def test_task_is_time_limited_and_retries_only_database_errors():
    from django.db import OperationalError

    assert derived_recompute_task.soft_time_limit == 300
    assert derived_recompute_task.time_limit == 360
    assert derived_recompute_task.max_retries == 5
    assert derived_recompute_task.autoretry_for == (OperationalError,)
    assert derived_recompute_task.retry_backoff is True
    assert derived_recompute_task.retry_backoff_max == 300


def test_every_route_names_a_registered_task_and_recomputation_has_one():
    from django.conf import settings

    from labeling.celery import app

    app.loader.import_default_modules()
    routes = settings.CELERY_TASK_ROUTES
    assert sorted(set(routes) - set(app.tasks)) == []
    assert routes["certification.tasks.derived_recompute_task"] == {"queue": "recompute"}
    for gone in (
        "agreement_recompute_task",
        "calibration_runs_refresh_task",
        "audit_reports_refresh_task",
    ):
        assert f"certification.tasks.{gone}" not in app.tasks


# -- the wiring --------------------------------------------------------------------------------
def test_scheduler_is_registered_once():
    # the scheduler of the derived results is registered once, by name: ready() may run again
    # (e.g. a test runner reloading apps) and still leaves one
    assert derived_schedulers() == [DERIVED_SCHEDULER]
    apps.get_app_config("certification").ready()
    assert derived_schedulers() == [DERIVED_SCHEDULER]


def test_announced_resolution_yields_a_report_after_commit(
    project, items, cast_vote, member, django_capture_on_commit_callbacks
):
    # a resolution is an input of the per-person reliability (not of the agreement: the votes'
    # own writes mark that)
    cast_vote(items[0], member(Role.ANNOTATOR), "admissible")
    cast_vote(items[0], member(Role.ANNOTATOR), "admissible")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with transaction.atomic():
            announce_resolutions(
                project_id=project.pk, resolved=[(items[0].pk, ResolutionStatus.CONSENSUS)]
            )
        # nothing before commit
        assert not ReliabilityReport.objects.exists()
    assert len(callbacks) == 1
    # when the commit happens
    with django_capture_on_commit_callbacks(execute=True):
        callbacks[0]()
    # then
    report = ReliabilityReport.objects.get(project=project)
    assert report.policy_version == 1
    assert not AgreementReport.objects.exists()


def test_a_failing_recompute_does_not_break_the_resolution(
    project, items, monkeypatch, django_capture_on_commit_callbacks, caplog
):
    def broken(**kwargs):
        raise RuntimeError("stats exploded")

    # a resolution marks the per-person reliability (the agreement reads only the votes)
    monkeypatch.setattr("certification.services.reliability.reliability_recompute", broken)
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            announce_resolutions(project_id=project.pk, resolved=[(items[0].pk, "consensus")])
    # the error is logged, not raised into the code that resolved the item
    assert "stats exploded" in caplog.text
    assert not ReliabilityReport.objects.exists()


# -- end to end through the labelling services -------------------------------------------------
def _prior(annotator, answer, claim_label):
    return {
        "annotator": annotator,
        "answer_label": answer,
        "claim_labels": [
            {"claim": 0, "label": claim_label},
            {"claim": 1, "label": claim_label},
        ],
    }


def test_consensus_from_prior_votes_at_labelling_start_yields_a_report(
    project, import_records, member, django_capture_on_commit_callbacks
):
    record = native_record("q1")
    record["candidates"][0]["prior_annotations"] = [
        _prior("p1", "inadmissible", "not_supported"),
        _prior("p2", "inadmissible", "not_supported"),
    ]
    import_records([record])
    # when labelling starts, the item with two agreeing prior votes is resolved by consensus
    with django_capture_on_commit_callbacks(execute=True):
        project_labelling_start(project=project, actor=member(Role.MANAGER))
    # then
    assert Item.objects.filter(status=ItemStatus.RESOLVED).count() == 1
    report = AgreementReport.objects.get(project=project)
    assert report.answer["raters"] == ["prior:p1", "prior:p2"]
    assert report.answer["percent_agreement"] == {"value": 1.0, "reason": None}
    assert report.claim["n_votes"] == 4


def _submit(project, annotator, answer, claim_label):
    assignment = item_claim_next(project=project, actor=annotator)
    claims = assignment.item.candidate.claims.order_by("index")
    data = AnnotationInput(
        answer_label=answer,
        claims=tuple(ClaimInput(claim_id=c.pk, label=claim_label) for c in claims),
    )
    annotation_submit(project=project, assignment_id=assignment.pk, actor=annotator, data=data)
    return assignment.item


def test_consensus_and_adjudication_each_recompute_the_report(
    project, import_records, member, django_capture_on_commit_callbacks
):
    import_records([native_record("q1")])
    project_labelling_start(project=project, actor=member(Role.MANAGER))
    ann1, ann2 = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    # given two annotators agreeing on the first item
    with django_capture_on_commit_callbacks(execute=True):
        first = _submit(project, ann1, "inadmissible", "not_supported")
        assert _submit(project, ann2, "inadmissible", "not_supported") == first
    first.refresh_from_db()
    assert first.status == ItemStatus.RESOLVED
    report = AgreementReport.objects.get(project=project)
    assert report.answer["n_votes"] == 2
    assert report.answer["raters"] == [f"user:{ann1.pk}", f"user:{ann2.pk}"]
    # and disagreeing on the second: the votes changed, so the report counts them at once
    # (before the adjudication), never presenting the agreeing item's figures as current
    with django_capture_on_commit_callbacks(execute=True):
        second = _submit(project, ann1, "admissible", "not_supported")
        _submit(project, ann2, "abstained", "not_supported")
    second.refresh_from_db()
    assert second.status == ItemStatus.DISAGREEMENT
    report = AgreementReport.objects.get(project=project)
    assert report.answer["n_votes"] == 4
    assert report.answer["percent_agreement"]["value"] == 0.5
    # when an adjudicator resolves it
    with django_capture_on_commit_callbacks(execute=True):
        adjudication_resolve(
            project=project,
            item_id=second.pk,
            actor=member(Role.ADJUDICATOR),
            expected_version=second.version,
            answer_label="admissible",
            claims=tuple(
                ClaimInput(claim_id=c.pk, label="not_supported")
                for c in second.candidate.claims.all()
            ),
            rationale="the answer is right",
        )
    # then the report counts the disagreeing votes too
    report = AgreementReport.objects.get(project=project)
    assert report.answer["n_votes"] == 4
    assert report.answer["percent_agreement"]["value"] == 0.5
