"""Recomputation benchmark: a storm of annotators, one worker, and how current the figures stay.

Usage (from the repository root, PostgreSQL and Redis running)::

    python tests/benchmarks/bench_recompute.py      # 64 annotators, 300 s, 2,000 items
    python tests/benchmarks/bench_recompute.py --duration 60 --annotators 16 \\
        --database-url postgres://postgres@127.0.0.1:5432/certlabel_bench_recompute \\
        --broker-url redis://127.0.0.1:6379/14

The database named in ``--database-url`` is dropped and created afresh and migrated; the Redis
database of ``--broker-url`` is emptied before and after (give the benchmark one of its own).
``--items`` items (half as many calibration questions with two scored candidates each) are
imported through the real import service, two calibration specs are declared, and labelling
starts with overlap 2. One Celery worker (``-Q housekeeping,recompute,builds``, with the beat
scheduler embedded, ``-B``) runs the recomputations.

``--annotators`` threads (each its own database connection) then label through the services
(``item_claim_next``, ``annotation_submit``): the answer ``admissible`` or, one time in three,
``inadmissible``, so items reach both consensus and the disagreement queue; one adjudicator
thread resolves the queue (``adjudication_resolve``). After ``--duration`` seconds they stop.

Printed: the votes, resolutions and calibration runs created; the largest number of
``derived_recompute_task`` messages waiting in Redis for one (project, kind) at any sample
(target at most 3) and the largest number of states queued and running at once; and the seconds
from the last vote or resolution until every derived result is current (no change row left,
nothing queued or running, no calibration run pending or running; target at most 10 s). Not
collected by pytest.
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[2]
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/certlabel_bench_recompute"
DEFAULT_BROKER = "redis://127.0.0.1:6379/14"
SLUG = "bench"
QUEUED_TARGET = 3
CURRENT_TARGET_S = 10.0


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of labelling")
    parser.add_argument("--annotators", type=int, default=64)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--broker-url", default=DEFAULT_BROKER)
    parser.add_argument("--concurrency", type=int, default=2, help="the worker's processes")
    parser.add_argument("--settle-timeout", type=float, default=600.0)
    return parser.parse_args()


def _recreate_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _records(n_items: int) -> list[dict[str, Any]]:
    rng = random.Random(7)
    records = []
    for q in range(n_items // 2):
        candidates = [
            {
                "id": f"c{k}",
                "text": f"The answer is {q + k}.",
                "generator": "model-a",
                "canonical_form": str(q + k),
                "acceptance_score": round(rng.random(), 3),
                "is_selected": k == 0,
                "claims": [],
            }
            for k in range(2)
        ]
        records.append(
            {
                "external_id": f"q{q}",
                "text": f"Question {q}?",
                "group_key": "",
                "candidates": candidates,
            }
        )
    return records


def _setup(n_items: int, n_annotators: int) -> dict[str, Any]:
    import io

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from certification.services import calibration_spec_create
    from labeling.importers.native import read_jsonl
    from labeling.models import DerivedChange, Project, Question, Role
    from labeling.services import (
        membership_set,
        project_create,
        project_labelling_configure,
        project_labelling_start,
        workload_import,
    )
    from labeling.services.imports import fingerprint

    users = get_user_model()
    project = project_create(slug=SLUG, name="Recompute benchmark")
    manager = users.objects.create_user("manager")
    membership_set(project=project, user=manager, role=Role.MANAGER)
    data = "".join(json.dumps(r) + "\n" for r in _records(n_items)).encode()
    workload_import(
        project=project,
        records=read_jsonl(io.BytesIO(data)),
        format="native",
        filename="bench.jsonl",
        file_sha256=fingerprint(data.decode()),
    )
    Question.objects.filter(project=project).update(partition="calibration")
    Project.objects.filter(pk=project.pk).update(
        partition_seed=0,
        partition_proportions={"calibration": 1.0},
        partition_frozen_at=timezone.now(),
    )
    project.refresh_from_db()
    spec_fields = {
        "method": "selective_risk",
        "alpha": "0.1",
        "delta": "0.05",
        "score_field": "acceptance_score",
        "selector": "is_selected",
    }
    calibration_spec_create(
        project=project, actor=manager, name="main", thresholds=[0.5, 0.7, 0.9], **spec_fields
    )
    calibration_spec_create(
        project=project, actor=manager, name="strict", thresholds=[0.8, 0.9], **spec_fields
    )
    project_labelling_configure(project=project, actor=manager, overlap=2)
    project_labelling_start(project=project, actor=manager)
    annotators = []
    for i in range(n_annotators):
        user = users.objects.create_user(f"annotator{i}")
        membership_set(project=project, user=user, role=Role.ANNOTATOR)
        annotators.append(user)
    adjudicator = users.objects.create_user("adjudicator")
    membership_set(project=project, user=adjudicator, role=Role.ADJUDICATOR)
    DerivedChange.objects.filter(project=project).delete()  # start from a clean slate
    return {
        "project": project,
        "annotators": annotators,
        "adjudicator": adjudicator,
    }


class Shared:
    """What the threads report."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.votes = 0
        self.resolutions = 0
        self.errors: Counter[str] = Counter()
        self.last_vote = 0.0  # the last committed vote or resolution
        self.max_latency = 0.0


