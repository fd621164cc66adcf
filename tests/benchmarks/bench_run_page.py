"""Run page benchmark: the calibration run page, its charts drawn on every request.

Usage (from the repository root)::

    python tests/benchmarks/bench_run_page.py
    python tests/benchmarks/bench_run_page.py --questions 400 --thresholds 40 --requests 10

Builds a project in a fresh SQLite file in a temporary directory (migrated, loaded through the
real import service): ``--questions`` calibration questions and a quarter as many test
questions, ``--samples`` candidates each with seeded random scores and labels, one spec with
both methods (selective risk over ``--thresholds`` thresholds, conformal), and one done run.
Then a signed-in manager requests the run page through Django's test client (the whole
request: middleware, views, templates, the four SVG charts; no network).

Printed: the p50 and max wall time in ms over ``--requests`` requests. Not collected by pytest
(``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _records(questions: int, samples: int, seed: int) -> dict[str, list[dict[str, object]]]:
    from tests.factories import calibration_candidate, calibration_record

    rng = random.Random(seed)

    def record(name: str) -> dict[str, object]:
        candidates = [
            calibration_candidate(
                f"s{k}",
                answer=f"a{rng.randrange(3)}",
                label="admissible" if rng.random() < 0.8 else "inadmissible",
                score=round(rng.random(), 3),
                selected=k == 0,
            )
            for k in range(samples)
        ]
        return calibration_record(name, candidates)

    return {
        "calibration": [record(f"c{i}") for i in range(questions)],
        "test": [record(f"t{i}") for i in range(max(1, questions // 4))],
    }


def _timed(get: object, requests: int) -> list[float]:
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        response = get()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.status_code
    return times


def main(argv: list[str] | None = None) -> int:
    """Build the run, time the page, print the figures; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--thresholds", type=int, default=20)
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    directory = tempfile.mkdtemp(prefix="bench-run-page-")
    os.environ["DATABASE_URL"] = f"sqlite:///{directory}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "labeling.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    call_command("migrate", verbosity=0)

    from certification.services import calibration_run_execute, calibration_run_request
    from labeling.models import Role
    from labeling.services import membership_set, project_create
    from tests.factories import UserFactory, calibration_project, make_spec

    project = calibration_project(
        project_create(slug="bench", name="Bench"),
        _records(args.questions, args.samples, args.seed),
    )
    manager = UserFactory(username="bench-manager")
    membership_set(project=project, user=manager, role=Role.MANAGER)
    thresholds = [
        round(0.05 + 0.9 * i / max(1, args.thresholds - 1), 4) for i in range(args.thresholds)
    ]
    spec = make_spec(project, actor=manager, method="both", selector="mode", thresholds=thresholds)
    run = calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)
    print(
        f"run {run.pk}: {run.status}, {args.questions} calibration questions, "
        f"{args.thresholds} thresholds"
    )
    client = Client()
    client.force_login(manager)
    url = f"/p/{project.slug}/certification/runs/{run.pk}/"

    def get() -> object:
        return client.get(url)

    get()  # warm up templates and imports
    times = _timed(get, args.requests)
    print(f"run page  p50 {statistics.median(times):8.1f} ms   max {max(times):8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
