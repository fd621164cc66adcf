"""RCCS: the retrieval-conditioned confidence score, a calibration diagnostic.

With retrieval relevance R, model confidence C (both in [0, 1]) and adjudicated correctness A (0/1)
per answer: rc = R * C, ``rccs_correlation`` = Pearson(rc, A), ``confidence_calibration_error`` =
mean(|rc - A|), ``mean_rc`` = mean(rc), n = rows used. It is a diagnostic, not a guarantee: it
carries no sampling statement.

Conventions: values outside [0, 1] or infinite are refused (no silent
clipping: a confidence of 1.2 is a bug upstream); a missing value (None or NaN) drops its row
(complete case) and ``n_dropped`` reports how many; the correlation is undefined — None with a
reason, never 0 or NaN — when n < 3 (two points always correlate perfectly) or when rc or A is
constant within a tolerance of 1e-12 (a product that is constant in exact arithmetic need not be
constant in floating point).

Source: devarakondasrikanth, "Proposal: Retrieval-Conditioned Confidence Metric (RCCS) for RAG
evaluation", which names the outputs rccs_correlation, confidence_calibration_error,
mean_rc and n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from certification.stats.errors import InsufficientDataError, StatsError

__all__ = ["CONSTANT_TOLERANCE", "RCCSResult", "rccs"]

#: Spread (max - min) at or below which a vector counts as constant.
CONSTANT_TOLERANCE = 1e-12


@dataclass(frozen=True)
class RCCSResult:
    """RCCS outputs for one set of answers.

    ``rccs_correlation`` = Pearson(R*C, A) in [-1, 1], None when undefined
    (``correlation_reason``); ``confidence_calibration_error`` = mean(|R*C - A|) and ``mean_rc``
    = mean(R*C), in [0, 1]; ``n`` >= 1 complete rows were used, ``n_dropped`` missed a value.
    """

    rccs_correlation: float | None
    correlation_reason: str | None
    confidence_calibration_error: float
    mean_rc: float
    n: int
    n_dropped: int


def _column(values: Sequence[float | None], name: str) -> NDArray[np.float64]:
    try:
        array = np.array([math.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        raise StatsError(f"{name} must hold numbers in [0, 1] or None") from None
    if array.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional, got shape {array.shape}")
    present = array[~np.isnan(array)]
    if np.isinf(present).any() or (present < 0).any() or (present > 1).any():
        raise StatsError(f"{name} must lie in [0, 1] (values are refused, not clipped)")
    return array


def rccs(
    retrieval: Sequence[float | None],
    confidence: Sequence[float | None],
    correctness: Sequence[float | None],
    *,
    constant_tolerance: float = CONSTANT_TOLERANCE,
) -> RCCSResult:
    """Compute the RCCS outputs with complete-case handling of missing values.

    Shape (n,) each, None or NaN = missing: ``retrieval`` R and ``confidence`` C in [0, 1],
    ``correctness`` A exactly 0 or 1 (missing e.g. when unresolved). rc or A counts as constant
    when max - min <= ``constant_tolerance``.

    Raises:
        StatsError: if the lengths differ, a value is non-numeric, infinite or outside [0, 1], or
            a correctness value is not 0/1.
        InsufficientDataError: if no row is complete.
    """
    r = _column(retrieval, "retrieval")
    c = _column(confidence, "confidence")
    a = _column(correctness, "correctness")
    if not (r.shape == c.shape == a.shape):
        raise StatsError(
            f"retrieval, confidence and correctness must have the same length, got "
            f"{r.shape[0]}, {c.shape[0]} and {a.shape[0]}"
        )
    present_a = a[~np.isnan(a)]
    if not np.all((present_a == 0) | (present_a == 1)):
        raise StatsError("correctness must be 0 or 1 (or None when missing)")
    complete = ~(np.isnan(r) | np.isnan(c) | np.isnan(a))
    n = int(np.count_nonzero(complete))
    dropped = int(r.shape[0]) - n
    if n == 0:
        raise InsufficientDataError(f"no complete row: all {dropped} rows have a missing value")
    rc = r[complete] * c[complete]
    a = a[complete]
    error = float(np.mean(np.abs(rc - a)))
    mean_rc = float(np.mean(rc))
    correlation: float | None = None
    reason: str | None = None
    if n < 3:
        reason = f"n = {n} < 3 complete rows: a correlation needs at least 3"
    elif float(np.ptp(rc)) <= constant_tolerance:
        reason = "R*C is constant: the correlation is undefined"
    elif float(np.ptp(a)) <= constant_tolerance:
        reason = "correctness is constant: the correlation is undefined"
    else:
        x = rc - rc.mean()
        y = a - a.mean()
        value = float(np.dot(x, y) / math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y))))
        correlation = max(-1.0, min(1.0, value))  # rounding can overshoot +-1 by an ulp
    return RCCSResult(
        rccs_correlation=correlation,
        correlation_reason=reason,
        confidence_calibration_error=error,
        mean_rc=mean_rc,
        n=n,
        n_dropped=dropped,
    )
