"""Dawid–Skene latent-class estimates: each rater's confusion matrix and each unit's posterior.

A model estimate, not a label. The model (Dawid, A. P. and Skene, A. M. (1979), "Maximum
likelihood estimation of observer error-rates using the EM algorithm", Journal of the Royal
Statistical Society, Series C 28(1), 20–28, §2) assumes:

1. each unit has one true label z, drawn from the class prior p (the same for every unit);
2. rater r, given the true label j, answers l with probability pi_r[j, l], the same for every
   unit (class-conditional confusion constant across items: no item is harder than another);
3. raters answer independently of each other given the true label (conditional independence:
   two raters who share a misreading violate it, and the model then over-trusts their
   agreement).

Its parameters are fitted by EM from the labels alone, started from the majority-vote shares
(§3). The fit is computed by Toloka's crowd-kit (``crowdkit.aggregation.DawidSkene``, the
maintained reference implementation): its confusion matrices are clipped at 1e-10 before
normalising, and EM stops when the per-label evidence lower bound improves by less than
``tol`` or after ``max_iter`` iterations. Only labels that occur are classes of the model.

Shapes: ratings n_units × n_raters, ``Sequence[Sequence[Label | None]]``, with ``units`` and
``raters`` naming rows and columns; units without a label are left out.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from crowdkit.aggregation import DawidSkene

from certification.stats.errors import StatsError
from certification.stats.reliability.rates import Label, _check_shape

# crowd-kit's defaults (n_iter, tol), named here because a stored estimate records them.
DAWID_SKENE_MAX_ITER = 100
DAWID_SKENE_TOL = 1e-5

ASSUMPTIONS = (
    "each item has one true label, drawn from a class prior shared by all items",
    "an annotator's confusion matrix (answer given the true label) is the same on every item",
    "annotators answer independently of each other given the true label",
)


@dataclass(frozen=True)
class DawidSkeneEstimate:
    """A fitted Dawid–Skene model.

    Attributes:
        labels: the classes, sorted (every label that occurs in the ratings).
        priors: estimated class prior, aligned with ``labels``, sums to 1.
        raters: raters with at least one label, in input order.
        confusion: per rater (aligned with ``raters``), ``len(labels)`` × ``len(labels)``
            probabilities: ``confusion[r][j][l]`` = P(rater answers labels[l] | true label is
            labels[j]); each row sums to 1.
        units: units with at least one label, in input order.
        posteriors: per unit (aligned with ``units``), P(true label = labels[j] | all labels).
        iterations: EM iterations run.
        converged: whether EM stopped on ``tol`` before ``max_iter``.
    """

    labels: tuple[Label, ...]
    priors: tuple[float, ...]
    raters: tuple[str, ...]
    confusion: tuple[tuple[tuple[float, ...], ...], ...]
    units: tuple[int, ...]
    posteriors: tuple[tuple[float, ...], ...]
    iterations: int
    converged: bool

    def most_probable(self, unit_index: int) -> Label:
        """The label with the highest posterior for ``units[unit_index]`` (ties: first)."""
        row = self.posteriors[unit_index]
        return self.labels[int(np.argmax(row))]


def dawid_skene(
    ratings: Sequence[Sequence[Label | None]],
    raters: Sequence[str],
    units: Sequence[int],
    *,
    max_iter: int = DAWID_SKENE_MAX_ITER,
    tol: float = DAWID_SKENE_TOL,
) -> DawidSkeneEstimate | None:
    """Fit the Dawid–Skene model to the labels (crowd-kit's EM); None without any label.

    Args:
        ratings: n_units × n_raters labels, ``None`` = not labelled.
        raters: the n_raters column ids, distinct.
        units: the n_units row ids, distinct.
        max_iter: the EM iteration cap (>= 1).
        tol: the stopping tolerance on the per-label evidence lower bound (> 0).

    Returns:
        A :class:`DawidSkeneEstimate`, or None when the matrix holds no label.

    Raises:
        StatsError: ragged ratings, duplicate raters or units, units of the wrong length,
            max_iter < 1 or tol <= 0.
    """
    _check_shape(ratings, raters)
    if len(units) != len(ratings) or len(set(units)) != len(units):
        raise StatsError("units must name each ratings row once")
    if max_iter < 1 or not tol > 0:
        raise StatsError(f"max_iter must be >= 1 and tol > 0, got {max_iter} and {tol}")
    rows = [
        (unit, rater, label)
        for unit, row in zip(units, ratings, strict=True)
        for rater, label in zip(raters, row, strict=True)
        if label is not None
    ]
    if not rows:
        return None
    data = pd.DataFrame(rows, columns=["task", "worker", "label"])
    model = DawidSkene(n_iter=max_iter, tol=tol)
    with warnings.catch_warnings():
        # crowd-kit 1.4 passes pandas keywords (inplace=, copy=) that pandas 3 deprecates.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        model.fit(data)
    probas, fitted_priors, errors = model.probas_, model.priors_, model.errors_
    if probas is None or fitted_priors is None or errors is None:  # pragma: no cover
        raise StatsError("crowd-kit's DawidSkene returned no fit")
    labels = tuple(sorted(data["label"].unique()))
    labelled_units, labelled_raters = set(data["task"]), set(data["worker"])
    kept_units = tuple(u for u in units if u in labelled_units)
    kept_raters = tuple(r for r in raters if r in labelled_raters)
    probas = probas.reindex(index=list(kept_units), columns=list(labels)).fillna(0.0)
    posteriors = probas.to_numpy(dtype=float)
    posteriors = posteriors / posteriors.sum(axis=1, keepdims=True)
    priors = fitted_priors.reindex(list(labels)).fillna(0.0).to_numpy(dtype=float)
    # errors: index (worker, observed label), columns: true label
    confusion = []
    for rater in kept_raters:
        block = errors.xs(rater, level="worker").reindex(index=list(labels), columns=list(labels))
        # A label the rater never gave has no row: probability 0 for it.
        matrix = block.fillna(0.0).to_numpy(dtype=float).T  # rows: true label
        matrix = matrix / matrix.sum(axis=1, keepdims=True)
        confusion.append(tuple(tuple(float(p) for p in row) for row in matrix))
    iterations = len(model.loss_history_)
    return DawidSkeneEstimate(
        labels=labels,
        priors=tuple(float(p) for p in priors / priors.sum()),
        raters=kept_raters,
        confusion=tuple(confusion),
        units=kept_units,
        posteriors=tuple(tuple(float(p) for p in row) for row in posteriors),
        iterations=iterations,
        converged=iterations < max_iter,
    )
