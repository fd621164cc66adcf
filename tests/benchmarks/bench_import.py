"""Import benchmark: a generated native workload through the real import service.

Usage (from the repository root, with the project installed)::

    python tests/benchmarks/bench_import.py                       # SQLite, 10,000 questions
    python tests/benchmarks/bench_import.py --questions 1000 \\
        --postgres postgres://postgres@127.0.0.1:5432/postgres    # SQLite and PostgreSQL
    python tests/benchmarks/bench_import.py --shape labelstudio --questions 50000 --floor \\
        --postgres postgres://postgres@127.0.0.1:5432/postgres    # beside the database's floor

The workload has ``--questions`` questions, each with 2 sources of its own, 10 candidates and 4
claims per candidate with explicit spans. It is written line by line to a temporary file (never
held in memory), then each backend imports it in its own process on a fresh database, through
``workload_import`` exactly as ``manage.py import_workload`` calls it (hashing, parsing,
validation and writes included; migrations excluded). For PostgreSQL, ``--postgres`` names a
server (any database on it); the scratch database ``certlabel_bench`` is created there and
dropped afterwards.

Each child runs with ``DJANGO_DEBUG=false``, as production does; ``--debug`` keeps the
development default, under which Django records the SQL of every query, so memory grows with the
file.

Reported per backend: records read, rows written (sum of the created counts, without
``unanchored_claims``, which counts claims rather than rows), seconds, records and rows per
second, the importing process's CPU seconds (the database server's are not included), the
seconds of the COMMIT alone (on PostgreSQL the deferred foreign-key checks of every row) and its
peak RSS (``ru_maxrss``, which includes Django and the migrations). The recomputations of
derived results that the import schedules are not run (see ``child_env``); the modules that
scheduling loads are loaded before the timer starts, as in a web or worker process.

``--floor`` measures, after each import, what the database alone needs to store the rows the
import added: a fresh database (on PostgreSQL the scratch database ``certlabel_bench_floor``,
dropped afterwards), migrated and set up as the import's was, receives exactly those rows in one
transaction, timed to the end of its COMMIT (PostgreSQL: one binary ``COPY`` per table, sent
from memory; SQLite: one ``INSERT ... SELECT`` per table from the import's file, attached), and
its tables' row counts are then checked equal to the import's. The floor is the database's own
cost of storing those rows (writes, indexes, the deferred constraint checks at COMMIT) and none
of ours (reading, checking, row building). Printed: ``floor s``, ``floor/s`` (records per second
at the floor) and ``x floor`` (the import's seconds over the floor's).

``--shape labelstudio`` imports the tasks of ``bench_vs_labelstudio.py`` instead (one passage,
one answer, one claim, a prior annotation with evidence and a consensus resolution each;
``--questions`` of them).

Targets: at least 20,000 rows/s on PostgreSQL and a peak RSS under 400 MB.
Not collected by pytest (``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[2]
BENCH_DB = "certlabel_bench"
FLOOR_DB = "certlabel_bench_floor"
ROWS_PER_S_TARGET = 20_000
RSS_TARGET_MB = 400

WORDS = (
    "harbour council ledger archive ferry lantern meadow granary tariff quarry orchard "
    "beacon tannery cooper mill charter bridge tollgate warden vintner foundry cistern"
).split()


def _sentence(seed: int, n_words: int) -> str:
    words = [WORDS[(seed * 7 + i * 13) % len(WORDS)] for i in range(n_words)]
    return " ".join(words).capitalize() + f" {seed % 997}."


def generate(path: Path, *, questions: int, candidates: int, claims: int, sources: int) -> int:
    """Write the workload to ``path`` one record per line; return the file size in bytes."""
    with path.open("w", encoding="utf-8") as out:
        for q in range(questions):
            record_sources = [
                {
                    "id": f"doc-{q}-{s}",
                    "text": " ".join(_sentence(q * 31 + s * 17 + k, 14) for k in range(12)),
                    "uri": f"https://archive.example/doc/{q}/{s}",
                    "observed_at": "2024-06-01T12:00:00+00:00",
                    "rank": s,
                    "score": round(1 - s / 10, 2),
                }
                for s in range(sources)
            ]
            record_candidates = []
            for c in range(candidates):
                parts = [_sentence(q + c * 3 + k, 8) for k in range(claims)]
                text = " ".join(parts)
                spans, start = [], 0
                for part in parts:
                    spans.append({"text": part, "start": start, "end": start + len(part)})
                    start += len(part) + 1
                record_candidates.append(
                    {
                        "id": f"c{c}",
                        "text": text,
                        "generator": "bench-model",
                        "generator_settings": {"temperature": 0.7},
                        "canonical_form": f"form-{c % 4}",
                        "retrieval_score": 0.8,
                        "confidence": round(c / candidates, 3),
                        "is_selected": c == 0,
                        "claims": spans,
                    }
                )
            record = {
                "external_id": f"q{q:07d}",
                "text": f"Question {q}: " + _sentence(q, 10),
                "group_key": f"g{q // 10}",
                "slices": {"domain": ("archive", "ferry", "council")[q % 3]},
                "sources": record_sources,
                "candidates": record_candidates,
            }
            out.write(json.dumps(record, ensure_ascii=False))
            out.write("\n")
    return path.stat().st_size


# -- children: one backend in its own process --------------------------------------------------
def _set_up() -> list[float]:
    """Set Django up on DATABASE_URL, migrate, create the benchmark's project, and time every
    COMMIT from now on: return the list whose one value sums their seconds.

    On PostgreSQL the COMMIT runs the deferred foreign-key checks of every row written (one
    index lookup and row lock per reference), a floor that no client-side work removes.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from labeling.services import project_create

    call_command("migrate", verbosity=0)
    project_create(slug="bench", name="Benchmark")
    # What the import's after-commit scheduling of derived results loads (certification's
    # services, with NumPy, SciPy and PyArrow: about 1 s, once per process) is loaded here, as
    # a web or worker process has it loaded before any import.
    import certification.services  # noqa: F401
    import certification.tasks  # noqa: F401

    commit_seconds = [0.0]
    commit = connection.commit

    def timed_commit() -> None:
        began = time.perf_counter()
        commit()
        commit_seconds[0] += time.perf_counter() - began

    connection.commit = timed_commit
    return commit_seconds


