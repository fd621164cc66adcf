"""Start-labelling benchmark: queue and compare a whole imported project in one call.

Usage (from the repository root, with the project installed)::

    python tests/benchmarks/bench_start.py                        # SQLite, 50,000 items
    python tests/benchmarks/bench_start.py --items 10000 \\
        --postgres postgres://postgres@127.0.0.1:5432/postgres    # SQLite and PostgreSQL
    python tests/benchmarks/bench_start.py --statements ...       # and each statement's share

The workload: ``--items`` questions, each with one source, one candidate answer with one claim
and two imported prior annotations (a quarter of them disagreeing on the answer label), so with
overlap 2 the start compares every item: three quarters go to consensus, a quarter to the
disagreement queue. Each backend runs in its own process on a fresh database
(``DJANGO_DEBUG=false``): migrate, import (not timed), then ``project_labelling_start`` timed,
as the background job runs it (progress callback included), to the end of its COMMIT.

Reported per backend, each beside the target: the wall seconds; the CPU seconds of the
benchmark's process; and the CPU seconds of the database: on PostgreSQL those of the server
process serving the connection (the backend whose pid ``pg_backend_pid()`` gives, read from
``/proc/<pid>/stat`` before and after, so the server must run on this machine; the server's
shared background processes, e.g. the WAL writer, are not counted), on SQLite none apart (the
database runs inside the process, whose CPU includes it). Also the items' statuses afterwards,
the peak RSS and the load average before and after the run (other work on the machine stretches
the wall time, not the CPU time). ``--statements`` adds each statement's wall and database CPU
seconds, and the COMMIT's (on PostgreSQL the deferred foreign-key checks of every row written):
the floor of the set-based start is their sum.

Target (issue 33): 50,000 items started in <= 3 s on both databases, the database's CPU
included.
Not collected by pytest (``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_import import _sentence, child_env, scratch_database  # noqa: E402  (shared helpers)

REPO = Path(__file__).resolve().parents[2]
BENCH_DB = f"certlabel_bench_start_{os.getpid()}"  # one per run: two runs never share it
SECONDS_TARGET = 3.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def generate(path: Path, items: int) -> int:
    """Write the workload (one JSON line per question) to ``path``; return its size in bytes."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(items):
            passage = " ".join(_sentence(i * 5 + k, 12) for k in range(4))
            answer = _sentence(i * 5 + 9, 10)
            first = passage.index(".") + 1
            evidence = [{"source": "d", "start": 0, "end": first, "quote": passage[:first]}]
            label = ("admissible", "inadmissible")[i % 2]
            other = ("inadmissible", "admissible")[i % 2] if i % 4 == 3 else label
            claims = [{"claim": 0, "label": "supported", "evidence": evidence}]
            record = {
                "external_id": f"q{i:06d}",
                "text": _sentence(i, 9) + "?",
                "sources": [{"id": "d", "text": passage}],
                "candidates": [
                    {
                        "id": "c0",
                        "text": answer,
                        "claims": [{"text": answer, "start": 0, "end": len(answer)}],
                        "prior_annotations": [
                            {"annotator": "ann-1", "answer_label": label, "claim_labels": claims},
                            {"annotator": "ann-2", "answer_label": other, "claim_labels": claims},
                        ],
                    }
                ],
            }
            out.write(json.dumps(record) + "\n")
    return path.stat().st_size


def _process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) a process has used so far, from /proc; None if unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # fields[n - 3] is proc(5)'s field n
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _DatabaseCpu:
    """The CPU seconds of the database server process of Django's connection (PostgreSQL).

    ``read()`` is None on SQLite (the database runs in this process) and when the server's
    process is not readable (another machine).
    """

    def __init__(self) -> None:
        from django.db import connection

        self.pid = None
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.pid = cursor.fetchone()[0]
            if _process_cpu(self.pid) is None:
                print("warning: the PostgreSQL backend is not on this machine", file=sys.stderr)
                self.pid = None

    def read(self) -> float | None:
        return None if self.pid is None else _process_cpu(self.pid)


