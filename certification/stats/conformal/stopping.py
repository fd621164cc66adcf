"""The Hoeffding sequential stopping rule: stop sampling a question once its mode is stable.

The rule must be applied identically to calibration and test questions; it follows the sequential
stopping rule of the reference code of Mouzouni (2026), arXiv:2602.21368.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.canonical import Canonicaliser
from certification.stats.conformal.scores import resolve_canonicaliser
from certification.stats.conformal.vectorised import check_codes, run_starts, sorted_runs
from certification.stats.errors import StatsError
from certification.stats.intervals import check_count, check_open_unit


def hoeffding_epsilon(k: int, delta: float) -> float:
    """eps_k = sqrt(ln(2/delta) / (2k)), the Hoeffding half-width after k samples.

    Raises:
        StatsError: if k < 1 or delta is outside (0, 1).

    Source: Hoeffding (1963); Mouzouni (2026) reference code. Check: at delta 0.05, k = 2 / 8 / 100
    give 0.960323 / 0.480161 / 0.135810.
    """
    size = check_count(k, name="k")
    if size < 1:
        raise StatsError("k must be >= 1")
    d = check_open_unit(delta, name="delta")
    return math.sqrt(math.log(2 / d) / (2 * size))


def should_stop(mode_count: int, k: int, *, delta: float, min_samples: int = 2) -> bool:
    """Stop iff k >= min_samples and mode_count / k - eps_k > 1/2.

    ``mode_count`` lies in [0, k]; stopping starts at k = ``min_samples`` (the reference code
    uses 2).

    Raises:
        StatsError: on non-integer counts, mode_count > k, or delta outside (0, 1).
    """
    count = check_count(mode_count, name="mode_count")
    size = check_count(k, name="k")
    if count > size:
        raise StatsError(f"mode_count={count} exceeds k={size}")
    eps = hoeffding_epsilon(size, delta)
    return size >= check_count(min_samples, name="min_samples") and count / size - eps > 0.5


@dataclass(frozen=True)
class StoppingResult:
    """Where sequential stopping ended for one question (the first ``samples_used`` are kept)."""

    samples_used: int
    samples_available: int

    @property
    def stopped_early(self) -> bool:
        """Whether the rule fired before the samples ran out."""
        return self.samples_used < self.samples_available

    @property
    def samples_saved(self) -> int:
        """samples_available - samples_used."""
        return self.samples_available - self.samples_used


def sequential_stop(
    samples: Sequence[str],
    *,
    delta: float,
    canonicaliser: Canonicaliser | str = "exact",
    min_samples: int = 2,
) -> StoppingResult:
    """Replay the Hoeffding stopping rule over one question's samples, in sampling order.

    The mode is counted on canonical classes, and the same rule (delta, canonicaliser,
    min_samples) must be applied to calibration and test questions.

    Raises:
        StatsError: on a bad delta, canonicaliser or sample.
    """
    check_open_unit(delta, name="delta")
    canon = resolve_canonicaliser(canonicaliser)
    counts: Counter[str] = Counter()
    mode = 0
    for k, answer in enumerate(samples, start=1):
        cls = canon(answer)
        counts[cls] += 1
        mode = max(mode, counts[cls])
        if should_stop(mode, k, delta=delta, min_samples=min_samples):
            return StoppingResult(k, len(samples))
    return StoppingResult(len(samples), len(samples))


@dataclass(frozen=True, eq=False)
class StoppingSummary:
    """Sequential stopping over n questions: ``int64`` (n,) samples kept and drawn per question."""

    samples_used: NDArray[np.int64]
    samples_available: NDArray[np.int64]

    @property
    def total_used(self) -> int:
        """The sum of ``samples_used``."""
        return int(self.samples_used.sum())

    @property
    def total_available(self) -> int:
        """The sum of ``samples_available``."""
        return int(self.samples_available.sum())

    @property
    def samples_saved(self) -> int:
        """total_available - total_used."""
        return self.total_available - self.total_used

    @property
    def fraction_saved(self) -> float | None:
        """samples_saved / total_available, or None when nothing was available."""
        total = self.total_available
        return self.samples_saved / total if total else None


def sequential_stop_codes(
    codes: ArrayLike, *, delta: float, min_samples: int = 2
) -> StoppingSummary:
    """Vectorised :func:`sequential_stop` over integer-coded samples (columns in sampling order).

    ``codes`` is ``int`` (n, K), -1 = no sample (trailing only). Pass ``samples_used`` to
    :func:`truncate_codes` for the samples the calibration (or test) then uses.

    Raises:
        StatsError: on malformed codes or a bad delta.
    """
    code_arr = check_codes(codes)
    first = check_count(min_samples, name="min_samples")
    check_open_unit(delta, name="delta")
    n, width = code_arr.shape
    valid_in_order = code_arr >= 0
    available = valid_in_order.sum(axis=1).astype(np.int64)
    used = available.copy()
    if width:
        # occurrence[i, t] = how many of the first t + 1 samples share sample t's class; the
        # mode count after t + 1 samples is its running maximum (a count grows only when its
        # class is drawn).
        classes, _, positions, pad = sorted_runs(code_arr, None)
        _, start = run_starts(classes, pad)
        index = np.arange(width, dtype=np.int64)
        run_start = np.maximum.accumulate(np.where(start, index, 0), axis=1)
        occurrence = np.empty((n, width), dtype=np.int64)
        np.put_along_axis(occurrence, positions, index - run_start + 1, axis=1)
        mode = np.maximum.accumulate(np.where(valid_in_order, occurrence, 0), axis=1)
        k = index + 1
        # the scalar function, so calibration and replay agree to the last bit at a boundary
        eps = np.array([hoeffding_epsilon(int(size), delta) for size in k])
        fire = valid_in_order & (k >= max(first, 1)) & (mode / k - eps > 0.5)
        fired = fire.any(axis=1)
        used = np.where(fired, fire.argmax(axis=1) + 1, available).astype(np.int64)
    return StoppingSummary(samples_used=used, samples_available=available)


def truncate_codes(codes: ArrayLike, samples_used: ArrayLike) -> NDArray[np.int64]:
    """Keep the first ``samples_used[i]`` samples of each row; the rest become -1.

    ``codes`` is ``int`` (n, K), ``samples_used`` ``int`` (n,) in 0..K. Returns a new ``int64``
    array.

    Raises:
        StatsError: on malformed or mismatched arrays.
    """
    code_arr = check_codes(codes)
    used = np.asarray(samples_used)
    if used.shape != (code_arr.shape[0],) or not np.issubdtype(used.dtype, np.integer):
        raise StatsError(f"samples_used must be integers of shape ({code_arr.shape[0]},)")
    if (used < 0).any() or (used > code_arr.shape[1]).any():
        raise StatsError("samples_used must lie in [0, K]")
    keep = np.arange(code_arr.shape[1])[None, :] < used[:, None]
    return np.where(keep, code_arr, -1)
