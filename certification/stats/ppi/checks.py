"""Input checks of the error-rate estimators: label codes, [0, 1] vectors, weights, strata."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from certification.stats.errors import StatsError
from certification.stats.intervals import check_counts
from certification.stats.ppi.results import MISSING, NEGATIVE, POSITIVE


def unit_vector(values: ArrayLike, *, name: str) -> NDArray[np.float64]:
    """Return a 1-D float vector of values in [0, 1] (labels or judge predictions).

    ``values`` (shape (n,)) are numeric or boolean; ``name`` words the error.

    Raises:
        StatsError: if ``values`` is not 1-D, not numeric, or holds a value outside [0, 1] or
            not finite.
    """
    array = np.asarray(values)
    if array.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise StatsError(f"{name} must be numeric, got dtype {array.dtype}")
    out = array.astype(np.float64)
    if out.size and not (np.all(np.isfinite(out)) and out.min() >= 0.0 and out.max() <= 1.0):
        raise StatsError(f"{name} must hold finite values in [0, 1] (labels or scores)")
    return out


def normalised_weights(weights: ArrayLike | None, n: int, *, name: str) -> NDArray[np.float64]:
    """Return Horvitz–Thompson weights rescaled to mean 1 (the Hájek form), or ones.

    ``weights`` (shape (n,), > 0) are 1 / inclusion probability, None for equal weights. The
    result sums to n.

    Raises:
        StatsError: if the shape is not (n,) or a weight is not finite and > 0.
    """
    if weights is None:
        return np.ones(n)
    array = np.asarray(weights, dtype=np.float64)
    if array.shape != (n,):
        raise StatsError(f"{name} must have shape ({n},), got {array.shape}")
    if n and not (np.all(np.isfinite(array)) and float(array.min()) > 0.0):
        raise StatsError(f"{name} must be finite and > 0 (1 / inclusion probability)")
    # ppi_py's convention: weights rescaled to mean 1, so only their ratios matter (Hájek).
    return array / array.sum() * n if n else array


def z_quantile(probability: float) -> float:
    """Return the standard normal quantile z_p of a probability p in (0, 1)."""
    return float(_st.norm.ppf(probability))


def stratum_arrays(
    errors: ArrayLike, sampled: ArrayLike, population: ArrayLike | None
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Return the per-stratum counts (errors k, sampled n, population N) as int64 arrays.

    Each has shape (H,): k_h, n_h >= k_h and N_h >= max(1, n_h); ``population`` None means one
    stratum (weight 1 whatever its size, N = ``[1]``).

    Raises:
        StatsError: on non-integer or negative counts, mismatched shapes, k_h > n_h, n_h > N_h,
            an empty stratum or more than one stratum without population sizes.
    """
    k = check_counts(errors, name="errors")
    n = check_counts(sampled, name="sampled")
    if k.shape != n.shape:
        raise StatsError(f"errors and sampled must have the same shape, got {k.shape}, {n.shape}")
    if population is None:
        if k.size != 1:
            raise StatsError("population sizes are needed when there is more than one stratum")
        big = np.ones(1, dtype=np.int64)  # one stratum: its weight is 1 whatever its size
    else:
        big = check_counts(population, name="population")
        if big.shape != k.shape:
            raise StatsError(
                f"population must have the same shape as sampled, got {big.shape}, {n.shape}"
            )
        if np.any(n > big):
            raise StatsError("a stratum cannot have more audited items than items")
        if np.any(big == 0):
            raise StatsError("every stratum must have at least one item (population >= 1)")
    if np.any(k > n):
        raise StatsError("errors must be <= sampled in every stratum")
    return k, n, big


def stratum_keys(strata: Sequence[Hashable] | None, size: int) -> tuple[Hashable, ...]:
    """Return the strata's keys for a report (0..size-1 when none are given).

    Raises:
        StatsError: if ``strata`` does not name exactly ``size`` strata.
    """
    if strata is None:
        return tuple(range(size))
    keys = tuple(strata)
    if len(keys) != size:
        raise StatsError(f"strata must name each of the {size} strata, got {len(keys)}")
    return keys


def label_codes(values: ArrayLike, *, name: str) -> NDArray[np.int64]:
    """Return a 1-D int64 array of label codes 1, 0 and -1.

    ``values`` (shape (n,)) are integer codes; ``name`` words the error.

    Raises:
        StatsError: if ``values`` is not 1-D, not integer (booleans refused) or holds another
            code.
    """
    array = np.asarray(values)
    if array.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
        raise StatsError(f"{name} must hold integer codes 1, 0 or -1, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.size and not np.isin(array, (POSITIVE, NEGATIVE, MISSING)).all():
        raise StatsError(f"{name} must hold only the codes 1, 0 and -1")
    return array
