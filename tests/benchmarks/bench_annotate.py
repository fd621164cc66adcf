"""Annotation benchmark: simulated annotators label through the REST API served by gunicorn.

Usage (from the repository root, with the project installed and a PostgreSQL server running)::

    python tests/benchmarks/bench_annotate.py
    python tests/benchmarks/bench_annotate.py --items 1000 --annotators 16 --workers 3 \\
        --database-url postgres://postgres@127.0.0.1:5432/certlabel_bench

The database named in ``--database-url`` is dropped and created afresh (the server's
``postgres`` database is used for that), migrated, and loaded with ``--items`` items (half as
many questions with two candidates each, two claims per candidate, one pinned source) through
the real import service. Labelling starts with overlap ``--overlap``; ``--annotators`` users get
the annotator role and an API token.

gunicorn then serves the application (``DJANGO_DEBUG=false``, persistent database connections
``conn_max_age=600`` as a production deployment would set) on a free port, with ``--workers``
processes of ``--threads`` threads. As in production, Celery tasks (the agreement recompute each
resolution announces) go to a broker, ``--broker-url`` (default: Redis database 15, which the
benchmark empties before and after; no worker runs them, so the figures are the web tier's);
``--broker-url eager`` runs them inside the requests instead, as the embedded default does.
Each simulated annotator is a thread with its own keep-alive HTTP connection, repeating until
the server has no work for it (after ``--think-ms`` of pause before each request; the default 0
saturates the server, so latency is then mostly queueing: about annotators / throughput):

- ``POST /api/projects/<slug>/assignments/next/`` (200 with the form, 204 when none), then
- ``PUT /api/projects/<slug>/assignments/<id>/annotation/`` labelling every claim
  ``not_supported`` and the answer ``admissible`` or ``inadmissible`` (a mix of consensus and
  disagreement, so the comparison runs both ways).

An annotator that gets 204 asks again after a short pause (``--empty-retries`` times) before
stopping: at the tail, an item can be momentarily held by another annotator's request.

Reported: per operation the count and p50/p95/p99/max latency in ms as the client measures it
(queueing in gunicorn included), throughput in requests/s and annotations/s, HTTP errors, and
the check read from the database: every item has exactly ``--overlap`` annotations from
``--overlap`` different annotators ("double assignments" counts items with more, or with one
annotator twice; "unfinished" items with fewer). Target: p95 under 100 ms and zero double
assignments. The client threads run on the same machine as the server and the database.
Not collected by pytest (``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[2]
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/certlabel_bench"
# A Redis database of the benchmark's own: it is emptied before and after the run.
DEFAULT_BROKER = "redis://127.0.0.1:6379/15"
SLUG = "bench"
P95_TARGET_MS = 100

WORDS = (
    "harbour council ledger archive ferry lantern meadow granary tariff quarry orchard "
    "beacon tannery cooper mill charter bridge tollgate warden vintner foundry cistern"
).split()


def _sentence(seed: int, n_words: int) -> str:
    words = [WORDS[(seed * 7 + i * 13) % len(WORDS)] for i in range(n_words)]
    return " ".join(words).capitalize() + f" {seed % 997}."


def generate(path: Path, *, questions: int) -> None:
    """Write ``questions`` native records (two candidates, two claims each) to ``path``."""
    with path.open("w", encoding="utf-8") as out:
        for q in range(questions):
            candidates = []
            for c in range(2):
                parts = [_sentence(q + c * 5 + k, 8) for k in range(2)]
                spans, start = [], 0
                for part in parts:
                    spans.append({"text": part, "start": start, "end": start + len(part)})
                    start += len(part) + 1
                candidates.append(
                    {"id": f"c{c}", "text": " ".join(parts), "generator": "m", "claims": spans}
                )
            record = {
                "external_id": f"q{q:06d}",
                "text": f"Question {q}: " + _sentence(q, 10),
                "sources": [
                    {
                        "id": f"doc-{q}",
                        "text": " ".join(_sentence(q * 31 + k, 14) for k in range(10)),
                        "uri": f"https://archive.example/doc/{q}",
                    }
                ],
                "candidates": candidates,
            }
            out.write(json.dumps(record) + "\n")


# -- child: set the database up, in its own process --------------------------------------------
def setup_child(items: int, annotators: int, overlap: int) -> None:
    """Migrate, import, create users and tokens, start labelling; print JSON (tokens, ids)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from labeling.importers.native import file_sha256, read_jsonl
    from labeling.models import Role
    from labeling.services import (
        membership_set,
        project_create,
        project_labelling_configure,
        project_labelling_start,
        workload_import,
    )
    from labeling.services.tokens import api_token_create

    call_command("migrate", verbosity=0)
    user_model = get_user_model()
    manager = user_model.objects.create_user(username="bench-manager")
    project = project_create(slug=SLUG, name="Annotation benchmark", manager=manager)
    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "bench.jsonl"
        generate(workload, questions=(items + 1) // 2)
        with workload.open("rb") as stream:
            digest = file_sha256(stream)
            workload_import(
                project=project,
                records=read_jsonl(stream),
                format="native",
                filename=workload.name,
                file_sha256=digest,
            )
    project_labelling_configure(project=project, actor=manager, overlap=overlap)
    project_labelling_start(project=project, actor=manager)
    tokens = []
    for n in range(annotators):
        user = user_model.objects.create_user(username=f"bench-annotator-{n:02d}")
        membership_set(project=project, user=user, role=Role.ANNOTATOR)
        tokens.append(api_token_create(user=user, name="benchmark").secret)
    print(json.dumps({"project_id": project.pk, "items": project.items.count(), "tokens": tokens}))


# -- PostgreSQL scratch database and the server ------------------------------------------------
def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _database_name(url: str) -> str:
    name = urlsplit(url).path.lstrip("/")
    if not name.replace("_", "").isalnum():
        raise SystemExit(f"unexpected database name {name!r} in {url}")
    return name


def recreate_database(url: str) -> None:
    import psycopg

    name = _database_name(url)
    with psycopg.connect(_with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")


def drop_database(url: str) -> None:
    import psycopg

    with psycopg.connect(_with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {_database_name(url)} WITH (FORCE)")


def server_env(database_url: str, broker_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    separator = "&" if urlsplit(database_url).query else "?"
    if broker_url != "eager":
        env.update(CELERY_BROKER_URL=broker_url, CELERY_TASK_ALWAYS_EAGER="false")
    env.update(
        DATABASE_URL=f"{database_url}{separator}conn_max_age=600",
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_LOG_LEVEL="WARNING",
        # The benchmark saturates the server on purpose: a simulated annotator may send more
        # than the production per-user rate, which would measure the throttle, not the server.
        CERTLABEL_THROTTLE_USER="1000000/minute",
    )
    return env


def empty_broker(broker_url: str) -> None:
    """Empty the benchmark's own Redis database (the tasks it enqueued are never run)."""
    import redis

    redis.Redis.from_url(broker_url).flushdb()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(env: dict[str, str], port: int, workers: int, threads: int) -> subprocess.Popen:
    gunicorn = Path(sys.executable).with_name("gunicorn")
    process = subprocess.Popen(
        [
            str(gunicorn) if gunicorn.exists() else "gunicorn",
            "labeling.wsgi:application",
            f"--bind=127.0.0.1:{port}",
            f"--workers={workers}",
            f"--threads={threads}",
            "--worker-class=gthread",
            "--keep-alive=30",
            "--log-level=warning",
        ],
        cwd=REPO,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited with code {process.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/api/projects/")
            conn.getresponse().read()
            conn.close()
            return process
        except OSError:
            time.sleep(0.2)
    stop_gunicorn(process)
    raise SystemExit("gunicorn did not answer within 60 s")


def stop_gunicorn(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# -- simulated annotators ----------------------------------------------------------------------
class Results:
    """Latencies and outcomes collected by every annotator thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = {"next": [], "submit": []}
        self.outcomes: Counter[str] = Counter()
        self.errors: list[str] = []

    def record(self, op: str, seconds: float, outcome: str) -> None:
        with self.lock:
            self.latency[op].append(seconds)
            self.outcomes[f"{op} {outcome}"] += 1


def annotator(
    port: int,
    token: str,
    n: int,
    results: Results,
    empty_retries: int,
    think: float,
    start: threading.Barrier,
) -> None:
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(op: str, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        if think:
            time.sleep(think)
        began = time.perf_counter()
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            conn.close()  # reconnects on the next request
            raise
        results.record(op, time.perf_counter() - began, str(response.status))
        return response.status, data

    base = f"/api/projects/{SLUG}/assignments"
    empty = 0
    start.wait()
    try:
        while True:
            status, data = call("next", "POST", f"{base}/next/")
            if status == 204:
                empty += 1
                if empty > empty_retries:
                    return
                time.sleep(0.05 * empty)
                continue
            if status != 200:
                results.errors.append(f"next {status}: {data[:200]!r}")
                return
            empty = 0
            form = json.loads(data)
            label = ("admissible", "inadmissible")[(n + form["item_id"]) % 2]
            body = json.dumps(
                {
                    "answer_label": label,
                    "claims": [
                        {"claim_id": c["id"], "label": "not_supported"} for c in form["claims"]
                    ],
                    "time_spent_seconds": 12.5,
                }
            ).encode()
            status, data = call(
                "submit", "PUT", f"{base}/{form['assignment_id']}/annotation/", body
            )
            if status != 200:
                results.errors.append(f"submit {status}: {data[:200]!r}")
    finally:
        conn.close()


def percentiles(values: list[float]) -> dict[str, float]:
    if len(values) < 2:
        return {"n": len(values)}
    q = statistics.quantiles(values, n=100, method="inclusive")
    return {
        "n": len(values),
        "p50_ms": round(q[49] * 1000, 1),
        "p95_ms": round(q[94] * 1000, 1),
        "p99_ms": round(q[98] * 1000, 1),
        "max_ms": round(max(values) * 1000, 1),
    }


def verify(database_url: str, project_id: int, overlap: int) -> dict[str, int]:
    """Count items by annotations from the database: exactly ``overlap`` by distinct people."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            """
            SELECT i.id, count(a.id), count(DISTINCT a.annotator_id),
                   (SELECT count(*) FROM labeling_assignment s
                     WHERE s.item_id = i.id AND s.status IN ('leased', 'submitted'))
              FROM labeling_item i LEFT JOIN labeling_annotation a ON a.item_id = i.id
             WHERE i.project_id = %s
             GROUP BY i.id
            """,
            (project_id,),
        ).fetchall()
        statuses = dict(
            conn.execute(
                "SELECT status, count(*) FROM labeling_item WHERE project_id = %s GROUP BY status",
                (project_id,),
            ).fetchall()
        )
    return {
        "items": len(rows),
        "exactly_n_by_n_people": sum(1 for _, n, people, _ in rows if n == people == overlap),
        "double_assignments": sum(
            1 for _, n, people, live in rows if n > overlap or people < n or live > overlap
        ),
        "unfinished": sum(1 for _, n, _, _ in rows if n < overlap),
        "annotations": sum(n for _, n, _, _ in rows),
        **{f"status_{k}": v for k, v in sorted(statuses.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--annotators", type=int, default=32)
    parser.add_argument("--overlap", type=int, default=2)
    parser.add_argument("--workers", type=int, default=max(2, (os.cpu_count() or 1) * 2))
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads per worker; default: enough for every annotator's connection at once",
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help="pause of each annotator between requests (default 0: the server is saturated)",
    )
    parser.add_argument("--empty-retries", type=int, default=3)
    parser.add_argument(
        "--broker-url",
        default=DEFAULT_BROKER,
        help="Celery broker the server enqueues to (emptied before and after), or 'eager'",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--setup-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup_child:
        setup_child(args.items, args.annotators, args.overlap)
        return
    # gthread keeps each keep-alive connection on one worker: with fewer threads than
    # connections there, requests queue behind others' and the tail grows.
    args.threads = args.threads or -(-args.annotators // args.workers)

    url = args.database_url
    print(f"database {url}: creating, migrating, loading {args.items} items ...", flush=True)
    recreate_database(url)
    env = server_env(url, args.broker_url)
    if args.broker_url != "eager":
        empty_broker(args.broker_url)
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--setup-child", "--database-url", url]
            + [f"--items={args.items}", f"--annotators={args.annotators}"]
            + [f"--overlap={args.overlap}"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
        setup = json.loads(done.stdout.strip().splitlines()[-1])
        port = free_port()
        print(
            f"gunicorn on :{port}, {args.workers} workers x {args.threads} threads; "
            f"{args.annotators} annotators, overlap {args.overlap}, {setup['items']} items",
            flush=True,
        )
        server = start_gunicorn(env, port, args.workers, args.threads)
        try:
            results = Results()
            barrier = threading.Barrier(args.annotators + 1)
            threads = [
                threading.Thread(
                    target=annotator,
                    args=(
                        port,
                        token,
                        n,
                        results,
                        args.empty_retries,
                        args.think_ms / 1000,
                        barrier,
                    ),
                )
                for n, token in enumerate(setup["tokens"])
            ]
            for thread in threads:
                thread.start()
            barrier.wait()
            began = time.perf_counter()
            for thread in threads:
                thread.join()
            seconds = time.perf_counter() - began
        finally:
            stop_gunicorn(server)
        check = verify(url, setup["project_id"], args.overlap)
    finally:
        if not args.keep:
            drop_database(url)
        if args.broker_url != "eager":
            empty_broker(args.broker_url)

    requests = sum(len(v) for v in results.latency.values())
    report = {
        "items": setup["items"],
        "annotators": args.annotators,
        "overlap": args.overlap,
        "gunicorn": f"{args.workers} workers x {args.threads} threads (gthread)",
        "think_ms": args.think_ms,
        "cpus": os.cpu_count(),
        "seconds": round(seconds, 1),
        "requests_per_s": round(requests / seconds, 1),
        "annotations_per_s": round(check["annotations"] / seconds, 1),
        "next": percentiles(results.latency["next"]),
        "submit": percentiles(results.latency["submit"]),
        "outcomes": dict(sorted(results.outcomes.items())),
        "errors": results.errors[:10],
        "error_count": len(results.errors),
        "check": check,
    }
    print(json.dumps(report, indent=2))
    p95 = max(report[op].get("p95_ms", 0) for op in ("next", "submit"))
    verdict = "met" if p95 < P95_TARGET_MS else "NOT met"
    print(f"p95 target (< {P95_TARGET_MS} ms): {verdict} (worst p95 {p95} ms)")
    print(f"double assignments: {check['double_assignments']}; unfinished: {check['unfinished']}")
    if check["double_assignments"] or results.errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
