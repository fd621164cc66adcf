"""The conformal section: per-question answer sets, the threshold M* and its coverage curve.

Sets are per question: the top M* canonical answer classes by frequency; M* is the split
conformal quantile of the calibration questions' scores (rank of the best admissible class).
Source: split conformal prediction, Vovk, Gammerman and Shafer (2005), "Algorithmic Learning in a
Random World"; Angelopoulos and Bates (2021), "A gentle introduction to conformal prediction",
arXiv:2107.07511, section 1; the set construction of :mod:`certification.stats.conformal`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from certification.certificates.contract import Contract
from certification.certificates.jsonnum import fraction_text, num
from certification.certificates.units import PreparedQuestion, exclusions
from certification.stats.conformal import (
    ConformalCalibration,
    ConformalThreshold,
    SetEvaluation,
    calibrate,
    conformal_threshold,
    evaluate_sets,
)

#: Miscoverage levels of the "coverage and mean set size vs alpha" curve (plus the spec's alpha).
ALPHA_GRID = ("0.01", "0.02", "0.05", "0.1", "0.15", "0.2", "0.25", "0.3", "0.4", "0.5")


def _evaluation(evaluation: SetEvaluation) -> dict[str, Any]:
    return {
        "threshold": num(evaluation.threshold),
        "n": evaluation.n,
        "covered": evaluation.covered,
        "coverage": num(evaluation.coverage),
        "n_solvable": evaluation.n_solvable,
        "covered_solvable": evaluation.covered_solvable,
        "coverage_solvable": num(evaluation.coverage_solvable),
        "set_size_counts": [[size, count] for size, count in evaluation.set_size_counts],
        "mean_set_size": num(evaluation.mean_set_size),
        "reason": evaluation.reason,
    }


def _threshold(threshold: ConformalThreshold) -> dict[str, Any]:
    return {
        "alpha": fraction_text(threshold.alpha),
        "n": threshold.n,
        "k": threshold.k,
        "value": num(threshold.threshold),
        "infinite": threshold.is_infinite,
        "reason": threshold.reason,
    }


def stopping_summary(prepared: Sequence[PreparedQuestion]) -> dict[str, Any]:
    """Return the samples the stopping rule saved over a partition.

    Counts ``samples_available``, ``samples_used``, ``samples_saved``, ``no_answer_samples`` and
    ``fraction_saved`` (in [0, 1], None without samples).
    """
    available = sum(p.samples_available for p in prepared)
    used = sum(p.samples_used for p in prepared)
    return {
        "samples_available": available,
        "samples_used": used,
        "samples_saved": available - used,
        "fraction_saved": num((available - used) / available) if available else None,
        "no_answer_samples": sum(p.no_answer_samples for p in prepared),
    }


def _counts(
    calibration: Sequence[PreparedQuestion],
    test: Sequence[PreparedQuestion],
    cal: Sequence[PreparedQuestion],
) -> dict[str, Any]:
    return {
        "questions": len(calibration),
        "excluded": exclusions([p.excluded for p in calibration]),
        "used": len(cal),
        "unsolvable": sum(1 for p in cal if math.isinf(p.score)),
        "inconsistent_classes": sum(p.inconsistent_classes for p in cal),
        "stopping": stopping_summary(calibration),
        "test_stopping": stopping_summary(test),
    }


def _curve(
    scores: Sequence[float],
    curve_scores: Sequence[float],
    curve_classes: Sequence[int],
    contract: Contract,
) -> list[dict[str, Any]]:
    """Coverage and mean set size at each alpha of the grid (and the spec's)."""
    curve = []
    alphas = sorted({Decimal(a) for a in ALPHA_GRID} | {contract.alpha})
    for a in alphas:
        at = conformal_threshold(scores, a)
        evaluation = evaluate_sets(curve_scores, curve_classes, at)
        curve.append(
            {
                "alpha": str(a),
                "threshold": num(at.threshold),
                "coverage": num(evaluation.coverage),
                "covered": evaluation.covered,
                "n": evaluation.n,
                "mean_set_size": num(evaluation.mean_set_size),
                # M* = inf: every set is the whole answer space, so every question counts as
                # covered by convention, the unsolvable ones (no admissible sample) included.
                "infinite": at.is_infinite,
                "covered_unsolvable": evaluation.covered - evaluation.covered_solvable,
            }
        )
    return curve


def _curve_infinite(curve: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Return where the coverage curve's M* is infinite, or None when it never is.

    ``alphas`` (as text), ``n`` (questions at each point: all get the whole answer space) and
    ``covered_unsolvable`` (covered only by that convention: no admissible answer was sampled).
    """
    points = [p for p in curve if p.get("threshold") == "inf"]
    if not points:
        return None
    return {
        "alphas": [p["alpha"] for p in points],
        "n": points[0]["n"],
        "covered_unsolvable": points[0]["covered_unsolvable"],
    }


def _reliability(calibration_result: ConformalCalibration) -> dict[str, Any]:
    reliability = calibration_result.reliability
    return {
        "n": reliability.n,
        "n_mode_admissible": reliability.n_mode_admissible,
        # unreduced, so the counts show: #{s_i <= 1} / (n + 1)
        "level": None
        if reliability.level is None
        else f"{reliability.n_mode_admissible}/{reliability.n + 1}",
        "value": num(reliability.value),
        "reason": reliability.reason,
    }


def conformal_section(
    calibration: Sequence[PreparedQuestion],
    test: Sequence[PreparedQuestion],
    contract: Contract,
) -> tuple[dict[str, Any], float | None]:
    """Return the conformal section (JSON primitives) and M*, possibly ``math.inf``.

    M* is None when no calibration question is used.

    Raises:
        StatsError: on a malformed alpha (from ``certification.stats.conformal``).
    """
    cal = [p for p in calibration if p.excluded is None]
    tst = [p for p in test if p.excluded is None]
    section: dict[str, Any] = {
        "alpha": str(contract.alpha),
        "canonicaliser": contract.canonicaliser,
        "tie_rule": contract.tie_rule,
        "answer_field": contract.answer_field,
        "stopping_delta": None if contract.stopping_delta is None else str(contract.stopping_delta),
        "counts": _counts(calibration, test, cal),
    }
    if not cal:
        section.update(
            threshold=None,
            reliability=None,
            score_counts=[],
            calibration_sets=None,
            test_sets=None,
            curve=[],
            curve_infinite=None,
            reason="no calibration question: the conformal threshold is undefined",
        )
        return section, None
    scores = [p.score for p in cal]
    n_classes = [len(p.classes) for p in cal]
    calibration_result = calibrate(scores, contract.alpha)
    threshold = calibration_result.threshold
    test_scores = [p.score for p in tst]
    test_classes = [len(p.classes) for p in tst]
    curve_scores, curve_classes, curve_on = (
        (test_scores, test_classes, "test") if tst else (scores, n_classes, "calibration")
    )
    curve = _curve(scores, curve_scores, curve_classes, contract)
    section.update(
        threshold=_threshold(threshold),
        reliability=_reliability(calibration_result),
        score_counts=[[num(score), count] for score, count in calibration_result.score_counts],
        calibration_sets=_evaluation(evaluate_sets(scores, n_classes, threshold)),
        test_sets=_evaluation(evaluate_sets(test_scores, test_classes, threshold)) if tst else None,
        curve=curve,
        curve_infinite=_curve_infinite(curve),
        curve_partition=curve_on,
        reason=None,
    )
    return section, threshold.threshold
