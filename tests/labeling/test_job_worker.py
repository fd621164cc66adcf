"""Background jobs in a real Celery worker (PostgreSQL + Redis): the request returns at once.

A large workload import and starting labelling on a large project are answered 202 in well
under a second while a separate worker process does the work; the job's progress is visible
(its lease's heartbeat thread) while it runs. A worker killed with SIGKILL in the middle of an
import loses nothing: the background engine's recovery pass finds its lapsed lease and another
worker completes it.
Skips without the services, fails with ``CERTLABEL_REQUIRE_SERVICES=1`` (as the worker test of
``test_celery_worker`` does).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from labeling import engine
from labeling.celery import app as celery_app
from labeling.models import ImportBatch, Item, Job, JobStatus, Project, Question, Role
from tests.conftest import jsonl_bytes, native_record
from tests.labeling.test_celery_worker import (
    REPO,
    _require_services,
    _stop_worker,
    _test_database_url,
)

pytestmark = pytest.mark.celery_worker

JOB_TIMEOUT = 300.0
# 20,000 items: the import runs for seconds, so the 0.05 s poll sees it mid-way (2,000 questions
# took 0.33 s, shorter than a heartbeat and a poll together, and the progress went unseen).
QUESTIONS = 10_000
HEARTBEAT = 0.1
POLL = 0.05


def _start_worker(
    log: Path, job_root: Path, heartbeat: float, lapse: float = 30.0
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="labeling.settings",
        DATABASE_URL=_test_database_url(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        CELERY_RESULT_BACKEND=settings.CELERY_RESULT_BACKEND,
        CELERY_TASK_ALWAYS_EAGER="false",
        CERTLABEL_JOB_ROOT=str(job_root),
        CERTLABEL_WORK_HEARTBEAT_SECONDS=str(heartbeat),
        CERTLABEL_WORK_LAPSE_SECONDS=str(lapse),
    )
    command = [
        sys.executable, "-m", "celery", "-A", "labeling", "worker",
        "--pool=solo", "--concurrency=1", "-Q", "builds", "-n", f"jobs-{os.getpid()}@%h",
        "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO",
    ]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def _purge_builds_queue() -> None:
    with celery_app.connection_for_write() as conn:
        conn.default_channel.queue_purge("builds")


@pytest.fixture
def producer(settings: Any) -> Any:
    """Send tasks to the broker (not eager) and make every upload and start a job."""
    _require_services()
    settings.JOB_IMPORT_BYTES = 1024
    settings.JOB_START_ITEMS = 100
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    try:
        _purge_builds_queue()
    except Exception:  # the queue does not exist yet
        pass
    yield
    celery_app.conf.task_always_eager = eager


def _wait(job_id: int, worker: subprocess.Popen[bytes], log: Path) -> tuple[Job, list[Job]]:
    """Poll the job until it ends; return it and every state seen while it ran."""
    seen: list[Job] = []
    deadline = time.monotonic() + JOB_TIMEOUT
    while True:
        job = Job.objects.get(pk=job_id)
        seen.append(job)
        if job.finished:
            return job, seen
        assert worker.poll() is None, f"worker exited:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"job {job_id} not done:\n{log.read_text()}"
        time.sleep(POLL)


def _warm_up(client: Any) -> None:
    """Do what a served process has done after its first requests: load the URLs, the views,
    the import formats, and open the broker connection (one-time costs, not the request's)."""
    assert client.get("/api/projects/study/jobs/").status_code == 200
    assert client.post("/api/projects/study/imports/", {}, format="multipart").status_code == 400
    reverse("api-job-detail", kwargs={"slug": "study", "job_id": 1})
    with celery_app.producer_or_acquire() as producer:
        producer.connection.ensure_connection(max_retries=3)


def _states(seen: list[Job]) -> list[tuple[str, int, int]]:
    return [(s.status, s.progress_done, s.progress_total) for s in seen]


def _upload(n: int) -> SimpleUploadedFile:
    data = jsonl_bytes([native_record(f"q{i}") for i in range(1, n + 1)])
    return SimpleUploadedFile("large.jsonl", data, content_type="application/x-ndjson")


@pytest.mark.django_db(transaction=True)
def test_a_large_import_and_a_large_start_run_in_the_worker_while_the_request_returns_at_once(
    api, project, producer, _job_storage, tmp_path
):
    client = api(Role.MANAGER)
    _warm_up(client)
    log = tmp_path / "worker.log"
    worker = _start_worker(log, _job_storage, heartbeat=HEARTBEAT)
    try:
        # when a manager uploads a large file
        upload = _upload(QUESTIONS)
        began = time.monotonic()
        response = client.post("/api/projects/study/imports/", {"file": upload}, format="multipart")
        import_seconds = time.monotonic() - began

        # then the request answers 202 before anything is imported (the worker imports in one
        # transaction, which takes seconds for this file; the request's time is logged below,
        # not asserted: a loaded machine is no failure)
        assert response.status_code == 202, response.content
        assert not Question.objects.filter(project=project).exists()
        job_id = response.json()["id"]
        # and the worker imports it; its progress is visible while it runs
        job, seen = _wait(job_id, worker, log)
        assert job.status == JobStatus.DONE, job.error
        assert job.result["created"]["questions"] == QUESTIONS
        assert Question.objects.filter(project=project).count() == QUESTIONS
        assert any(
            s.status == JobStatus.RUNNING and 0 < s.progress_done < s.progress_total for s in seen
        ), f"no progress was seen while the import ran: {_states(seen)}\n{log.read_text()}"
        assert job.result["batch"] == ImportBatch.objects.get(project=project).pk
        body = client.get(f"/api/projects/study/jobs/{job_id}/").json()
        assert (body["status"], body["percent"]) == ("done", 100)

        # when the manager starts labelling on its 20,000 items
        began = time.monotonic()
        response = client.post("/api/projects/study/labelling/start/")
        start_seconds = time.monotonic() - began

        # then the request answers 202 before labelling has started, and the worker starts it
        assert response.status_code == 202, response.content
        project.refresh_from_db()
        assert project.labelling_started_at is None
        job, _ = _wait(response.json()["id"], worker, log)
        assert job.status == JobStatus.DONE, job.error
        assert job.result["items"] == 2 * QUESTIONS
        project.refresh_from_db()
        assert project.labelling_started_at is not None
        assert Item.objects.filter(project=project, queue_position__isnull=True).count() == 0
        logging.getLogger(__name__).warning(
            "job_worker.request_seconds",
            extra={
                "import_request": round(import_seconds, 3),
                "start_request": round(start_seconds, 3),
            },
        )
    finally:
        _stop_worker(worker)


@pytest.mark.django_db(transaction=True)
def test_an_import_whose_worker_is_killed_is_recovered_and_completed_by_another_worker(
    api, project, producer, settings, _job_storage, tmp_path
):
    settings.CERTLABEL_WORK_LAPSE_SECONDS = 3.0
    client = api(Role.MANAGER)
    log = tmp_path / "worker.log"
    worker = _start_worker(log, _job_storage, heartbeat=HEARTBEAT, lapse=3.0)
    try:
        response = client.post(
            "/api/projects/study/imports/", {"file": _upload(QUESTIONS)}, format="multipart"
        )
        assert response.status_code == 202
        job_id = response.json()["id"]
        # given the worker is in the middle of the import
        deadline = time.monotonic() + JOB_TIMEOUT
        while not 0 < (job := Job.objects.get(pk=job_id)).progress_done < job.progress_total:
            assert not job.finished, f"the import ended before it was seen mid-way: {job.status}"
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(POLL)
        # when it is killed with SIGKILL (its transaction is rolled back)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        killed = Job.objects.get(pk=job_id)
        assert killed.status == JobStatus.RUNNING and killed.lease_owner != ""
        assert not Question.objects.filter(project=project).exists()
        # and another worker comes; the recovery pass finds the lapsed lease
        worker = _start_worker(log, _job_storage, heartbeat=HEARTBEAT, lapse=3.0)
        assert engine.recover().resent.get("job", []) == []  # not lapsed yet
        time.sleep(settings.CERTLABEL_WORK_LAPSE_SECONDS + 0.5)
        assert engine.recover().resent.get("job") == [job_id]
        # then the job is run again, to the end, exactly once
        job, _ = _wait(job_id, worker, log)
        assert job.status == JobStatus.DONE, job.error
        assert job.attempts == 2 and job.lease_owner == ""
        assert Question.objects.filter(project=project).count() == QUESTIONS
        assert ImportBatch.objects.filter(project=project).count() == 1
        assert Project.objects.get(pk=project.pk).jobs.count() == 1
    finally:
        _stop_worker(worker)