def child(workload: Path) -> None:
    """Migrate the database in DATABASE_URL, import ``workload`` and print a JSON report."""
    commit_seconds = _set_up()
    from django.conf import settings
    from django.db import connection

    from labeling.importers.native import file_sha256, read_jsonl
    from labeling.models import Project
    from labeling.services import workload_import

    project = Project.objects.get(slug="bench")
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    with workload.open("rb") as stream:
        digest = file_sha256(stream)
        result = workload_import(
            project=project,
            records=read_jsonl(stream),
            format="native",
            filename=workload.name,
            file_sha256=digest,
        )
    seconds = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    rows = sum(n for name, n in result.created.items() if name != "unanchored_claims")
    report = {
        "backend": connection.vendor,
        "debug": settings.DEBUG,
        "records": result.records,
        "rows": rows,
        "created": result.created,
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds),
        "commit_seconds": round(commit_seconds[0], 2),
        # This process's CPU time (the database server's is not in it): less sensitive than
        # wall time to other load on the machine.
        "cpu_seconds": round(
            cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime, 2
        ),
        # ru_maxrss is in kilobytes on Linux (bytes on macOS).
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(report))


def _id_tables() -> list[str]:
    """The tables of every installed model whose primary key is an integer ``id``."""
    from django.apps import apps
    from django.db import models

    return sorted(
        {
            model._meta.db_table
            for model in apps.get_models(include_auto_created=True)
            if model._meta.managed
            and model._meta.pk.column == "id"
            and isinstance(model._meta.pk, models.AutoField)
        }
    )


