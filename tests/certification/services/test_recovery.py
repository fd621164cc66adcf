"""Runs and builds whose worker died or whose task was lost: leases and their heartbeats, the one
lapse rule, the background engine's recovery pass (``labeling.engine.recover``: send again,
attempt cap), "Run now" and Rebuild on dead work, one stored snapshot per distinct input, and
the working directories killed builds leave behind.
"""

from __future__ import annotations

import dataclasses
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
from certification.services.calibration import CALIBRATION_RUN, REPLACED_ERROR
from certification.services.releases import release_build_execute, release_freeze, release_rebuild
from certification.services.releases.build import RELEASE_BUILD, build_work_root, build_workdir
from labeling import engine
from labeling.engine import Lease, RecoveryReport, is_lapsed, lapse
from labeling.exceptions import Conflict
from labeling.models import Project
from tests.certification.services.test_release_build import _demo, _user
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

# Lease owners on another machine: the SQLite rule "a lease whose process still runs on this
# host is not lapsed" (labeling.engine) never applies to them.
DEAD = "another-host:4242:dead-task"
ALIVE = "another-host:4343:live-task"


@pytest.fixture
def demo(settings: Any) -> Project:
    """The demo project, written for each test: these tests may run heartbeat threads with their
    own connections, so they cannot share a module's rolled-back data (``tests/conftest.py``)."""
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


def _held(model: Any, pk: int, *, beat: Any, owner: str = DEAD, attempts: int = 1) -> None:
    """Mark a run or build running, held by ``owner`` whose last heartbeat was at ``beat``."""
    running = RunStatus.RUNNING if model is CalibrationRun else BuildStatus.RUNNING
    model.objects.filter(pk=pk).update(
        status=running,
        lease_owner=owner,
        started_at=_dead(60),
        heartbeat_at=beat,
        attempts=attempts,
        enqueued_at=None,
    )


