"""certlabel beside Label Studio on the same tasks: import, export and the label loop.

Usage (from the repository root, with the project installed)::

    python tests/benchmarks/bench_vs_labelstudio.py                       # certlabel only
    python tests/benchmarks/bench_vs_labelstudio.py --with-label-studio   # both, alternating
    python tests/benchmarks/bench_vs_labelstudio.py --with-label-studio --tasks 10000 50000 \\
        --clients 8 32 --postgres postgres://postgres@127.0.0.1:5432/postgres
    python tests/benchmarks/bench_vs_labelstudio.py --with-label-studio --loops-only \\
        --backends postgres --postgres postgres://postgres@127.0.0.1:5432/postgres \\
        --clients 8 32                                                    # the loops alone

``--with-label-studio`` installs ``label-studio==1.23.2`` into a virtualenv of its own under the
system's temporary folder (kept between runs; ``--label-studio-venv`` names another). It is a
benchmark dependency only: the product never imports it, and nothing of it is committed.

The workload: N tasks, each a question, a source passage of ten sentences and an answer of two,
with one annotation that labels the answer (admissible or inadmissible) and cites the passage's
first sentence as evidence. Both products get the same N tasks, each in its own format:

- Label Studio: ``{"data": {"question", "passage", "answer"}, "annotations": [{"result": [a
  Labels span on the passage, a Choices verdict on the answer]}]}`` in a project whose labelling
  config has exactly those two controls;
- certlabel: a native record with the passage as its one source, the answer as its one candidate
  with one claim (the whole answer), a prior annotation (answer label, claim label ``supported``
  with the evidence span) and a consensus resolution with the same labels, so that the release
  carries every label.

Phases, each product in turn (certlabel, then Label Studio, then again for ``--rounds`` > 1):

1. **import**: one API upload of the N tasks into a new project (certlabel ``POST
   /api/projects/<slug>/imports/``, polling the job a large file becomes; Label Studio ``POST
   /api/projects/<id>/import``), timed from the request to the last row written; the server
   process tree's peak RSS is sampled every 50 ms meanwhile.
2. **export**: certlabel freezes a release (``POST .../releases/``) and downloads every file of
   it; Label Studio builds an export snapshot (``POST .../exports/``) and downloads it as JSON.
   certlabel's export starts once the derived results the import scheduled are current (a
   wait over 1 s is printed), so that the build does not wait behind them in the one worker's
   queue; it prints the seconds of freeze and build, and of the download, apart.
3. **label loop**: a second project of ``--loop-tasks`` tasks without annotations, overlap 2
   (Label Studio: ``maximum_annotations`` 2); ``--clients`` annotators, each a user of its own
   with an API token and one keep-alive connection, repeat next + submit with no think time for
   ``--loop-seconds``. Reported: cycles per second, the cycle's p50 and p95 (next and submit
   together, as the annotator waits), and from the database afterwards the tasks with more
   annotations than the overlap ("over overlap"). certlabel's loops start once its derived
   results (recomputed in the background after each import) are current, and the time that
   took is printed: the loop is measured on its own, not beside the 50,000-task recomputation.
4. **label loop with think time**: as 3, on a new project, with ``--think-clients`` annotators
   (default 32) who each wait a think time of mean ``--think`` seconds (default 1) after a
   cycle, as people do; reported: the p95 of next and of submit, each. People do not click in
   step: each client starts at a random moment of its first think time, and each think time is
   drawn uniformly from ``think × (1 ± --think-spread)`` (default 0.5, so 0.5–1.5 s).
   ``--think-spread 0`` is the lock-step model instead: every client starts at once and waits
   exactly ``--think``, so every second all of them send their request in the same instant
   and the p95 measures how long that burst takes to drain.

``--loops-only`` runs phases 3 and 4 alone (``--tasks`` is then not used).

Servers: certlabel under gunicorn (``--workers``, threads enough for every client), on the
embedded default (a SQLite file, Celery tasks in-process) and, with ``--postgres``, on
PostgreSQL with Redis (``--broker-url``, the benchmark's own database 13, emptied) and one real
Celery worker (``celery -A labeling worker -Q housekeeping,recompute,builds``), as production;
``--backends`` picks them. Label Studio as ``label-studio start`` serves it by default (one
process, its SQLite database in-process).

CPU: beside each wall-clock figure, the server's CPU-seconds per 1,000 tasks (import, export)
or cycles (loops), from /proc (utime + stime; bench_annotate.py's meters): certlabel's gunicorn
process tree + the Celery worker's tree + on PostgreSQL the processes of its database (client
backends, autovacuum workers) and the server's shared background writers; Label Studio's
process tree. A process tree counts its exited children (reaped: cutime + cstime). The import's
CPU includes the derived results it scheduled (recomputed after it), a loop's the wait after it
until they are current again (work the loop's votes caused); the wall-clock times do not. Each
part is printed (and Redis, the whole PostgreSQL server and the clients beside, not summed).
The benchmark counts its own 4 processes against Label Studio's 1: wall-clock ratios alone
favour the product that uses more cores.

Ratios are Label Studio's time, p95 or CPU over certlabel's: above 1, certlabel is faster or
cheaper. Targets (issue 33): import >= 10x, export >= 50x, label-loop cycle p95 at most 1/10 of
Label Studio's at 8 and 32 clients, server CPU per cycle at most 1/3 of Label Studio's (the
project-size side of it: bench_loop_scale.py), and with think time next and submit each under
100 ms at p95.

Every child (gunicorn, the worker, Label Studio, the setup children) runs in a session of its
own and is stopped with its whole process group on every way out: failure, SIGINT, SIGTERM
(bench_annotate.spawn). Starts and waits have deadlines that stretch with the load (base × the
1-minute load average per core, at least 1, at most 10: gunicorn 60 s, Label Studio 300 s, a
job or build or export 600 s, derived results 900 s); requests time out (a client's 120 s).
Not collected by pytest (``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import random
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_annotate as server  # noqa: E402  (the benchmarks' process and CPU helpers)

REPO = server.REPO
LABEL_STUDIO = "label-studio==1.23.2"
# Label Studio 1.23.2 passes sentry-sdk options that sentry-sdk 3 refuses (it would not start).
LABEL_STUDIO_PINS = ("sentry-sdk>=2,<3",)
DEFAULT_VENV = Path(tempfile.gettempdir()) / "certlabel-bench-label-studio-1.23.2"
# The benchmark's own Redis database (emptied before and after): not the test suite's 15.
BROKER = "redis://127.0.0.1:6379/13"
OVERLAP = 2
# Wall-clock ratios (Label Studio's time or p95 over certlabel's) and, for the label loop
# without think time, the CPU ratio (Label Studio's server CPU per cycle over certlabel's).
TARGETS = {"import": 10.0, "export": 50.0, "loop": 10.0, "loop_cpu": 3.0}
THINK_P95_TARGET_MS = 100
# Base deadlines in seconds, each stretched by the load factor (bench_annotate.Deadline).
JOB_DEADLINE = 600  # an import job, a release build, an export snapshot
SETTLE_DEADLINE = 900  # derived results current
LABEL_STUDIO_START_DEADLINE = 300
CLIENT_TIMEOUT = 120  # one request of a label-loop client
LABEL_CONFIG = (
    '<View><Header value="$question"/><Text name="passage" value="$passage"/>'
    '<Labels name="evidence" toName="passage"><Label value="evidence"/></Labels>'
    '<Text name="answer" value="$answer"/>'
    '<Choices name="verdict" toName="answer" choice="single">'
    '<Choice value="admissible"/><Choice value="inadmissible"/></Choices></View>'
)


# -- the workload, once, in both formats -------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """One task: what both products get, before conversion."""

    key: str
    question: str
    passage: str
    answer: str
    verdict: str
    evidence_end: int  # the evidence is passage[0:evidence_end], its first sentence


def tasks(n: int, *, salt: int = 0) -> Iterator[Task]:
    """The n tasks of a workload (deterministic; ``salt`` makes another set of texts)."""
    for i in range(n):
        seed = i * 11 + salt * 100_003
        sentences = [server._sentence(seed + k, 14) for k in range(10)]
        yield Task(
            key=f"t{salt}-{i:06d}",
            question=f"Question {i}: " + server._sentence(seed, 10),
            passage=" ".join(sentences),
            answer=" ".join(server._sentence(seed + 50 + k, 8) for k in range(2)),
            verdict=("admissible", "inadmissible")[i % 2],
            evidence_end=len(sentences[0]),
        )


def native_record(task: Task, *, annotated: bool) -> dict[str, Any]:
    """The task as a certlabel native record (with its annotation and resolution, if asked)."""
    record: dict[str, Any] = {
        "external_id": task.key,
        "text": task.question,
        "sources": [{"id": f"doc-{task.key}", "text": task.passage}],
        "candidates": [
            {
                "id": "c0",
                "text": task.answer,
                "claims": [{"text": task.answer, "start": 0, "end": len(task.answer)}],
            }
        ],
    }
    if annotated:
        evidence = [
            {
                "source": f"doc-{task.key}",
                "start": 0,
                "end": task.evidence_end,
                "quote": task.passage[: task.evidence_end],
            }
        ]
        claim = {"claim": 0, "label": "supported", "evidence": evidence}
        candidate = record["candidates"][0]
        candidate["prior_annotations"] = [
            {"annotator": "ann-1", "answer_label": task.verdict, "claim_labels": [claim]}
        ]
        candidate["resolution"] = {
            "status": "consensus",
            "answer_label": task.verdict,
            "claim_labels": [claim],
        }
    return record


def label_studio_result(task: Task) -> list[dict[str, Any]]:
    """The annotation's result in Label Studio's JSON: the evidence span and the verdict."""
    return [
        {
            "from_name": "evidence",
            "to_name": "passage",
            "type": "labels",
            "value": {
                "start": 0,
                "end": task.evidence_end,
                "text": task.passage[: task.evidence_end],
                "labels": ["evidence"],
            },
        },
        {
            "from_name": "verdict",
            "to_name": "answer",
            "type": "choices",
            "value": {"choices": [task.verdict]},
        },
    ]


def label_studio_task(task: Task, *, annotated: bool) -> dict[str, Any]:
    data = {"question": task.question, "passage": task.passage, "answer": task.answer}
    out: dict[str, Any] = {"data": data}
    if annotated:
        out["annotations"] = [{"result": label_studio_result(task)}]
    return out


def write_native(path: Path, n: int, *, annotated: bool, salt: int) -> int:
    with path.open("w", encoding="utf-8") as out:
        for task in tasks(n, salt=salt):
            out.write(json.dumps(native_record(task, annotated=annotated)) + "\n")
    return path.stat().st_size


def write_label_studio(path: Path, n: int, *, annotated: bool, salt: int) -> int:
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for i, task in enumerate(tasks(n, salt=salt)):
            out.write(("," if i else "") + json.dumps(label_studio_task(task, annotated=annotated)))
        out.write("]")
    return path.stat().st_size


# -- HTTP and measurement ----------------------------------------------------------------------
class Http:
    """One keep-alive connection with a token (the benchmark's client)."""

    def __init__(self, port: int, token: str, timeout: float = 3600) -> None:
        self.port, self.timeout = port, timeout
        self.headers = {"Authorization": f"Token {token}"}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(
        self, method: str, path: str, body: bytes | None = None, content_type: str | None = None
    ) -> tuple[int, bytes, dict[str, str]]:
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                # A keep-alive connection the server closed while it was idle (the manager's,
                # during a label loop) fails on its next request before the server reads it.
                stale = isinstance(exc, BrokenPipeError | http.client.RemoteDisconnected)
                if attempt == 1 and stale:
                    continue
                raise
            return response.status, data, dict(response.getheaders())
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, payload: Any = None, ok: tuple[int, ...] = (200, 201)):
        body = None if payload is None else json.dumps(payload).encode()
        status, data, _ = self.call(method, path, body, "application/json" if body else None)
        if status not in ok:
            raise SystemExit(f"{method} {path}: {status} {data[:300]!r}")
        return json.loads(data) if data else None

    def close(self) -> None:
        self.conn.close()


