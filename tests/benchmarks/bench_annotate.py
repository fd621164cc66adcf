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
Each annotator stops after ``--max-seconds`` (default 1800) even if work is left.

The module also holds what the other benchmarks share: the scratch database, gunicorn and a
Celery worker started in sessions of their own and stopped with their process groups on every
way out (``spawn``, ``stop_process``; SIGINT and SIGTERM become SystemExit, an exit hook stops
what is left), deadlines that stretch with the machine's load (``Deadline``, ``wait_for``:
base seconds × the 1-minute load average per core, at least 1, at most 10), and CPU meters
(``tree_cpu``: a process tree's utime + stime from /proc, exited children included;
``PostgresCpu``: the PostgreSQL processes of one database).
Not collected by pytest (``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import atexit
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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
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


# -- child processes: each in a session of its own, stopped on every path ----------------------
# Every server, worker and setup child the benchmarks start goes through spawn(): it runs in a
# session (process group) of its own, and stop_process() ends the whole group (gunicorn's
# workers, Celery's pool and beat). Callers stop their children in ``finally``; whatever is
# still registered is stopped at exit, and SIGINT / SIGTERM become SystemExit, so the same
# ``finally`` blocks and exit hook run then too.
_CHILDREN: dict[int, subprocess.Popen] = {}
_CLEANUP_INSTALLED = False


def load_factor() -> float:
    """The 1-minute load average per core, at least 1: how much slower than idle we may be."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


class Deadline:
    """A time limit of ``base`` seconds that stretches with the machine's load.

    It has passed once the time since its start exceeds ``base`` × :func:`load_factor`, read
    again at each check (a machine that others load meanwhile gets longer), and in any case
    after ``base`` × ``cap``.
    """

    def __init__(self, base: float, cap: float = 10.0) -> None:
        self.base, self.cap, self.began = base, cap, time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def allowed(self) -> float:
        return self.base * min(self.cap, load_factor())

    def passed(self) -> bool:
        return self.elapsed() > self.allowed()

    def describe(self) -> str:
        return (
            f"{self.elapsed():.0f} s (allowed {self.allowed():.0f} s: {self.base:g} s × load "
            f"factor {load_factor():.2f}, at most ×{self.cap:g})"
        )


def wait_for(
    check: Callable[[], Any],
    *,
    what: str,
    base: float,
    watch: Iterable[subprocess.Popen] = (),
    interval: float = 0.2,
    cap: float = 10.0,
) -> Any:
    """Call ``check`` until it returns a true value, and return that; bounded.

    Raises SystemExit when a process of ``watch`` exits meanwhile, or when the load-scaled
    :class:`Deadline` of ``base`` seconds passes.
    """
    deadline = Deadline(base, cap)
    while True:
        for process in watch:
            if process.poll() is not None:
                raise SystemExit(f"{what}: {process.args[0]} exited with code {process.returncode}")
        result = check()
        if result:
            return result
        if deadline.passed():
            raise SystemExit(f"{what}: not done after {deadline.describe()}")
        time.sleep(interval)


def _on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through every ``finally``, then the exit hook


def install_cleanup() -> None:
    """Stop every registered child at exit, and turn SIGINT / SIGTERM into SystemExit."""
    global _CLEANUP_INSTALLED
    if _CLEANUP_INSTALLED:
        return
    _CLEANUP_INSTALLED = True
    atexit.register(stop_all_children)
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _on_signal)


def spawn(args: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """Start a child in a session of its own and register it for :func:`stop_all_children`."""
    install_cleanup()
    process = subprocess.Popen(list(args), start_new_session=True, **kwargs)
    _CHILDREN[process.pid] = process
    return process


def _killpg(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def stop_process(process: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM to the child's process group, SIGKILL to what is left after ``grace`` seconds.

    Every wait is bounded; a child that outlives SIGKILL's 10 s is reported, not waited for.
    """
    try:
        if process.poll() is None:
            _killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        # The group can outlive its leader (a pool child whose master died): end it too.
        _killpg(process.pid, signal.SIGKILL)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            print(f"warning: {process.args[0]} (pid {process.pid}) survived SIGKILL", flush=True)
    finally:
        _CHILDREN.pop(process.pid, None)


def stop_all_children() -> None:
    """Stop every child still registered (the exit hook; a no-op when all were stopped)."""
    for process in list(_CHILDREN.values()):
        stop_process(process, grace=5.0)


def cleanup(*steps: Callable[[], object]) -> None:
    """Run every step of a teardown, even after one fails; then raise the first failure."""
    failure: BaseException | None = None
    for step in steps:
        try:
            step()
        except BaseException as exc:  # noqa: BLE001  (the other steps must still run)
            print(f"warning: teardown step failed: {exc!r}", flush=True)
            failure = failure or exc
    if failure is not None:
        raise failure


def run_child(args: Sequence[str], *, what: str, base_timeout: float, **kwargs: Any) -> str:
    """Run a setup child to its end (its own session) and return its standard output.

    Bounded by a load-scaled :class:`Deadline` of ``base_timeout`` seconds; the child is
    stopped on every path out. Raises SystemExit when it fails or runs out of time.
    """
    process = spawn(args, stdout=subprocess.PIPE, text=True, **kwargs)
    deadline = Deadline(base_timeout)
    try:
        while True:
            try:
                out, _ = process.communicate(timeout=2)
                break
            except subprocess.TimeoutExpired:
                if deadline.passed():
                    raise SystemExit(f"{what}: still running after {deadline.describe()}") from None
        if process.returncode != 0:
            raise SystemExit(f"{what} failed with code {process.returncode}")
        return out
    finally:
        stop_process(process, grace=5.0)


def _answers(port: int, path: str = "/health/live") -> bool:
    """Whether the server on ``port`` answers ``path`` (any HTTP status)."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", path)
            conn.getresponse().read()
        finally:
            conn.close()
    except (OSError, http.client.HTTPException):
        return False
    return True


def start_gunicorn(
    env: dict[str, str], port: int, workers: int, threads: int, *, base_deadline: float = 60.0
) -> subprocess.Popen:
    """gunicorn serving the application on ``port``, once it answers.

    The start may take ``base_deadline`` seconds times the load factor (:class:`Deadline`);
    gunicorn is stopped when it exits, does not answer in time, or the wait is interrupted.
    """
    gunicorn = Path(sys.executable).with_name("gunicorn")
    process = spawn(
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
    )
    try:
        wait_for(lambda: _answers(port), what="gunicorn start", base=base_deadline, watch=[process])
    except BaseException:
        stop_process(process)
        raise
    return process


def start_celery_worker(
    env: dict[str, str], workdir: Path, *, concurrency: int = 1, beat: bool = False
) -> subprocess.Popen:
    """A real Celery worker on every queue (docs/operations.md), its output in ``workdir``.

    ``beat``: with the beat scheduler embedded (``-B``), as production runs one beat.
    """
    log = (workdir / "worker.log").open("wb")
    args = [sys.executable, "-m", "celery", "-A", "labeling", "worker"]
    args += ["-Q", "housekeeping,recompute,builds", f"--concurrency={concurrency}"]
    args += ["--loglevel=WARNING", "-n", f"bench-{os.getpid()}-{time.monotonic_ns()}@%h"]
    if beat:
        args += ["-B", "-s", str(workdir / "celerybeat-schedule")]
    try:
        return spawn(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()  # the child holds its own descriptor


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a child's log (its folder may be deleted after the run)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({path}: {exc})"


# -- CPU accounting ----------------------------------------------------------------------------
# CPU seconds are read from /proc/<pid>/stat: utime + stime of a process (all its threads) and
# cutime + cstime, the time of its children it has waited for. The servers must run on this
# machine.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    """(parent pid, own ticks, reaped children's ticks, start tick) of a process; None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # fields[n - 3] is proc(5)'s field n
    return (
        int(fields[1]),
        int(fields[11]) + int(fields[12]),
        int(fields[13]) + int(fields[14]),
        int(fields[19]),
    )


def _uptime_ticks() -> int:
    with open("/proc/uptime") as uptime:
        return int(float(uptime.read().split()[0]) * CLOCK_TICKS)


def tree_cpu(root: int) -> float:
    """CPU seconds used so far by ``root`` and every descendant, running or exited.

    Each live process of the tree (found by walking /proc for children) counts its own time and
    that of the children it has reaped; a descendant that exited is counted in its parent once
    reaped, so the difference of two readings is exact however processes come and go inside the
    tree (only a process re-parented away from it, e.g. a double-forked daemon, escapes).
    """
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            table[int(entry.name)] = stat
    children: dict[int, list[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat[0], []).append(pid)
    ticks, stack = 0, [root]
    while stack:
        pid = stack.pop()
        if (stat := table.get(pid)) is not None:
            ticks += stat[1] + stat[2]
            stack.extend(children.get(pid, ()))
    return ticks / CLOCK_TICKS


class PostgresCpu:
    """CPU seconds of the PostgreSQL processes serving one database, sampled from /proc.

    Counted (``read``): every process that ``pg_stat_activity`` lists on ``database`` (client
    backends, autovacuum and parallel workers) and the server's shared background processes
    (checkpointer, background writer, WAL writer, autovacuum launcher), which write for every
    database: on a server others use too they carry some of their share. A process is counted
    from its first sample (from 0 when it started after this meter) to its last: one that exits
    between two samples loses at most ``interval`` seconds of its time. ``server`` is the whole
    server's process tree (:func:`tree_cpu` of the postmaster): exact, but everyone's.
    """

    SHARED = frozenset({"checkpointer", "background writer", "walwriter", "autovacuum launcher"})

    def __init__(self, server_url: str, database: str, interval: float = 0.25) -> None:
        import psycopg

        self.database, self.interval = database, interval
        # The meter's own session is on another database: not counted as the run's.
        self.conn = psycopg.connect(
            _with_database(server_url, "postgres"), autocommit=True, connect_timeout=10
        )
        [(backend,)] = self.conn.execute("SELECT pg_backend_pid()").fetchall()
        stat = _stat(backend)
        self.postmaster = stat[0] if stat else None
        if self.postmaster is None:
            print("warning: PostgreSQL is not on this machine: its CPU is not counted", flush=True)
        self.began = _uptime_ticks()
        self.first: dict[tuple[int, int], int] = {}
        self.last: dict[tuple[int, int], int] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.sample()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        with self.lock:
            rows = self.conn.execute(
                "SELECT pid, datname, backend_type FROM pg_stat_activity"
            ).fetchall()
            for pid, datname, kind in rows:
                if datname != self.database and kind not in self.SHARED:
                    continue
                if (stat := _stat(pid)) is None:
                    continue
                key = (pid, stat[3])  # a pid used again is another process
                if key not in self.first:
                    self.first[key] = 0 if stat[3] >= self.began else stat[1]
                self.last[key] = stat[1]

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001  (a lost meter is reported, not fatal)
                print(f"warning: PostgreSQL CPU sampling stopped: {exc!r}", flush=True)
                return

    def read(self) -> float:
        """CPU seconds of the database's processes since this meter started."""
        self.sample()
        with self.lock:
            ticks = sum(self.last[key] - self.first[key] for key in self.last)
        return ticks / CLOCK_TICKS

    def server(self) -> float:
        """CPU seconds so far of the whole server (every database, every user)."""
        return tree_cpu(self.postmaster) if self.postmaster else 0.0

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)
        self.conn.close()


def redis_pid(url: str) -> int | None:
    """The pid of the Redis server at ``url`` when it runs on this machine, else None."""
    import redis

    try:
        info = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5).info("server")
    except redis.RedisError:
        return None
    pid = int(info.get("process_id", 0))
    return pid if pid and _stat(pid) is not None else None


def own_cpu() -> float:
    """CPU seconds of this process (the benchmark's clients and meters), its threads included."""
    times = os.times()
    return times.user + times.system


class CpuMeter:
    """Named cumulative CPU readings of a server's parts; ``mark`` reads them all.

    ``parts``: name -> a function returning CPU seconds used so far. ``total`` names the parts
    summed as the server's CPU; the others (the clients, the shared Redis, the whole PostgreSQL
    server) are printed beside it.
    """

    def __init__(self, parts: dict[str, Callable[[], float]], total: Sequence[str]) -> None:
        self.parts, self.total = parts, list(total)

    def mark(self) -> dict[str, float]:
        return {name: read() for name, read in self.parts.items()}

    def between(self, before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        spent = {name: after[name] - before[name] for name in self.parts}
        spent["server"] = sum(spent[name] for name in self.total)
        return spent


def per_thousand(spent: dict[str, float], cycles: int) -> dict[str, float]:
    """CPU seconds per 1,000 cycles of each reading (NaN without cycles)."""
    return {k: (v * 1000 / cycles if cycles else float("nan")) for k, v in spent.items()}


def cpu_text(per: dict[str, float], unit: str = "cycles") -> str:
    """``12.30 server CPU-s per 1,000 cycles (web 5.10, worker 2.00, ...)``."""
    others = ", ".join(f"{k} {v:.2f}" for k, v in per.items() if k != "server")
    return f"{per['server']:.2f} server CPU-s per 1,000 {unit} ({others})"


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
    stop_at: float,
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
    start.wait(timeout=60)
    try:
        while time.monotonic() < stop_at:
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
        "--max-seconds",
        type=float,
        default=1800.0,
        help="annotators stop after this many seconds even if work is left (default 1800)",
    )
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
        out = run_child(
            [sys.executable, __file__, "--setup-child", "--database-url", url]
            + [f"--items={args.items}", f"--annotators={args.annotators}"]
            + [f"--overlap={args.overlap}"],
            what="setup",
            base_timeout=300 + args.items / 50,
            cwd=REPO,
            env=env,
        )
        setup = json.loads(out.strip().splitlines()[-1])
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
                        time.monotonic() + args.max_seconds,
                    ),
                    daemon=True,
                )
                for n, token in enumerate(setup["tokens"])
            ]
            for thread in threads:
                thread.start()
            barrier.wait(timeout=60)
            began = time.perf_counter()
            # Each annotator stops at --max-seconds; a request may then take its 60 s timeout.
            for thread in threads:
                thread.join(timeout=max(0.0, began + args.max_seconds + 90 - time.perf_counter()))
            seconds = time.perf_counter() - began
            if any(thread.is_alive() for thread in threads):
                results.errors.append("an annotator did not stop within --max-seconds + 90 s")
        finally:
            stop_process(server)
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
