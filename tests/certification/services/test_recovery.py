"""Runs and builds whose worker died or whose task was lost: heartbeats, the one lapse rule, the
recovery service (re-enqueue, attempt cap), "Run now" and Rebuild on dead work, one stored
snapshot per distinct input, and the working directories killed builds leave behind.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.test import TestCase
from django.utils import timezone

from certification.models import (
    BuildStatus,
    CalibrationInput,
    CalibrationRun,
    ReleaseBuild,
    RunStatus,
)
from certification.selectors import calibration_inputs
from certification.services import (
    calibration_run_execute,
    calibration_run_request,
    calibration_run_start,
    calibration_runs_refresh,
)
from certification.services.calibration import REPLACED_ERROR
from certification.services.liveness import Heartbeat, lapse, work_lapsed
from certification.services.recovery import stalled_work_recover
from certification.services.releases import release_build_execute, release_freeze, release_rebuild
from certification.services.releases.build import build_work_root, build_workdir
from labeling.exceptions import Conflict
from labeling.models import Project
from tests.certification.services.test_release_build import _demo, _user
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings: Any) -> Project:
    """The demo project, written for each test: these tests run heartbeat threads with their own
    connections, so they cannot share a module's rolled-back data (``tests/conftest.py``)."""
    settings.DEBUG = True  # demo_setup runs only in development
    return _demo()


def _questions(prefix: str, n: int) -> list[dict[str, Any]]:
    return [
        rec(f"{prefix}{i}", [cand("a", answer="x", score=1.0, label="admissible", selected=True)])
        for i in range(n)
    ]


@pytest.fixture
def spec(project: Project) -> Any:
    calibration_project(project, {"calibration": _questions("c", 30)})
    return make_spec(project)


def _lost_run(spec: Any) -> CalibrationRun:
    """A pending run whose task message never reached a worker."""
    with TestCase.captureOnCommitCallbacks(execute=False):
        return calibration_run_request(spec=spec, trigger="manual")


def _dead(seconds: float = 1.0) -> Any:
    """A time just past the lapse."""
    return timezone.now() - lapse() - timedelta(seconds=seconds)


def _recover() -> Any:
    with TestCase.captureOnCommitCallbacks(execute=True):
        return stalled_work_recover()


# -- the lapse rule ------------------------------------------------------------------------------
def test_the_lapse_is_a_couple_of_minutes_by_default_and_configurable(settings):
    assert lapse() == timedelta(seconds=120)
    settings.CERTLABEL_WORK_LAPSE_SECONDS = 15
    assert lapse() == timedelta(seconds=15)


def test_running_work_lapses_by_its_heartbeat_and_pending_work_by_its_enqueue_time(spec):
    run = _lost_run(spec)
    run.refresh_from_db()
    assert run.enqueued_at is not None and not work_lapsed(run)
    run.enqueued_at = _dead()
    assert work_lapsed(run)
    run.status, run.started_at, run.heartbeat_at = RunStatus.RUNNING, _dead(600), timezone.now()
    assert not work_lapsed(run)  # an old start, a fresh heartbeat: alive
    run.heartbeat_at = _dead()
    assert work_lapsed(run)
    run.heartbeat_at = None  # no heartbeat yet: the start counts
    assert work_lapsed(run)
    run.status = RunStatus.DONE
    assert not work_lapsed(run)


# -- recovery of runs ----------------------------------------------------------------------------
def test_a_running_run_whose_heartbeat_lapsed_is_run_again_to_the_end(spec):
    run = _lost_run(spec)
    CalibrationRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=_dead(60), heartbeat_at=_dead(), attempts=1
    )
    report = _recover()
    assert report.runs_requeued == [run.pk] and report.runs_failed == []
    run.refresh_from_db()
    assert run.status == RunStatus.DONE, run.error
    assert run.attempts == 2
    assert run.result["outcome"] == run.outcome != ""
    # nothing left to recover
    assert _recover().runs_requeued == []


def test_a_run_with_a_recent_heartbeat_is_left_alone(spec):
    run = _lost_run(spec)
    CalibrationRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        started_at=_dead(600),
        heartbeat_at=timezone.now() - timedelta(seconds=10),
        attempts=1,
    )
    assert _recover().runs_requeued == []
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.attempts == 1