class _StatementClock:
    """Wall, process CPU and database CPU seconds of each statement Django runs, and of COMMIT.

    An execute wrapper times the statements; the COMMIT (not a statement Django runs through
    a cursor) is timed by wrapping the connection's ``_commit``. Statements are keyed by their
    first words (the table they write or read).
    """

    def __init__(self, database: _DatabaseCpu) -> None:
        from django.db import connection

        self.database = database
        self.times: dict[str, list[float]] = {}  # key: [count, wall, process CPU, database CPU]
        self.connection = connection
        self._commit = connection._commit

        def commit() -> None:
            self._timed("COMMIT", self._commit)

        connection._commit = commit

    def _timed(self, key: str, run: object) -> object:
        cpu, process, started = self.database.read(), time.process_time(), time.perf_counter()
        try:
            return run()  # type: ignore[operator]
        finally:
            wall = time.perf_counter() - started
            process = time.process_time() - process
            after = self.database.read()
            entry = self.times.setdefault(key, [0, 0.0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += wall
            entry[2] += process
            entry[3] += (after - cpu) if cpu is not None and after is not None else 0.0

    def __call__(self, execute, sql, params, many, context):  # noqa: ANN001, ANN204
        words = " ".join(str(sql).replace("(", " ").split()[:4])
        return self._timed(words, lambda: execute(sql, params, many, context))

    def close(self) -> None:
        del self.connection._commit  # the class's method again


def child(workload: Path, profile_to: str | None) -> None:
    """Migrate DATABASE_URL's database, import ``workload``, time the start; print JSON.

    ``profile_to``: a file for cProfile's statistics of the start (None: not profiled).
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Count

    from labeling.importers.native import file_sha256, read_jsonl
    from labeling.models import Item, Role
    from labeling.services import (
        membership_set,
        project_create,
        project_labelling_configure,
        project_labelling_start,
        workload_import,
    )

    call_command("migrate", verbosity=0)
    project = project_create(slug="bench", name="Start benchmark")
    manager = get_user_model().objects.create_user("manager")
    membership_set(project=project, user=manager, role=Role.MANAGER)
    with workload.open("rb") as stream:
        digest = file_sha256(stream)
        workload_import(
            project=project,
            records=read_jsonl(stream),
            format="native",
            filename=workload.name,
            file_sha256=digest,
        )
    project_labelling_configure(project=project, actor=manager, overlap=2)
    reports: list[tuple[str, int, int]] = []
    database = _DatabaseCpu()
    clock = _StatementClock(database)
    load_before = os.getloadavg()
    profile = cProfile.Profile() if profile_to else None
    with connection.execute_wrapper(clock):
        database_before, cpu_before = database.read(), _self_cpu()
        started = time.perf_counter()
        if profile:
            profile.enable()
        project_labelling_start(
            project=project,
            actor=manager,
            progress=lambda step, done, total: reports.append((step, done, total)),
        )
        if profile:
            profile.disable()
        seconds = time.perf_counter() - started
        cpu_seconds, database_after = _self_cpu() - cpu_before, database.read()
    clock.close()
    load_after = os.getloadavg()
    if profile:
        profile.dump_stats(profile_to)
    items = Item.objects.filter(project=project).count()
    statuses = dict(
        Item.objects.filter(project=project)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    print(
        json.dumps(
            {
                "backend": connection.vendor,
                "items": items,
                "seconds": round(seconds, 2),
                "items_per_s": round(items / seconds),
                "cpu_seconds": round(cpu_seconds, 2),
                # None: the database runs in the process (SQLite), or is not readable.
                "database_cpu_seconds": None
                if database_before is None or database_after is None
                else round(database_after - database_before, 2),
                "statuses": statuses,
                "progress_reports": len(reports),
                # ru_maxrss is in kilobytes on Linux.
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
                "statements": {
                    key: [n, round(wall, 3), round(process, 3), round(cpu, 2)]
                    for key, (n, wall, process, cpu) in sorted(
                        clock.times.items(), key=lambda kv: -kv[1][1]
                    )
                },
            }
        )
    )


def run_child(workload: Path, database_url: str, profile_to: str | None) -> dict[str, object]:
    env = child_env(database_url)  # derived results are scheduled, not run (see child_env)
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(workload)]
        + (["--profile", profile_to] if profile_to else []),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _against(seconds: float) -> str:
    """``seconds`` beside the target."""
    verdict = "<=" if seconds <= SECONDS_TARGET else "> "
    return f"{seconds:6.2f} s {verdict} {SECONDS_TARGET:g} s"


def _print_report(r: dict[str, object], statements: bool) -> None:
    process, database = r["cpu_seconds"], r["database_cpu_seconds"]
    print(f"{r['backend']}: {r['items']} items, {r['items_per_s']} items/s, {r['statuses']}")
    print(f"  wall                     {_against(r['seconds'])}")
    print(f"  process CPU              {_against(process)}")
    if database is None:
        print("  database CPU             (in the process: SQLite, or a server not on this host)")
    else:
        print(f"  database backend CPU     {_against(database)}")
        print(f"  process + database CPU   {_against(process + database)}")
    before, after = r["load_average"]
    print(f"  peak RSS {r['peak_rss_mb']} MB; load average {before} before, {after} after")
    if statements:
        print(f"  {'statement':<44}{'runs':>6}{'wall s':>9}{'proc CPU s':>11}{'db CPU s':>10}")
        for key, (n, wall, process_cpu, cpu) in r["statements"].items():
            db = "-" if database is None else f"{cpu:.2f}"
            print(f"  {key[:44]:<44}{n:>6}{wall:>9.3f}{process_cpu:>11.3f}{db:>10}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--postgres", metavar="URL", help="PostgreSQL server to benchmark too")
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite run")
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="cProfile the start into FILE (with .<backend> appended); the figures then include "
        "the profiler's overhead",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="print each statement's wall and database CPU seconds, and the COMMIT's",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.profile)
        return 0

    reports = []
    with tempfile.TemporaryDirectory(prefix="certlabel-bench-start-") as tmp:
        workload = Path(tmp) / "workload.jsonl"
        size = generate(workload, args.items)
        print(f"workload: {args.items} items, 2 prior votes each; {size / 1e6:.1f} MB", flush=True)
        if not args.no_sqlite:
            sqlite_url = f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
            profile_to = args.profile and f"{args.profile}.sqlite"
            reports.append(run_child(workload, sqlite_url, profile_to))
            print(json.dumps(reports[-1]), flush=True)
        if args.postgres:
            with scratch_database(args.postgres, BENCH_DB) as url:
                profile_to = args.profile and f"{args.profile}.postgresql"
                reports.append(run_child(workload, url, profile_to))
            print(json.dumps(reports[-1]), flush=True)

    print()
    for r in reports:
        _print_report(r, args.statements)
    print(
        f"target: {args.items} items started in <= {SECONDS_TARGET:g} s, "
        "the database's CPU included"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
