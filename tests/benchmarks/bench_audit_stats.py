"""Evaluator audit benchmark: the pure statistics of one audit recomputation.

Usage (from the repository root)::

    python tests/benchmarks/bench_audit_stats.py                      # the issue's sizes
    python tests/benchmarks/bench_audit_stats.py --judged 1000000 --repeats 3

One workload, generated with a fixed seed (generation is not timed): ``--judged`` (100,000) items
labelled by a judge (flagged, not flagged, 1% unavailable) across ``--slices`` (5) slices, and a
stratified audit sample (judge verdict × slice) of ``--audited`` (2,000) items with resolved human
labels in a three-label schema (2% unresolved). One recomputation, as the Celery task runs it
after a resolution, is timed from those arrays and label lists to:

- the confusion matrix and every audit metric (``audit``, with inclusion weights);
- the same per slice (``audit_by_slice`` over the 5 slices);
- the disagreement list;
- the population error rate three ways (``estimate_error_rate``: human-only exact bound,
  PPI and PPI++, union bound), over all judged items.

It runs ``--repeats`` times; the best and the median wall time of the whole and of each part are
printed, with the target (under 2 s for the whole). Not collected by pytest
(``python_files = test_*.py``). Loading rows from the database is not part of this measurement.
"""

# ruff: noqa: T201  (a command-line script: printing is its output)
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Hashable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from certification.stats.audit import (  # noqa: E402
    AuditMetrics,
    AuditRecord,
    Disagreement,
    Polarity,
    audit,
    audit_by_slice,
    disagreements,
)
from certification.stats.ppi import ErrorRateComparison, estimate_error_rate  # noqa: E402

TARGET_S = 2.0
SCHEMA = ("supported", "unsupported", "contradicted")
POLARITY = Polarity(
    name="error / not supported",
    human_positive=frozenset({"unsupported", "contradicted"}),
    evaluator_positive=frozenset({"hallucinated"}),
)


def timed(function: Callable[[], object], repeats: int) -> tuple[list[float], object]:
    """Run ``function`` ``repeats`` times; return the wall times and the last result."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return times, result


def report(label: str, times: list[float], target: float | None = None) -> None:
    """Print the best and median of ``times``, with a verdict when there is a target."""
    best, median = min(times), statistics.median(times)
    verdict = "" if target is None else ("   [ok]" if median < target else "   [OVER TARGET]")
    print(f"{label:<44}best {best:7.3f} s   median {median:7.3f} s{verdict}")


def main(argv: list[str] | None = None) -> int:
    """Generate the workload, time the recomputation and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judged", type=int, default=100_000)
    parser.add_argument("--audited", type=int, default=2_000)
    parser.add_argument("--slices", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    # -- workload (not timed) ---------------------------------------------------------------
    big_n = args.judged
    slices = rng.integers(0, args.slices, size=big_n)
    truth = rng.random(big_n) < 0.08 + 0.02 * slices
    judge = np.where(truth, rng.random(big_n) < 0.6, rng.random(big_n) < 0.05).astype(np.int64)
    judge[rng.random(big_n) < 0.01] = -1
    strata = slices * 2 + (judge == 1)  # verdict × slice; unavailable sampled with unflagged
    n_strata = 2 * args.slices
    per_stratum = np.full(n_strata, args.audited // n_strata)
    per_stratum[: args.audited - per_stratum.sum()] += 1
    audited = np.concatenate(
        [
            rng.choice(np.flatnonzero(strata == h), per_stratum[h], replace=False)
            for h in range(n_strata)
        ]
    )
    human = truth[audited].astype(np.int64)
    human[rng.random(audited.size) < 0.02] = -1
    inclusion = per_stratum / np.bincount(strata, minlength=n_strata)
    weights = 1.0 / inclusion[strata[audited]]
    judge_labels = [
        None if code == -1 else ("hallucinated" if code == 1 else "faithful")
        for code in judge[audited]
    ]
    error_labels = rng.choice(SCHEMA[1:], size=audited.size)
    human_labels = [
        None if code == -1 else (str(error_labels[i]) if code == 1 else "supported")
        for i, code in enumerate(human)
    ]
    slice_keys = [f"domain-{s}" for s in slices[audited]]
    records = [
        AuditRecord(f"item-{i}", e, h, "")
        for i, e, h in zip(audited, judge_labels, human_labels, strict=True)
    ]

    # -- the recomputation ------------------------------------------------------------------
    def metrics() -> AuditMetrics:
        return audit(judge_labels, human_labels, POLARITY, human_order=SCHEMA, weights=weights)

    def sliced() -> dict[Hashable, AuditMetrics]:
        return audit_by_slice(
            judge_labels, human_labels, slice_keys, POLARITY, human_order=SCHEMA, weights=weights
        )

    def listed() -> tuple[Disagreement, ...]:
        return disagreements(records, POLARITY)

    def estimates() -> ErrorRateComparison:
        return estimate_error_rate(judge, audited, human, strata=strata, delta=0.05)

    def everything() -> object:
        return metrics(), sliced(), listed(), estimates()

    times, _ = timed(everything, args.repeats)
    overall, per_slice, rows, comparison = metrics(), sliced(), listed(), estimates()
    print(
        f"audit: {big_n:,} judged items, {audited.size:,} audited in {n_strata} strata "
        f"({args.slices} slices), {overall.n_unresolved} unresolved, "
        f"{comparison.n_unavailable:,} unavailable"
    )
    print(
        f"  sensitivity {overall.sensitivity.value:.3f}, specificity "
        f"{overall.specificity.value:.3f}, kappa {overall.kappa.kappa:.3f}, "
        f"{len(rows)} disagreements, {len(per_slice)} slices"
    )
    for row in comparison.summaries():
        estimate = "   --  " if row.estimate is None else f"{row.estimate:.4f}"
        print(
            f"  {row.method:<12} estimate {estimate}  upper bound {row.upper_bound:.4f}  "
            f"({row.assumption})"
        )
    print(f"  true rate of the simulated workload {truth.mean():.4f}")
    report("whole recomputation", times, TARGET_S)
    for label, function in (
        ("  confusion matrix + metrics", metrics),
        ("  per slice", sliced),
        ("  disagreement list", listed),
        ("  three error-rate estimates", estimates),
    ):
        report(label, timed(function, args.repeats)[0])
    print(f"target: < {TARGET_S:g} s for the whole (median of {args.repeats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