def test_a_pending_run_whose_task_was_lost_is_sent_again(spec):
    run = _lost_run(spec)
    assert _recover().runs_requeued == []  # just sent: not lost yet
    CalibrationRun.objects.filter(pk=run.pk).update(enqueued_at=_dead())
    assert _recover().runs_requeued == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.attempts == 1


def test_a_run_whose_worker_keeps_dying_is_failed_closed_after_the_attempt_cap(spec, settings):
    settings.CERTLABEL_WORK_MAX_ATTEMPTS = 3
    run = _lost_run(spec)
    CalibrationRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, started_at=_dead(), heartbeat_at=_dead(), attempts=3
    )
    report = _recover()
    assert report.runs_failed == [run.pk] and report.runs_requeued == []
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("failed: its worker stopped 3 times")
    assert run.result == {}


def test_a_worker_that_recovery_gave_up_on_writes_nothing(spec):
    """The result is written only by the attempt that holds the run."""
    run = _lost_run(spec)
    executed = calibration_run_execute(run_id=run.pk)
    assert executed.status == RunStatus.DONE and executed.attempts == 1
    # a second delivery of the same task finds it done and changes nothing
    again = calibration_run_execute(run_id=run.pk)
    assert again.status == RunStatus.DONE and again.attempts == 1


# -- one run per spec per distinct input; one snapshot per distinct input ------------------------
def test_a_refresh_with_unchanged_inputs_creates_no_run_and_no_snapshot(spec, project):
    with TestCase.captureOnCommitCallbacks(execute=True):
        first = calibration_runs_refresh(project_id=project.pk)
    assert len(first) == 1
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert calibration_runs_refresh(project_id=project.pk) == []
        assert calibration_runs_refresh(project_id=project.pk) == []
    assert CalibrationRun.objects.count() == 1
    assert CalibrationInput.objects.count() == 1


def test_the_snapshot_is_stored_once_for_the_runs_that_share_it(spec, project):
    other = make_spec(project, name="other", thresholds=[0.6])
    run = calibration_run_request(spec=spec, trigger="manual")
    run_other = calibration_run_request(spec=other, trigger="manual")
    # two specs, two runs (their input hashes differ by the spec), one stored snapshot
    assert run.pk != run_other.pk and run.input_sha256 != run_other.input_sha256
    assert CalibrationInput.objects.count() == 1
    assert run.input_id == run_other.input_id
    assert CalibrationRun.objects.get(pk=run.pk).inputs == calibration_inputs(spec=spec)
    # a failed run retried on the same input reuses the stored snapshot
    CalibrationRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error="x")
    retried = calibration_run_request(spec=spec, trigger="manual")
    assert retried.pk != run.pk and retried.input_id == run.input_id
    assert CalibrationInput.objects.count() == 1


# -- "Run now" on a stuck run --------------------------------------------------------------------
def test_run_now_on_a_run_whose_task_was_lost_replaces_it(spec, api):
    stuck = _lost_run(spec)
    client = api("manager")
    # sent a moment ago: Run now answers the same run
    answer = client.post(f"/api/projects/study/calibration/specs/{spec.pk}/runs/")
    assert answer.status_code == 202 and answer.json()["id"] == stuck.pk
    CalibrationRun.objects.filter(pk=stuck.pk).update(enqueued_at=_dead())
    with TestCase.captureOnCommitCallbacks(execute=True):
        answer = client.post(f"/api/projects/study/calibration/specs/{spec.pk}/runs/")
    assert answer.status_code == 202
    fresh = CalibrationRun.objects.get(pk=answer.json()["id"])
    stuck.refresh_from_db()
    assert fresh.pk != stuck.pk and fresh.status == RunStatus.DONE
    assert stuck.status == RunStatus.FAILED and stuck.error == REPLACED_ERROR
    assert fresh.input_id == stuck.input_id  # the snapshot is not stored again