def multipart(field_name: str, filename: str, content: bytes, **fields: str) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{field_name}"; '
        f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
        + content
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


@contextmanager
def peak_rss(pid: int) -> Iterator[dict[str, float]]:
    """Sample the RSS of ``pid`` and its children every 50 ms; ``out["mib"]`` is the peak."""
    import psutil

    out = {"mib": 0.0}
    stop = threading.Event()

    def sample() -> None:
        root = psutil.Process(pid)
        while not stop.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
                rss = sum(p.memory_info().rss for p in procs if p.is_running())
                out["mib"] = max(out["mib"], rss / 2**20)
            except psutil.Error:
                pass
            stop.wait(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join()


def percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@dataclass
class Loop:
    """What the label loop's clients measured."""

    cycles: list[float] = field(default_factory=list)
    nexts: list[float] = field(default_factory=list)
    submits: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    out_of_work: int = 0  # clients that stopped before the deadline: no item left for them
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, took: tuple[float, float]) -> None:
        with self.lock:
            self.nexts.append(took[0])
            self.submits.append(took[1])
            self.cycles.append(took[0] + took[1])


# A client's cycle: next + submit, returning (next seconds, submit seconds), or None (no work).
Cycle = Callable[[], tuple[float, float] | None]


def run_loop(
    clients: list[Cycle], seconds: float, loop: Loop, think: float = 0.0, spread: float = 0.0
) -> float:
    """Run each client's cycle until ``seconds`` pass or it has no work; return the wall time.

    ``think``: the mean seconds each client waits after a cycle (an annotator reading the next
    task). ``spread`` (0 to 1): with it, each client first waits a random part of one think
    time, and each wait is uniform on ``think * (1 - spread)`` to ``think * (1 + spread)``;
    with 0, every client starts at once and waits exactly ``think``.
    """
    barrier = threading.Barrier(len(clients) + 1)
    deadline: list[float] = []
    # Seeded: the same draws in every run and for both products (which client gets which draw
    # follows the order in which they ask).
    draws = random.Random(20261202)
    lock = threading.Lock()

    def pause() -> float:
        with lock:
            return think * draws.uniform(1 - spread, 1 + spread)

    def worker(cycle: Cycle) -> None:
        barrier.wait(timeout=120)
        if spread:
            with lock:
                start = draws.uniform(0, think)
            time.sleep(start)
        empty = 0
        while time.perf_counter() < deadline[0]:
            try:
                took = cycle()
            except Exception as exc:  # noqa: BLE001  (a client's failure is a figure)
                loop.errors.append(repr(exc)[:200])
                return
            if took is None:
                empty += 1
                if empty > 3:
                    with loop.lock:
                        loop.out_of_work += 1
                    return
                time.sleep(0.05 * empty)
                continue
            empty = 0
            loop.add(took)
            if think:
                time.sleep(pause())

    # Daemon threads: an interrupted run exits without waiting for them (its servers are
    # stopped by then, so their requests fail at once anyway).
    threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in clients]
    for thread in threads:
        thread.start()
    deadline.append(time.perf_counter() + seconds)
    began = time.perf_counter()
    barrier.wait(timeout=120)
    # Bounded: a client stops at the deadline, after the request (CLIENT_TIMEOUT) and the
    # think time it is in.
    stop_by = began + seconds + CLIENT_TIMEOUT + 2 * think + 30
    for thread in threads:
        thread.join(timeout=max(0.0, stop_by - time.perf_counter()))
    if any(thread.is_alive() for thread in threads):
        loop.errors.append("a client did not stop in time (left running as a daemon thread)")
    return time.perf_counter() - began


