"""certlabel beside Label Studio on the same tasks: import, export and the label loop.

Usage (from the repository root, with the project installed)::

    python tests/benchmarks/bench_vs_labelstudio.py                       # certlabel only
    python tests/benchmarks/bench_vs_labelstudio.py --with-label-studio   # both, alternating
    python tests/benchmarks/bench_vs_labelstudio.py --with-label-studio --tasks 10000 50000 \\
        --clients 8 32 --postgres postgres://postgres@127.0.0.1:5432/postgres

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

Servers: certlabel under gunicorn (``--workers``, threads enough for every client), on the
embedded default (a SQLite file, Celery tasks in-process) and, with ``--postgres``, on
PostgreSQL with Redis (the benchmark's own database 15) and one Celery worker, as production;
Label Studio as ``label-studio start`` serves it by default (its SQLite database).

Ratios are Label Studio's time (or p95) over certlabel's: above 1, certlabel is faster.
Targets (the speed issue): import >= 10x, export >= 50x, label-loop p95 at most 1/5, and with
think time next and submit each under 100 ms at p95.
Not collected by pytest (``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import http.client
import json
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
import bench_annotate as server  # noqa: E402  (the benchmarks' shared gunicorn helpers)

REPO = server.REPO
LABEL_STUDIO = "label-studio==1.23.2"
DEFAULT_VENV = Path(tempfile.gettempdir()) / "certlabel-bench-label-studio-1.23.2"
BROKER = "redis://127.0.0.1:6379/15"
OVERLAP = 2
TARGETS = {"import": 10.0, "export": 50.0, "loop": 5.0}
THINK_P95_TARGET_MS = 100
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
        barrier.wait()
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
                    return
                time.sleep(0.05 * empty)
                continue
            empty = 0
            loop.add(took)
            if think:
                time.sleep(pause())

    threads = [threading.Thread(target=worker, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    deadline.append(time.perf_counter() + seconds)
    began = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
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


class Certlabel:
    """certlabel under gunicorn on one database."""

    name = "certlabel"

    def __init__(
        self, database: str, workdir: Path, annotators: int, loops: int, workers: int
    ) -> None:
        self.database, self.workdir, self.workers = database, workdir, workers
        broker = "eager" if database.startswith("sqlite") else BROKER
        if database.startswith("postgres"):
            server.recreate_database(database)
            server.empty_broker(BROKER)
        self.env = server.server_env(database, broker)
        for name in ("jobs", "releases", "mail"):
            (workdir / name).mkdir(parents=True, exist_ok=True)
        self.env.update(
            CERTLABEL_JOB_ROOT=str(workdir / "jobs"),
            CERTLABEL_RELEASE_ROOT=str(workdir / "releases"),
            CERTLABEL_MAIL_DIR=str(workdir / "mail"),
        )
        done = subprocess.run(
            [sys.executable, __file__, "--certlabel-setup-child", str(annotators), str(loops)],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
        self.tokens = json.loads(done.stdout.strip().splitlines()[-1])
        # On PostgreSQL, background work (a large upload's import job, labelling start, derived
        # results) goes to a Celery worker, as in production; on SQLite it runs in-process.
        self.worker = None
        if broker != "eager":
            self.worker_log = (workdir / "worker.log").open("wb")
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "labeling", "worker"]
                + ["-Q", "housekeeping,recompute,builds", "--concurrency=1"]
                + ["--loglevel=WARNING", "-n", f"bench-{os.getpid()}@%h"],
                cwd=REPO,
                env=self.env,
                stdout=self.worker_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.port = server.free_port()
        threads = -(-(annotators + 1) // workers)
        self.process = server.start_gunicorn(self.env, self.port, workers, threads)
        self.manager = Http(self.port, self.tokens["manager"])
        self.loops = 0

    def close(self) -> None:
        self.manager.close()
        server.stop_gunicorn(self.process)
        if self.worker is not None:
            server.stop_gunicorn(self.worker)  # SIGTERM to its session, then SIGKILL
            self.worker_log.close()
            server.empty_broker(BROKER)
        if self.database.startswith("postgres"):
            server.drop_database(self.database)

    def wait_job(self, slug: str, job: dict[str, Any]) -> None:
        while job["status"] not in ("done", "failed"):
            time.sleep(0.05)
            job = self.manager.json("GET", f"/api/projects/{slug}/jobs/{job['id']}/")
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
        while release["builds"][0]["status"] not in ("done", "failed"):
            time.sleep(0.05)
            release = self.manager.json("GET", url)
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

    def settle(self) -> float:
        """Wait until every derived result is current in every project; return the seconds.

        After the 50,000-task import its recomputations (agreement, reliability, calibration,
        audit over every resolved item) run in the background; the export and the label loop
        are measured once they are done, so each measures itself, not itself beside them.
        Gives up after 900 s, saying so.
        """
        began = time.perf_counter()
        slugs = ["import", *(f"loop{n}" for n in range(self.loops))]
        while time.perf_counter() - began < 900:
            kinds = [
                k
                for slug in slugs
                for k in self.manager.json("GET", f"/api/projects/{slug}/derived/")
            ]
            if all(k["current"] or k["last_error"] for k in kinds):
                break
            time.sleep(0.5)
        else:
            print("  certlabel: derived results still not current after 900 s", flush=True)
        return time.perf_counter() - began

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
        conn = Http(self.port, self.tokens["annotators"][n], timeout=120)
        base = f"/api/projects/{self.loop_slug}/assignments"

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
        print(f"installing {LABEL_STUDIO} into {path} (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([str(path / "bin" / "pip"), "install", "-q", LABEL_STUDIO], check=True)
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
        self.log = (workdir / "label-studio.log").open("wb")
        self.process = subprocess.Popen(
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
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.manager = Http(self.port, token)
        deadline = time.monotonic() + 300
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"label-studio exited; see {self.log.name}")
            try:
                if self.manager.call("GET", "/api/projects/")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("label-studio did not answer within 300 s")
            time.sleep(0.5)
        done = subprocess.run(
            [str(bin_dir / "python"), "-c", LS_USERS, str(annotators)],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            check=True,
        )
        self.tokens = json.loads(done.stdout.strip().splitlines()[-1])

    def close(self) -> None:
        self.manager.close()
        server.stop_gunicorn(self.process)  # SIGTERM to the session, then SIGKILL
        self.log.close()

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
        while snapshot["status"] not in ("completed", "failed"):
            time.sleep(0.05)
            snapshot = self.manager.json("GET", f"/api/projects/{project}/exports/{snapshot['id']}")
        status, data, _ = self.manager.call(
            "GET", f"/api/projects/{project}/exports/{snapshot['id']}/download?exportType=JSON"
        )
        if status != 200:
            raise SystemExit(f"label studio export download: {status}")
        return time.perf_counter() - began, len(data)

    def settle(self) -> float:
        """Label Studio has no derived results: nothing to wait for."""
        return 0.0

    def start_loop(self, path: Path) -> None:
        self.loop_project = self.new_project()
        self.upload(self.loop_project, path)

    def client(self, n: int) -> Cycle:
        conn = Http(self.port, self.tokens[n], timeout=120)
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


# -- the run -----------------------------------------------------------------------------------
def settle(product: Any) -> None:
    """Wait until the product's derived results are current; print a wait of over 1 s."""
    settled = product.settle()
    if settled > 1:
        print(f"  {product.name}: derived results current after {settled:.1f} s", flush=True)


