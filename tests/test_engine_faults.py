"""Fault tests of the background engine (``labeling.engine``) with real processes and its
default timings: heartbeat 5 s, lapse 30 s, a recovery pass every 10 s.

- ``kill -9`` of a whole worker (solo pool) during a large workload import job: a new worker
  finishes it within a minute of starting, importing the file exactly once;
- ``kill -9`` of the pool child only (prefork): done within a minute of the kill;
- ``kill -9`` of a worker during a recomputation of a project's agreement: current within a
  minute of a new worker starting;
- PostgreSQL restarted (``pg_ctlcluster … restart -m fast``) during that recomputation: current
  within 30 s of PostgreSQL accepting connections again (the task's own retry takes its lease
  back at once);
- two ``celery beat`` at once: the recovery pass still acts once per period.

The workers and beats get this process's engine settings (the defaults, unless the environment
sets ``CERTLABEL_WORK_*``), except where a test says otherwise. The work is made long by its
size alone (a workload of thousands of questions, a project of 24,000 votes by 250 raters), with
no test hook in the product. Each test logs its measured seconds with ``logger.warning``.

Runs only on PostgreSQL with a ``redis://`` broker (``tests/labeling/test_celery_worker.py``);
``CERTLABEL_REQUIRE_SERVICES=1`` turns the skip into a failure. The PostgreSQL restart needs
Debian's ``pg_ctlcluster`` and root (else that test is skipped); it restarts the machine's
cluster serving the test database, so nothing else should use that cluster meanwhile.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from django.conf import settings
from django.db import DatabaseError, connection, connections

from certification.models import AgreementReport, DerivedResultState
from certification.selectors import derived_freshness
from certification.services import votes_sha256
from certification.services.derived import derived_recompute_request
from labeling.celery import app as celery_app
from labeling.models import (
    DerivedChange,
    DerivedKind,
    ImportBatch,
    Job,
    JobStatus,
    PeriodicRun,
    Project,
    Question,
    Role,
)
from labeling.selectors import project_votes
from labeling.services import membership_set
from labeling.services.imports import workload_import_file
from labeling.services.jobs import workload_import_in_background, workload_import_job_start
from tests.benchmarks.bench_import import generate
from tests.certification.test_worker_faults import (
    Services,
    _child_of,
    _env,
    _kill_during,
    _queues,
    _wait,
)
from tests.factories import UserFactory
from tests.labeling.test_celery_worker import REPO, _require_services, _stop_worker

pytestmark = [pytest.mark.celery_worker, pytest.mark.slow]
logger = logging.getLogger(__name__)

ENGINE_SETTINGS = (
    "CERTLABEL_WORK_HEARTBEAT_SECONDS",
    "CERTLABEL_WORK_LAPSE_SECONDS",
    "CERTLABEL_WORK_RECOVER_SECONDS",
    "CERTLABEL_WORK_MAX_ATTEMPTS",
)
#: A worker death is healed within the lapse plus one recovery period (plus the work itself).
DONE_WITHIN = 60.0
#: After PostgreSQL is back, the task's own retry finishes the recomputation.
CURRENT_AFTER_DATABASE = 30.0
#: The import job's workload: about 40 MB, some seconds to import.
IMPORT_QUESTIONS = 3500
#: The voted project: a recomputation of its agreement takes some seconds.
VOTED_ITEMS, RATERS, VOTES_PER_ITEM = 8000, 250, 3
#: Seconds between the work being claimed and the fault (mid-way through it).
INTO_THE_WORK = 1.5


# -- the processes ---------------------------------------------------------------------------
def _engine_env(**extra: str) -> dict[str, str]:
    """``_env()`` with this process's engine settings instead of the shortened ones."""
    env = {name: value for name, value in _env().items() if not name.startswith("CERTLABEL_WORK_")}
    env.update({name: str(getattr(settings, name)) for name in ENGINE_SETTINGS})
    # the uploads waiting for a job are in this test's storage
    env["CERTLABEL_JOB_ROOT"] = str(settings.STORAGES["jobs"]["OPTIONS"]["location"])
    env.update(extra)
    return env


