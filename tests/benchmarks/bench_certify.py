"""Certification statistics benchmark: selective risk and conformal calibration at scale.

Usage (from the repository root)::

    python tests/benchmarks/bench_certify.py                     # the issue's sizes
    python tests/benchmarks/bench_certify.py --answers 1000000 --repeats 3

Two workloads, generated with a fixed seed (generation is not timed):

- selective risk: ``--thresholds`` (M = 1,000) thresholds on ``--answers`` (200,000) calibration
  answers with uniform scores and 0/1 losses; timed from raw arrays to the certificate
  (``certify_scores``: one sort, ``searchsorted``, exact p-values, Clopper–Pearson bounds at
  1 - delta/M, Bonferroni decision, one row record per threshold);
- conformal calibration: ``--questions`` (200,000) questions x ``--samples`` (K = 20) integer-coded
  samples (the fast path: answers already canonicalised and coded), timed from the code and
  admissibility arrays through rank scores, M*, the reliability level and the set evaluation;
  Hoeffding sequential stopping over the same arrays is timed separately.

Each workload runs ``--repeats`` times; the best and the median wall time are printed, with the
target (under one second each). Not collected by pytest (``python_files = test_*.py``).
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from certification.stats.conformal import (  # noqa: E402
    calibrate,
    evaluate_sets,
    rank_scores_from_codes,
    sequential_stop_codes,
)
from certification.stats.selective_risk import certify_scores  # noqa: E402

TARGET_S = 1.0


def timed(function: Callable[[], object], repeats: int) -> tuple[list[float], object]:
    """Run ``function`` ``repeats`` times; return the wall times and the last result."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return times, result


def report(label: str, times: list[float]) -> None:
    best, median = min(times), statistics.median(times)
    verdict = "ok" if median < TARGET_S else "OVER TARGET"
    print(f"{label:<44}best {best:7.3f} s   median {median:7.3f} s   [{verdict}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=200_000)
    parser.add_argument("--thresholds", type=int, default=1_000)
    parser.add_argument("--questions", type=int, default=200_000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    # -- selective risk ---------------------------------------------------------------------
    scores = rng.random(args.answers)
    losses = (rng.random(args.answers) < 0.3 * (1 - scores)).astype(np.int8)
    thresholds = np.linspace(0.0, 1.0, args.thresholds, endpoint=False)

    def selective() -> object:
        return certify_scores(scores, losses, thresholds, alpha=0.1, delta=0.05)

    times, certificate = timed(selective, args.repeats)
    chosen = certificate.chosen
    print(
        f"selective risk: {args.answers:,} answers x {args.thresholds:,} thresholds; "
        f"{len(certificate.certified_indices)} certified, chosen threshold "
        f"{chosen.threshold if chosen else None}"
    )
    report("  counts + p-values + bounds + decision", times)

    # -- conformal calibration --------------------------------------------------------------
    n, k = args.questions, args.samples
    skill = rng.beta(2.0, 1.0, size=n)
    wrong = rng.integers(1, 8, size=(n, k))
    codes = np.where(rng.random((n, k)) < skill[:, None], 0, wrong).astype(np.int64)
    admissible = codes == 0

    def conformal() -> object:
        ranks = rank_scores_from_codes(codes, admissible)
        calibration = calibrate(ranks.scores, 0.1)
        evaluation = evaluate_sets(ranks.scores, ranks.n_classes, calibration.threshold)
        return calibration, evaluation

    times, (calibration, evaluation) = timed(conformal, args.repeats)
    print(
        f"conformal: {n:,} questions x K = {k}; M* = {calibration.threshold.threshold:g}, "
        f"reliability {calibration.reliability.value:.4f}, coverage {evaluation.coverage:.4f}, "
        f"mean set size {evaluation.mean_set_size:.3f}"
    )
    report("  ranks + M* + reliability + evaluation", times)

    times, stopping = timed(lambda: sequential_stop_codes(codes, delta=0.05), args.repeats)
    print(
        f"  sequential stopping saves {stopping.samples_saved:,} of "
        f"{stopping.total_available:,} samples ({stopping.fraction_saved:.1%})"
    )
    report("  Hoeffding sequential stopping", times)
    print(f"target: < {TARGET_S:g} s each (median of {args.repeats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
