"""Fault tests: a real Celery worker is killed (``kill -9``) while it computes a calibration run
or builds a release, or only its pool child is; the result then completes with no human action.

A real ``celery beat`` sends the background engine's recovery task (every 3 s here:
``CERTLABEL_WORK_RECOVER_SECONDS``) and a new or surviving worker does the work: the lapse is
10 s here (``CERTLABEL_WORK_LAPSE_SECONDS``), heartbeats every 2 s
(``CERTLABEL_WORK_HEARTBEAT_SECONDS``). The lapse is the bound: the work is taken over within
the lapse plus a recovery period (and some slack for a loaded machine) of the kill.
The work is made long enough to be killed mid-way by its size alone (thousands of questions, a
family of 10,000 thresholds; a release of as many candidates), with no test hook in the product.

Runs only on PostgreSQL with a ``redis://`` broker (see ``tests/labeling/test_celery_worker.py``);
``CERTLABEL_REQUIRE_SERVICES=1`` turns the skip into a failure.
"""

from __future__ import annotations

import logging
import os
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
from django.test import override_settings

from certification.models import BuildStatus, CalibrationRun, ReleaseBuild, RunStatus
from certification.services import calibration_run_start
from certification.services.releases import release_freeze
from labeling.celery import app as celery_app
from labeling.models import Project, Role
from labeling.services import membership_set
from tests.factories import UserFactory, calibration_project, make_spec
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_record as rec
from tests.labeling.test_celery_worker import _require_services, _stop_worker, _test_database_url

pytestmark = [pytest.mark.celery_worker, pytest.mark.slow]
logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
LAPSE, HEARTBEAT, RECOVERY = 10, 2, 3
#: Taken over by a worker (its second attempt claimed) within the lapse plus one recovery period
#: of the kill, plus slack for a new worker's start and a loaded machine.
TAKEN_OVER_WITHIN = LAPSE + RECOVERY + 20.0
#: Then done within a minute of being taken over (the work itself takes a few seconds).
DONE_WITHIN = 60.0
QUESTIONS = 6000