def _recover() -> RecoveryReport:
    """One recovery pass; the tasks it sends run (eagerly) once it commits."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        return engine.recover()


def _resent(report: RecoveryReport, kind: str) -> list[int]:
    return report.resent.get(kind, [])


def _failed(report: RecoveryReport, kind: str) -> list[int]:
    return report.failed.get(kind, [])


# -- the lapse rule ------------------------------------------------------------------------------
def test_the_lapse_is_half_a_minute_by_default_and_configurable(settings):
    assert lapse() == timedelta(seconds=30)
    settings.CERTLABEL_WORK_LAPSE_SECONDS = 15
    assert lapse() == timedelta(seconds=15)


def test_held_work_lapses_by_its_heartbeat_and_pending_work_by_its_enqueue_time(spec):
    run = _lost_run(spec)
    run.refresh_from_db()
    assert run.enqueued_at is not None and not is_lapsed(run)
    run.enqueued_at = _dead()
    assert is_lapsed(run)
    run.enqueued_at = None  # never sent: its creation counts
    assert not is_lapsed(run)
    run.created_at = _dead()
    assert is_lapsed(run)
    run.status, run.lease_owner = RunStatus.RUNNING, DEAD
    run.started_at, run.heartbeat_at = _dead(600), timezone.now()
    assert not is_lapsed(run) and not run.worker_lost  # an old start, a fresh heartbeat: alive
    run.heartbeat_at = _dead()
    assert is_lapsed(run) and run.worker_lost
    run.heartbeat_at = None  # no heartbeat at all
    assert is_lapsed(run) and run.worker_lost
    run.status, run.lease_owner = RunStatus.DONE, ""
    assert not is_lapsed(run) and not run.worker_lost


# -- recovery of runs ----------------------------------------------------------------------------
def test_a_running_run_whose_heartbeat_lapsed_is_run_again_to_the_end(spec):
    run = _lost_run(spec)
    _held(CalibrationRun, run.pk, beat=_dead())
    report = _recover()
    assert _resent(report, CALIBRATION_RUN) == [run.pk]
    assert _failed(report, CALIBRATION_RUN) == []
    run.refresh_from_db()
    assert run.status == RunStatus.DONE, run.error
    assert run.attempts == 2 and run.lease_owner == ""
    assert run.result["outcome"] == run.outcome != ""
    # nothing left to recover
    assert _resent(_recover(), CALIBRATION_RUN) == []


def test_a_run_with_a_recent_heartbeat_is_left_alone(spec):
    run = _lost_run(spec)
    _held(CalibrationRun, run.pk, beat=timezone.now() - timedelta(seconds=10), owner=ALIVE)
    assert _resent(_recover(), CALIBRATION_RUN) == []
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.attempts == 1
    assert run.lease_owner == ALIVE
    # and a second worker delivered the same run is turned away while the lease is live
    assert calibration_run_execute(run_id=run.pk, task_id="another-task").status == "running"
    run.refresh_from_db()
    assert run.attempts == 1 and run.lease_owner == ALIVE


def test_a_pending_run_whose_task_was_lost_is_sent_again(spec):
    run = _lost_run(spec)
    assert _resent(_recover(), CALIBRATION_RUN) == []  # just sent: not lost yet
    CalibrationRun.objects.filter(pk=run.pk).update(enqueued_at=_dead())
    assert _resent(_recover(), CALIBRATION_RUN) == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.attempts == 1


def test_a_run_whose_worker_keeps_dying_is_failed_closed_after_the_attempt_cap(spec, settings):
    settings.CERTLABEL_WORK_MAX_ATTEMPTS = 3
    run = _lost_run(spec)
    _held(CalibrationRun, run.pk, beat=_dead(), attempts=3)
    report = _recover()
    assert _failed(report, CALIBRATION_RUN) == [run.pk]
    assert _resent(report, CALIBRATION_RUN) == []
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.lease_owner == ""
    assert run.error == "failed: its worker stopped 3 times; not started again"
    assert run.result == {}
    # a late delivery of its task changes nothing
    assert calibration_run_execute(run_id=run.pk).status == RunStatus.FAILED


def test_a_worker_that_recovery_gave_up_on_writes_nothing(spec):
    """The result is written only by the worker that holds the run's lease."""
    run = _lost_run(spec)
    _held(CalibrationRun, run.pk, beat=_dead())
    assert _resent(_recover(), CALIBRATION_RUN) == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.attempts == 2
    # the first worker comes back: its outcome is not written
    assert not engine.release(
        CalibrationRun, run.pk, lease_owner=DEAD, status=RunStatus.FAILED, error="late"
    )
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.error == ""
    # a second delivery of the task finds it done and changes nothing
    again = calibration_run_execute(run_id=run.pk)
    assert again.status == RunStatus.DONE and again.attempts == 2


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
    _held(CalibrationRun, stuck.pk, beat=_dead())
    with TestCase.captureOnCommitCallbacks(execute=True):
        fresh = calibration_run_start(spec=spec, actor=spec.created_by)
    stuck.refresh_from_db()
    assert fresh.pk != stuck.pk
    assert stuck.status == RunStatus.FAILED
    assert stuck.error.startswith("replaced: its worker stopped")
    assert CalibrationRun.objects.get(pk=fresh.pk).status == RunStatus.DONE
    # the replaced run stays failed: the recovery pass does not bring it back
    report = _recover()
    assert stuck.pk not in _resent(report, CALIBRATION_RUN) + _failed(report, CALIBRATION_RUN)
    stuck.refresh_from_db()
    assert stuck.status == RunStatus.FAILED and stuck.error.startswith("replaced:")


# -- heartbeats ----------------------------------------------------------------------------------
def _no_sending(monkeypatch: pytest.MonkeyPatch, kind_name: str) -> None:
    """Keep the engine from sending ``kind_name``'s tasks (restored after the test)."""
    kind = engine._kinds[kind_name]
    monkeypatch.setitem(engine._kinds, kind_name, dataclasses.replace(kind, send=lambda pk: None))