def floor_child(source_url: str) -> None:
    """Store in the database in DATABASE_URL the rows the import added to ``source_url``'s (the
    rows past this database's largest ids after the same set-up), in one transaction; print a
    JSON report of the seconds to the end of the COMMIT."""
    commit_seconds = _set_up()
    from django.db import connection, transaction

    tables = _id_tables()
    with connection.cursor() as cursor:
        past = {}
        for table in tables:
            cursor.execute(f'SELECT COALESCE(MAX(id), 0) FROM "{table}"')  # noqa: S608
            past[table] = cursor.fetchone()[0]
    rows = 0
    if connection.vendor == "postgresql":
        import psycopg

        data: dict[str, bytes] = {}
        with psycopg.connect(source_url) as source:
            for table in tables:
                select = f'SELECT * FROM "{table}" WHERE id > {past[table]} ORDER BY id'  # noqa: S608
                with source.cursor().copy(f"COPY ({select}) TO STDOUT (FORMAT BINARY)") as copy:
                    data[table] = b"".join(bytes(block) for block in copy)
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            for table, blob in data.items():
                with cursor.cursor.copy(f'COPY "{table}" FROM STDIN (FORMAT BINARY)') as copy:
                    copy.write(blob)
                rows += cursor.cursor.rowcount  # the rows the COPY stored
    else:
        source_path = source_url.removeprefix("sqlite:///")
        with connection.cursor() as cursor:
            cursor.execute("ATTACH DATABASE %s AS source", [source_path])
        started = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            for table in tables:
                cursor.execute(
                    f'INSERT INTO main."{table}" SELECT * FROM source."{table}" '  # noqa: S608
                    f"WHERE id > {past[table]} ORDER BY id"
                )
                rows += cursor.rowcount
    seconds = time.perf_counter() - started
    _check_same_counts(source_url, tables)
    print(
        json.dumps(
            {
                "rows": rows,
                "seconds": round(seconds, 3),
                "commit_seconds": round(commit_seconds[0], 3),
            }
        )
    )


def _check_same_counts(source_url: str, tables: list[str]) -> None:
    """Exit with the tables whose row count here differs from ``source_url``'s database's."""
    from django.db import connection

    count = 'SELECT count(*) FROM {}"{}"'  # noqa: S608 - a model's table
    with connection.cursor() as cursor:
        here = {}
        for table in tables:
            cursor.execute(count.format("main." if connection.vendor == "sqlite" else "", table))
            here[table] = cursor.fetchone()[0]
        if connection.vendor == "postgresql":
            import psycopg

            with psycopg.connect(source_url) as source:
                there = {t: source.execute(count.format("", t)).fetchone()[0] for t in tables}
        else:
            there = {}
            for table in tables:
                cursor.execute(count.format("source.", table))
                there[table] = cursor.fetchone()[0]
    differing = [f"{t} ({here[t]} here, {there[t]} there)" for t in tables if here[t] != there[t]]
    if differing:
        raise SystemExit(f"the floor's tables differ from the import's: {', '.join(differing)}")


def child_env(database_url: str, *, debug: bool = False) -> dict[str, str]:
    """The environment of a benchmark's child process: this one's without Django's and
    Celery's settings, on ``database_url``, quiet logs, and unless ``debug`` production-shaped
    (with DEBUG on, Django keeps the SQL of every query, so memory grows with the work).

    The recomputations of derived results that the measured work schedules go to an in-memory
    broker and are not run: the benchmarks time the work, not them. (In production a worker
    runs them apart from the work, and on the embedded default a web process's background
    thread does; with tasks in-process here, they would run right after the work's COMMIT,
    inside the timed window.)
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env.update(
        DATABASE_URL=database_url,
        DJANGO_LOG_LEVEL="WARNING",
        CELERY_BROKER_URL="memory://localhost/",
        CELERY_TASK_ALWAYS_EAGER="false",
    )
    if not debug:
        env.update(
            DJANGO_DEBUG="false",
            DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
            DJANGO_ALLOWED_HOSTS="localhost",
        )
    return env


def run_child(
    workload: Path, database_url: str, *, debug: bool, floor_of: str | None = None
) -> dict[str, object]:
    """Import ``workload`` into ``database_url`` in a child process (or, with ``floor_of``, a
    database URL, store there what the import added to that one) and return its report."""
    env = child_env(database_url, debug=debug)
    arguments = ["--floor-child", floor_of] if floor_of else ["--child", str(workload)]
    done = subprocess.run(
        [sys.executable, __file__, *arguments],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- PostgreSQL scratch database -------------------------------------------------------------
def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _admin(server_url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(statement)


@contextmanager
def scratch_database(server_url: str, name: str) -> Iterator[str]:
    """Create the database ``name`` on ``server_url`` (dropped first if it exists) and yield
    its URL; drop it afterwards."""
    _admin(server_url, f"DROP DATABASE IF EXISTS {name}")
    _admin(server_url, f"CREATE DATABASE {name}")
    try:
        yield _with_database(server_url, name)
    finally:
        _admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def run_backend(
    workload: Path, url: str, floor_url: str | None, *, debug: bool
) -> dict[str, object]:
    """Import ``workload`` into ``url``; with ``floor_url``, then measure the floor there."""
    report = run_child(workload, url, debug=debug)
    if floor_url is not None:
        floor = run_child(workload, floor_url, debug=debug, floor_of=url)
        report["floor_rows"] = floor["rows"]
        report["floor_seconds"] = floor["seconds"]
        report["floor_commit_seconds"] = floor["commit_seconds"]
    return report


def run_postgres(workload: Path, server_url: str, *, debug: bool, floor: bool) -> dict[str, object]:
    with scratch_database(server_url, BENCH_DB) as url:
        if not floor:
            return run_backend(workload, url, None, debug=debug)
        with scratch_database(server_url, FLOOR_DB) as floor_url:
            return run_backend(workload, url, floor_url, debug=debug)


def generate_labelstudio(path: Path, *, questions: int) -> int:
    """Write ``bench_vs_labelstudio.py``'s tasks (annotated) to ``path``; return its size."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_vs_labelstudio import write_native

    return write_native(path, questions, annotated=True, salt=1)


