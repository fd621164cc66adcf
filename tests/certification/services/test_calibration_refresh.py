"""End to end: a resolution, once committed, recomputes the project's calibration runs in the
background (a derived mark -> ``derived_recompute_task`` (calibration) ->
``calibration_run_execute_task``).
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import transaction

from certification.apps import DERIVED_SCHEDULER
from certification.models import CalibrationRun, DerivedResultState, RunStatus
from certification.selectors import calibration_run_get, calibration_run_report
from certification.services import calibration_run_request
from certification.tasks import derived_recompute_task
from labeling.derived import derived_schedulers
from labeling.models import DerivedKind, Item, ItemStatus, Resolution, ResolutionStatus, Role
from labeling.services import adjudication_resolve
from labeling.signals import announce_resolutions
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db


@pytest.fixture
def disputed(project):
    """A calibration partition of 3 resolved answers and one in the disagreement queue."""
    records = [rec(f"c{i}", [cand("a", score=1.0, selected=True)]) for i in range(3)]
    records.append(
        rec("q", [cand("a", score=1.0, labels=("admissible", "inadmissible"), selected=True)])
    )
    calibration_project(project, {"calibration": records})
    item = Item.objects.get(project=project, candidate__question__external_id="q")
    assert item.status == ItemStatus.DISAGREEMENT
    return item


def test_the_scheduler_is_registered_once():
    # the scheduler of the derived results is registered once, by name: ready() may run again
    # (e.g. a test runner reloading apps) and still leaves one
    assert derived_schedulers() == [DERIVED_SCHEDULER]
    apps.get_app_config("certification").ready()
    assert derived_schedulers() == [DERIVED_SCHEDULER]


def test_an_adjudication_recomputes_the_run_in_the_background(
    project, disputed, member, django_capture_on_commit_callbacks
):
    # given a spec whose first run saw the disputed item as pending
    spec = make_spec(project, thresholds=[0.5])
    with django_capture_on_commit_callbacks(execute=True):
        first = CalibrationRun.objects.get(pk=_start(spec).pk)
    first.refresh_from_db()
    assert first.status == RunStatus.DONE
    assert first.result["pending"]["calibration"] == 1
    # when an adjudicator resolves it (the signal fires after commit)
    adjudicator = member(Role.ADJUDICATOR)
    with django_capture_on_commit_callbacks(execute=True):
        adjudication_resolve(
            project=project,
            item_id=disputed.pk,
            actor=adjudicator,
            expected_version=disputed.version,
            answer_label="inadmissible",
            claims=[],
            rationale="the second vote is right",
        )
    # then a new run was requested by the label change and computed
    latest = CalibrationRun.objects.filter(spec=spec).order_by("-pk").first()
    assert latest.pk != first.pk
    assert (latest.trigger, latest.status) == ("labels_changed", RunStatus.DONE)
    assert latest.result["pending"]["calibration"] == 0
    assert latest.result["selective_risk"]["counts"]["errors"] == 1


def _start(spec):
    with transaction.atomic():
        return calibration_run_request(spec=spec, trigger="manual")


def test_an_announcement_without_a_label_change_starts_nothing(
    project, disputed, django_capture_on_commit_callbacks
):
    spec = make_spec(project, thresholds=[0.5])
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            announce_resolutions(
                project_id=project.pk, resolved=[(disputed.pk, ResolutionStatus.CONSENSUS)]
            )
    assert CalibrationRun.objects.filter(spec=spec).count() == 1  # the first refresh
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            announce_resolutions(
                project_id=project.pk, resolved=[(disputed.pk, ResolutionStatus.CONSENSUS)]
            )
    assert CalibrationRun.objects.filter(spec=spec).count() == 1  # same inputs: no new run


def test_a_failing_refresh_does_not_break_the_resolution(
    project, disputed, member, monkeypatch, django_capture_on_commit_callbacks, caplog
):
    make_spec(project, thresholds=[0.5])

    def broken(**kwargs):
        raise RuntimeError("refresh exploded")

    monkeypatch.setattr("certification.tasks.calibration_runs_refresh", broken)
    with django_capture_on_commit_callbacks(execute=True):
        adjudication_resolve(
            project=project,
            item_id=disputed.pk,
            actor=member(Role.ADJUDICATOR),
            expected_version=disputed.version,
            answer_label="admissible",
            claims=[],
            rationale="fine",
        )
    disputed.refresh_from_db()
    assert disputed.status == ItemStatus.RESOLVED
    assert "refresh exploded" in caplog.text


def test_the_refresh_task_skips_a_missing_project(db):
    assert derived_recompute_task.delay(424242, DerivedKind.CALIBRATION).get() == "missing"
    assert not CalibrationRun.objects.exists()
    assert not DerivedResultState.objects.exists()


def test_the_task_requests_and_computes_a_run_for_the_changed_labels(
    project, disputed, member, django_capture_on_commit_callbacks
):
    # given a spec's first run, then an adjudication whose after-commit schedule is not run
    spec = make_spec(project, thresholds=[0.5])
    with django_capture_on_commit_callbacks(execute=True):
        first = CalibrationRun.objects.get(pk=_start(spec).pk)
    adjudication_resolve(
        project=project,
        item_id=disputed.pk,
        actor=member(Role.ADJUDICATOR),
        expected_version=disputed.version,
        answer_label="inadmissible",
        claims=[],
        rationale="the second vote is right",
    )
    assert CalibrationRun.objects.filter(spec=spec).count() == 1
    # when the recomputation of the calibration kind runs
    with django_capture_on_commit_callbacks(execute=True):
        outcome = derived_recompute_task.delay(project.pk, DerivedKind.CALIBRATION).get()
    # then it requested a run over the new labels, which was computed
    assert outcome == "done"
    latest = CalibrationRun.objects.filter(spec=spec).order_by("-pk").first()
    assert latest.pk != first.pk
    assert (latest.trigger, latest.status) == ("labels_changed", RunStatus.DONE)
    assert latest.result["pending"]["calibration"] == 0
    state = DerivedResultState.objects.get(project=project, kind=DerivedKind.CALIBRATION)
    assert state.last_error == "" and state.lease_owner == ""


def test_a_run_says_when_newer_labels_superseded_it(
    project, disputed, member, login, django_capture_on_commit_callbacks
):
    # given a done run that saw the disputed item as pending
    spec = make_spec(project, thresholds=[0.5])
    with django_capture_on_commit_callbacks(execute=True):
        first = _start(spec)
    first = calibration_run_get(project=project, run_id=first.pk)
    assert calibration_run_report(run=first)["freshness"] == {
        "superseded": False,
        "reason": None,
        "current_input_sha256": first.input_sha256,
        "changed_at": None,
        "newer_run": None,
    }
    # when the item is resolved (the refresh then computes a new run)
    with django_capture_on_commit_callbacks(execute=True):
        resolved = adjudication_resolve(
            project=project,
            item_id=disputed.pk,
            actor=member(Role.ADJUDICATOR),
            expected_version=disputed.version,
            answer_label="inadmissible",
            claims=[],
            rationale="the second vote is right",
        )
    latest = CalibrationRun.objects.filter(spec=spec).order_by("-pk").first()
    # then the first run is superseded by the newer input, with its hash, time and run
    freshness = calibration_run_report(run=first)["freshness"]
    changed_at = Resolution.objects.get(item_id=disputed.pk).created_at
    assert freshness == {
        "superseded": True,
        "reason": "the labels or scores it reads changed since it was requested",
        "current_input_sha256": latest.input_sha256,
        "changed_at": changed_at.isoformat(),
        "newer_run": {
            "id": latest.pk,
            "status": "done",
            "created_at": latest.created_at.isoformat(),
        },
    }
    assert resolved is not None
    page = login("adjudicator").get(f"/p/study/certification/runs/{first.pk}/").content.decode()
    assert 'data-superseded="true"' in page and f"/runs/{latest.pk}/" in page
    newer = login("adjudicator").get(f"/p/study/certification/runs/{latest.pk}/").content.decode()
    assert 'data-superseded="false"' in newer
    assert "automatic: the resolved labels or scores it reads changed" in newer
