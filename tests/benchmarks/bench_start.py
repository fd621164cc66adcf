"""Start-labelling benchmark: queue and compare a whole imported project in one call.

Usage (from the repository root, with the project installed)::

    python tests/benchmarks/bench_start.py                        # SQLite, 50,000 items
    python tests/benchmarks/bench_start.py --items 10000 \\
        --postgres postgres://postgres@127.0.0.1:5432/postgres    # SQLite and PostgreSQL

The workload: ``--items`` questions, each with one source, one candidate answer with one claim
and two imported prior annotations (a quarter of them disagreeing on the answer label), so with
overlap 2 the start compares every item: three quarters go to consensus, a quarter to the
disagreement queue. Each backend runs in its own process on a fresh database
(``DJANGO_DEBUG=false``): migrate, import (not timed), then ``project_labelling_start`` timed,
as the background job runs it (progress callback included).

Reported per backend: items, seconds, items per second, the process's CPU seconds (the database
server's are not included), the items' statuses afterwards, and the peak RSS.

Target: 50,000 items start "in a few seconds"; printed against 5 s.
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
SECONDS_TARGET = 5.0


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
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    profile = cProfile.Profile() if profile_to else None
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
        profile.dump_stats(profile_to)
    seconds = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
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
                "cpu_seconds": round(
                    cpu_after.ru_utime
                    + cpu_after.ru_stime
                    - cpu_before.ru_utime
                    - cpu_before.ru_stime,
                    2,
                ),
                "statuses": statuses,
                "progress_reports": len(reports),
                # ru_maxrss is in kilobytes on Linux.
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
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

    print(f"\n{'backend':<12}{'items':>8}{'seconds':>10}{'items/s':>10}{'CPU s':>8}{'RSS MB':>9}")
    for r in reports:
        print(
            f"{r['backend']:<12}{r['items']:>8}{r['seconds']:>10}{r['items_per_s']:>10}"
            f"{r['cpu_seconds']:>8}{r['peak_rss_mb']:>9}  {r['statuses']}"
        )
    print(f"target: {args.items} items started in <= {SECONDS_TARGET:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