def measure(product: Any, n: int, files: dict[str, Path], clients: list[int], args) -> dict:
    """Import, export and the label loop at each client count; one product, one N."""
    out: dict[str, Any] = {}
    seconds, rss = product.import_(files["import"])
    out["import"] = {"seconds": seconds, "per_s": n / seconds, "rss_mib": rss}
    # The export is measured on its own, as the loops are: not queued behind (one worker) or
    # beside (in-process) the recomputation of the derived results the import scheduled.
    settle(product)
    seconds, size = product.export()
    out["export"] = {"seconds": seconds, "per_s": n / seconds, "bytes": size}
    print(
        f"  {product.name}: import {n / out['import']['seconds']:,.0f} tasks/s, "
        f"export {out['export']['per_s']:,.0f} rec/s ({size:,} bytes)",
        flush=True,
    )
    for count in clients:
        product.start_loop(files["loop"])
        settle(product)
        loop = Loop()
        wall = run_loop([product.client(i) for i in range(count)], args.loop_seconds, loop)
        out[f"loop{count}"] = loop_figures(loop, wall, product.over_overlap())
        f = out[f"loop{count}"]
        print(
            f"  {product.name}: {count} clients {f['cycles_per_s']:.1f} cycles/s, "
            f"p95 {f['p95_ms']:.0f} ms, {f['over_overlap']} over overlap, "
            f"{f['errors']} errors {f['first_error']}",
            flush=True,
        )
    if args.think_clients:
        product.start_loop(files["loop"])
        product.settle()
        loop = Loop()
        clients_ = [product.client(i) for i in range(args.think_clients)]
        wall = run_loop(
            clients_, args.loop_seconds, loop, think=args.think, spread=args.think_spread
        )
        out["think"] = loop_figures(loop, wall, product.over_overlap())
        f = out["think"]
        print(
            f"  {product.name}: {args.think_clients} clients, {think_label(args)}: "
            f"next p95 {f['next_p95_ms']:.0f} ms, submit p95 {f['submit_p95_ms']:.0f} ms, "
            f"{f['over_overlap']} over overlap, {f['errors']} errors {f['first_error']}",
            flush=True,
        )
    return out


def think_label(args: argparse.Namespace) -> str:
    """The think-time model in words, e.g. ``1 s think (0.5-1.5 s, random starts)``."""
    if not args.think_spread:
        return f"{args.think:g} s think (lock-step)"
    low, high = args.think * (1 - args.think_spread), args.think * (1 + args.think_spread)
    return f"{args.think:g} s think ({low:g}-{high:g} s, random starts)"


