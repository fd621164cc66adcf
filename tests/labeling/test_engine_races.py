"""Races of the background engine found by trying to break it: a worker that lost its lease
fails nothing, a retry in another process takes its task's lease back, a restarted process
with its old pid does not keep a dead lease, a resumed job counts its progress again, and the
freshness API says when a worker was lost.
"""

from __future__ import annotations

import dataclasses
import io
import os
import socket
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import TestCase
from django.utils import timezone

from certification.api.derived import freshness_json
from certification.models import BuildStatus, DerivedResultState, ReleaseBuild
from certification.selectors import derived_freshness
from certification.services.derived import derived_recompute
from certification.services.releases import (
    release_build_execute,
    release_build_fail,
    release_freeze,
)
from certification.services.releases.build import RELEASE_BUILD, build_workdir
from labeling import engine
from labeling.derived import derived_mark
from labeling.models import DerivedKind, Job, JobStatus, Role
from labeling.services import jobs as jobs_module
from labeling.services.jobs import job_execute, workload_import_job_start
from tests.certification.services.test_release_build import _demo, _user
from tests.conftest import jsonl_bytes, native_record

pytestmark = pytest.mark.django_db


def _dead() -> Any:
    return timezone.now() - engine.lapse() - timedelta(seconds=1)


def test_a_worker_that_lost_its_lease_cannot_fail_the_build_recovery_sent_again(
    settings, monkeypatch
):
    settings.DEBUG = True
    project = _demo()
    with TestCase.captureOnCommitCallbacks(execute=False):
        release = release_freeze(project=project, actor=_user("manager"), version="1")
    build = release.builds.get()
    old = "another-host:4242.1:old-task"  # alive, but its heartbeat lapsed (a long pause)
    ReleaseBuild.objects.filter(pk=build.pk).update(
        status=BuildStatus.RUNNING, lease_owner=old, heartbeat_at=_dead(), attempts=1
    )
    workdir = build_workdir(build.pk, 1)
    workdir.mkdir(parents=True)  # the old worker is still writing here
    kind = engine._kinds[RELEASE_BUILD]
    monkeypatch.setitem(
        engine._kinds, RELEASE_BUILD, dataclasses.replace(kind, send=lambda pk: None)
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        report = engine.recover()
    assert report.resent.get(RELEASE_BUILD) == [build.pk]
    assert not workdir.exists()  # the pass removed the old attempt's folder
    # the old worker's next write fails, and its task fails the build with its own owner
    release_build_fail(build_id=build.pk, error="FileNotFoundError: gone", lease_owner=old)
    build.refresh_from_db()
    assert (build.status, build.error) == (BuildStatus.PENDING, "")
    # the task sent again builds it
    done = release_build_execute(build_id=build.pk, task_id="resent")
    assert (done.status, done.attempts) == (BuildStatus.DONE, 2)


def test_a_retry_in_another_process_takes_its_tasks_lease_back(project):
    derived_mark(project_id=project.pk, kinds=[DerivedKind.AGREEMENT])
    # the first attempt ran in a sibling pool child, hit a database error and re-raised it:
    # the lease stays its task's, with a fresh heartbeat
    sibling = f"{socket.gethostname()}:{os.getppid()}.1:task-x"
    DerivedResultState.objects.create(
        project=project,
        kind=DerivedKind.AGREEMENT,
        lease_owner=sibling,
        heartbeat_at=timezone.now(),
        attempts=1,
    )
    # Celery's retry (same task id) runs in this process
    outcome = derived_recompute(
        project_id=project.pk, kind=DerivedKind.AGREEMENT, compute=lambda pk: None, task_id="task-x"
    )
    assert outcome == "done"
    # another task is turned away while a live lease holds it
    DerivedResultState.objects.filter(project=project).update(
        lease_owner=sibling, heartbeat_at=timezone.now()
    )
    derived_mark(project_id=project.pk, kinds=[DerivedKind.AGREEMENT])
    outcome = derived_recompute(
        project_id=project.pk, kind=DerivedKind.AGREEMENT, compute=lambda pk: None, task_id="task-y"
    )
    assert outcome == "busy"


def test_a_lease_of_a_dead_process_whose_pid_came_back_is_recovered_on_sqlite(project, member):
    if connection.vendor != "sqlite":
        pytest.skip("the owner-process rule applies on SQLite only")
    # the process that ran the job was restarted and got the same pid (as in a container):
    # its start time differs
    job = Job.objects.create(
        project=project,
        kind="labelling_start",
        actor=member(Role.MANAGER),
        status=JobStatus.RUNNING,
        lease_owner=f"{socket.gethostname()}:{os.getpid()}.1:task-of-the-dead-process",
        heartbeat_at=timezone.now() - timedelta(hours=6),
        attempts=1,
    )
    assert job.worker_lost
    with TestCase.captureOnCommitCallbacks(execute=False):
        report = engine.recover()
    assert report.resent.get("job") == [job.pk]


def test_a_resumed_import_job_counts_its_progress_again(project, member, _job_storage):
    data = jsonl_bytes([native_record(f"q{i}") for i in range(20)])
    with TestCase.captureOnCommitCallbacks(execute=False):
        job = workload_import_job_start(
            project=project,
            stream=io.BytesIO(data),
            format_name="native",
            filename="w.jsonl",
            actor=member(Role.MANAGER),
        )
    # the first attempt had read 90 % of the file when its worker died
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        lease_owner="another-host:1.1:t1",
        heartbeat_at=_dead(),
        attempts=1,
        progress_done=int(len(data) * 0.9),
    )
    seen: list[tuple[int, int]] = []
    real = jobs_module._run_import

    def spy(job: Any, progress: Any) -> Any:
        result = real(job, progress)
        seen.append((progress.done, job.progress_total))
        return result

    jobs_module.RUNNERS[jobs_module.JobKind.WORKLOAD_IMPORT] = spy
    try:
        done = job_execute(job_id=job.pk, task_id="t2")
    finally:
        jobs_module.RUNNERS[jobs_module.JobKind.WORKLOAD_IMPORT] = real
    assert done.status == JobStatus.DONE
    assert seen == [(len(data), len(data))]


