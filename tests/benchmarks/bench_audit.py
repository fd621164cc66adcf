"""Evaluator-audit benchmark: ``audit_report_recompute`` end to end on PostgreSQL.

Usage (repository root, PostgreSQL running): ``python tests/benchmarks/bench_audit.py``
[``--judged 100000 --resolved 2000 --repeats 5 --database-url URL --keep``].

The ``--database-url`` database is dropped, created, migrated (dropped at the end unless
``--keep``) and filled by ``labeling.bulk.insert_rows`` (untimed): ``--judged`` items, one per
candidate (10 per question, 5 domains, 3 generators), each with one answer-level label of
``judge@v1`` (1% unavailable); ``--resolved`` of them, evenly spread, resolved by consensus. The
audit is declared with ``audit_report_configure``'s defaults but not computed, so run 1 is cold;
each run is one ``audit_report_recompute`` (read, statistics, ``UPDATE``), with the stored
``input_sha256`` blanked before runs 2.. so that each computes. A last run with unchanged inputs
(hash hit: read and hash only) is timed apart. Peak RSS is the process's ``ru_maxrss`` (data
building included). Target: under 2 s. Not collected by pytest (``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[2]
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/certlabel_bench_audit"
TARGET_S = 2.0
DOMAINS = ("med", "law", "finance", "history", "science")


def _admin(url: str, statement: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    if not name.replace("_", "").isalnum():
        raise SystemExit(f"unexpected database name {name!r} in {url}")
    admin_url = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(statement.format(name=name))


def build(judged: int, resolved: int) -> int:
    """Insert the workload; return the declared (not yet computed) AuditReport's id."""
    from django.db import connection, transaction
    from django.utils import timezone

    from certification.models import AuditReport
    from labeling import models as m
    from labeling.bulk import insert_rows
    from labeling.services import project_create

    def put(model: type, columns: str, rows: list, ids: bool = False) -> list[int]:
        return insert_rows(model, columns.split(), rows, with_ids=ids)

    now, per_q, verdicts = timezone.now(), 10, ("admissible", "inadmissible")
    with transaction.atomic():
        project = project_create(slug="bench-audit", name="Audit benchmark")
        policy = m.LabelPolicy.objects.get(project=project)
        evaluator = m.Evaluator.objects.create(project=project, name="judge", version="v1")
        slices = [json.dumps({"domain": d, "question_type": "fact"}) for d in DOMAINS]
        q_rows = [
            (project.pk, f"q{q:06d}", f"Question {q}?", f"g{q // 10}", slices[q % 5], "{}",
             f"{q:064x}", now)
            for q in range(-(-judged // per_q))
        ]  # fmt: skip
        cols = "project_id external_id text group_key slices metadata fingerprint created_at"
        q_ids = put(m.Question, cols, q_rows, ids=True)
        c_rows = [
            (q_ids[i // per_q], f"c{i % per_q}", f"Answer {i}.", f"model-{i % 3}", "{}",
             i % per_q, False, "{}", f"{i:064x}")
            for i in range(judged)
        ]  # fmt: skip
        cols = "question_id key text generator generator_settings sample_index is_selected"
        c_ids = put(m.CandidateAnswer, cols + " metadata fingerprint", c_rows, ids=True)
        cols = "project_id candidate_id status overlap assigned_count prior_votes queue_position"
        i_rows = [(project.pk, c, "open", 1, 0, 0, n, 1, now) for n, c in enumerate(c_ids)]
        item_ids = put(m.Item, cols + " version created_at", i_rows, ids=True)
        labels = [  # 1% unavailable, about 2/7 inadmissible
            (evaluator.pk, c, None, False) if n % 100 == 99
            else (evaluator.pk, c, verdicts[n % 7 < 2], True)
            for n, c in enumerate(c_ids)
        ]  # fmt: skip
        put(m.EvaluatorLabel, "evaluator_id candidate_id label available", labels)
        r_rows = [
            (item_ids[n], 1, "consensus", policy.pk, verdicts[n % 5 < 2],
             f"resolution {n}" if n % 3 == 0 else "", now)
            for n in range(0, judged, max(1, judged // resolved))[:resolved]
        ]  # fmt: skip
        cols = "item_id number status policy_id answer_label rationale created_at"
        put(m.Resolution, cols, r_rows)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE labeling_item i SET status = 'resolved', resolution_id = r.id"
                " FROM labeling_resolution r WHERE r.item_id = i.id"
            )
        report = AuditReport.objects.create(  # audit_report_configure's defaults, not computed
            project=project, evaluator=evaluator, human_positive=["inadmissible"],
            evaluator_positive=["inadmissible"], confidence="0.95",
        )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return report.pk


def run(args: argparse.Namespace) -> dict[str, object]:
    os.environ.update(
        DATABASE_URL=args.database_url, DJANGO_SETTINGS_MODULE="labeling.settings",
        DJANGO_DEBUG="false", DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="localhost", DJANGO_LOG_LEVEL="WARNING",
    )  # fmt: skip
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    from certification.models import AuditReport
    from certification.services.audit import audit_report_recompute

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    report_id = build(args.judged, args.resolved)
    build_s = time.perf_counter() - started
    seconds = []
    for n in range(args.repeats):
        if n:  # force the computation: the stored hash no longer matches
            AuditReport.objects.filter(pk=report_id).update(input_sha256="")
        started = time.perf_counter()
        report = audit_report_recompute(report_id=report_id)
        seconds.append(time.perf_counter() - started)
    started = time.perf_counter()
    audit_report_recompute(report_id=report_id)  # unchanged inputs: hash hit, no write
    unchanged_s = time.perf_counter() - started
    return {
        "judged": report.result["n_items"],
        "resolved": report.result["n_resolved"],
        "build_seconds": round(build_s, 2),
        "runs_seconds": [round(s, 3) for s in seconds],
        "cold_seconds": round(seconds[0], 3),
        "median_seconds": round(statistics.median(seconds), 3),
        "min_seconds": round(min(seconds), 3),
        "max_seconds": round(max(seconds), 3),
        "unchanged_hash_seconds": round(unchanged_s, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "target_seconds": TARGET_S,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judged", type=int, default=100_000)
    parser.add_argument("--resolved", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--keep", action="store_true", help="leave the database afterwards")
    args = parser.parse_args(argv)
    _admin(args.database_url, "DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    _admin(args.database_url, "CREATE DATABASE {name}")
    try:
        print(json.dumps(run(args), indent=2))
    finally:
        if not args.keep:
            from django.db import connections

            connections.close_all()
            _admin(args.database_url, "DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
