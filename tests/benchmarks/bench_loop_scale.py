"""Server CPU per 1,000 label-loop cycles at two project sizes, with a real worker running.

Usage (from the repository root, with the project installed, PostgreSQL and Redis running)::

    .venv/bin/python tests/benchmarks/bench_loop_scale.py                  # 10k and 1M labels
    .venv/bin/python tests/benchmarks/bench_loop_scale.py --with-label-studio --seed-cache
    .venv/bin/python tests/benchmarks/bench_loop_scale.py --project-labels 2000 20000 \\
        --loop-items 1000 --loop-seconds 10 --clients 4                   # a smoke run

For each size in ``--project-labels`` (default 10,000 and 1,000,000) a PostgreSQL database
``bench_loop_<labels>`` holds one project ``loop`` (overlap 2) whose labels are already there:
``labels / 2`` items, four per question (a question, a passage, four answers of one claim
each), each item with two imported human prior annotations (40 pseudonymous annotators; the
claim labelled ``not_supported``, the answer admissible or inadmissible, a quarter of the items
disagreeing), followed by ``--loop-items`` items of the Label Studio comparison's shape without
any vote. The seeding goes through the product's own paths, in a child process on the embedded
Celery default (tasks run in-process, after each commit): ``workload_import`` of native JSONL
files (25,000 questions each, one transaction each), then ``project_labelling_start``, which
counts the prior annotations as votes and compares every seeded item at once (three quarters to
consensus, a quarter to the disagreement queue), after whose commit the derived results
(agreement, per-person reliability, ...) are recomputed over all of them; then ``VACUUM
ANALYZE``. So ``labels`` is the number of votes in the project before the loop
(``sum(prior_votes)``, checked), all of them imported prior votes; the loop's own votes are live
annotations, so the tables of assignments and annotations hold only the loop's rows. Seeding is
not measured; its wall-clock and CPU seconds are printed per phase.

``--seed-cache`` keeps each seeded database as ``bench_loop_seed_<labels>`` and reuses it when
its parameters and the project's migrations are the same (each run gets a fresh copy, made by
``CREATE DATABASE ... TEMPLATE``); without it the seed is made in the run's database and
dropped with it. Rebuild the cache (``--reseed``) after changing the import or the start.

Then, per size: a real Celery worker (``celery -A labeling worker -Q
housekeeping,recompute,builds``, ``--worker-concurrency``, with the beat scheduler embedded as
production runs one beat; ``--no-beat`` leaves it out) and gunicorn (``--workers``, threads for
every client) on the database, Redis database ``--broker-url`` (emptied before and after) as
broker. Once the derived results are current, ``--clients`` annotators (each a user of its own
with an API token and a keep-alive connection) repeat next + submit (one claim, labelled
``not_supported``; the answer's verdict alternates) for ``--loop-seconds`` with ``--think``
seconds between cycles (default 0: no think time; with it, as bench_vs_labelstudio.py:
uniform on think × (1 ± 0.5), random starts). After the loop the benchmark waits, at most
``--catch-up`` seconds (default 900, load-scaled), until the derived results are current again
(the catch-up): the worker's recomputations of the loop's votes are work the cycles caused.
Both windows are reported: the loop alone (the server's CPU while the cycles ran, the worker
recomputing beside them: the steady state, given a loop long enough for several
recomputations) and with the catch-up; a catch-up that did not end in time is marked (its
remaining work is then left out). A product that spaces out an expensive recomputation (by its
last duration, say) makes the catch-up long: use a loop of several such spaces.

CPU: utime + stime from /proc of (web) gunicorn's process tree, (worker) the Celery worker's
tree (pool and beat included), (postgres) every PostgreSQL process on the run's database (client
backends, autovacuum and parallel workers, sampled every 0.25 s) plus the server's shared
background writers (checkpointer, background writer, WAL writer, autovacuum launcher). The
server CPU is web + worker + postgres, per 1,000 cycles; printed beside it: Redis (the
broker; a server others may use too), the whole PostgreSQL server (everyone's) and the
benchmark's own process (the clients).
``--with-label-studio`` runs the same loop on Label Studio 1.23.2 (bench_vs_labelstudio.py's
virtualenv and setup; a project of ``--loop-items`` tasks without annotations, its SQLite
database in-process) and counts its process tree's CPU.

Targets (issue 33, item 2): CPU per 1,000 cycles at 1,000,000 labels within 20 % of that at
10,000, and at most 1/3 of Label Studio's in the same run. Figures taken on a machine others
load are noisy: compare runs made alike.
Not collected by pytest (``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_annotate as server  # noqa: E402  (the benchmarks' process and CPU helpers)
import bench_vs_labelstudio as vs  # noqa: E402  (the loop, its clients, Label Studio)

REPO = server.REPO
SLUG = "loop"
OVERLAP = 2
DEFAULT_SERVER = "postgres://postgres@127.0.0.1:5432/postgres"
# The benchmark's own Redis database (emptied before and after): not the test suite's 15.
DEFAULT_BROKER = "redis://127.0.0.1:6379/12"
IMPORT_CHUNK = 25_000  # records (questions) per import file, one transaction each
SEED_CANDIDATES = 4  # items per seeded question
SEED_FORMAT = 2  # bump when the seeded content changes: cached seeds of another are rebuilt
SCALE_TARGET = 1.20  # 1M labels' CPU per cycle at most 20 % above (or below) 10k labels'
CPU_TARGET = 3.0  # Label Studio's CPU per cycle over certlabel's, at least


# -- the seed: through the import and the labelling start, in a child process ------------------
def seed_question(q: int, candidates: int) -> dict[str, Any]:
    """Seeded question ``q``: a passage and ``candidates`` answers, each of one claim with two
    prior votes (the answer admissible or inadmissible, the claim ``not_supported``; a quarter
    of the items disagree on the answer)."""
    passage = " ".join(server._sentence(q * 5 + k, 12) for k in range(3))
    key = f"s{q:07d}"
    verdicts = ("admissible", "inadmissible")
    answers = []
    for c in range(candidates):
        i = q * candidates + c  # the item's number among the seeded ones
        text = server._sentence(i * 3 + 50, 10)
        first = verdicts[i % 2]
        second = first if i % 4 != 3 else verdicts[(i + 1) % 2]
        a = i % 40
        b = (a + 1 + (i // 40) % 39) % 40  # another of 40 pseudonyms, the pairs rotating
        answers.append(
            {
                "id": f"c{c}",
                "text": text,
                "claims": [{"text": text, "start": 0, "end": len(text)}],
                "prior_annotations": [
                    {
                        "annotator": f"seed-{who:02d}",
                        "answer_label": verdict,
                        "claim_labels": [{"claim": 0, "label": "not_supported"}],
                    }
                    for who, verdict in ((a, first), (b, second))
                ],
            }
        )
    return {
        "external_id": key,
        "text": f"Question {q}: " + server._sentence(q, 10),
        "sources": [{"id": f"doc-{key}", "text": passage}],
        "candidates": answers,
    }


def seed_records(labels: int, loop_items: int) -> Iterator[dict[str, Any]]:
    """The seeded questions (``labels / 2`` items, two votes each), then the loop's items."""
    items = labels // OVERLAP
    for q in range(-(-items // SEED_CANDIDATES)):
        yield seed_question(q, min(SEED_CANDIDATES, items - q * SEED_CANDIDATES))
    for task in vs.tasks(loop_items, salt=2):
        yield vs.native_record(task, annotated=False)


def seed_child(labels: int, loop_items: int) -> None:
    """Migrate, create the project, import, start labelling, vacuum; print a JSON summary.

    Celery runs in-process (the embedded default): the derived results the start makes stale
    are recomputed right after its commit, as a worker would.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Count, Sum

    from labeling.importers.native import file_sha256, read_jsonl
    from labeling.models import DerivedChange, Item
    from labeling.services import (
        project_create,
        project_labelling_configure,
        project_labelling_start,
        workload_import,
    )

    cpu = [server.own_cpu()]

    def phase(name: str, began: float) -> float:
        """Print a phase's wall-clock seconds and this process's CPU-seconds in it."""
        now, used = time.perf_counter(), server.own_cpu()
        print(
            f"  seed: {name} {now - began:.1f} s ({used - cpu[0]:.1f} CPU-s here)",
            file=sys.stderr,
            flush=True,
        )
        cpu[0] = used
        return now

    t = time.perf_counter()
    call_command("migrate", verbosity=0)
    manager = get_user_model().objects.create_user(username="bench-manager")
    project = project_create(slug=SLUG, name="Label loop at scale", manager=manager)
    project_labelling_configure(project=project, actor=manager, overlap=OVERLAP)
    t = phase("migrate and project", t)
    records = seed_records(labels, loop_items)
    total = -(-labels // OVERLAP // SEED_CANDIDATES) + loop_items
    with tempfile.TemporaryDirectory() as tmp:
        for part, start in enumerate(range(0, total, IMPORT_CHUNK)):
            path = Path(tmp) / f"seed-{part:03d}.jsonl"
            with path.open("w", encoding="utf-8") as out:
                for _ in range(min(IMPORT_CHUNK, total - start)):
                    out.write(json.dumps(next(records)) + "\n")
            with path.open("rb") as stream:
                workload_import(
                    project=project,
                    records=read_jsonl(stream),
                    format="native",
                    filename=path.name,
                    file_sha256=file_sha256(stream),
                )
            path.unlink()
            t = phase(f"import of records {start + 1:,}-{min(total, start + IMPORT_CHUNK):,}", t)
    project_labelling_start(project=project, actor=manager)  # derived results recomputed after
    t = phase("labelling start (votes compared, derived results recomputed)", t)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    phase("VACUUM ANALYZE", t)
    items = Item.objects.filter(project=project)
    statuses = dict(items.values_list("status").annotate(n=Count("pk")).order_by())
    votes = items.aggregate(n=Sum("prior_votes"))["n"] or 0
    if votes != labels // OVERLAP * OVERLAP:
        raise SystemExit(f"seeded {votes} votes, expected {labels}")
    print(
        json.dumps(
            {
                "labels": votes,
                "items": items.count(),
                "statuses": statuses,
                "derived_changes_left": DerivedChange.objects.filter(project=project).count(),
            }
        )
    )


def tokens_child(annotators: int) -> None:
    """Migrate (a cached seed may predate a migration); annotators with tokens; print JSON."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from labeling.models import Project, Role
    from labeling.services import membership_set
    from labeling.services.tokens import api_token_create

    call_command("migrate", verbosity=0)
    users = get_user_model().objects
    project = Project.objects.get(slug=SLUG)
    manager = users.get(username="bench-manager")
    tokens = []
    for n in range(annotators):
        user, created = users.get_or_create(username=f"bench-annotator-{n:02d}")
        if created:
            membership_set(project=project, user=user, role=Role.ANNOTATOR)
        tokens.append(api_token_create(user=user, name="bench").secret)
    manager_token = api_token_create(user=manager, name="bench").secret
    print(json.dumps({"manager": manager_token, "annotators": tokens}))


# -- databases ---------------------------------------------------------------------------------
def migrations_digest() -> str:
    """A digest of the project's migration files: a cached seed is reused only with the same."""
    digest = hashlib.sha256()
    for app in ("labeling", "certification"):
        for path in sorted((REPO / app / "migrations").glob("*.py")):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def admin(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the server's ``postgres`` database (autocommit)."""
    import psycopg

    with psycopg.connect(
        server._with_database(url, "postgres"), autocommit=True, connect_timeout=10
    ) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def database_comment(url: str, name: str) -> str | None:
    rows = admin(
        url,
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        (name,),
    )
    return rows[0][0] if rows else None


def seed_into(url: str, labels: int, loop_items: int) -> dict[str, Any]:
    """Create ``url``'s database afresh and seed it (child process); return its summary."""
    server.recreate_database(url)
    env = server.server_env(url, "eager")
    env.update(CELERY_BROKER_URL="memory://", CELERY_TASK_ALWAYS_EAGER="true")
    began = time.perf_counter()
    out = server.run_child(
        [sys.executable, __file__, "--seed-child", str(labels), str(loop_items)],
        what=f"seeding {labels:,} labels",
        # Measured: about 4 minutes per 1,000,000 labels on 2 idle cores; ample room here.
        base_timeout=900 + labels / 200,
        cwd=REPO,
        env=env,
    )
    summary = json.loads(out.strip().splitlines()[-1])
    summary["seconds"] = time.perf_counter() - began
    return summary


def prepare_database(args: argparse.Namespace, labels: int) -> tuple[str, dict[str, Any]]:
    """The run's database, seeded (a copy of the cached seed with ``--seed-cache``)."""
    run_url = server._with_database(args.postgres, f"bench_loop_{labels}")
    if not args.seed_cache:
        print(f"seeding {labels:,} labels into {server._database_name(run_url)} ...", flush=True)
        summary = seed_into(run_url, labels, args.loop_items)
        print(f"  seeded in {summary['seconds']:.0f} s: {summary}", flush=True)
        return run_url, summary
    seed_url = server._with_database(args.postgres, f"bench_loop_seed_{labels}")
    seed_name = server._database_name(seed_url)
    wanted = json.dumps(
        {
            "format": SEED_FORMAT,
            "labels": labels,
            "loop_items": args.loop_items,
            "migrations": migrations_digest(),
        },
        sort_keys=True,
    )
    comment = database_comment(args.postgres, seed_name)
    summary: dict[str, Any] = {}
    if args.reseed or comment is None or not comment.startswith(wanted):
        print(f"seeding {labels:,} labels into {seed_name} (cached) ...", flush=True)
        try:
            summary = seed_into(seed_url, labels, args.loop_items)
        except BaseException:
            server.drop_database(seed_url)  # never a half-made cache
            raise
        print(f"  seeded in {summary['seconds']:.0f} s: {summary}", flush=True)
        admin(
            args.postgres,
            f"COMMENT ON DATABASE {seed_name} IS "  # noqa: S608 - a checked identifier
            + "'"
            + (wanted + " " + json.dumps(summary)).replace("'", "''")
            + "'",
        )
    else:
        summary = json.loads(comment[len(wanted) :].strip() or "{}")
        print(f"reusing {seed_name} (seeded in {summary.get('seconds', 0):.0f} s)", flush=True)
    run_name = server._database_name(run_url)
    began = time.perf_counter()
    server.drop_database(run_url)
    strategy = ""
    if int(admin(args.postgres, "SHOW server_version_num")[0][0]) >= 150000:
        strategy = " STRATEGY = FILE_COPY"  # a file copy: much faster than WAL_LOG's
    admin(args.postgres, f"CREATE DATABASE {run_name} TEMPLATE {seed_name}{strategy}")
    print(f"  copied to {run_name} in {time.perf_counter() - began:.0f} s", flush=True)
    return run_url, summary


# -- certlabel on the seeded project -----------------------------------------------------------
class ScaledCertlabel:
    """gunicorn, a real Celery worker and the meters on a seeded database (the loop's product).

    As bench_vs_labelstudio.py's products: ``start_loop``, ``settle``, ``client``,
    ``over_overlap``, ``cpu``; everything started is stopped by ``close`` on every path.
    """

    name = "certlabel"

    def __init__(self, url: str, workdir: Path, annotators: int, args: argparse.Namespace) -> None:
        self.url, self.workdir, self.broker = url, workdir, args.broker_url
        self.process: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None
        self.manager: vs.Http | None = None
        self.pg_cpu: server.PostgresCpu | None = None
        try:
            self._start(annotators, args)
        except BaseException:
            self.close()
            raise

    def _start(self, annotators: int, args: argparse.Namespace) -> None:
        server.empty_broker(self.broker)
        self.env = server.server_env(self.url, self.broker)
        for name in ("jobs", "releases", "mail"):
            (self.workdir / name).mkdir(parents=True, exist_ok=True)
        self.env.update(
            CERTLABEL_JOB_ROOT=str(self.workdir / "jobs"),
            CERTLABEL_RELEASE_ROOT=str(self.workdir / "releases"),
            CERTLABEL_MAIL_DIR=str(self.workdir / "mail"),
        )
        out = server.run_child(
            [sys.executable, __file__, "--tokens-child", str(annotators)],
            what="tokens",
            base_timeout=300,
            cwd=REPO,
            env=self.env,
        )
        self.tokens = json.loads(out.strip().splitlines()[-1])
        self.worker = server.start_celery_worker(
            self.env, self.workdir, concurrency=args.worker_concurrency, beat=not args.no_beat
        )
        self.port = server.free_port()
        threads = -(-(annotators + 1) // args.workers)
        self.process = server.start_gunicorn(self.env, self.port, args.workers, threads)
        self.manager = vs.Http(self.port, self.tokens["manager"], timeout=vs.CLIENT_TIMEOUT)
        self.pg_cpu = server.PostgresCpu(self.url, server._database_name(self.url))
        web, worker = self.process.pid, self.worker.pid
        parts: dict[str, Callable[[], float]] = {
            "web": lambda: server.tree_cpu(web),
            "worker": lambda: server.tree_cpu(worker),
            "postgres": self.pg_cpu.read,
        }
        if (redis := server.redis_pid(self.broker)) is not None:
            parts["redis"] = lambda: server.tree_cpu(redis)
        parts["pg server"] = self.pg_cpu.server
        parts["clients"] = server.own_cpu
        self.cpu = server.CpuMeter(parts, ["web", "worker", "postgres"])

    def children(self) -> list[subprocess.Popen]:
        return [p for p in (self.process, self.worker) if p is not None]

    def check_alive(self) -> None:
        for process in self.children():
            if process.poll() is not None:
                raise SystemExit(f"{process.args[:5]} exited with code {process.returncode}")

    def close(self) -> None:
        if self.worker is not None and self.worker.poll() is not None:
            print(f"the Celery worker had exited ({self.worker.returncode}); its log ends:")
            print(server.log_tail(self.workdir / "worker.log"), flush=True)
        steps: list[Callable[[], object]] = []
        if self.manager is not None:
            steps.append(self.manager.close)
        if self.pg_cpu is not None:
            steps.append(self.pg_cpu.close)
        steps += [lambda p=p: server.stop_process(p) for p in self.children()]
        steps.append(lambda: server.empty_broker(self.broker))
        self.process = self.worker = self.manager = self.pg_cpu = None
        server.cleanup(*steps)

    def start_loop(self, path: Path) -> None:
        """The seeded project is the loop's: its open items are served in import order."""

    def settle(self, base: float = vs.SETTLE_DEADLINE) -> float:
        """Wait (``base`` s, load-scaled) until the project's derived results are current."""
        return vs.settle_derived(self, [SLUG], base)

    def client(self, n: int) -> vs.Cycle:
        return vs.api_cycle(self.port, self.tokens["annotators"][n], SLUG, n)

    def over_overlap(self) -> int:
        """Items with more votes (the loop's annotations + prior votes) than the overlap."""
        import psycopg

        with psycopg.connect(self.url, connect_timeout=10) as conn:
            row = conn.execute(
                "SELECT count(*) FROM (SELECT a.item_id FROM labeling_annotation a "
                "JOIN labeling_item i ON i.id = a.item_id GROUP BY a.item_id, i.prior_votes, "
                "i.overlap HAVING count(*) + i.prior_votes > i.overlap) AS over"
            ).fetchone()
        return int(row[0]) if row else 0


# -- the run -----------------------------------------------------------------------------------
def run_size(args: argparse.Namespace, labels: int, work: Path, annotators: int) -> dict:
    """Seed (or copy) one size, run its loops; the figures by loop name."""
    url, summary = prepare_database(args, labels)
    out: dict[str, Any] = {"seed": summary}
    try:
        product = ScaledCertlabel(url, work / f"certlabel-{labels}", annotators, args)
        try:
            out["loops"] = run_loops(product, None, args)
        finally:
            product.close()
    finally:
        if not args.keep_db:
            server.drop_database(url)
    return out


def run_loops(product: Any, path: Path | None, args: argparse.Namespace) -> dict[str, dict]:
    """The loop at each client count (with ``--think``); print each one's figures."""
    out = {}
    for count in args.clients:
        f = out[f"{count}"] = vs.loop_measured(product, path, count, args, think=args.think)
        print(
            f"  {product.name}: {count} clients, {f['cycles']:,} cycles, "
            f"{f['cycles_per_s']:.1f} cycles/s, cycle p50 {f['p50_ms']:.0f} ms, "
            f"p95 {f['p95_ms']:.0f} ms (next {f['next_p95_ms']:.0f}, submit "
            f"{f['submit_p95_ms']:.0f}), {f['over_overlap']} over overlap, {f['errors']} errors "
            f"{f['first_error']}\n    {server.cpu_text(f['cpu'])}\n"
            f"    the loop alone: {f['cpu_loop']['server']:.2f}; {vs.catch_up_text(f)}",
            flush=True,
        )
    return out


def report(results: dict[str, Any], args: argparse.Namespace) -> None:
    """One line per size and client count, then the ratios against the targets.

    Each ratio is given twice: over the loop alone (the server's CPU while the cycles ran, the
    worker recomputing beside them) and with the catch-up after the loop (the derived results'
    recomputation the last votes left to do); a catch-up that did not end within
    ``--catch-up`` is marked, its CPU then being incomplete.
    """
    print(
        "\n| labels | clients | cycles/s | cycle p95 ms | next / submit p95 ms "
        "| server CPU-s / 1,000 cycles: loop | with catch-up | web | worker | postgres |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = [(f"{labels:,}", labels) for labels in args.project_labels]
    if "ls" in results:
        rows.append(("Label Studio", "ls"))
    for name, key in rows:
        loops = results[key] if key == "ls" else results[key]["loops"]
        for count in args.clients:
            f = loops[f"{count}"]
            cpu = f["cpu"]
            caught = "" if f["caught_up"] else " (incomplete)"
            print(
                f"| {name} | {count} | {f['cycles_per_s']:.1f} | {f['p95_ms']:,.0f} | "
                f"{f['next_p95_ms']:,.0f} / {f['submit_p95_ms']:,.0f} | "
                f"{f['cpu_loop']['server']:.2f} | {cpu['server']:.2f}{caught} | "
                + " | ".join(
                    f"{cpu[part]:.2f}" if part in cpu else "—"
                    for part in ("web", "worker", "postgres")
                )
                + " |"
            )
    sizes = args.project_labels
    for count in args.clients:
        for figure, window in (("cpu_loop", "the loop alone"), ("cpu", "with catch-up")):

            def per(key: Any, figure: str = figure, count: int = count) -> float:
                loops = results[key] if key == "ls" else results[key]["loops"]
                return loops[f"{count}"][figure]["server"]

            if len(sizes) >= 2:
                small, large = per(sizes[0]), per(sizes[-1])
                change = large / small if small else float("nan")
                verdict = "met" if 1 / SCALE_TARGET <= change <= SCALE_TARGET else "NOT met"
                print(
                    f"{count} clients, {window}: CPU per cycle at {sizes[-1]:,} labels / at "
                    f"{sizes[0]:,}: {change:.2f} (target within ±{(SCALE_TARGET - 1) * 100:.0f} "
                    f"%: {verdict})"
                )
            if "ls" in results:
                for labels in sizes:
                    ratio = per("ls") / per(labels) if per(labels) else float("nan")
                    verdict = "met" if ratio >= CPU_TARGET else "NOT met"
                    print(
                        f"{count} clients, {window}, {labels:,} labels: Label Studio's CPU per "
                        f"cycle / certlabel's {ratio:.2f}× (target ≥ {CPU_TARGET:g}×: {verdict})"
                    )
    incomplete = [
        f"{name} ({count} clients)"
        for name, key in rows
        for count in args.clients
        if not (results[key] if key == "ls" else results[key]["loops"])[f"{count}"]["caught_up"]
    ]
    if incomplete:
        print(
            "catch-up incomplete (the derived results were not current within --catch-up): "
            + ", ".join(incomplete)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--project-labels",
        type=int,
        nargs="+",
        default=[10_000, 1_000_000],
        help="votes already in the project, one run each (default 10000 1000000)",
    )
    parser.add_argument(
        "--loop-items", type=int, default=10_000, help="open items for the loop (default 10000)"
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[8])
    parser.add_argument("--loop-seconds", type=float, default=60.0)
    parser.add_argument(
        "--catch-up",
        type=float,
        default=vs.SETTLE_DEADLINE,
        help="after a loop, wait at most this many seconds (load-scaled) for the derived "
        f"results, counting the CPU (default {vs.SETTLE_DEADLINE})",
    )
    parser.add_argument(
        "--think", type=float, default=0.0, help="mean seconds between two cycles (default 0)"
    )
    parser.add_argument("--postgres", default=DEFAULT_SERVER, help="a PostgreSQL server URL")
    parser.add_argument(
        "--broker-url", default=DEFAULT_BROKER, help=f"Redis database (emptied; {DEFAULT_BROKER})"
    )
    parser.add_argument("--workers", type=int, default=max(2, (os.cpu_count() or 1) * 2))
    parser.add_argument("--worker-concurrency", type=int, default=1)
    parser.add_argument("--no-beat", action="store_true", help="no beat scheduler in the worker")
    parser.add_argument(
        "--seed-cache",
        action="store_true",
        help="keep the seeded databases (bench_loop_seed_<labels>) and reuse them",
    )
    parser.add_argument("--reseed", action="store_true", help="rebuild the cached seeds")
    parser.add_argument("--keep-db", action="store_true", help="keep the run's databases")
    parser.add_argument("--with-label-studio", action="store_true")
    parser.add_argument("--label-studio-venv", type=Path, default=vs.DEFAULT_VENV)
    parser.add_argument("--seed-child", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--tokens-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seed_child:
        seed_child(*args.seed_child)
        return
    if args.tokens_child is not None:
        tokens_child(args.tokens_child)
        return
    if any(labels < OVERLAP or labels % OVERLAP for labels in args.project_labels):
        parser.error(f"--project-labels: positive multiples of the overlap ({OVERLAP})")
    args.think_spread = 0.5  # as bench_vs_labelstudio.py's default: random starts
    server.install_cleanup()
    bin_dir = vs.label_studio_venv(args.label_studio_venv) if args.with_label_studio else None
    annotators = max(args.clients)
    results: dict[Any, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for labels in args.project_labels:
            print(f"{labels:,} labels in the project", flush=True)
            results[labels] = run_size(args, labels, work, annotators)
        if bin_dir is not None:
            print("Label Studio", flush=True)
            path = work / "ls-loop.json"
            vs.write_label_studio(path, args.loop_items, annotated=False, salt=2)
            ls_work = work / "label-studio"
            ls_work.mkdir()
            ls = vs.LabelStudio(bin_dir, ls_work, annotators)
            try:
                results["ls"] = run_loops(_OneProject(ls, path), path, args)
            finally:
                ls.close()
                shutil.rmtree(ls_work, ignore_errors=True)
    report(results, args)
    loops = [("Label Studio", results["ls"])] if "ls" in results else []
    loops += [(f"{labels:,} labels", results[labels]["loops"]) for labels in args.project_labels]
    failed = [
        f"{name}, {count} clients"
        for name, runs in loops
        for count, f in runs.items()
        if f["errors"] or not f["cycles"]
    ]
    if failed:
        print(f"loops with errors or no cycle: {'; '.join(failed)}", flush=True)
        sys.exit(1)


class _OneProject:
    """Label Studio with one loop project for every client count (the size stays as it is)."""

    def __init__(self, product: Any, path: Path) -> None:
        self.product, self.path, self.started = product, path, False
        self.name, self.cpu = product.name, product.cpu

    def start_loop(self, path: Path | None) -> None:
        if not self.started:
            self.product.start_loop(self.path)
            self.started = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.product, name)


if __name__ == "__main__":
    main()
