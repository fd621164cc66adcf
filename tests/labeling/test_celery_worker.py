"""A real Celery worker process runs a labelling task against the test database.

Runs only in the production-shaped configuration: a ``redis://`` broker and
result backend, and PostgreSQL, which a second process can share with the test (a SQLite test
database may live in memory). Set ``CERTLABEL_REQUIRE_SERVICES=1`` (as .ci/run does) to turn the
skip into a failure, so a CI job cannot pass without having run it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from labeling.celery import app as celery_app
from labeling.tasks import source_versions_verify_task
from tests.conftest import native_record

REPO = Path(__file__).resolve().parents[2]
RESULT_TIMEOUT = 60.0

pytestmark = pytest.mark.celery_worker


def _missing_services() -> str | None:
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        return f"needs CELERY_BROKER_URL=redis://… (it is {settings.CELERY_BROKER_URL!r})"
    if not (settings.CELERY_RESULT_BACKEND or "").startswith("redis://"):
        return "needs CELERY_RESULT_BACKEND=redis://… to read the task's result"
    if connection.vendor != "postgresql":
        return f"needs DATABASE_URL=postgres://… (the database is {connection.vendor})"
    return None


def _require_services() -> None:
    reason = _missing_services()
    if reason is None:
        return
    if os.environ.get("CERTLABEL_REQUIRE_SERVICES") == "1":
        pytest.fail(f"CERTLABEL_REQUIRE_SERVICES=1 but the worker test cannot run: {reason}")
    pytest.skip(reason)


def _test_database_url() -> str:
    """The URL of the database this test writes to (``test_<name>``), for the worker."""
    db = connection.settings_dict
    user = quote(db["USER"] or "", safe="")
    password = f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{auth}{db['HOST'] or ''}{port}/{quote(db['NAME'], safe='')}"


def _start_worker(queue: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="labeling.settings",
        DATABASE_URL=_test_database_url(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        CELERY_RESULT_BACKEND=settings.CELERY_RESULT_BACKEND,
        CELERY_TASK_ALWAYS_EAGER="false",
    )
    command = [
        sys.executable, "-m", "celery", "-A", "labeling", "worker",
        "--pool=solo", "--concurrency=1", "-Q", queue, "-n", f"{queue}@%h",
        "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO",
    ]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def _stop_worker(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.terminate()  # SIGTERM: warm shutdown, closes its database connections
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=10)


@pytest.mark.django_db(transaction=True)
def test_worker_process_verifies_committed_source_versions(project, import_records):
    _require_services()
    # given a project whose imported rows are committed (a transactional test), so that another
    # process sees them: three questions, one pinned source version each
    import_records([native_record("q1"), native_record("q2"), native_record("q3")])
    queue = f"certlabel-test-{uuid.uuid4().hex[:12]}"
    eager = celery_app.conf.task_always_eager
    # the producer must send to the broker even if the environment asked for eager tasks
    celery_app.conf.task_always_eager = False
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "worker.log"
        worker = _start_worker(queue, log)
        try:
            # when the task is sent to the worker's own queue
            result = source_versions_verify_task.apply_async(args=[project.pk], queue=queue)
            deadline = time.monotonic() + RESULT_TIMEOUT
            while not result.ready():
                assert worker.poll() is None, f"worker exited early:\n{log.read_text()}"
                assert time.monotonic() < deadline, (
                    f"no result in {RESULT_TIMEOUT}s:\n{log.read_text()}"
                )
                time.sleep(0.2)
            # then the worker, not this process, computed the real counts
            assert result.successful(), log.read_text()
            # the result is ready: read it without the "inside a task" guard that an eager task
            # run earlier in this process may have left set
            assert result.get(timeout=5, disable_sync_subtasks=False) == {
                "checked": 3,
                "mismatched": [],
            }
            assert result.id in log.read_text()
        finally:
            celery_app.conf.task_always_eager = eager
            _stop_worker(worker)
