"""Fault test: Redis stops while annotators submit and an adjudicator resolves (real worker).

Runs on PostgreSQL with a real Celery worker (``-Q housekeeping,recompute,builds`` and the beat
scheduler embedded) against a Redis server of the test's own, started on a free port in a
temporary directory (the machine's Redis is never touched). The outage lasts
``CERTLABEL_OUTAGE_SECONDS`` (default 20 s; the path is the same as for 60 s: every enqueue
during the outage fails fast and is logged, the marks stay in PostgreSQL, and the background
engine's recovery pass sends them again once Redis is back). The worker's recovery pass runs
every 5 s here (``CERTLABEL_WORK_RECOVER_SECONDS``) instead of 10 s, so the test waits less;
the minute allowed after Redis returns (twice the lapse) covers either.

Checked: every request during the outage answers (200/201) in under 1 s, and within a minute of
Redis returning every derived result is current and the agreement equals a clean recomputation.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.db import connection
from rest_framework.test import APIClient

from certification.models import AgreementReport
from certification.selectors import derived_freshness
from certification.services import votes_sha256
from labeling.celery import app as celery_app
from labeling.models import Item, ItemStatus, Role
from labeling.selectors import project_votes
from labeling.services import project_labelling_configure, project_labelling_start
from labeling.services.tokens import api_token_create
from tests.factories import work_record
from tests.labeling.api.conftest import claim_ids, labels_body
from tests.labeling.test_celery_worker import REPO, _test_database_url

pytestmark = pytest.mark.celery_worker

OUTAGE = float(os.environ.get("CERTLABEL_OUTAGE_SECONDS", "20"))
CATCH_UP = 60.0
REQUEST_LIMIT = 1.0


def _missing() -> str | None:
    if connection.vendor != "postgresql":
        return f"needs DATABASE_URL=postgres://… (the database is {connection.vendor})"
    if shutil.which("redis-server") is None:
        return "needs redis-server to start a private Redis"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_redis(port: int, directory: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return process
        time.sleep(0.05)
    raise RuntimeError("the private redis-server did not start")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _start_worker(broker: str, directory: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="labeling.settings",
        DATABASE_URL=_test_database_url(),
        CELERY_BROKER_URL=broker,
        CELERY_TASK_ALWAYS_EAGER="false",
        CERTLABEL_WORK_RECOVER_SECONDS="5",
    )
    command = [
        sys.executable, "-m", "celery", "-A", "labeling", "worker", "-B",
        "-s", str(directory / "beat-schedule"), "-Q", "housekeeping,recompute,builds",
        "--pool=solo", "-n", f"outage-{os.getpid()}@%h", "--loglevel=INFO",
        "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    log = (directory / "worker.log").open("wb")
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def _use_broker(broker: str) -> tuple[str, bool]:
    """Point this process's Celery app at ``broker``; returns the previous URL and eager flag."""
    previous = (celery_app.conf.broker_url, celery_app.conf.task_always_eager)
    celery_app.conf.broker_url = broker
    # Celery fixes the write/read URLs from broker_url on first use (the set-up's enqueues):
    # point them at the new broker too, or the messages still go to the old one.
    celery_app.conf.broker_write_url = broker
    celery_app.conf.broker_read_url = broker
    celery_app.conf.task_always_eager = False
    celery_app._pool = None  # built afresh for the new URL
    celery_app.amqp._producer_pool = None
    return previous


def _client(user) -> APIClient:
    client = APIClient()
    secret = api_token_create(user=user, name="test").secret
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def _vote(client: APIClient, answer: str) -> tuple[float, int]:
    """Claim and submit one item through the API; returns the slowest request's seconds."""
    t0 = time.monotonic()
    response = client.post("/api/projects/study/assignments/next/", format="json")
    claim_s = time.monotonic() - t0
    if response.status_code == 204:
        return claim_s, 204
    assert response.status_code == 200, response.content
    assignment_id = response.json()["assignment_id"]
    item = Item.objects.get(assignments__pk=assignment_id)
    t0 = time.monotonic()
    submitted = client.put(
        f"/api/projects/study/assignments/{assignment_id}/annotation/",
        labels_body(item, answer=answer),
        format="json",
    )
    submit_s = time.monotonic() - t0
    assert submitted.status_code == 200, submitted.content
    return max(claim_s, submit_s), 200


