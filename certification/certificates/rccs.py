"""The RCCS section: retrieval-conditioned confidence of the calibration units.

Source: :func:`certification.stats.rccs.rccs` (retrieval score R, confidence C and correctness
of each unit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from certification.certificates.jsonnum import num
from certification.certificates.units import Unit
from certification.stats.errors import StatsError
from certification.stats.rccs import rccs


def rccs_section(units: Sequence[Unit]) -> dict[str, Any]:
    """Return the RCCS section of the calibration units with a candidate and a loss.

    Args:
        units: the calibration partition's units (candidates carry ``R`` and ``C``).

    Returns:
        ``rccs_correlation``, ``correlation_reason``, ``confidence_calibration_error``,
        ``mean_rc``, ``n``, ``n_dropped`` and ``reason``; when the statistic is undefined only
        ``n`` (0), ``n_dropped`` and ``reason``.
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