@pytest.mark.django_db(transaction=True)
def test_a_long_single_step_still_heartbeats(project, settings, monkeypatch):
    settings.CERTLABEL_WORK_HEARTBEAT_SECONDS = 0.05
    from certification.certificates import compute as compute_module

    # no transaction to defer to here: keep the task from running at once (also the run that
    # the spec's staleness mark requests in-process when the spec is created)
    _no_sending(monkeypatch, CALIBRATION_RUN)
    calibration_project(project, {"calibration": _questions("c", 5)})
    spec = make_spec(project)
    with transaction.atomic():  # the request runs inside its caller's transaction
        run = calibration_run_request(spec=spec, trigger="manual")
    assert CalibrationRun.objects.get(pk=run.pk).status == RunStatus.PENDING
    seen: list[Any] = []

    real = compute_module.calibration_result_compute

    def one_long_step(**kwargs: Any) -> Any:
        started = CalibrationRun.objects.get(pk=run.pk).heartbeat_at
        time.sleep(0.6)  # one step of the computation, longer than many heartbeats
        seen.append((started, CalibrationRun.objects.get(pk=run.pk).heartbeat_at))
        return real(**kwargs)

    monkeypatch.setattr(compute_module, "calibration_result_compute", one_long_step)
    done = calibration_run_execute(run_id=run.pk)
    assert done.status == RunStatus.DONE and done.lease_owner == ""
    ((started, later),) = seen
    assert started is not None and later > started


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stops_once_the_lease_is_no_longer_its_owners(project, settings):
    settings.CERTLABEL_WORK_HEARTBEAT_SECONDS = 0.05
    calibration_project(project, {"calibration": _questions("c", 3)})
    with transaction.atomic():
        run = calibration_run_request(spec=make_spec(project), trigger="manual")
        CalibrationRun.objects.filter(pk=run.pk).update(
            status=RunStatus.RUNNING, lease_owner=DEAD, heartbeat_at=None, attempts=2
        )
    heartbeat = Lease(CalibrationRun, run.pk, lease_owner=DEAD)
    with heartbeat:
        time.sleep(0.3)
        beaten = CalibrationRun.objects.get(pk=run.pk).heartbeat_at
        assert beaten is not None
        # recovery took it back (another worker now holds it): no more heartbeats
        CalibrationRun.objects.filter(pk=run.pk).update(lease_owner=ALIVE, heartbeat_at=None)
        time.sleep(0.3)
        assert not heartbeat._thread.is_alive()
    assert CalibrationRun.objects.get(pk=run.pk).heartbeat_at is None


# -- builds --------------------------------------------------------------------------------------
def _lost_build(project: Project) -> tuple[Any, ReleaseBuild]:
    with TestCase.captureOnCommitCallbacks(execute=False):
        release = release_freeze(project=project, actor=_user("manager"), version="1")
    return release, release.builds.get()


def test_a_dead_build_is_built_again_by_recovery(demo):
    release, build = _lost_build(demo)
    _held(ReleaseBuild, build.pk, beat=timezone.now(), owner=ALIVE)
    # while its lease is live, a second builder is refused
    with pytest.raises(Conflict):
        release_build_execute(build_id=build.pk, task_id="second-builder")
    # its worker dies: the lease lapses and the recovery builds it again
    ReleaseBuild.objects.filter(pk=build.pk).update(heartbeat_at=_dead())
    report = _recover()
    assert _resent(report, RELEASE_BUILD) == [build.pk]
    build.refresh_from_db()
    assert build.status == BuildStatus.DONE and build.attempts == 2, build.error
    assert build.lease_owner == ""
    assert build.storage_prefix == f"{demo.pk}/{release.pk}/{build.pk}/"
    assert len(build.manifest_sha256) == 64