def loop_figures(loop: Loop, wall: float, over: int) -> dict[str, Any]:
    return {
        "cycles": len(loop.cycles),
        "cycles_per_s": len(loop.cycles) / wall if wall else 0.0,
        "p50_ms": percentile(loop.cycles, 50) * 1000,
        "p95_ms": percentile(loop.cycles, 95) * 1000,
        "next_p95_ms": percentile(loop.nexts, 95) * 1000,
        "submit_p95_ms": percentile(loop.submits, 95) * 1000,
        "over_overlap": over,
        "errors": len(loop.errors),
        "first_error": loop.errors[0] if loop.errors else "",
        "out_of_work": loop.out_of_work,
    }


# -- certlabel ---------------------------------------------------------------------------------
def certlabel_setup_child(annotators: int, loops: int) -> None:
    """Migrate; a manager with a token; ``annotators`` users with tokens; the projects.

    Projects: ``import`` (the manager's) and ``loop0`` ... (the annotators are members, overlap
    set). Prints JSON: the manager's and the annotators' tokens.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from labeling.models import Role
    from labeling.services import membership_set, project_create, project_labelling_configure
    from labeling.services.tokens import api_token_create

    call_command("migrate", verbosity=0)
    users = get_user_model().objects
    manager = users.create_user(username="bench-manager")
    people = [users.create_user(username=f"bench-annotator-{n:02d}") for n in range(annotators)]
    project_create(slug="import", name="import", manager=manager)
    for n in range(loops):
        project = project_create(slug=f"loop{n}", name=f"loop {n}", manager=manager)
        project_labelling_configure(project=project, actor=manager, overlap=OVERLAP)
        for user in people:
            membership_set(project=project, user=user, role=Role.ANNOTATOR)
    print(
        json.dumps(
            {
                "manager": api_token_create(user=manager, name="bench").secret,
                "annotators": [api_token_create(user=u, name="bench").secret for u in people],
            }
        )
    )


def api_cycle(port: int, token: str, slug: str, n: int) -> Cycle:
    """One annotator's next + submit cycle through the API (client ``n`` picks its labels)."""
    conn = Http(port, token, timeout=CLIENT_TIMEOUT)
    base = f"/api/projects/{slug}/assignments"

    def cycle() -> tuple[float, float] | None:
        began = time.perf_counter()
        status, data, _ = conn.call("POST", f"{base}/next/")
        if status == 204:
            return None
        if status != 200:
            raise RuntimeError(f"next {status} {data[:200]!r}")
        form = json.loads(data)
        served = time.perf_counter()
        body = {
            "answer_label": ("admissible", "inadmissible")[(n + form["item_id"]) % 2],
            "claims": [{"claim_id": c["id"], "label": "not_supported"} for c in form["claims"]],
        }
        status, data, _ = conn.call(
            "PUT",
            f"{base}/{form['assignment_id']}/annotation/",
            json.dumps(body).encode(),
            "application/json",
        )
        if status != 200:
            raise RuntimeError(f"submit {status} {data[:200]!r}")
        return served - began, time.perf_counter() - served

    return cycle