def test_run_now_on_a_running_run_whose_heartbeat_lapsed_replaces_it(spec):
    stuck = _lost_run(spec)
    CalibrationRun.objects.filter(pk=stuck.pk).update(
        status=RunStatus.RUNNING, started_at=_dead(), heartbeat_at=_dead(), attempts=1
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        fresh = calibration_run_start(spec=spec, actor=spec.created_by)
    stuck.refresh_from_db()
    assert fresh.pk != stuck.pk
    assert stuck.error.startswith("replaced: its worker stopped")
    assert CalibrationRun.objects.get(pk=fresh.pk).status == RunStatus.DONE


# -- heartbeats ----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_long_single_step_still_heartbeats(project, settings, monkeypatch):
    settings.CERTLABEL_HEARTBEAT_SECONDS = 0.05
    from certification.services import calibration as calibration_module

    # no transaction to defer to here: keep the task from running at once (also the run that
    # the spec's staleness mark requests in-process when the spec is created)
    monkeypatch.setattr(calibration_module, "_enqueue_execute", lambda run_id: None)
    calibration_project(project, {"calibration": _questions("c", 5)})
    spec = make_spec(project)
    with transaction.atomic():  # the request runs inside its caller's transaction
        run = calibration_run_request(spec=spec, trigger="manual")
    assert CalibrationRun.objects.get(pk=run.pk).status == RunStatus.PENDING
    seen: list[Any] = []

    real = calibration_module.calibration_result_compute

    def one_long_step(**kwargs: Any) -> Any:
        started = CalibrationRun.objects.get(pk=run.pk).heartbeat_at
        time.sleep(0.6)  # one step of the computation, longer than many heartbeats
        seen.append((started, CalibrationRun.objects.get(pk=run.pk).heartbeat_at))
        return real(**kwargs)

    monkeypatch.setattr(calibration_module, "calibration_result_compute", one_long_step)
    done = calibration_run_execute(run_id=run.pk)
    assert done.status == RunStatus.DONE
    ((started, later),) = seen
    assert started is not None and later > started


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stops_once_the_row_is_no_longer_its_attempt(project, settings):
    settings.CERTLABEL_HEARTBEAT_SECONDS = 0.05
    calibration_project(project, {"calibration": _questions("c", 3)})
    with transaction.atomic():
        run = calibration_run_request(spec=make_spec(project), trigger="manual")
        CalibrationRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, attempts=2)
    heartbeat = Heartbeat(CalibrationRun, run.pk, attempts=2)
    with heartbeat:
        time.sleep(0.3)
        beaten = CalibrationRun.objects.get(pk=run.pk).heartbeat_at
        assert beaten is not None
        # recovery took it back (another attempt now holds it): no more heartbeats
        CalibrationRun.objects.filter(pk=run.pk).update(attempts=3, heartbeat_at=None)
        time.sleep(0.3)
        assert not heartbeat._thread.is_alive()
    assert CalibrationRun.objects.get(pk=run.pk).heartbeat_at is None


# -- builds --------------------------------------------------------------------------------------
def _lost_build(project: Project) -> tuple[Any, ReleaseBuild]:
    with TestCase.captureOnCommitCallbacks(execute=False):
        release = release_freeze(project=project, actor=_user("manager"), version="1")
    return release, release.builds.get()


def test_a_dead_build_is_built_again_by_recovery(demo):  # noqa: F811
    release, build = _lost_build(demo)
    ReleaseBuild.objects.filter(pk=build.pk).update(
        status=BuildStatus.RUNNING, started_at=_dead(), heartbeat_at=_dead(), attempts=1
    )
    # while it is "running", a second builder is refused
    with pytest.raises(Conflict):
        release_build_execute(build_id=build.pk)
    report = _recover()
    assert report.builds_requeued == [build.pk]
    build.refresh_from_db()
    assert build.status == BuildStatus.DONE and build.attempts == 2, build.error
    assert build.storage_prefix == f"{demo.pk}/{release.pk}/{build.pk}/"
    assert len(build.manifest_sha256) == 64


def test_a_build_whose_task_was_lost_is_sent_again(demo):  # noqa: F811
    _, build = _lost_build(demo)
    assert _recover().builds_requeued == []
    ReleaseBuild.objects.filter(pk=build.pk).update(enqueued_at=_dead())
    assert _recover().builds_requeued == [build.pk]
    build.refresh_from_db()
    assert build.status == BuildStatus.DONE


def test_a_restarted_build_removes_what_its_killed_attempt_left(demo):  # noqa: F811
    _, build = _lost_build(demo)
    left = build_workdir(build.pk, 1)
    left.mkdir(parents=True)
    (left / "labels.csv").write_bytes(b"question_id,")
    ReleaseBuild.objects.filter(pk=build.pk).update(attempts=1)  # a first attempt was killed
    done = release_build_execute(build_id=build.pk)
    assert done.status == BuildStatus.DONE and done.attempts == 2
    assert not left.exists() and list(build_work_root().iterdir()) == []