def _annotator(user: Any, project: Any, shared: Shared, seed: int) -> None:
    from django.db import connection

    from labeling.exceptions import LabelingError
    from labeling.services import AnnotationInput, annotation_submit, item_claim_next

    rng = random.Random(seed)
    try:
        while not shared.stop.is_set():
            t0 = time.monotonic()
            try:
                assignment = item_claim_next(project=project, actor=user)
            except LabelingError as exc:
                with shared.lock:
                    shared.errors[type(exc).__name__] += 1
                time.sleep(0.5)
                continue
            if assignment is None:
                time.sleep(0.5)
                continue
            answer = "inadmissible" if rng.random() < 1 / 3 else "admissible"
            try:
                annotation_submit(
                    project=project,
                    assignment_id=assignment.pk,
                    actor=user,
                    data=AnnotationInput(answer_label=answer, claims=()),
                )
            except LabelingError as exc:
                with shared.lock:
                    shared.errors[type(exc).__name__] += 1
                continue
            now = time.monotonic()
            with shared.lock:
                shared.votes += 1
                shared.last_vote = now
                shared.max_latency = max(shared.max_latency, now - t0)
    finally:
        connection.close()


def _adjudicator(user: Any, project: Any, shared: Shared) -> None:
    from django.db import connection

    from labeling.exceptions import LabelingError
    from labeling.models import Item, ItemStatus
    from labeling.services import adjudication_resolve

    try:
        while not shared.stop.is_set():
            item = Item.objects.filter(project=project, status=ItemStatus.DISAGREEMENT).first()
            if item is None:
                time.sleep(0.5)
                continue
            try:
                adjudication_resolve(
                    project=project,
                    item_id=item.pk,
                    actor=user,
                    expected_version=item.version,
                    answer_label="admissible",
                    claims=[],
                    rationale="benchmark",
                )
            except LabelingError as exc:
                with shared.lock:
                    shared.errors[type(exc).__name__] += 1
                continue
            with shared.lock:
                shared.resolutions += 1
                shared.last_vote = time.monotonic()  # a resolution is a change too
            time.sleep(0.2)
    finally:
        connection.close()


def _queued_per_key(redis_client: Any) -> Counter[tuple[str, str]]:
    """Count derived_recompute_task messages waiting in Redis, per (project, kind)."""
    counts: Counter[tuple[str, str]] = Counter()
    for raw in redis_client.lrange("recompute", 0, -1):
        message = json.loads(raw)
        headers = message.get("headers") or {}
        if headers.get("task") != "certification.tasks.derived_recompute_task":
            continue
        args = json.loads(base64.b64decode(message["body"]))[0]
        counts[(str(args[0]), str(args[1]))] += 1
    return counts


def _current(project: Any) -> bool:
    from certification.models import CalibrationRun, DerivedResultState
    from labeling.models import DerivedChange

    if DerivedChange.objects.filter(project=project).exists():
        return False
    # queued (its task sent) or running (a worker holds its lease)
    busy = DerivedResultState.objects.filter(project=project).exclude(
        enqueued_at__isnull=True, lease_owner=""
    )
    if busy.exists():
        return False
    return not CalibrationRun.objects.filter(
        spec__project=project, status__in=["pending", "running"]
    ).exists()


