"""Input checks and the integer coding of a ratings matrix (n_units × n_raters, None = missing)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from certification.stats.agreement.results import MISSING, EncodedRatings, Label
from certification.stats.errors import StatsError


def encode_ratings(
    ratings: Sequence[Sequence[Label | None]], *, n_raters: int | None = None
) -> EncodedRatings:
    """Replace labels by integer codes.

    ``ratings`` rows share one length; ``None`` or a float NaN (as the ``krippendorff`` package
    reads it) is missing. ``n_raters`` shapes an empty matrix (0 × n_raters).

    Raises:
        StatsError: if the rows have different lengths (or not ``n_raters``) or a label is not
            hashable.
    """
    rows = [list(row) for row in ratings]
    width = n_raters if n_raters is not None else (len(rows[0]) if rows else 0)
    if any(len(row) != width for row in rows):
        raise StatsError(
            f"ratings must be rectangular with one entry per rater ({width}) in every unit"
        )
    try:
        labels = {value for row in rows for value in row if not is_missing(value)}
    except TypeError as exc:
        raise StatsError(f"labels must be hashable: {exc}") from None
    categories = tuple(sorted(labels, key=repr))
    index = {label: i for i, label in enumerate(categories)}
    codes = np.full((len(rows), width), MISSING, dtype=np.int64)
    for u, row in enumerate(rows):
        for r, value in enumerate(row):
            if not is_missing(value):
                codes[u, r] = index[value]
    return EncodedRatings(codes=codes, categories=categories)


def is_missing(value: Any) -> bool:
    """True for a missing rating: None or a float NaN (NaN never equals itself as a label)."""
    return value is None or (isinstance(value, float | np.floating) and math.isnan(value))


def check_table(table: ArrayLike) -> NDArray[np.int64]:
    """Return ``table`` as a square table of non-negative int64 counts, or raise StatsError."""
    array = np.asarray(table)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise StatsError(f"table must be a square k x k array, got shape {array.shape}")
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
        raise StatsError(f"table must hold integer counts, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.size and int(array.min()) < 0:
        raise StatsError("table counts must be >= 0")
    return array


def normal_quantile(confidence: float) -> float:
    """The standard normal quantile of a two-sided interval at ``confidence``."""
    return float(_st.norm.ppf(0.5 + confidence / 2.0))