def test_the_freshness_api_says_when_a_worker_was_lost(project):
    derived_mark(project_id=project.pk, kinds=[DerivedKind.AGREEMENT])
    DerivedResultState.objects.create(
        project=project, kind=DerivedKind.AGREEMENT, lease_owner="h:1.1:t", heartbeat_at=_dead()
    )
    fresh = derived_freshness(project=project)[DerivedKind.AGREEMENT]
    assert fresh.worker_lost and freshness_json(fresh)["worker_lost"] is True


def test_a_recomputation_whose_lease_was_taken_over_records_nothing(project):
    derived_mark(project_id=project.pk, kinds=[DerivedKind.AGREEMENT])

    def paused_then_taken_over(project_id: int) -> None:
        # the worker paused past the lapse; another one took the lease over meanwhile
        DerivedResultState.objects.filter(project_id=project_id).update(
            lease_owner="other-host:7.1:other-task", heartbeat_at=timezone.now()
        )

    outcome = derived_recompute(
        project_id=project.pk,
        kind=DerivedKind.AGREEMENT,
        compute=paused_then_taken_over,
        task_id="slow-task",
    )
    state = DerivedResultState.objects.get(project=project, kind=DerivedKind.AGREEMENT)
    fresh = derived_freshness(project=project)[DerivedKind.AGREEMENT]
    # the changes stay for the new holder; the stale one covered nor freed anything
    assert outcome == "done" and fresh.newer_changes == 1
    assert (state.covered_generation, state.computed_at) == (0, None)
    assert state.lease_owner == "other-host:7.1:other-task"