class Certlabel:
    """certlabel under gunicorn on one database (on PostgreSQL with a real Celery worker)."""

    name = "certlabel"

    def __init__(
        self,
        database: str,
        workdir: Path,
        annotators: int,
        loops: int,
        workers: int,
        broker: str = BROKER,
    ) -> None:
        self.database, self.workdir, self.workers = database, workdir, workers
        self.broker = broker
        self.postgres = database.startswith("postgres")
        self.process: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None
        self.manager: Http | None = None
        self.pg_cpu: server.PostgresCpu | None = None
        try:
            self._start(annotators, loops)
        except BaseException:
            self.close()  # nothing left running, whatever failed
            raise

    def _start(self, annotators: int, loops: int) -> None:
        database, workdir = self.database, self.workdir
        broker = self.broker if self.postgres else "eager"
        if self.postgres:
            server.recreate_database(database)
            server.empty_broker(self.broker)
        self.env = server.server_env(database, broker)
        for name in ("jobs", "releases", "mail"):
            (workdir / name).mkdir(parents=True, exist_ok=True)
        self.env.update(
            CERTLABEL_JOB_ROOT=str(workdir / "jobs"),
            CERTLABEL_RELEASE_ROOT=str(workdir / "releases"),
            CERTLABEL_MAIL_DIR=str(workdir / "mail"),
        )
        out = server.run_child(
            [sys.executable, __file__, "--certlabel-setup-child", str(annotators), str(loops)],
            what="certlabel setup",
            base_timeout=300,
            cwd=REPO,
            env=self.env,
        )
        self.tokens = json.loads(out.strip().splitlines()[-1])
        # On PostgreSQL, background work (a large upload's import job, labelling start, derived
        # results) goes to a Celery worker, as in production; on SQLite it runs in-process.
        if self.postgres:
            self.worker = server.start_celery_worker(self.env, workdir, concurrency=1)
        self.port = server.free_port()
        threads = -(-(annotators + 1) // self.workers)
        self.process = server.start_gunicorn(self.env, self.port, self.workers, threads)
        self.manager = Http(self.port, self.tokens["manager"])
        self.loops = 0
        self.cpu = self._meter()

    def _meter(self) -> server.CpuMeter:
        """The CPU of the web tree and, on PostgreSQL, the worker and the database's backends."""
        assert self.process is not None
        web = self.process.pid
        parts: dict[str, Callable[[], float]] = {"web": lambda: server.tree_cpu(web)}
        if self.worker is not None:
            worker = self.worker.pid
            parts["worker"] = lambda: server.tree_cpu(worker)
        if self.postgres:
            self.pg_cpu = server.PostgresCpu(self.database, server._database_name(self.database))
            parts["postgres"] = self.pg_cpu.read
            parts["pg server"] = self.pg_cpu.server
            if (redis := server.redis_pid(self.broker)) is not None:
                parts["redis"] = lambda: server.tree_cpu(redis)
        parts["clients"] = server.own_cpu
        return server.CpuMeter(parts, [p for p in ("web", "worker", "postgres") if p in parts])

    def children(self) -> list[subprocess.Popen]:
        return [p for p in (self.process, self.worker) if p is not None]

    def check_alive(self) -> None:
        """Raise SystemExit when gunicorn or the worker has exited (nothing would finish)."""
        for process in self.children():
            if process.poll() is not None:
                raise SystemExit(f"{process.args[:5]} exited with code {process.returncode}")

    def close(self) -> None:
        """Stop everything started (each step runs even if one before it failed)."""
        if self.worker is not None and self.worker.poll() is not None:
            print(f"the Celery worker had exited ({self.worker.returncode}); its log ends:")
            print(server.log_tail(self.workdir / "worker.log"), flush=True)
        steps: list[Callable[[], object]] = []
        if self.manager is not None:
            steps.append(self.manager.close)
        if self.pg_cpu is not None:
            steps.append(self.pg_cpu.close)
        steps += [lambda p=p: server.stop_process(p) for p in self.children()]
        if self.postgres:
            steps += [
                lambda: server.empty_broker(self.broker),
                lambda: server.drop_database(self.database),
            ]
        self.process = self.worker = self.manager = self.pg_cpu = None
        server.cleanup(*steps)

    def _poll(self, what: str, path: str, done: Callable[[Any], bool], first: Any) -> Any:
        """GET ``path`` until ``done`` says so; bounded (JOB_DEADLINE, load-scaled)."""
        assert self.manager is not None
        manager, state = self.manager, [first]

        def check() -> bool:
            if not done(state[0]):
                state[0] = manager.json("GET", path)
            return done(state[0])

        server.wait_for(check, what=what, base=JOB_DEADLINE, watch=self.children(), interval=0.05)
        return state[0]

    def wait_job(self, slug: str, job: dict[str, Any]) -> None:
        job = self._poll(
            f"job {job['id']}",
            f"/api/projects/{slug}/jobs/{job['id']}/",
            lambda j: j["status"] in ("done", "failed"),
            job,
        )
        if job["status"] == "failed":
            raise SystemExit(f"job failed: {job}")

    def upload(self, slug: str, path: Path) -> None:
        body, content_type = multipart("file", path.name, path.read_bytes(), format="native")
        status, data, _ = self.manager.call(
            "POST", f"/api/projects/{slug}/imports/", body, content_type
        )
        if status == 202:
            self.wait_job(slug, json.loads(data))
        elif status not in (200, 201):
            raise SystemExit(f"import: {status} {data[:300]!r}")

    def import_(self, path: Path) -> tuple[float, float]:
        with peak_rss(self.process.pid) as rss:
            began = time.perf_counter()
            self.upload("import", path)
            seconds = time.perf_counter() - began
        return seconds, rss["mib"]

    def export(self) -> tuple[float, int]:
        size = 0
        began = time.perf_counter()
        release = self.manager.json("POST", "/api/projects/import/releases/", {"version": "1"})
        url = f"/api/projects/import/releases/{release['id']}/"
        # the files are built in the background (in-process on the embedded default)
        release = self._poll(
            "release build", url, lambda r: r["builds"][0]["status"] in ("done", "failed"), release
        )
        if release["builds"][0]["status"] == "failed" or not release["files"]:
            raise SystemExit(f"release build: {release['builds'][0]}")
        built = time.perf_counter()
        for name in [f["name"] for f in release["files"]]:
            status, data, _ = self.manager.call(
                "GET", f"/api/projects/import/releases/{release['id']}/files/{name}"
            )
            if status != 200:
                raise SystemExit(f"release file {name}: {status}")
            size += len(data)
        ended = time.perf_counter()
        print(
            f"  certlabel: export: freeze and build {built - began:.2f} s, "
            f"download {ended - built:.2f} s",
            flush=True,
        )
        return ended - began, size

    def settle(self, base: float = SETTLE_DEADLINE) -> float:
        """Wait until every derived result is current in every project; return the seconds.

        After the 50,000-task import its recomputations (agreement, reliability, calibration,
        audit over every resolved item) run in the background; the export and the label loop
        are measured once they are done, so each measures itself, not itself beside them.
        Gives up after ``base`` seconds (SETTLE_DEADLINE, 900) times the load factor, saying so
        (``self.current`` is then False).
        """
        assert self.manager is not None
        slugs = ["import", *(f"loop{n}" for n in range(self.loops))]
        return settle_derived(self, slugs, base)

    def start_loop(self, path: Path) -> None:
        slug = f"loop{self.loops}"
        self.loops += 1
        self.upload(slug, path)
        status, data, _ = self.manager.call("POST", f"/api/projects/{slug}/labelling/start/")
        if status == 202:
            self.wait_job(slug, json.loads(data))
        elif status not in (200, 201):
            raise SystemExit(f"labelling start: {status} {data[:300]!r}")
        self.loop_slug = slug

    def client(self, n: int) -> Cycle:
        return api_cycle(self.port, self.tokens["annotators"][n], self.loop_slug, n)

    def over_overlap(self) -> int:
        query = (
            "SELECT count(*) FROM (SELECT a.item_id FROM labeling_annotation a "
            "JOIN labeling_item i ON i.id = a.item_id JOIN labeling_project p ON p.id = "
            "i.project_id WHERE p.slug = %s GROUP BY a.item_id HAVING count(*) > %s) AS over"
        )
        if self.database.startswith("sqlite"):
            with sqlite3.connect(self.database.removeprefix("sqlite:///")) as conn:
                return conn.execute(query.replace("%s", "?"), (self.loop_slug, OVERLAP)).fetchone()[
                    0
                ]
        import psycopg

        with psycopg.connect(self.database) as conn:
            row = conn.execute(query, (self.loop_slug, OVERLAP)).fetchone()
            return int(row[0]) if row else 0


# -- Label Studio ------------------------------------------------------------------------------
LS_USERS = """
import os, sys, json
import label_studio
sys.path.insert(0, os.path.dirname(label_studio.__file__))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings.label_studio")
import django
django.setup()
from organizations.models import Organization
from rest_framework.authtoken.models import Token
from users.models import User
org = Organization.objects.first()
keys = []
for i in range(int(sys.argv[1])):
    email = f"annotator{i}@example.org"
    user, _ = User.objects.get_or_create(email=email, defaults={"username": email})
    user.active_organization = org
    user.save()
    org.add_user(user)
    keys.append(Token.objects.get_or_create(user=user)[0].key)
print(json.dumps(keys))
"""


def label_studio_venv(path: Path) -> Path:
    """The virtualenv with Label Studio, made (once) if missing; returns its bin folder."""
    binary = path / "bin" / "label-studio"
    if not binary.exists():
        print(f"installing {LABEL_STUDIO} into {path} (once; minutes) ...", flush=True)
        server.run_child([sys.executable, "-m", "venv", str(path)], what="venv", base_timeout=300)
        server.run_child(
            [str(path / "bin" / "pip"), "install", "-q", LABEL_STUDIO, *LABEL_STUDIO_PINS],
            what=f"pip install {LABEL_STUDIO}",
            base_timeout=3600,
        )
    return path / "bin"


class LabelStudio:
    """Label Studio 1.23.2 as ``label-studio start`` serves it (its SQLite database)."""

    name = "Label Studio"

    def __init__(self, bin_dir: Path, workdir: Path, annotators: int) -> None:
        self.data = workdir / "label-studio"
        self.data.mkdir()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))},
            "LABEL_STUDIO_BASE_DATA_DIR": str(self.data),
        }
        self.port = server.free_port()
        token = secrets.token_hex(20)
        self.process: subprocess.Popen | None = None
        self.manager = Http(self.port, token)
        try:
            with (workdir / "label-studio.log").open("wb") as log:
                self.log = Path(log.name)
                self.process = server.spawn(
                    [
                        str(bin_dir / "label-studio"),
                        "start",
                        "--no-browser",
                        f"--port={self.port}",
                        "--username=bench@example.org",
                        f"--password={secrets.token_urlsafe(12)}",
                        f"--user-token={token}",
                        "--enable-legacy-api-token",
                    ],
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            # Its first start migrates a new SQLite database: minutes on a loaded machine.
            server.wait_for(
                self._answers,
                what=f"label-studio start (log: {self.log})",
                base=LABEL_STUDIO_START_DEADLINE,
                watch=[self.process],
                interval=0.5,
            )
            out = server.run_child(
                [str(bin_dir / "python"), "-c", LS_USERS, str(annotators)],
                what="label-studio users",
                base_timeout=300,
                env=self.env,
                stderr=subprocess.DEVNULL,
            )
            self.tokens = json.loads(out.strip().splitlines()[-1])
            pid = self.process.pid
            self.cpu = server.CpuMeter(
                {"label-studio": lambda: server.tree_cpu(pid), "clients": server.own_cpu},
                ["label-studio"],
            )
        except BaseException:
            self.close()
            raise

    def _answers(self) -> bool:
        """Whether Label Studio serves the API to the manager's token yet."""
        try:
            return self.manager.call("GET", "/api/projects/")[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    def children(self) -> list[subprocess.Popen]:
        return [self.process] if self.process is not None else []

    def close(self) -> None:
        steps: list[Callable[[], object]] = [self.manager.close]
        steps += [lambda p=p: server.stop_process(p) for p in self.children()]
        self.process = None
        server.cleanup(*steps)

    def new_project(self) -> int:
        project = self.manager.json(
            "POST",
            "/api/projects/",
            {"title": "bench", "label_config": LABEL_CONFIG, "maximum_annotations": OVERLAP},
        )
        return int(project["id"])

    def upload(self, project: int, path: Path) -> None:
        status, data, _ = self.manager.call(
            "POST", f"/api/projects/{project}/import", path.read_bytes(), "application/json"
        )
        if status not in (200, 201):
            raise SystemExit(f"label studio import: {status} {data[:300]!r}")

    def import_(self, path: Path) -> tuple[float, float]:
        project = self.new_project()
        with peak_rss(self.process.pid) as rss:
            began = time.perf_counter()
            self.upload(project, path)
            seconds = time.perf_counter() - began
        self.last_project = project
        return seconds, rss["mib"]

    def export(self) -> tuple[float, int]:
        project = self.last_project
        began = time.perf_counter()
        snapshot = self.manager.json("POST", f"/api/projects/{project}/exports/", {})
        state = [snapshot]

        def built() -> bool:
            if state[0]["status"] not in ("completed", "failed"):
                path = f"/api/projects/{project}/exports/{snapshot['id']}"
                state[0] = self.manager.json("GET", path)
            return state[0]["status"] in ("completed", "failed")

        server.wait_for(
            built,
            what="label studio export",
            base=JOB_DEADLINE,
            watch=self.children(),
            interval=0.05,
        )
        status, data, _ = self.manager.call(
            "GET", f"/api/projects/{project}/exports/{snapshot['id']}/download?exportType=JSON"
        )
        if status != 200:
            raise SystemExit(f"label studio export download: {status}")
        return time.perf_counter() - began, len(data)

    current = True  # Label Studio has no derived results

    def settle(self, base: float = SETTLE_DEADLINE) -> float:
        """Label Studio has no derived results: nothing to wait for."""
        return 0.0

    def start_loop(self, path: Path) -> None:
        self.loop_project = self.new_project()
        self.upload(self.loop_project, path)

    def client(self, n: int) -> Cycle:
        conn = Http(self.port, self.tokens[n], timeout=CLIENT_TIMEOUT)
        project = self.loop_project

        def cycle() -> tuple[float, float] | None:
            began = time.perf_counter()
            status, data, _ = conn.call("GET", f"/api/projects/{project}/next")
            if status == 404:
                return None
            if status != 200:
                raise RuntimeError(f"next {status} {data[:200]!r}")
            task = json.loads(data)
            served = time.perf_counter()
            verdict = ("admissible", "inadmissible")[(n + task["id"]) % 2]
            result = [
                {
                    "from_name": "verdict",
                    "to_name": "answer",
                    "type": "choices",
                    "value": {"choices": [verdict]},
                }
            ]
            status, data, _ = conn.call(
                "POST",
                f"/api/tasks/{task['id']}/annotations/?project={project}",
                json.dumps({"result": result, "lead_time": 12.5}).encode(),
                "application/json",
            )
            if status not in (200, 201):
                raise RuntimeError(f"submit {status} {data[:200]!r}")
            return served - began, time.perf_counter() - served

        return cycle

    def over_overlap(self) -> int:
        with sqlite3.connect(self.data / "label_studio.sqlite3") as conn:
            row = conn.execute(
                "SELECT count(*) FROM (SELECT task_id FROM task_completion WHERE project_id = ? "
                "GROUP BY task_id HAVING count(*) > ?)",
                (self.loop_project, OVERLAP),
            ).fetchone()
        return int(row[0])


def settle_derived(product: Any, slugs: list[str], base: float) -> float:
    """Poll the projects' derived results until every kind is current (or failed); bounded.

    ``product`` has ``manager`` (an :class:`Http`), ``check_alive`` and ``name``; its
    ``current`` is set to whether they were current in time. Returns the seconds waited. The
    polls go through the web server, whose CPU a loop's catch-up counts: they start 0.5 s apart
    and space out to 5 s (a poll of a project of 1,000,000 labels costs about 10 ms).
    """
    began = time.perf_counter()
    deadline = server.Deadline(base)
    product.current = False
    while not deadline.passed():
        product.check_alive()
        kinds = [
            k
            for slug in slugs
            for k in product.manager.json("GET", f"/api/projects/{slug}/derived/")
        ]
        if all(k["current"] or k["last_error"] for k in kinds):
            product.current = True
            break
        time.sleep(min(5.0, 0.5 + (time.perf_counter() - began) / 10))
    else:
        print(
            f"  {product.name}: derived results still not current after {deadline.describe()}",
            flush=True,
        )
    return time.perf_counter() - began


# -- the run -----------------------------------------------------------------------------------
def settle(product: Any) -> None:
    """Wait until the product's derived results are current; print a wait of over 1 s."""
    settled = product.settle()
    if settled > 1:
        print(f"  {product.name}: derived results current after {settled:.1f} s", flush=True)


def loop_measured(product: Any, path: Path, count: int, args, think: float = 0.0) -> dict:
    """One label loop of ``count`` clients on a new project; its figures and its server CPU.

    The CPU window is the loop and then the catch-up, the wait (``args.catch_up`` seconds at
    most, load-scaled) until the derived results are current again: certlabel's worker
    recomputes them after the loop's last votes, work the cycles caused (Label Studio has
    none). ``cpu`` holds CPU-seconds per 1,000 cycles of each part and of the server
    (``server``: web + worker + PostgreSQL, or Label Studio's process tree) over both;
    ``cpu_loop`` over the loop alone; ``caught_up`` whether the catch-up ended in time (if not,
    ``cpu`` leaves out what was still to do).
    """
    product.start_loop(path)
    settle(product)
    loop = Loop()
    clients = [product.client(i) for i in range(count)]
    spread = args.think_spread if think else 0.0
    before = product.cpu.mark()
    wall = run_loop(clients, args.loop_seconds, loop, think=think, spread=spread)
    at_end = product.cpu.mark()
    tail = product.settle(args.catch_up)
    after = product.cpu.mark()
    figures = loop_figures(loop, wall, product.over_overlap())
    figures["cpu"] = server.per_thousand(product.cpu.between(before, after), figures["cycles"])
    figures["cpu_loop"] = server.per_thousand(
        product.cpu.between(before, at_end), figures["cycles"]
    )
    figures["cpu_per_1000"] = figures["cpu"]["server"]
    figures["tail_s"] = tail
    figures["caught_up"] = product.current
    if figures["out_of_work"]:
        print(
            f"  warning: {figures['out_of_work']} of {count} clients ran out of items before "
            "the loop's end (give the loop more items): fewer cycles than the time allowed",
            flush=True,
        )
    return figures


def measure(product: Any, n: int, files: dict[str, Path], clients: list[int], args) -> dict:
    """Import, export and the label loop at each client count; one product, one N."""
    out: dict[str, Any] = {}
    if not args.loops_only:
        before = product.cpu.mark()
        seconds, rss = product.import_(files["import"])
        # The import's CPU counts the derived results it made stale (recomputed after it, in
        # the background); its wall-clock time does not, nor does the export's.
        settle(product)
        spent = server.per_thousand(product.cpu.between(before, product.cpu.mark()), n)
        out["import"] = {
            "seconds": seconds,
            "per_s": n / seconds,
            "rss_mib": rss,
            "cpu": spent,
            "cpu_per_1000": spent["server"],
        }
        # The export is measured on its own, as the loops are: not queued behind (one worker)
        # or beside (in-process) the recomputation of the derived results the import scheduled.
        before = product.cpu.mark()
        seconds, size = product.export()
        spent = server.per_thousand(product.cpu.between(before, product.cpu.mark()), n)
        out["export"] = {
            "seconds": seconds,
            "per_s": n / seconds,
            "bytes": size,
            "cpu": spent,
            "cpu_per_1000": spent["server"],
        }
        print(
            f"  {product.name}: import {n / out['import']['seconds']:,.0f} tasks/s, "
            f"{server.cpu_text(out['import']['cpu'], 'tasks')}; "
            f"export {out['export']['per_s']:,.0f} rec/s ({size:,} bytes), "
            f"{server.cpu_text(out['export']['cpu'], 'records')}",
            flush=True,
        )
    for count in clients:
        f = out[f"loop{count}"] = loop_measured(product, files["loop"], count, args)
        print(
            f"  {product.name}: {count} clients {f['cycles_per_s']:.1f} cycles/s, "
            f"p95 {f['p95_ms']:.0f} ms, {f['over_overlap']} over overlap, "
            f"{f['errors']} errors {f['first_error']}\n"
            f"    {server.cpu_text(f['cpu'])}; the loop alone "
            f"{f['cpu_loop']['server']:.2f}; {catch_up_text(f)}",
            flush=True,
        )
    if args.think_clients:
        f = out["think"] = loop_measured(
            product, files["loop"], args.think_clients, args, think=args.think
        )
        print(
            f"  {product.name}: {args.think_clients} clients, {think_label(args)}: "
            f"next p95 {f['next_p95_ms']:.0f} ms, submit p95 {f['submit_p95_ms']:.0f} ms, "
            f"{f['over_overlap']} over overlap, {f['errors']} errors {f['first_error']}\n"
            f"    {server.cpu_text(f['cpu'])}",
            flush=True,
        )
    return out


def catch_up_text(figures: dict[str, Any]) -> str:
    """How the catch-up after a loop went, in words."""
    if figures["caught_up"]:
        return f"derived results current {figures['tail_s']:.1f} s after the loop"
    return f"derived results NOT current {figures['tail_s']:.0f} s after the loop (CPU left out)"


def think_label(args: argparse.Namespace) -> str:
    """The think-time model in words, e.g. ``1 s think (0.5-1.5 s, random starts)``."""
    if not args.think_spread:
        return f"{args.think:g} s think (lock-step)"
    low, high = args.think * (1 - args.think_spread), args.think * (1 + args.think_spread)
    return f"{args.think:g} s think ({low:g}-{high:g} s, random starts)"


def ratio(theirs: float | None, ours: float | None) -> str:
    if not theirs or not ours or math.isnan(theirs) or math.isnan(ours):
        return "—"
    return f"{theirs / ours:.1f}×"


def report(results: dict[tuple[str, int], list[dict]], args) -> None:
    """The table: each product's figures, the wall-clock ratio and the CPU ratio beside it.

    Ratios are Label Studio's over certlabel's (above 1, certlabel is faster or cheaper), per
    backend; with several rounds, each product's best round.
    """

    def best(key: tuple[str, int], phase: str, figure: str, low: bool = False) -> float | None:
        values = [r[phase][figure] for r in results.get(key) or [] if phase in r]
        if not values:
            return None
        return min(values) if low else max(values)

    backends = (("sqlite", "SQLite"), ("postgres", "PostgreSQL"))

    def ratios(n: int, phase: str, figure: str, *, low: bool, target: float | None) -> str:
        """``SQLite 5.1×, PostgreSQL 4.2× (target 10×)``: Label Studio's over each backend's."""
        theirs = best(("ls", n), phase, figure, low=low)
        found = []
        for key, name in backends:
            ours = best((key, n), phase, figure, low=low)
            if ours is not None:
                # a rate (tasks/s) is better high: its ratio is ours over theirs
                found.append(f"{name} {ratio(theirs, ours) if low else ratio(ours, theirs)}")
        text = ", ".join(found) or "—"
        return f"{text} (target {target:g}×)" if target else text

    print(
        "\n| phase | N | Label Studio | certlabel SQLite | certlabel PostgreSQL "
        "| wall-clock ratio | CPU ratio |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    products = ("ls", "sqlite", "postgres")
    for n in args.tasks:
        for phase, unit in (("import", "tasks"), ("export", "rec")):
            cells = {}
            for product in products:
                per_s = best((product, n), phase, "per_s")
                cpu = best((product, n), phase, "cpu_per_1000", low=True)
                extra = ""
                if phase == "import" and per_s is not None:
                    extra = f", {best((product, n), phase, 'rss_mib', low=True):,.0f} MiB"
                cells[product] = (
                    "—" if per_s is None else f"{per_s:,.0f} {unit}/s{extra}, {cpu:.2f} CPU-s/1k"
                )
            if all(c == "—" for c in cells.values()):
                continue
            print(
                f"| {phase} | {n:,} | {cells['ls']} | {cells['sqlite']} | {cells['postgres']} | "
                f"{ratios(n, phase, 'per_s', low=False, target=TARGETS[phase])} | "
                f"{ratios(n, phase, 'cpu_per_1000', low=True, target=None)} |"
            )
        for count in args.clients:
            phase = f"loop{count}"
            cells = {}
            for product in products:
                runs = [r[phase] for r in results.get((product, n), []) if phase in r]
                cells[product] = (
                    "; ".join(
                        f"{r['cycles_per_s']:.1f} cycles/s, p95 {r['p95_ms']:,.0f} ms, "
                        f"{r['cpu_per_1000']:.2f} CPU-s/1k cycles"
                        f"{'' if r['caught_up'] else ' (catch-up incomplete)'}, "
                        f"{r['over_overlap']} over overlap"
                        for r in runs
                    )
                    or "—"
                )
            print(
                f"| next + submit, {count} clients | {args.loop_tasks:,} | {cells['ls']} | "
                f"{cells['sqlite']} | {cells['postgres']} | cycle p95 "
                f"{ratios(n, phase, 'p95_ms', low=True, target=TARGETS['loop'])} | "
                f"{ratios(n, phase, 'cpu_per_1000', low=True, target=TARGETS['loop_cpu'])} |"
            )
        if args.think_clients:
            for product in products:
                runs = [r["think"] for r in results.get((product, n), []) if "think" in r]
                cells[product] = (
                    "; ".join(
                        f"next p95 {r['next_p95_ms']:,.0f} ms, submit p95 "
                        f"{r['submit_p95_ms']:,.0f} ms, {r['cpu_per_1000']:.2f} CPU-s/1k "
                        f"cycles{'' if r['caught_up'] else ' (catch-up incomplete)'}, "
                        f"{r['over_overlap']} over overlap"
                        for r in runs
                    )
                    or "—"
                )
            print(
                f"| next / submit, {args.think_clients} clients, {think_label(args)} | "
                f"{args.loop_tasks:,} | {cells['ls']} | {cells['sqlite']} | "
                f"{cells['postgres']} | target p95 < {THINK_P95_TARGET_MS} ms each | "
                f"{ratios(n, 'think', 'cpu_per_1000', low=True, target=None)} |"
            )
    print(
        "\nCPU-s/1k: server CPU-seconds per 1,000 tasks, records or cycles: certlabel's web "
        "process tree + Celery worker tree + the PostgreSQL processes of its database (and the "
        "server's shared background writers); Label Studio's process tree (its SQLite is "
        "in-process). The figures per part are printed above."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with-label-studio", action="store_true")
    parser.add_argument("--label-studio-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--tasks", type=int, nargs="+", default=[10_000])
    parser.add_argument("--loop-tasks", type=int, default=10_000)
    parser.add_argument("--clients", type=int, nargs="+", default=[8])
    parser.add_argument("--loop-seconds", type=float, default=60.0)
    parser.add_argument(
        "--think-clients", type=int, default=32, help="clients of the think-time loop (0: none)"
    )
    parser.add_argument(
        "--think", type=float, default=1.0, help="mean seconds between two cycles of a client"
    )
    parser.add_argument(
        "--think-spread",
        type=float,
        default=0.5,
        help="think times uniform on think x (1 +- spread), random starts; 0: lock-step",
    )
    parser.add_argument(
        "--catch-up",
        type=float,
        default=SETTLE_DEADLINE,
        help="after a loop, wait at most this many seconds (load-scaled) for the derived "
        f"results, counting the CPU (default {SETTLE_DEADLINE})",
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=max(2, (os.cpu_count() or 1) * 2))
    parser.add_argument("--postgres", help="a PostgreSQL server URL: certlabel runs there too")
    parser.add_argument(
        "--broker-url",
        default=BROKER,
        help=f"the Redis database of certlabel on PostgreSQL (emptied; default {BROKER})",
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        choices=["sqlite", "postgres"],
        help="certlabel's backends (default: sqlite, and postgres with --postgres)",
    )
    parser.add_argument(
        "--loops-only",
        action="store_true",
        help="only the label loops (no import and export phases; --tasks is not used)",
    )
    parser.add_argument("--certlabel-setup-child", type=int, nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.certlabel_setup_child is not None:
        certlabel_setup_child(*args.certlabel_setup_child)
        return
    if not 0 <= args.think_spread <= 1:
        parser.error("--think-spread: from 0 to 1")
    backends = args.backends or ["sqlite", *(["postgres"] if args.postgres else [])]
    if "postgres" in backends and not args.postgres:
        parser.error("--backends postgres needs --postgres URL")
    if args.loops_only:
        args.tasks = args.tasks[:1]
    server.install_cleanup()
    bin_dir = label_studio_venv(args.label_studio_venv) if args.with_label_studio else None
    annotators = max([*args.clients, args.think_clients])
    results: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in args.tasks:
            files = {
                "native": {
                    "import": work / f"native-{n}.jsonl",
                    "loop": work / "native-loop.jsonl",
                },
                "ls": {"import": work / f"ls-{n}.json", "loop": work / "ls-loop.json"},
            }
            if not args.loops_only:
                write_native(files["native"]["import"], n, annotated=True, salt=1)
            write_native(files["native"]["loop"], args.loop_tasks, annotated=False, salt=2)
            if bin_dir:
                if not args.loops_only:
                    write_label_studio(files["ls"]["import"], n, annotated=True, salt=1)
                write_label_studio(files["ls"]["loop"], args.loop_tasks, annotated=False, salt=2)
            for round_ in range(args.rounds):
                configs = []
                if "sqlite" in backends:
                    configs.append(("sqlite", f"sqlite:///{work}/certlabel-{n}-{round_}.sqlite3"))
                if "postgres" in backends:
                    configs.append(
                        ("postgres", server._with_database(args.postgres, "certlabel_vs_ls"))
                    )
                for key, url in configs:
                    print(f"N={n:,} round {round_ + 1}: certlabel on {key}", flush=True)
                    product = Certlabel(
                        url,
                        work / f"{key}-{n}-{round_}",
                        annotators,
                        len(args.clients) + (1 if args.think_clients else 0),
                        args.workers,
                        args.broker_url,
                    )
                    try:
                        results.setdefault((key, n), []).append(
                            measure(product, n, files["native"], args.clients, args)
                        )
                    finally:
                        product.close()
                if bin_dir:
                    print(f"N={n:,} round {round_ + 1}: Label Studio", flush=True)
                    ls_work = work / f"ls-{n}-{round_}"
                    ls_work.mkdir()
                    ls = LabelStudio(bin_dir, ls_work, annotators)
                    try:
                        results.setdefault(("ls", n), []).append(
                            measure(ls, n, files["ls"], args.clients, args)
                        )
                    finally:
                        ls.close()
                        shutil.rmtree(ls_work, ignore_errors=True)
    report(results, args)
    failed = [
        f"{key[0]} {phase}"
        for key, runs in results.items()
        for run in runs
        for phase, figures in run.items()
        if phase.startswith(("loop", "think")) and (figures["errors"] or not figures["cycles"])
    ]
    if failed:
        print(f"loops with errors or no cycle: {', '.join(failed)}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