class EngineServices(Services):
    """Workers and any number of beats, run with :func:`_engine_env`."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.beats: list[subprocess.Popen[bytes]] = []

    def worker(self, pool: str, **env: str) -> subprocess.Popen[bytes]:
        n = len(self.workers)
        command = [
            sys.executable, "-m", "celery", "-A", "labeling", "worker",
            f"--pool={pool}", "--concurrency=1", "-Q", _queues(), "-n", f"engine{n}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO",
        ]  # fmt: skip
        with (self.directory / f"worker{n}.log").open("wb") as out:
            process = subprocess.Popen(
                command, cwd=REPO, env=_engine_env(**env), stdout=out, stderr=subprocess.STDOUT
            )
        self.workers.append(process)
        return process

    def start_beat(self, **env: str) -> subprocess.Popen[bytes]:
        n = len(self.beats)
        command = [
            sys.executable, "-m", "celery", "-A", "labeling", "beat", "--loglevel=INFO",
            "-s", str(self.directory / f"beat{n}-schedule"),
            "--pidfile", str(self.directory / f"beat{n}.pid"),
        ]  # fmt: skip
        with (self.directory / f"beat{n}.log").open("wb") as out:
            process = subprocess.Popen(
                command, cwd=REPO, env=_engine_env(**env), stdout=out, stderr=subprocess.STDOUT
            )
        self.beats.append(process)
        return process

    def log_of(self, name: str) -> str:
        return (self.directory / name).read_text(errors="replace")

    def runtimes(self, task: str, outcome: str) -> str:
        """The seconds each run of ``task`` that returned ``outcome`` took, from the logs.

        A worker logs the success just after the outcome is written: wait a little for it.
        """
        pattern = rf"{re.escape(task)}\[[^\]]+\] succeeded in ([\d.]+)s: '{outcome}'"
        deadline = time.monotonic() + 5
        while True:
            logs = "".join(self.log_of(path.name) for path in self.directory.glob("*.log"))
            found = re.findall(pattern, logs)
            if found or time.monotonic() > deadline:
                return ", ".join(f"{float(seconds):.1f}s" for seconds in found) or "none logged"
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop every worker and beat, and any pool child a killed main process left."""
        processes = [*self.workers, *self.beats, *([self.beat] if self.beat else [])]
        descendants: list[psutil.Process] = []
        for process in processes:
            try:
                descendants += psutil.Process(process.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        for process in processes:
            try:
                _stop_worker(process)
            except Exception:  # keep stopping the others
                logger.exception("could not stop %s", process.pid)
        for child in descendants:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass


def _purge_queues() -> None:
    """Drop the messages waiting in this broker's queues (earlier tests', the set-up's), and
    those a killed worker left unacknowledged: Redis would hand them to a later test's worker
    once the visibility timeout is over, with row ids that a new test database gives again.
    """
    with celery_app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in _queues().split(","):
            channel.queue_purge(queue)
        channel.client.delete(channel.unacked_key, channel.unacked_index_key)


def _end_sessions_left() -> None:
    """End the sessions the stopped processes left on this test's own database.

    A killed worker's query runs on in PostgreSQL until it ends, and would hold the locks the
    test database's flush waits for.
    """
    for _ in range(2):
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            return
        except DatabaseError:
            connections.close_all()


@pytest.fixture
def engine_services() -> Iterator[EngineServices]:
    """The processes of one test, stopped on every path; this process sends to the broker."""
    _require_services()
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    _purge_queues()
    logger.warning(
        "engine settings of the workers: "
        + ", ".join(f"{name}={getattr(settings, name)}" for name in ENGINE_SETTINGS)
    )
    with tempfile.TemporaryDirectory() as tmp:
        running = EngineServices(Path(tmp))
        try:
            yield running
        finally:
            celery_app.conf.task_always_eager = eager
            running.stop()
            _end_sessions_left()
            _purge_queues()


# -- the work ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A native workload of ``IMPORT_QUESTIONS`` questions (bench_import's generator)."""
    path = tmp_path_factory.mktemp("engine-workload") / "large.jsonl"
    generate(path, questions=IMPORT_QUESTIONS, candidates=10, claims=4, sources=2)
    return path


def _manager(project: Project) -> Any:
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    return manager


def _status(model: Any, pk: int) -> str:
    return str(model.objects.values_list("status", flat=True).get(pk=pk))


def _import_job(project: Project, manager: Any, workload: Path) -> Job:
    assert workload_import_in_background(workload.stat().st_size), "a job, not a request"
    with workload.open("rb") as stream:
        return workload_import_job_start(
            project=project,
            stream=stream,
            format_name="native",
            filename=workload.name,
            actor=manager,
        )


def _kill_mid_job(job: Job, victim: Callable[[], int], services: Services) -> float:
    """Kill the victim some way into the job's import; return when (monotonic)."""
    _wait(lambda: _status(Job, job.pk) == JobStatus.RUNNING, 120, services, f"job {job.pk}")
    time.sleep(INTO_THE_WORK)
    return _kill_during(Job, job.pk, victim, services)["killed_at"]


def _job_ended(job: Job) -> bool:
    return _status(Job, job.pk) in (JobStatus.DONE, JobStatus.FAILED)


def _assert_imported_once(project: Project, job: Job, workload: Path) -> None:
    job.refresh_from_db()
    assert job.status == JobStatus.DONE, job.error
    assert job.attempts == 2
    batches = ImportBatch.objects.filter(project=project)
    assert batches.count() == 1 and batches.get().filename == workload.name
    assert job.result["batch"] == batches.get().pk and not job.result["already_imported"]
    questions = Question.objects.filter(project=project)
    assert questions.count() == IMPORT_QUESTIONS
    assert questions.values("external_id").distinct().count() == IMPORT_QUESTIONS


def _voted_records() -> Iterator[dict[str, Any]]:
    """Items with three prior votes each (answer and claim) by raters among ``RATERS``."""
    for q in range(VOTED_ITEMS):
        first, step = (q * 7919) % RATERS, 1 + q % 3
        text = f"The answer is {q}."
        votes = [
            {
                "annotator": f"rater{(first + k * step) % RATERS}",
                "answer_label": "inadmissible" if (q * 7 + k * 3) % 5 == 0 else "admissible",
                "claim_labels": [
                    {"claim": 0, "label": "not_supported" if (q + k) % 4 == 0 else "supported"}
                ],
            }
            for k in range(VOTES_PER_ITEM)
        ]
        yield {
            "external_id": f"v{q:05d}",
            "text": f"Question {q}?",
            "candidates": [
                {
                    "id": "c0",
                    "text": text,
                    "claims": [{"text": text, "start": 0, "end": len(text)}],
                    "prior_annotations": votes,
                }
            ],
        }


def _voted_project(project: Project) -> Any:
    """Import the votes in bulk (one import), with nothing marked or queued afterwards."""
    manager = _manager(project)
    data = "".join(json.dumps(record) + "\n" for record in _voted_records()).encode()
    workload_import_file(
        project=project,
        stream=io.BytesIO(data),
        format_name="native",
        filename="votes.jsonl",
        actor=manager,
    )
    # the import's own recomputations: not this test's (no worker has started yet)
    DerivedChange.objects.filter(project=project).delete()
    DerivedResultState.objects.filter(project=project).delete()
    _purge_queues()
    # Statistics of the imported tables now, as autovacuum gathers them soon after a large
    # import: an autoanalyze that ran while the import's transaction was open records them as
    # empty, and the planner then joins them by nested loops (minutes, not seconds).
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return manager


def _agreement_state(project: Project) -> DerivedResultState | None:
    return DerivedResultState.objects.filter(project=project, kind=DerivedKind.AGREEMENT).first()


def _computing(project: Project) -> bool:
    state = _agreement_state(project)
    return state is not None and state.lease_owner != ""


def _assert_agreement_exact(project: Project) -> DerivedResultState:
    report = AgreementReport.objects.get(project=project)
    assert report.input_sha256 == votes_sha256(project_votes(project=project))
    assert report.answer["n_votes"] == VOTED_ITEMS * VOTES_PER_ITEM
    state = _agreement_state(project)
    assert state is not None and state.lease_owner == "" and state.last_error == ""
    return state


# -- kill -9 during an import job --------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_an_import_job_whose_worker_was_killed_is_done_by_a_new_worker(
    project, engine_services, workload
):
    services = engine_services
    manager = _manager(project)
    services.start_beat()
    first = services.worker("solo")
    job = _import_job(project, manager, workload)  # sent on commit
    _kill_mid_job(job, lambda: first.pid, services)
    first.wait(timeout=10)
    # when a new worker starts
    services.worker("solo")
    took = _wait(lambda: _job_ended(job), DONE_WITHIN, services, "the import job")
    _assert_imported_once(project, job, workload)
    logger.warning(
        f"engine: import job {job.pk} done {took:.1f}s after a new worker started "
        f"(the import took {services.runtimes('job_run_task', 'done')})"
    )


