"""Prediction sets of new questions (their top M* classes) and their evaluation on a test split.

P(s_test <= M*) >= 1 - alpha for exchangeable questions (split conformal, Vovk et al. 2005;
Angelopoulos and Bates 2021, arXiv:2107.07511, section 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from certification.stats.conformal.scores import FrequencyProfile
from certification.stats.conformal.threshold import ConformalThreshold, check_scores
from certification.stats.errors import StatsError


@dataclass(frozen=True)
class PredictionSet:
    """The top-M* classes of one question, by rank.

    When M* is infinite the set is formally every possible answer: ``classes`` then lists all
    sampled classes and ``trivial`` is True.
    """

    classes: tuple[str, ...]
    trivial: bool

    @property
    def size(self) -> int | None:
        """Number of classes in the set, or None for a trivial (unbounded) set."""
        return None if self.trivial else len(self.classes)


def prediction_set(
    profile: FrequencyProfile, threshold: ConformalThreshold | float
) -> PredictionSet:
    """The top M* classes of ``profile`` (all its classes when it has fewer than M*).

    ``profile`` must use the calibration's canonicaliser and tie rule; ``threshold`` is M*, an
    integer >= 1 or ``inf``.

    Raises:
        StatsError: if the threshold is not an integer >= 1 or ``inf``.
    """
    value = threshold.threshold if isinstance(threshold, ConformalThreshold) else float(threshold)
    if math.isinf(value) and value > 0:
        return PredictionSet(classes=profile.classes, trivial=True)
    if not (value >= 1 and value == math.floor(value)):
        raise StatsError(f"threshold must be an integer >= 1 or inf, got {threshold!r}")
    return PredictionSet(classes=profile.classes[: int(value)], trivial=False)


@dataclass(frozen=True)
class SetEvaluation:
    """Coverage and set size of top-M* sets on a set of questions (test or calibration).

    ``covered`` counts questions with s_i <= M* (the conformal event; a trivial set covers
    everything), ``coverage`` = covered / n; ``n_solvable`` counts questions with an admissible
    sampled class (s_i finite), ``coverage_solvable`` = covered_solvable / n_solvable.
    ``set_size_counts`` are (size, questions) pairs ascending (empty when M* is infinite);
    ``mean_set_size`` is the mean of min(M*, classes sampled). None values carry ``reason``.
    """

    threshold: float
    n: int
    covered: int
    coverage: float | None
    n_solvable: int
    covered_solvable: int
    coverage_solvable: float | None
    set_size_counts: tuple[tuple[int, int], ...]
    mean_set_size: float | None
    reason: str | None


def evaluate_sets(
    scores: ArrayLike, n_classes: ArrayLike, threshold: ConformalThreshold | float
) -> SetEvaluation:
    """Coverage, coverage on solvable questions and the set-size distribution at M*.

    A question's set is its top min(M*, c_i) classes (c_i = classes sampled); it covers iff
    s_i <= M*. "Solvable" means some admissible class was sampled (s_i finite): coverage there
    separates calibration quality from a capability gap (Mouzouni 2026, section 4).

    ``scores`` (shape (n,)) are rank scores and ``n_classes`` (shape (n,)) the distinct classes
    sampled per question (>= s_i when s_i is finite). When M* is infinite every set is trivial:
    coverage is n / n and the set sizes are undefined (None, with a reason).

    Raises:
        StatsError: on malformed or mismatched inputs.
    """
    array = check_scores(scores)
    classes = np.asarray(n_classes)
    if classes.shape != array.shape or not np.issubdtype(classes.dtype, np.integer):
        raise StatsError(
            f"n_classes must be integers with the shape of scores {array.shape}, got "
            f"{classes.shape} {classes.dtype}"
        )
    finite = np.isfinite(array)
    if (classes < 0).any() or (array[finite] > classes[finite]).any():
        raise StatsError("n_classes must be >= 0 and >= every finite score")
    value = threshold.threshold if isinstance(threshold, ConformalThreshold) else float(threshold)
    n = int(array.shape[0])
    covered_mask = array <= value
    covered = int(np.count_nonzero(covered_mask))
    n_solvable = int(np.count_nonzero(finite))
    covered_solvable = int(np.count_nonzero(covered_mask & finite))
    reasons = []
    if n == 0:
        reasons.append("no questions")
    if n_solvable == 0:
        reasons.append("no solvable question (no admissible answer was sampled)")
    if math.isinf(value):
        reasons.append("M* is infinite: every set is the whole answer space")
        size_counts: tuple[tuple[int, int], ...] = ()
        mean_size = None
    else:
        sizes = np.minimum(classes, int(value))
        values, counts = np.unique(sizes, return_counts=True)
        size_counts = tuple(
            (int(v), int(c)) for v, c in zip(values.tolist(), counts.tolist(), strict=True)
        )
        mean_size = float(sizes.mean()) if n else None
    return SetEvaluation(
        threshold=value,
        n=n,
        covered=covered,
        coverage=covered / n if n else None,
        n_solvable=n_solvable,
        covered_solvable=covered_solvable,
        coverage_solvable=covered_solvable / n_solvable if n_solvable else None,
        set_size_counts=size_counts,
        mean_set_size=mean_size,
        reason="; ".join(reasons) or None,
    )