def test_a_build_whose_worker_keeps_dying_is_failed_after_the_attempt_cap(demo, settings):  # noqa: F811
    settings.CERTLABEL_WORK_MAX_ATTEMPTS = 2
    _, build = _lost_build(demo)
    ReleaseBuild.objects.filter(pk=build.pk).update(
        status=BuildStatus.RUNNING, started_at=_dead(), heartbeat_at=_dead(), attempts=2
    )
    assert _recover().builds_failed == [build.pk]
    build.refresh_from_db()
    assert build.status == BuildStatus.FAILED and "stopped 2 times" in build.error


def test_rebuild_restarts_a_first_build_whose_worker_died(demo, api):  # noqa: F811
    release, build = _lost_build(demo)
    ReleaseBuild.objects.filter(pk=build.pk).update(
        status=BuildStatus.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    # alive: there is nothing finished to compare with yet
    with pytest.raises(Conflict) as caught:
        release_rebuild(release=release, actor=_user("manager"))
    assert "no finished build to compare with" in caught.value.message
    # dead for just over the lapse (not 66 minutes): Rebuild builds it again
    ReleaseBuild.objects.filter(pk=build.pk).update(heartbeat_at=_dead())
    with TestCase.captureOnCommitCallbacks(execute=True):
        again = release_rebuild(release=release, actor=_user("manager"))
    assert again.pk == build.pk
    again.refresh_from_db()
    assert again.status == BuildStatus.DONE, again.error


# -- working directories of killed builds -------------------------------------------------------
def test_a_finished_build_leaves_no_working_directory(demo):  # noqa: F811
    with TestCase.captureOnCommitCallbacks(execute=True):
        release = release_freeze(project=demo, actor=_user("manager"), version="1")
    assert release.builds.get().status == BuildStatus.DONE
    root = build_work_root()
    assert not root.exists() or list(root.iterdir()) == []


def test_recovery_removes_the_directory_a_killed_build_left_behind(demo):  # noqa: F811
    release, build = _lost_build(demo)
    # a build killed mid-way: its directory is left with half-written files
    left = build_workdir(build.pk, 1)
    left.mkdir(parents=True)
    (left / "labels.jsonl").write_bytes(b'{"half": ')
    ReleaseBuild.objects.filter(pk=build.pk).update(
        status=BuildStatus.RUNNING, started_at=_dead(), heartbeat_at=_dead(), attempts=1
    )
    # and one of a build that is running right now, which must be kept
    with TestCase.captureOnCommitCallbacks(execute=False):
        rebuild_release = release_freeze(project=demo, actor=_user("manager"), version="2")
    alive = rebuild_release.builds.get()
    ReleaseBuild.objects.filter(pk=alive.pk).update(
        status=BuildStatus.RUNNING,
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
        attempts=2,
    )
    kept = build_workdir(alive.pk, 2)
    kept.mkdir(parents=True)
    # one of that build's earlier, killed attempt, and one of a build that no longer exists
    earlier = build_workdir(alive.pk, 1)
    earlier.mkdir(parents=True)
    orphan = build_workdir(alive.pk + 1000, 1)
    orphan.mkdir(parents=True)
    report = _recover()
    assert report.builds_requeued == [build.pk]
    assert report.workdirs_removed == sorted([build.pk, alive.pk, alive.pk + 1000])
    assert not left.exists() and not orphan.exists() and not earlier.exists()
    assert kept.is_dir()
    build.refresh_from_db()
    assert build.status == BuildStatus.DONE
    assert list(build_work_root().iterdir()) == [kept]


def test_a_restarted_build_removes_what_its_killed_attempt_left(demo):  # noqa: F811
    _, build = _lost_build(demo)
    left = build_workdir(build.pk, 1)
    left.mkdir(parents=True)
    (left / "labels.csv").write_bytes(b"question_id,")
    ReleaseBuild.objects.filter(pk=build.pk).update(attempts=1)  # a first attempt was killed
    done = release_build_execute(build_id=build.pk)
    assert done.status == BuildStatus.DONE and done.attempts == 2
    assert not left.exists() and list(build_work_root().iterdir()) == []