@pytest.mark.django_db(transaction=True)
def test_an_import_job_whose_pool_child_was_killed_is_done(project, engine_services, workload):
    services = engine_services
    manager = _manager(project)
    services.start_beat()
    worker = services.worker("prefork")
    child = _child_of(worker, services)
    job = _import_job(project, manager, workload)
    killed_at = _kill_mid_job(job, lambda: child.pid, services)
    _wait(
        lambda: _job_ended(job),
        DONE_WITHIN - (time.monotonic() - killed_at),
        services,
        "the import job",
    )
    took = time.monotonic() - killed_at
    assert took <= DONE_WITHIN
    assert worker.poll() is None, "the worker's main process is alive"
    _assert_imported_once(project, job, workload)
    logger.warning(
        f"engine: import job {job.pk} done {took:.1f}s after its pool child was killed "
        f"(the import took {services.runtimes('job_run_task', 'done')})"
    )


# -- kill -9 during a recomputation of derived results ---------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_recomputation_whose_worker_was_killed_is_current_after_a_new_worker(
    project, engine_services
):
    services = engine_services
    manager = _voted_project(project)
    services.start_beat()
    first = services.worker("solo")
    derived_recompute_request(project=project, kind=DerivedKind.AGREEMENT, actor=manager)
    _wait(lambda: _computing(project), 120, services, "the agreement computing")
    time.sleep(INTO_THE_WORK)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    fresh = derived_freshness(project=project)[DerivedKind.AGREEMENT]
    assert fresh.running and fresh.newer_changes and not fresh.current, "killed too late"
    # when a new worker starts
    services.worker("solo")
    started = time.monotonic()
    worker_lost: list[float] = []  # when the freshness said worker_lost (seconds after start)

    def current() -> bool:
        fresh = derived_freshness(project=project)[DerivedKind.AGREEMENT]
        if fresh.worker_lost:
            worker_lost.append(time.monotonic() - started)
        return fresh.current

    took = _wait(current, DONE_WITHIN, services, "the agreement current")
    state = _assert_agreement_exact(project)
    lost = (
        f"worker_lost shown from {worker_lost[0]:.1f}s to {worker_lost[-1]:.1f}s"
        if worker_lost
        else "worker_lost not seen (the recovery pass came within a poll of the lapse)"
    )
    logger.warning(
        f"engine: agreement current {took:.1f}s after a new worker started "
        f"(attempts {state.attempts}, computed in "
        f"{services.runtimes('derived_recompute_task', 'done')}); {lost}"
    )