# -- main --------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--claims", type=int, default=4)
    parser.add_argument("--sources", type=int, default=2)
    parser.add_argument(
        "--shape",
        choices=("questions", "labelstudio"),
        default="questions",
        help="the workload: questions with candidates and claims (default), or the tasks of "
        "bench_vs_labelstudio.py (--questions of them; --candidates, --claims, --sources unused)",
    )
    parser.add_argument(
        "--floor", action="store_true", help="also time the database alone storing those rows"
    )
    parser.add_argument("--postgres", metavar="URL", help="PostgreSQL server to benchmark too")
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite run")
    parser.add_argument(
        "--debug", action="store_true", help="run with DJANGO_DEBUG=true (the development default)"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--floor-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    if args.floor_child:
        floor_child(args.floor_child)
        return 0

    reports = []
    with tempfile.TemporaryDirectory(prefix="certlabel-bench-") as tmp:
        workload = Path(tmp) / "workload.jsonl"
        started = time.perf_counter()
        if args.shape == "labelstudio":
            size = generate_labelstudio(workload, questions=args.questions)
            shape = f"{args.questions} Label Studio benchmark tasks"
        else:
            size = generate(
                workload,
                questions=args.questions,
                candidates=args.candidates,
                claims=args.claims,
                sources=args.sources,
            )
            shape = (
                f"{args.questions} questions x {args.candidates} candidates x "
                f"{args.claims} claims, {args.sources} sources each"
            )
        print(
            f"workload: {shape}; {size / 1e6:.1f} MB, "
            f"generated in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        if not args.no_sqlite:
            url = f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
            floor_url = f"sqlite:///{Path(tmp) / 'floor.sqlite3'}" if args.floor else None
            reports.append(run_backend(workload, url, floor_url, debug=args.debug))
            print(json.dumps(reports[-1]), flush=True)
        if args.postgres:
            reports.append(
                run_postgres(workload, args.postgres, debug=args.debug, floor=args.floor)
            )
            print(json.dumps(reports[-1]), flush=True)

    floor_header = f"{'floor s':>9}{'floor/s':>10}{'x floor':>9}" if args.floor else ""
    print(
        f"\n{'backend':<12}{'records':>9}{'rows':>10}{'seconds':>9}{'records/s':>11}"
        f"{'rows/s':>9}{'commit s':>10}{'CPU s':>7}{'peak RSS MB':>13}{floor_header}"
    )
    for r in reports:
        floor_cells = ""
        if args.floor:
            floor = max(r["floor_seconds"], 0.001)  # a tiny workload's floor rounds to 0
            floor_cells = (
                f"{r['floor_seconds']:>9.2f}{r['records'] / floor:>10,.0f}"
                f"{r['seconds'] / floor:>9.1f}"
            )
        print(
            f"{r['backend']:<12}{r['records']:>9}{r['rows']:>10}{r['seconds']:>9}"
            f"{r['records'] / max(r['seconds'], 0.001):>11,.0f}{r['rows_per_s']:>9}"
            f"{r['commit_seconds']:>10}"
            f"{r['cpu_seconds']:>7}{r['peak_rss_mb']:>13}{floor_cells}"
        )
    if args.floor:
        print(
            "floor: the database alone storing the same rows in one transaction (its writes, "
            "indexes and constraint checks; none of the import's reading, checking and row "
            "building); floor/s: records per second at the floor; x floor: the import's "
            "seconds over the floor's"
        )
    print(f"targets: >= {ROWS_PER_S_TARGET} rows/s on PostgreSQL, peak RSS < {RSS_TARGET_MB} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