def _queues() -> str:
    """Every queue the product sends to: the default one, routed ones, the beat's."""
    queues = {getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")}
    routes = getattr(settings, "CELERY_TASK_ROUTES", None) or {}
    if isinstance(routes, dict):
        queues |= {r["queue"] for r in routes.values() if isinstance(r, dict) and "queue" in r}
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        queue = entry.get("options", {}).get("queue")
        if queue:
            queues.add(queue)
    return ",".join(sorted(queues))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="labeling.settings",
        DATABASE_URL=_test_database_url(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        CELERY_RESULT_BACKEND=settings.CELERY_RESULT_BACKEND or "",
        CELERY_TASK_ALWAYS_EAGER="false",
        CERTLABEL_WORK_LAPSE_SECONDS=str(LAPSE),
        CERTLABEL_WORK_HEARTBEAT_SECONDS=str(HEARTBEAT),
        CERTLABEL_WORK_RECOVER_SECONDS=str(RECOVERY),
        CERTLABEL_RELEASE_ROOT=str(Path(settings.STORAGES["releases"]["OPTIONS"]["location"])),
    )
    return env


class Services:
    """The worker and beat processes of one test, with their logs."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.workers: list[subprocess.Popen[bytes]] = []
        self.beat: subprocess.Popen[bytes] | None = None

    def log(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}"
            for path in sorted(self.directory.glob("*.log"))
        )

    def worker(self, pool: str) -> subprocess.Popen[bytes]:
        n = len(self.workers)
        command = [
            sys.executable, "-m", "celery", "-A", "labeling", "worker",
            f"--pool={pool}", "--concurrency=1", "-Q", _queues(), "-n", f"faults{n}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO",
        ]  # fmt: skip
        with (self.directory / f"worker{n}.log").open("wb") as out:
            process = subprocess.Popen(
                command, cwd=REPO, env=_env(), stdout=out, stderr=subprocess.STDOUT
            )
        self.workers.append(process)
        return process

    def start_beat(self) -> None:
        command = [
            sys.executable, "-m", "celery", "-A", "labeling", "beat", "--loglevel=INFO",
            "-s", str(self.directory / "beat-schedule"),
            "--pidfile", str(self.directory / "beat.pid"),
        ]  # fmt: skip
        with (self.directory / "beat.log").open("wb") as out:
            self.beat = subprocess.Popen(
                command, cwd=REPO, env=_env(), stdout=out, stderr=subprocess.STDOUT
            )

    def stop(self) -> None:
        for process in [*self.workers, *([self.beat] if self.beat else [])]:
            _stop_worker(process)


@pytest.fixture
def services() -> Iterator[Services]:
    _require_services()
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False  # the test process sends to the broker
    lapse = override_settings(CERTLABEL_WORK_LAPSE_SECONDS=LAPSE)
    with tempfile.TemporaryDirectory() as tmp, lapse:
        running = Services(Path(tmp))
        try:
            yield running
        finally:
            celery_app.conf.task_always_eager = eager
            running.stop()


def _wait(check: Callable[[], bool], timeout: float, services: Services, what: str) -> float:
    """Poll ``check`` every 50 ms; return the seconds it took."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout}s\n" + (
            services.log()
        )
        time.sleep(0.05)
    return time.monotonic() - started


def _large_project(project: Project) -> Any:
    """A manager, and thousands of resolved calibration answers (a run takes some seconds)."""
    rows = [
        rec(
            f"c{i}",
            [
                cand(
                    "a",
                    answer="x",
                    score=(i % 997) / 997,
                    label="inadmissible" if i % 7 == 0 else "admissible",
                    selected=True,
                )
            ],
        )
        for i in range(QUESTIONS)
    ]
    calibration_project(project, {"calibration": rows})
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    return manager


def _status(model: Any, pk: int) -> str:
    return str(model.objects.values_list("status", flat=True).get(pk=pk))


def _child_of(worker: subprocess.Popen[bytes], services: Services) -> psutil.Process:
    children: list[psutil.Process] = []

    def found() -> bool:
        children[:] = psutil.Process(worker.pid).children()
        return bool(children)

    _wait(found, 60, services, "the worker's pool child")
    return children[0]


def _kill_during(
    model: Any, pk: int, victim: Callable[[], int], services: Services
) -> dict[str, float]:
    """Wait until the work is running, ``kill -9`` the victim, check it stays unfinished."""
    _wait(lambda: _status(model, pk) == "running", 120, services, f"{model.__name__} {pk} running")
    os.kill(victim(), signal.SIGKILL)
    killed_at = time.monotonic()
    row = model.objects.get(pk=pk)
    assert row.status == "running" and row.attempts == 1, "killed too late: it had finished"
    assert row.lease_owner != ""
    return {"killed_at": killed_at}


def _taken_over(model: Any, pk: int, killed: dict[str, float], services: Services) -> float:
    """Wait until another worker claimed the work (its second attempt); return seconds since
    the kill, which must be within the lapse plus one recovery period (and slack)."""

    def claimed_again() -> bool:
        return model.objects.values_list("attempts", flat=True).get(pk=pk) >= 2

    _wait(claimed_again, TAKEN_OVER_WITHIN + 5, services, f"{model.__name__} {pk} taken over")
    took = time.monotonic() - killed["killed_at"]
    assert took < TAKEN_OVER_WITHIN, f"taken over {took:.1f}s after the kill\n{services.log()}"
    return took


# -- kill -9 of the worker (its main process does the work: the solo pool) ---------------------
@pytest.mark.django_db(transaction=True)
def test_a_run_whose_worker_was_killed_completes_on_a_new_worker(project, services):
    manager = _large_project(project)
    spec = make_spec(
        project, actor=manager, thresholds=[i / 10_000 for i in range(10_000)], alpha="0.2"
    )
    services.start_beat()
    first = services.worker("solo")
    run = calibration_run_start(spec=spec, actor=manager)  # its task is sent on commit
    killed = _kill_during(CalibrationRun, run.pk, lambda: first.pid, services)
    first.wait(timeout=10)
    # when a new worker is back
    services.worker("solo")
    resumed = _taken_over(CalibrationRun, run.pk, killed, services)
    took = _wait(
        lambda: _status(CalibrationRun, run.pk) == RunStatus.DONE, DONE_WITHIN, services, "run"
    )
    run.refresh_from_db()
    assert run.attempts == 2 and run.error == ""
    assert run.result["outcome"] == run.outcome != ""
    assert len(run.result["selective_risk"]["rows"]) == 10_000
    assert run.lease_owner == ""
    logger.warning(f"run {run.pk} taken over {resumed:.1f}s after the kill, done {took:.1f}s later")


@pytest.mark.django_db(transaction=True)
def test_a_build_whose_worker_was_killed_completes_on_a_new_worker(project, services):
    manager = _large_project(project)
    services.start_beat()
    first = services.worker("solo")
    release = release_freeze(project=project, actor=manager, version="1", run_ids=[])
    build = release.builds.get()
    killed = _kill_during(ReleaseBuild, build.pk, lambda: first.pid, services)
    first.wait(timeout=10)
    services.worker("solo")
    resumed = _taken_over(ReleaseBuild, build.pk, killed, services)
    took = _wait(
        lambda: _status(ReleaseBuild, build.pk) == BuildStatus.DONE, DONE_WITHIN, services, "build"
    )
    build.refresh_from_db()
    assert build.attempts == 2 and build.error == ""
    assert build.progress_done == build.progress_total == QUESTIONS + 1
    assert build.storage_prefix == f"{project.pk}/{release.pk}/{build.pk}/"
    # the killed attempt's working directory was removed
    root = Path(settings.STORAGES["releases"]["OPTIONS"]["location"]) / "certlabel-builds"
    _wait(lambda: not root.exists() or not list(root.iterdir()), 30, services, "clean up")
    logger.warning(
        f"build {build.pk} taken over {resumed:.1f}s after the kill, done {took:.1f}s later"
    )


# -- kill -9 of the pool child only (the worker's main process survives) ------------------------
@pytest.mark.django_db(transaction=True)
def test_a_run_whose_pool_child_was_killed_completes(project, services):
    manager = _large_project(project)
    spec = make_spec(
        project, actor=manager, thresholds=[i / 10_000 for i in range(10_000)], alpha="0.2"
    )
    services.start_beat()
    worker = services.worker("prefork")
    _child_of(worker, services)  # the pool is up
    run = calibration_run_start(spec=spec, actor=manager)
    # The victim is the pool child running the work, found when it runs: on a loaded machine
    # billiard may replace a child that was slow to report ready before any work arrives.
    killed = _kill_during(CalibrationRun, run.pk, lambda: _child_of(worker, services).pid, services)
    resumed = _taken_over(CalibrationRun, run.pk, killed, services)
    took = _wait(
        lambda: _status(CalibrationRun, run.pk) == RunStatus.DONE, DONE_WITHIN, services, "run"
    )
    assert worker.poll() is None, "the worker's main process survived"
    run.refresh_from_db()
    assert run.attempts == 2 and len(run.result["selective_risk"]["rows"]) == 10_000
    logger.warning(
        f"run {run.pk} taken over {resumed:.1f}s after its pool child was killed, "
        f"done {took:.1f}s later"
    )


@pytest.mark.django_db(transaction=True)
def test_a_build_whose_pool_child_was_killed_completes(project, services):
    manager = _large_project(project)
    services.start_beat()
    worker = services.worker("prefork")
    _child_of(worker, services)  # the pool is up
    release = release_freeze(project=project, actor=manager, version="1", run_ids=[])
    build = release.builds.get()
    killed = _kill_during(ReleaseBuild, build.pk, lambda: _child_of(worker, services).pid, services)
    resumed = _taken_over(ReleaseBuild, build.pk, killed, services)
    took = _wait(
        lambda: _status(ReleaseBuild, build.pk) == BuildStatus.DONE, DONE_WITHIN, services, "build"
    )
    assert worker.poll() is None
    build.refresh_from_db()
    assert build.attempts == 2 and build.progress_done == QUESTIONS + 1
    logger.warning(
        f"build {build.pk} taken over {resumed:.1f}s after its pool child was killed, "
        f"done {took:.1f}s later"
    )