# -- PostgreSQL restarted during a recomputation ---------------------------------------------
def _pg_ready(host: str, port: str) -> bool:
    command = ["pg_isready", "-q", "-p", port, *(["-h", host] if host else [])]
    return subprocess.run(command, check=False, timeout=30).returncode == 0


@pytest.fixture
def pg_cluster() -> Iterator[list[str]]:
    """The Debian cluster serving the test database; running again after the test."""
    if os.geteuid() != 0 or not shutil.which("pg_ctlcluster") or not shutil.which("pg_lsclusters"):
        pytest.skip("restarting PostgreSQL needs Debian's pg_ctlcluster and root")
    db = connection.settings_dict
    host, port = db["HOST"] or "", str(db["PORT"] or 5432)
    if host not in ("", "127.0.0.1", "localhost", "::1"):
        pytest.skip(f"the test database is on another host ({host})")
    listed = subprocess.run(
        ["pg_lsclusters", "-h"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    found = [
        fields[:2]
        for fields in (line.split() for line in listed.splitlines())
        if len(fields) >= 4 and fields[2] == port and fields[3].startswith("online")
    ]
    if not found:
        pytest.skip(f"no running cluster on port {port} in pg_lsclusters:\n{listed}")
    try:
        yield ["--skip-systemctl-redirect", *found[0]]
    finally:
        if not _pg_ready(host, port):
            subprocess.run(["pg_ctlcluster", *found[0], "start"], check=False, timeout=120)
            deadline = time.monotonic() + 60
            while not _pg_ready(host, port) and time.monotonic() < deadline:
                time.sleep(0.5)
        connections.close_all()


def _answering(read: Callable[[], object]) -> Callable[[], bool]:
    """``read`` as a poll that survives the database being away (fresh connections)."""

    def check() -> bool:
        try:
            return bool(read())
        except DatabaseError:
            connections.close_all()
            return False

    return check


@pytest.mark.django_db(transaction=True)
def test_a_recomputation_during_a_database_restart_is_current_soon_after(
    project, pg_cluster, engine_services
):
    services = engine_services
    manager = _voted_project(project)
    services.start_beat()
    services.worker("solo")
    derived_recompute_request(project=project, kind=DerivedKind.AGREEMENT, actor=manager)
    _wait(lambda: _computing(project), 120, services, "the agreement computing")
    time.sleep(INTO_THE_WORK / 3)
    assert DerivedChange.objects.filter(project=project).exists(), "restarted too late"
    # when PostgreSQL restarts (fast: every session is ended) while the worker computes
    restarting = time.monotonic()
    subprocess.run(
        ["pg_ctlcluster", *pg_cluster, "restart", "-m", "fast"],
        check=True,
        timeout=120,
        capture_output=True,
    )
    connections.close_all()  # this process's connections were ended too
    _wait(_answering(lambda: Project.objects.filter(pk=project.pk).exists()), 60, services, "pg")
    back = time.monotonic()
    # then the agreement is current soon after PostgreSQL accepts connections again
    took = _wait(
        _answering(lambda: derived_freshness(project=project)[DerivedKind.AGREEMENT].current),
        CURRENT_AFTER_DATABASE,
        services,
        "the agreement current after the restart",
    )
    state = _assert_agreement_exact(project)
    log = services.log_of("worker0.log")
    retries = re.findall(r"derived_recompute_task\[[^\]]+\] retry: Retry in (\d+)s", log)
    assert retries, "the task's own retry finished the recomputation:\n" + log[-6000:]
    assert int(retries[0]) <= 1, f"the first retry waits at most a second: {retries}"
    logger.warning(
        f"engine: PostgreSQL restart took {back - restarting:.1f}s; agreement current "
        f"{took:.1f}s after PostgreSQL answered again (attempts {state.attempts}, task retries "
        f"after {', '.join(retries)}s, computed in "
        f"{services.runtimes('derived_recompute_task', 'done')})"
    )


# -- two beats -------------------------------------------------------------------------------
RECOVER_EVERY = 2.0
WINDOW = 20.0


@pytest.mark.django_db(transaction=True)
def test_two_beats_run_the_recovery_pass_once_per_period(engine_services):
    services = engine_services
    period = {"CERTLABEL_WORK_RECOVER_SECONDS": f"{RECOVER_EVERY:g}"}
    services.worker("solo", **period)
    services.start_beat(**period)
    services.start_beat(**period)
    runs = PeriodicRun.objects.filter(name="work-recover")
    _wait(runs.exists, 60, services, "the first recovery pass")
    seen = set()
    started = time.monotonic()
    while time.monotonic() - started < WINDOW:
        seen.add(runs.values_list("last_at", flat=True).get())
        time.sleep(0.1)
    sent = [
        services.log_of(f"beat{n}.log").count("Sending due task work-recover") for n in range(2)
    ]
    assert all(n >= WINDOW / RECOVER_EVERY / 2 for n in sent), f"both beats send: {sent}"
    most = math.ceil(WINDOW / (0.9 * RECOVER_EVERY)) + 1
    assert 5 <= len(seen) <= most, f"{len(seen)} passes in {WINDOW:.0f}s\n" + services.log()
    logger.warning(
        f"engine: two beats (sent {sent[0]} and {sent[1]} tasks) ran the recovery pass "
        f"{len(seen)} times in {WINDOW:.0f}s, every {RECOVER_EVERY:g}s (at most {most})"
    )