def ratio(theirs: float | None, ours: float | None) -> str:
    if not theirs or not ours:
        return "—"
    return f"{theirs / ours:.1f}×"


def report(results: dict[tuple[str, int], list[dict]], args) -> None:
    def best(key: tuple[str, int], phase: str, figure: str, low: bool = False) -> float | None:
        runs = results.get(key) or []
        values = [r[phase][figure] for r in runs if phase in r]
        if not values:
            return None
        return min(values) if low else max(values)

    print("\n| phase | N | Label Studio | certlabel SQLite | certlabel PostgreSQL | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for n in args.tasks:
        cells = {}
        for product in ("ls", "sqlite", "postgres"):
            per_s = best((product, n), "import", "per_s")
            rss = best((product, n), "import", "rss_mib", low=True)
            cells[product] = "—" if per_s is None else f"{per_s:,.0f}/s, {rss:,.0f} MiB"
        ours = max(
            filter(
                None,
                [best(("sqlite", n), "import", "per_s"), best(("postgres", n), "import", "per_s")],
            ),
            default=None,
        )
        theirs = best(("ls", n), "import", "per_s")
        print(
            f"| import | {n:,} | {cells['ls']} | {cells['sqlite']} | {cells['postgres']} | "
            f"{ratio(ours, theirs)} (target {TARGETS['import']:.0f}×) |"
        )
        for product in ("ls", "sqlite", "postgres"):
            per_s = best((product, n), "export", "per_s")
            cells[product] = "—" if per_s is None else f"{per_s:,.0f} rec/s"
        ours = max(
            filter(
                None,
                [best(("sqlite", n), "export", "per_s"), best(("postgres", n), "export", "per_s")],
            ),
            default=None,
        )
        print(
            f"| export | {n:,} | {cells['ls']} | {cells['sqlite']} | {cells['postgres']} | "
            f"{ratio(ours, best(('ls', n), 'export', 'per_s'))} (target "
            f"{TARGETS['export']:.0f}×) |"
        )
        for count in args.clients:
            phase = f"loop{count}"
            for product in ("ls", "sqlite", "postgres"):
                runs = [r[phase] for r in results.get((product, n), []) if phase in r]
                cells[product] = (
                    "—"
                    if not runs
                    else "; ".join(
                        f"{r['cycles_per_s']:.1f} cycles/s, p95 {r['p95_ms']:,.0f} ms, "
                        f"{r['over_overlap']} over overlap"
                        for r in runs
                    )
                )
            theirs = best(("ls", n), phase, "p95_ms", low=True)
            ratios = ", ".join(
                f"{name} {ratio(theirs, best((key, n), phase, 'p95_ms', low=True))}"
                for key, name in (("sqlite", "SQLite"), ("postgres", "PostgreSQL"))
                if best((key, n), phase, "p95_ms", low=True)
            )
            print(
                f"| next + submit, {count} clients | {args.loop_tasks:,} | {cells['ls']} | "
                f"{cells['sqlite']} | {cells['postgres']} | cycle p95 {ratios or '—'} "
                f"(target {TARGETS['loop']:.0f}×) |"
            )
        if args.think_clients:
            for product in ("ls", "sqlite", "postgres"):
                runs = [r["think"] for r in results.get((product, n), []) if "think" in r]
                cells[product] = (
                    "—"
                    if not runs
                    else "; ".join(
                        f"next p95 {r['next_p95_ms']:,.0f} ms, submit p95 "
                        f"{r['submit_p95_ms']:,.0f} ms, {r['over_overlap']} over overlap"
                        for r in runs
                    )
                )
            print(
                f"| next / submit, {args.think_clients} clients, {think_label(args)} | "
                f"{args.loop_tasks:,} | {cells['ls']} | {cells['sqlite']} | "
                f"{cells['postgres']} | target p95 < {THINK_P95_TARGET_MS} ms each |"
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
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--workers", type=int, default=max(2, (os.cpu_count() or 1) * 2))
    parser.add_argument("--postgres", help="a PostgreSQL server URL: certlabel runs there too")
    parser.add_argument("--certlabel-setup-child", type=int, nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.certlabel_setup_child is not None:
        certlabel_setup_child(*args.certlabel_setup_child)
        return
    if not 0 <= args.think_spread <= 1:
        parser.error("--think-spread: from 0 to 1")
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
            write_native(files["native"]["import"], n, annotated=True, salt=1)
            write_native(files["native"]["loop"], args.loop_tasks, annotated=False, salt=2)
            if bin_dir:
                write_label_studio(files["ls"]["import"], n, annotated=True, salt=1)
                write_label_studio(files["ls"]["loop"], args.loop_tasks, annotated=False, salt=2)
            for round_ in range(args.rounds):
                configs = [("sqlite", f"sqlite:///{work}/certlabel-{n}-{round_}.sqlite3")]
                if args.postgres:
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


if __name__ == "__main__":
    main()
