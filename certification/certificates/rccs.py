"""RCCS: retrieval-conditioned confidence of a run's calibration units, or of a project's answers.

Source: :func:`certification.stats.rccs.rccs` (retrieval score R, confidence C and correctness
of each unit). :func:`rccs_section` is the section of a calibration run; :func:`rccs_report` is
the report of its own over every candidate answer with a resolved label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from certification.certificates.jsonnum import num
from certification.certificates.units import Unit
from certification.stats.errors import StatsError
from certification.stats.rccs import rccs
from labeling.vocabulary import ADMISSIBLE, INADMISSIBLE


def rccs_section(units: Sequence[Unit]) -> dict[str, Any]:
    """Return the RCCS section of the calibration units with a candidate and a loss.

    Returns ``rccs_correlation``, ``correlation_reason``, ``confidence_calibration_error``,
    ``mean_rc``, ``n``, ``n_dropped`` and ``reason``; only the last three when undefined.
    """
    rows = [
        u for u in units if u.excluded is None and u.candidate is not None and u.loss is not None
    ]
    retrieval = [u.candidate["R"] for u in rows if u.candidate is not None]
    confidence = [u.candidate["C"] for u in rows if u.candidate is not None]
    correctness = [1 - (u.loss or 0) for u in rows]
    try:
        result = rccs(retrieval, confidence, correctness)
    except StatsError as exc:
        return {"n": 0, "n_dropped": len(rows), "reason": str(exc)}
    return {
        "rccs_correlation": num(result.rccs_correlation),
        "correlation_reason": result.correlation_reason,
        "confidence_calibration_error": num(result.confidence_calibration_error),
        "mean_rc": num(result.mean_rc),
        "n": result.n,
        "n_dropped": result.n_dropped,
        "reason": None,
    }


#: The correctness A of a resolved answer label; every other outcome (pending, unresolved,
#: abstained, evidence unavailable, a project's own labels) has none and is counted apart.
CORRECTNESS = {ADMISSIBLE: 1, INADMISSIBLE: 0}


def rccs_report(candidates: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Return RCCS over candidate answers with their current resolved labels, and its counts.

    Each candidate has ``R`` (retrieval score in [0, 1] or None), ``C`` (confidence in [0, 1] or
    None) and ``outcome``. Returns ``counts`` (``candidates``, ``with_retrieval``,
    ``with_confidence``, ``with_both``, ``outcomes`` per outcome, ``with_correctness``), ``rccs``
    (:func:`rccs_section` over the candidates with a correctness, complete cases only) and
    ``correctness`` (the rule, in words).
    """
    outcomes = Counter(c["outcome"] for c in candidates)
    rows = [c for c in candidates if c["outcome"] in CORRECTNESS]
    counts = {
        "candidates": len(candidates),
        "with_retrieval": sum(c["R"] is not None for c in candidates),
        "with_confidence": sum(c["C"] is not None for c in candidates),
        "with_both": sum(c["R"] is not None and c["C"] is not None for c in candidates),
        "outcomes": dict(sorted(outcomes.items())),
        "with_correctness": len(rows),
    }
    try:
        result = rccs(
            [c["R"] for c in rows],
            [c["C"] for c in rows],
            [CORRECTNESS[c["outcome"]] for c in rows],
        )
    except StatsError as exc:
        section: dict[str, Any] = {"n": 0, "n_dropped": len(rows), "reason": str(exc)}
    else:
        section = {
            "rccs_correlation": num(result.rccs_correlation),
            "correlation_reason": result.correlation_reason,
            "confidence_calibration_error": num(result.confidence_calibration_error),
            "mean_rc": num(result.mean_rc),
            "n": result.n,
            "n_dropped": result.n_dropped,
            "reason": None,
        }
    return {
        "counts": counts,
        "rccs": section,
        "correctness": (
            f"A = 1 for {ADMISSIBLE}, 0 for {INADMISSIBLE}; every other outcome has no "
            "correctness and is left out (counted under outcomes); a missing R or C drops "
            "the row (n_dropped)"
        ),
    }