def _resolve(client: APIClient, item: Item) -> float:
    t0 = time.monotonic()
    response = client.post(
        f"/api/projects/study/disagreements/{item.pk}/resolve/",
        {
            "expected_version": item.version,
            "answer_label": "admissible",
            "claims": [{"claim_id": c, "label": "not_supported"} for c in claim_ids(item)],
            "rationale": "checked",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    return time.monotonic() - t0


def _exact(project) -> bool:
    fresh = derived_freshness(project=project)
    if not all(f.current for f in fresh.values()):
        return False
    report = AgreementReport.objects.filter(project=project).first()
    return report is not None and report.input_sha256 == votes_sha256(
        project_votes(project=project)
    )


@pytest.mark.django_db(transaction=True)
def test_a_redis_outage_slows_no_request_and_the_results_catch_up(project, import_records, member):
    reason = _missing()
    if reason is not None:
        if os.environ.get("CERTLABEL_REQUIRE_SERVICES") == "1":
            pytest.fail(f"CERTLABEL_REQUIRE_SERVICES=1 but the outage test cannot run: {reason}")
        pytest.skip(reason)
    # the private Redis first: the set-up's own changes are enqueued there too
    tmp = Path(tempfile.mkdtemp(prefix="certlabel-outage-"))
    port = _free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    redis = _start_redis(port, tmp)
    previous = _use_broker(broker)
    worker = _start_worker(broker, tmp)
    try:
        manager = member(Role.MANAGER)
        import_records([work_record(f"q{i}") for i in range(1, 9)])  # 16 items
        project_labelling_configure(project=project, actor=manager, overlap=2)
        project_labelling_start(project=project, actor=manager)
        annotators = [_client(member(Role.ANNOTATOR)) for _ in range(4)]
        adjudicator = _client(member(Role.ADJUDICATOR))
        # given some labelling with Redis up, recomputed by the worker
        for i, client in enumerate(annotators):
            _vote(client, "admissible" if i % 2 else "inadmissible")
        deadline = time.monotonic() + CATCH_UP
        while not _exact(project):
            assert worker.poll() is None, (tmp / "worker.log").read_text()
            assert time.monotonic() < deadline, "no catch-up before the outage"
            time.sleep(0.5)
        # when Redis stops while annotators submit and an adjudicator resolves
        _stop(redis)
        timings: list[tuple[float, str]] = []
        stop_at = time.monotonic() + OUTAGE
        turn = 0
        while time.monotonic() < stop_at:
            client = annotators[turn % len(annotators)]
            seconds, status = _vote(client, "admissible" if turn % 3 else "inadmissible")
            timings.append((seconds, f"vote {turn} ({status})"))
            queued = Item.objects.filter(project=project, status=ItemStatus.DISAGREEMENT).first()
            if queued is not None:
                timings.append((_resolve(adjudicator, queued), f"resolve {queued.pk}"))
            turn += 1
            if status == 204:
                time.sleep(0.5)
        # then every request answered in under a second
        requests = len(timings)
        slowest = max(seconds for seconds, _ in timings)
        assert requests > 0
        assert slowest < REQUEST_LIMIT, f"slowest during the outage: {sorted(timings)[-5:]}"
        # the pages say the figures are stale meanwhile
        assert not all(f.current for f in derived_freshness(project=project).values())
        # and within a minute of Redis returning, every derived result is exact again
        redis = _start_redis(port, tmp)
        back = time.monotonic()
        while not _exact(project):
            assert worker.poll() is None, (tmp / "worker.log").read_text()
            assert time.monotonic() - back < CATCH_UP, (
                f"not current {CATCH_UP:.0f} s after Redis returned: "
                f"{derived_freshness(project=project)}\n{(tmp / 'worker.log').read_text()[-4000:]}"
            )
            time.sleep(0.5)
        sys.stderr.write(
            f"outage {OUTAGE:.0f} s: {requests} requests, slowest {slowest:.3f} s; exact "
            f"{time.monotonic() - back:.1f} s after Redis returned\n"
        )
    finally:
        celery_app.conf.broker_url, celery_app.conf.task_always_eager = previous
        celery_app.conf.broker_write_url = celery_app.conf.broker_read_url = previous[0]
        celery_app._pool = None
        celery_app.amqp._producer_pool = None
        _stop(worker)
        _stop(redis)
        shutil.rmtree(tmp, ignore_errors=True)