def main() -> int:
    args = _parse()
    _recreate_database(args.database_url)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="labeling.settings",
        DATABASE_URL=args.database_url,
        CELERY_BROKER_URL=args.broker_url,
        CELERY_TASK_ALWAYS_EAGER="false",
        DJANGO_LOG_LEVEL="WARNING",
    )
    os.environ.pop("CELERY_RESULT_BACKEND", None)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    import redis
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    redis_client = redis.Redis.from_url(args.broker_url)
    redis_client.flushdb()
    t0 = time.monotonic()
    world = _setup(args.items, args.annotators)
    print(f"setup: {args.items} items, {args.annotators} annotators, {time.monotonic() - t0:.1f} s")
    connection.close()

    from certification.models import CalibrationRun, DerivedResultState

    tmp = tempfile.mkdtemp(prefix="bench-recompute-")
    log = Path(tmp) / "worker.log"
    env = {k: v for k, v in os.environ.items()}
    worker_cmd = [
        sys.executable, "-m", "celery", "-A", "labeling", "worker", "-B",
        "-s", str(Path(tmp) / "beat-schedule"), "-Q", "housekeeping,recompute,builds",
        f"--concurrency={args.concurrency}", "--loglevel=WARNING", "-n", "bench@%h",
    ]  # fmt: skip
    with log.open("wb") as out:
        worker = subprocess.Popen(
            worker_cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    time.sleep(5)
    runs_before = CalibrationRun.objects.count()
    shared = Shared()
    threads = [
        threading.Thread(target=_annotator, args=(user, world["project"], shared, i), daemon=True)
        for i, user in enumerate(world["annotators"])
    ]
    threads.append(
        threading.Thread(
            target=_adjudicator, args=(world["adjudicator"], world["project"], shared), daemon=True
        )
    )
    max_queued = 0
    max_queued_key: tuple[str, str] | None = None
    max_states_busy = 0
    samples = 0
    current_at: float | None = None  # the first sample found current after the latest vote

    def sample() -> None:
        nonlocal max_queued, max_queued_key, max_states_busy, samples, current_at
        counts = _queued_per_key(redis_client)
        if counts:
            key, n = counts.most_common(1)[0]
            if n > max_queued:
                max_queued, max_queued_key = n, key
        busy = 0
        for state in DerivedResultState.objects.all():
            busy = max(busy, int(state.enqueued_at is not None) + int(bool(state.lease_owner)))
        max_states_busy = max(max_states_busy, busy)
        samples += 1
        with shared.lock:
            last = shared.last_vote
        if _current(world["project"]):
            if current_at is None or current_at < last:
                current_at = time.monotonic()
        elif current_at is not None and current_at >= last:
            current_at = None  # not current after all (a change arrived since)

    try:
        start = time.monotonic()
        for thread in threads:
            thread.start()
        while time.monotonic() - start < args.duration:
            sample()
            time.sleep(0.5)
        shared.stop.set()
        for thread in threads:
            thread.join(timeout=60)
        last_vote = shared.last_vote
        deadline = time.monotonic() + args.settle_timeout
        settled = None
        while time.monotonic() < deadline:
            sample()
            if current_at is not None and current_at >= last_vote:
                settled = current_at
                break
            time.sleep(0.25)
        runs = CalibrationRun.objects.count() - runs_before
        print(
            f"labelling: {args.duration:.0f} s, {shared.votes} votes, {shared.resolutions} "
            f"adjudications, errors {dict(shared.errors)}, "
            f"slowest submit {shared.max_latency:.2f} s"
        )
        print(f"calibration runs created: {runs} (2 specs)")
        print(
            f"largest number of queued recomputation tasks per (project, kind): {max_queued} "
            f"{max_queued_key or ''} (target <= {QUEUED_TARGET}; {samples} samples)"
        )
        print(f"largest queued + running per (project, kind) in the state rows: {max_states_busy}")
        if settled is None:
            print(f"NOT current {args.settle_timeout:.0f} s after the last vote")
            return 1
        lag = settled - last_vote
        print(
            f"seconds from the last vote or resolution until every derived result is "
            f"current: {lag:.1f} "
            f"(target <= {CURRENT_TARGET_S:.0f})"
        )
        ok = max_queued <= QUEUED_TARGET and lag <= CURRENT_TARGET_S
        print("targets met" if ok else "TARGETS MISSED")
        return 0 if ok else 1
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        redis_client.flushdb()
        print(f"worker log: {log}")


if __name__ == "__main__":
    sys.exit(main())
