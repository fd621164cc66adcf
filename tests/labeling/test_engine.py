"""The background engine (labeling.engine): a task retry takes its own lease back at once and
counts no new attempt; periodic tasks act once per period however many callers; on SQLite a
lease whose owner process still runs on this host is never taken; a failed send is sent again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import TestCase
from django.utils import timezone

from certification.models import CalibrationRun, DerivedResultState, RunStatus
from certification.services import calibration_run_execute, calibration_run_request
from certification.services.calibration import CALIBRATION_RUN
from certification.services.derived import derived_recompute
from labeling import engine
from labeling.derived import derived_mark
from labeling.models import DerivedChange, DerivedKind, Job, JobKind, JobStatus, PeriodicRun, Role
from labeling.tasks import work_recover_task
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

AGREEMENT = DerivedKind.AGREEMENT


def _ago(seconds: float) -> Any:
    return timezone.now() - timedelta(seconds=seconds)


def _dead_beat() -> Any:
    """A heartbeat just older than the lapse."""
    return timezone.now() - engine.lapse() - timedelta(seconds=1)


# -- (1) a task retry takes its own lease back at once; another task is turned away -----------
def test_a_retry_of_the_same_task_takes_its_own_derived_lease_back_at_once(project):
    derived_mark(project_id=project.pk, kinds=[AGREEMENT])
    # the task's first attempt claimed the lease, then its database connection broke (the lease
    # stays its own, with a fresh heartbeat: nobody else may take it yet)
    first = engine.owner("task-x")
    state = DerivedResultState.objects.create(
        project=project, kind=AGREEMENT, lease_owner=first, heartbeat_at=_ago(1), attempts=1
    )
    computed: list[int] = []

    def compute(project_id: int) -> None:
        computed.append(project_id)

    # another task (another id) is busy: it computes nothing and leaves the lease alone
    assert (
        derived_recompute(project_id=project.pk, kind=AGREEMENT, compute=compute, task_id="task-y")
        == "busy"
    )
    assert computed == []
    state.refresh_from_db()
    assert state.lease_owner == first
    assert DerivedChange.objects.filter(project=project, kind=AGREEMENT).exists()
    # the retry of the same task (same id) computes at once, and counts no new attempt
    assert (
        derived_recompute(project_id=project.pk, kind=AGREEMENT, compute=compute, task_id="task-x")
        == "done"
    )
    assert computed == [project.pk]
    state.refresh_from_db()
    assert (state.lease_owner, state.attempts) == ("", 1)
    assert not DerivedChange.objects.filter(project=project, kind=AGREEMENT).exists()


@pytest.fixture
def run(project: Any, monkeypatch: pytest.MonkeyPatch) -> CalibrationRun:
    """A pending calibration run whose task is not sent (the test runs it)."""
    kind = engine._kinds[CALIBRATION_RUN]
    monkeypatch.setitem(
        engine._kinds, CALIBRATION_RUN, dataclasses.replace(kind, send=lambda pk: None)
    )
    records = [
        rec(f"c{i}", [cand("a", answer="x", score=1.0, label="admissible", selected=True)])
        for i in range(10)
    ]
    calibration_project(project, {"calibration": records})
    with TestCase.captureOnCommitCallbacks(execute=False):
        return calibration_run_request(spec=make_spec(project), trigger="manual")


def test_a_retry_of_the_same_task_computes_a_run_another_task_leaves_alone(run):
    started = _ago(3)
    CalibrationRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        lease_owner=engine.owner("task-x"),
        heartbeat_at=_ago(1),
        started_at=started,
        attempts=1,
    )
    # another task: the run is left as the live holder has it
    other = calibration_run_execute(run_id=run.pk, task_id="task-y")
    assert (other.status, other.attempts) == (RunStatus.RUNNING, 1)
    # the same task again: it computes, and counts no new attempt
    done = calibration_run_execute(run_id=run.pk, task_id="task-x")
    assert done.status == RunStatus.DONE, done.error
    assert (done.attempts, done.lease_owner) == (1, "")
    assert done.started_at == started  # kept from the first attempt


# -- (2) a retry by the same owner does not count a new attempt -------------------------------
def test_a_claim_by_the_same_owner_counts_no_new_attempt_and_passes_the_cap(run, settings):
    settings.CERTLABEL_WORK_MAX_ATTEMPTS = 2
    cap = engine.max_attempts()
    a, b, c = (engine.owner(f"task-{n}") for n in "abc")
    assert engine.claim(CalibrationRun, run.pk, lease_owner=a, cap=cap) == 1
    first_start = CalibrationRun.objects.get(pk=run.pk).started_at
    # the same owner again (a retry of its task): the same attempt
    assert engine.claim(CalibrationRun, run.pk, lease_owner=a, cap=cap) == 1
    assert engine.claim(CalibrationRun, run.pk, lease_owner=a, cap=cap) == 1
    # another owner while a's heartbeat is fresh: refused
    assert engine.claim(CalibrationRun, run.pk, lease_owner=b, cap=cap) is None
    # a's heartbeat lapsed: b takes it over, a second attempt; the first start is kept
    CalibrationRun.objects.filter(pk=run.pk).update(heartbeat_at=_dead_beat())
    assert engine.claim(CalibrationRun, run.pk, lease_owner=b, cap=cap) == 2
    row = CalibrationRun.objects.get(pk=run.pk)
    assert (row.lease_owner, row.attempts, row.started_at) == (b, 2, first_start)
    # at the cap, b's own retry is still its attempt; a third owner gets none
    assert engine.claim(CalibrationRun, run.pk, lease_owner=b, cap=cap) == 2
    CalibrationRun.objects.filter(pk=run.pk).update(heartbeat_at=_dead_beat())
    assert engine.claim(CalibrationRun, run.pk, lease_owner=c, cap=cap) is None
    assert CalibrationRun.objects.get(pk=run.pk).attempts == 2


def test_a_job_retried_by_its_own_task_runs_without_a_new_attempt(project, member):
    manager = member(Role.MANAGER)
    job = Job.objects.create(
        project=project,
        kind=JobKind.LABELLING_START,
        actor=manager,
        status=JobStatus.RUNNING,
        lease_owner=engine.owner("job-task"),
        heartbeat_at=_ago(1),
        started_at=_ago(2),
        attempts=1,
    )
    # another task's delivery is turned away (the lease is live)
    assert engine.claim(Job, job.pk, lease_owner=engine.owner("other")) is None
    # the same task retried: it takes its lease back and finishes the job, still attempt 1
    assert engine.claim(Job, job.pk, lease_owner=engine.owner("job-task")) == 1
    assert engine.release(
        Job,
        job.pk,
        lease_owner=engine.owner("job-task"),
        status=JobStatus.DONE,
        finished_at=timezone.now(),
    )
    job.refresh_from_db()
    assert (job.status, job.attempts, job.lease_owner) == (JobStatus.DONE, 1, "")


# -- (3) periodic tasks act once per period, however many callers ----------------------------
def test_periodic_due_acts_once_per_period_for_two_callers():
    t0 = timezone.now()
    # two beats send the task at the same moment: one acts
    assert [engine.periodic_due("tick", 60, now=t0) for _ in range(2)] == [True, False]
    # within the period neither acts again
    assert engine.periodic_due("tick", 60, now=t0 + timedelta(seconds=30)) is False
    assert engine.periodic_due("tick", 60, now=t0 + timedelta(seconds=53)) is False
    # once most of the period (90 %) has passed, one of the two acts again
    later = t0 + timedelta(seconds=55)
    assert [engine.periodic_due("tick", 60, now=later) for _ in range(2)] == [True, False]
    assert PeriodicRun.objects.get(name="tick").last_at == later
    # another task's period is its own
    assert engine.periodic_due("other", 60, now=later) is True


def test_the_recovery_task_runs_one_pass_per_period(monkeypatch, settings):
    settings.CERTLABEL_WORK_RECOVER_SECONDS = 10
    passes: list[int] = []
    monkeypatch.setattr(engine, "recover", lambda **kw: passes.append(1) or engine.RecoveryReport())
    results = [work_recover_task.apply().get() for _ in range(3)]
    assert len(passes) == 1
    assert results[1:] == [{"resent": {}, "failed": {}}] * 2
    # a period later the next beat acts
    PeriodicRun.objects.filter(name="work-recover").update(last_at=_ago(10))
    work_recover_task.apply().get()
    assert len(passes) == 2


# -- (4) SQLite: a lease whose owner process still runs here is not lapsed --------------------
def _dead_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])  # noqa: S603
    process.wait(timeout=30)
    return process.pid


def _held_job(project: Any, owner: str) -> Job:
    return Job.objects.create(
        project=project,
        kind=JobKind.LABELLING_START,
        status=JobStatus.RUNNING,
        lease_owner=owner,
        heartbeat_at=_dead_beat(),
        started_at=_ago(600),
        attempts=1,
    )


def test_a_lapsed_lease_whose_owner_still_runs_here_is_taken_only_off_sqlite(project):
    host = socket.gethostname()
    alive = _held_job(project, f"{host}:{os.getpid()}:x")
    dead = _held_job(project, f"{host}:{_dead_pid()}:x")
    with TestCase.captureOnCommitCallbacks(execute=False):  # the jobs are not run here
        report = engine.recover()
    alive.refresh_from_db()
    dead.refresh_from_db()
    # the owner that died lost its job: set back to pending and sent again
    assert (dead.status, dead.lease_owner) == (JobStatus.PENDING, "")
    if connection.vendor == "sqlite":
        # one writer: this process's job, writing for longer than the lapse, blocks its own
        # heartbeat; it is not taken
        assert report.resent.get("job") == [dead.pk]
        assert (alive.status, alive.lease_owner) == (JobStatus.RUNNING, f"{host}:{os.getpid()}:x")
    else:
        # PostgreSQL: heartbeats commit from their own connection; a lapse is a lapse
        assert report.resent.get("job") == [alive.pk, dead.pk]
        assert (alive.status, alive.lease_owner) == (JobStatus.PENDING, "")


# -- sending: enqueued_at records it, a failed send clears it -------------------------------
def test_a_send_records_when_and_a_failed_send_is_left_to_the_recovery_pass(
    project, monkeypatch, caplog
):
    job = Job.objects.create(project=project, kind=JobKind.LABELLING_START)
    sent: list[int] = []
    kind = engine._kinds["job"]
    monkeypatch.setitem(engine._kinds, "job", dataclasses.replace(kind, send=sent.append))
    with TestCase.captureOnCommitCallbacks(execute=True):
        engine.send("job", job.pk)
        assert sent == []  # only after the commit
    job.refresh_from_db()
    assert sent == [job.pk] and job.enqueued_at is not None

    def down(pk: int) -> None:
        raise ConnectionError("the broker is away")

    monkeypatch.setitem(engine._kinds, "job", dataclasses.replace(kind, send=down))
    with (
        caplog.at_level(logging.ERROR, logger="labeling.engine"),
        TestCase.captureOnCommitCallbacks(execute=True),
    ):
        engine.send("job", job.pk)  # never raises
    job.refresh_from_db()
    assert job.enqueued_at is None
    assert "work.send_failed" in caplog.text
    # so the next recovery pass sends it
    monkeypatch.setitem(engine._kinds, "job", dataclasses.replace(kind, send=sent.append))
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert engine.recover().resent.get("job") == [job.pk]
    assert sent == [job.pk, job.pk]


# -- the four settings (a fresh interpreter each: settings are read once per process) --------
SETTINGS_REPORT = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'work': [s.CERTLABEL_WORK_HEARTBEAT_SECONDS, "
    "s.CERTLABEL_WORK_LAPSE_SECONDS, s.CERTLABEL_WORK_RECOVER_SECONDS, "
    "s.CERTLABEL_WORK_MAX_ATTEMPTS], "
    "'beat': {k: [v['task'], v['schedule']] for k, v in s.CELERY_BEAT_SCHEDULE.items()}, "
    "'old': [n for n in dir(s) if n in ('JOB_HEARTBEAT_SECONDS', 'JOB_HEARTBEAT_LAPSE', "
    "'JOB_MAX_ATTEMPTS', 'CERTLABEL_HEARTBEAT_SECONDS', 'CERTLABEL_DERIVED_RECONCILE_SECONDS', "
    "'CERTLABEL_DERIVED_QUEUED_STALE', 'CERTLABEL_DERIVED_RUNNING_STALE')]}))"
)


def _settings_run(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "CELERY_", "CERTLABEL_WORK_"))
    }
    clean.update(env, DJANGO_SETTINGS_MODULE="labeling.settings")
    return subprocess.run(  # noqa: S603
        [sys.executable, "-c", SETTINGS_REPORT],
        cwd=Path(__file__).resolve().parents[2],
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_four_settings_and_one_beat_entry_drive_the_engine():
    result = _settings_run()
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["work"] == [5.0, 30.0, 10.0, 3]
    assert got["beat"]["work-recover"] == ["labeling.tasks.work_recover_task", 10.0]
    assert not {"derived-reconcile", "jobs-recover", "stalled-work-recover"} & set(got["beat"])
    assert got["old"] == []
    result = _settings_run(CERTLABEL_WORK_RECOVER_SECONDS="3", CERTLABEL_WORK_MAX_ATTEMPTS="5")
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["work"] == [5.0, 30.0, 3.0, 5]
    assert got["beat"]["work-recover"][1] == 3.0


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CERTLABEL_WORK_HEARTBEAT_SECONDS": "30"}, "CERTLABEL_WORK_HEARTBEAT_SECONDS"),
        ({"CERTLABEL_WORK_HEARTBEAT_SECONDS": "0"}, "CERTLABEL_WORK_HEARTBEAT_SECONDS"),
        ({"CERTLABEL_WORK_RECOVER_SECONDS": "0"}, "CERTLABEL_WORK_RECOVER_SECONDS"),
        ({"CERTLABEL_WORK_MAX_ATTEMPTS": "0"}, "CERTLABEL_WORK_MAX_ATTEMPTS"),
    ],
    ids=["beat-not-below-lapse", "no-beat", "no-recovery", "no-attempt"],
)
def test_settings_that_would_never_recover_refuse_to_start(env, named):
    result = _settings_run(**env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and named in result.stderr


# -- the recovery pass: finished work is only freed, one bad row does not stop the pass -------
def test_a_lapsed_lease_on_finished_work_is_freed_without_sending_it_again(run, monkeypatch):
    sent: list[int] = []
    kind = engine._kinds[CALIBRATION_RUN]
    monkeypatch.setitem(engine._kinds, CALIBRATION_RUN, dataclasses.replace(kind, send=sent.append))
    CalibrationRun.objects.filter(pk=run.pk).update(
        status=RunStatus.DONE, lease_owner="gone:1:x", heartbeat_at=_dead_beat(), attempts=1
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        report = engine.recover()
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.worker_lost) == (RunStatus.DONE, "", False)
    assert sent == [] and CALIBRATION_RUN not in report.resent


def test_a_row_whose_recovery_fails_does_not_stop_the_pass(project, monkeypatch, caplog):
    jobs = [
        Job.objects.create(
            project=project,
            kind=JobKind.LABELLING_START,
            status=JobStatus.RUNNING,
            lease_owner="gone:1:x",
            heartbeat_at=_dead_beat(),
            attempts=1,
        )
        for _ in range(2)
    ]
    sent: list[int] = []

    def send(pk: int) -> None:
        if pk == jobs[0].pk:
            raise RuntimeError("this row's send breaks")
        sent.append(pk)

    kind = engine._kinds["job"]
    # the sender runs inside the pass (on commit, executed at once), so its failure is the row's
    monkeypatch.setitem(engine._kinds, "job", dataclasses.replace(kind, send=send))
    monkeypatch.setattr(engine, "send", lambda name, pk: engine._kinds[name].send(pk))
    with caplog.at_level(logging.ERROR, logger="labeling.engine"):
        report = engine.recover()
    assert sent == [jobs[1].pk] and report.resent["job"] == [jobs[1].pk]
    assert "work.recover_failed" in caplog.text