def test_a_redelivered_task_takes_a_lapsed_build_over(demo):
    _, build = _lost_build(demo)
    _held(ReleaseBuild, build.pk, beat=_dead())
    done = release_build_execute(build_id=build.pk, task_id="redelivered")
    assert done.status == BuildStatus.DONE and done.attempts == 2
    assert done.lease_owner == ""


def test_a_build_whose_task_was_lost_is_sent_again(demo):
    _, build = _lost_build(demo)
    # its task was sent a moment ago: not lost yet
    ReleaseBuild.objects.filter(pk=build.pk).update(enqueued_at=timezone.now())
    assert _resent(_recover(), RELEASE_BUILD) == []
    ReleaseBuild.objects.filter(pk=build.pk).update(enqueued_at=_dead())
    assert _resent(_recover(), RELEASE_BUILD) == [build.pk]
    build.refresh_from_db()
    assert build.status == BuildStatus.DONE


def test_a_build_whose_worker_keeps_dying_is_failed_after_the_attempt_cap(demo, settings):
    settings.CERTLABEL_WORK_MAX_ATTEMPTS = 2
    _, build = _lost_build(demo)
    _held(ReleaseBuild, build.pk, beat=_dead(), attempts=2)
    assert _failed(_recover(), RELEASE_BUILD) == [build.pk]
    build.refresh_from_db()
    assert build.status == BuildStatus.FAILED and build.lease_owner == ""
    assert build.error == "failed: its worker stopped 2 times; not started again"


def test_rebuild_restarts_a_first_build_whose_worker_died(demo):
    release, build = _lost_build(demo)
    _held(ReleaseBuild, build.pk, beat=timezone.now(), owner=ALIVE)
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
    assert again.lease_owner == ""


# -- working directories of killed builds -------------------------------------------------------
def test_a_finished_build_leaves_no_working_directory(demo):
    with TestCase.captureOnCommitCallbacks(execute=True):
        release = release_freeze(project=demo, actor=_user("manager"), version="1")
    assert release.builds.get().status == BuildStatus.DONE
    root = build_work_root()
    assert not root.exists() or list(root.iterdir()) == []


def test_recovery_removes_the_directory_a_killed_build_left_behind(demo):
    release, build = _lost_build(demo)
    # a build killed mid-way: its directory is left with half-written files
    left = build_workdir(build.pk, 1)
    left.mkdir(parents=True)
    (left / "labels.jsonl").write_bytes(b'{"half": ')
    _held(ReleaseBuild, build.pk, beat=_dead())
    # and one of a build that is running right now, which must be kept
    with TestCase.captureOnCommitCallbacks(execute=False):
        rebuild_release = release_freeze(project=demo, actor=_user("manager"), version="2")
    alive = rebuild_release.builds.get()
    _held(ReleaseBuild, alive.pk, beat=timezone.now(), owner=ALIVE, attempts=2)
    kept = build_workdir(alive.pk, 2)
    kept.mkdir(parents=True)
    # one of that build's earlier, killed attempt, and one of a build that no longer exists
    earlier = build_workdir(alive.pk, 1)
    earlier.mkdir(parents=True)
    orphan = build_workdir(alive.pk + 1000, 1)
    orphan.mkdir(parents=True)
    report = _recover()
    assert _resent(report, RELEASE_BUILD) == [build.pk]
    assert not left.exists() and not orphan.exists() and not earlier.exists()
    assert kept.is_dir()
    build.refresh_from_db()
    assert build.status == BuildStatus.DONE
    assert list(build_work_root().iterdir()) == [kept]


def test_a_restarted_build_removes_what_its_killed_attempt_left(demo):
    _, build = _lost_build(demo)
    left = build_workdir(build.pk, 1)
    left.mkdir(parents=True)
    (left / "labels.csv").write_bytes(b"question_id,")
    ReleaseBuild.objects.filter(pk=build.pk).update(attempts=1)  # a first attempt was killed
    done = release_build_execute(build_id=build.pk)
    assert done.status == BuildStatus.DONE and done.attempts == 2
    assert not left.exists() and list(build_work_root().iterdir()) == []
