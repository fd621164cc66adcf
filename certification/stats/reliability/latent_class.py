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
(§3), with the E and M steps of Toloka's crowd-kit 1.4 (``crowdkit.aggregation.DawidSkene``, the
maintained reference implementation, which the tests compare against), in numpy over the
observed labels only: confusion counts are floored at 1e-10 before normalising. Only labels
that occur are classes of the model.

Stopping rule: EM runs until no posterior moves by ``tol`` or more in one iteration, or
``max_iter`` iterations; the estimate records the iterations, the last change and the tolerance.
crowd-kit stops on its per-label evidence bound instead, which is not monotone in EM and can stop
far from the fixed point.

Identifiability: with labels from one annotator only, or no unit labelled by two annotators,
the confusion matrices cannot be told apart from the class prior (any prior fits, each
annotator's answers explain themselves); the fit is then undefined and says why.

Shapes: ratings n_units × n_raters, ``Sequence[Sequence[Label | None]]``, with ``units`` and
``raters`` naming rows and columns; units without a label are left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from certification.stats.errors import StatsError
from certification.stats.reliability.rates import Label, check_shape

# The stopping tolerance on the largest change of a posterior in one EM iteration, and the
# iteration cap: a stored estimate records both. FaithBench's claim labels (1,516 units, 22
# annotators) need about 1,200 iterations.
DAWID_SKENE_MAX_ITER = 10_000
DAWID_SKENE_TOL = 1e-6
# The floor of a confusion count, a class prior and a posterior (crowd-kit's ``_EPS``).
EPSILON = 1e-10

ASSUMPTIONS = (
    "each item has one true label, drawn from a class prior shared by all items",
    "an annotator's confusion matrix (answer given the true label) is the same on every item",
    "annotators answer independently of each other given the true label",
)

NO_LABEL = "no label to fit"
NOT_IDENTIFIED = (
    "not identified: no item has labels from two or more annotators, so an annotator's "
    "confusion matrix cannot be told apart from the class prior"
)


@dataclass(frozen=True)
class DawidSkeneEstimate:
    """A fitted Dawid–Skene model.

    ``labels`` are sorted (every label in the ratings) and ``priors`` aligned with them; for
    each of ``raters`` (input order), ``confusion[r][j][l]`` = P(rater answers labels[l] | true
    label is labels[j]), rows summing to 1; for each of ``units``, ``posteriors[u][j]`` = P(true
    label = labels[j] | all labels). ``change`` is the largest absolute posterior change in the
    last of ``iterations``; ``converged`` = ``change < tol`` (False: the cap stopped EM first and
    the posteriors may be up to about ``change`` per iteration from the fixed point).
    """

    labels: tuple[Label, ...]
    priors: tuple[float, ...]
    raters: tuple[str, ...]
    confusion: tuple[tuple[tuple[float, ...], ...], ...]
    units: tuple[int, ...]
    posteriors: tuple[tuple[float, ...], ...]
    iterations: int
    change: float
    tol: float
    max_iter: int
    converged: bool

    def most_probable(self, unit_index: int) -> Label:
        """The label with the highest posterior for ``units[unit_index]`` (ties: first)."""
        row = self.posteriors[unit_index]
        return self.labels[int(np.argmax(row))]


@dataclass(frozen=True)
class DawidSkeneUndefined:
    """No Dawid–Skene estimate, and why (``NO_LABEL`` or ``NOT_IDENTIFIED``)."""

    reason: str


def _missing(label: object) -> bool:
    return label is None or (isinstance(label, float) and math.isnan(label))


def dawid_skene(
    ratings: Sequence[Sequence[Label | None]],
    raters: Sequence[str],
    units: Sequence[int],
    *,
    max_iter: int = DAWID_SKENE_MAX_ITER,
    tol: float = DAWID_SKENE_TOL,
) -> DawidSkeneEstimate | DawidSkeneUndefined:
    """Fit the Dawid–Skene model to the labels by EM, iterated to ``tol`` on the posteriors.

    ``ratings`` is n_units × n_raters labels (strings; ``None`` or NaN = not labelled) for the
    distinct ``raters`` and ``units``; ``max_iter`` >= 1; ``tol`` > 0. Undefined
    (:class:`DawidSkeneUndefined`) when the matrix holds no label or no unit has labels from two
    raters (the model is not identified).

    Raises:
        StatsError: ragged ratings, duplicate raters or units, units of the wrong length, a
            label that is not a string (naming its unit and rater), max_iter < 1 or tol <= 0.
    """
    check_shape(ratings, raters)
    if len(units) != len(ratings) or len(set(units)) != len(units):
        raise StatsError("units must name each ratings row once")
    if max_iter < 1 or not tol > 0:
        raise StatsError(f"max_iter must be >= 1 and tol > 0, got {max_iter} and {tol}")
    cells = []
    for u, row in enumerate(ratings):
        for r, label in enumerate(row):
            if _missing(label):
                continue
            if not isinstance(label, str):
                raise StatsError(
                    f"unit {units[u]}, rater {raters[r]}: label {label!r} is not a string"
                )
            cells.append((u, r, label))
    if not cells:
        return DawidSkeneUndefined(NO_LABEL)
    rated_by: dict[int, set[int]] = {}
    for u, r, _ in cells:
        rated_by.setdefault(u, set()).add(r)
    if all(len(who) < 2 for who in rated_by.values()):
        return DawidSkeneUndefined(NOT_IDENTIFIED)
    labels = tuple(sorted({label for _, _, label in cells}))
    # Only units and raters with a label take part; the arrays index them densely.
    unit_index = sorted(rated_by)
    rater_index = sorted({r for _, r, _ in cells})
    unit_pos = {u: i for i, u in enumerate(unit_index)}
    rater_pos = {r: i for i, r in enumerate(rater_index)}
    label_pos = {label: i for i, label in enumerate(labels)}
    task = np.fromiter((unit_pos[u] for u, _, _ in cells), dtype=np.intp, count=len(cells))
    worker = np.fromiter((rater_pos[r] for _, r, _ in cells), dtype=np.intp, count=len(cells))
    given = np.fromiter((label_pos[x] for _, _, x in cells), dtype=np.intp, count=len(cells))
    fit = _em(task, worker, given, (len(unit_index), len(rater_index), len(labels)), max_iter, tol)
    posteriors, priors, errors, iterations, change = fit
    # confusion[r][j][l] = P(answer l | true j): the transpose of errors[r] (observed x true).
    confusion = [
        tuple(tuple(float(p) for p in row) for row in errors[r].T) for r in range(len(rater_index))
    ]
    return DawidSkeneEstimate(
        labels=labels,
        priors=tuple(float(p) for p in priors / priors.sum()),
        raters=tuple(raters[r] for r in rater_index),
        confusion=tuple(confusion),
        units=tuple(units[u] for u in unit_index),
        posteriors=tuple(tuple(float(p) for p in row) for row in posteriors),
        iterations=iterations,
        change=change,
        tol=tol,
        max_iter=max_iter,
        converged=change < tol,
    )


def _em(
    task: np.ndarray,
    worker: np.ndarray,
    given: np.ndarray,
    shape: tuple[int, int, int],
    max_iter: int,
    tol: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:
    """EM of Dawid and Skene (1979) §2 over label observations, with crowd-kit 1.4's steps.

    ``task``, ``worker`` and ``given`` hold, per observed label, the indices of its unit, rater
    and label; ``shape`` is (n_units, n_raters, n_labels). Returns (posteriors n_units ×
    n_labels, priors n_labels, errors n_raters × n_labels (observed) × n_labels (true),
    iterations, the last iteration's largest posterior change), with ``errors[r, l, j]`` =
    P(rater r answers l | true j) (0 for a label the rater never gave).

    The start is each unit's vote shares and the M step from them. Each iteration: E step (in
    base-2 logarithms, each row shifted by its maximum), class prior = mean posterior, M step
    (sums of posteriors per rater and answer, floored at ``EPSILON`` where the rater gave that
    answer, normalised per rater and true label); EM stops when no posterior moved by ``tol``
    or more. The posteriors returned are floored at ``EPSILON`` (as crowd-kit's) and
    normalised.
    """
    n_units, n_raters, n_labels = shape
    cell = worker * n_labels + given  # the (rater, answer) pair of each observation
    gave = np.bincount(cell, minlength=n_raters * n_labels).reshape(n_raters, n_labels) > 0

    def m_step(probas: np.ndarray) -> np.ndarray:
        sums = np.stack(
            [
                np.bincount(cell, weights=probas[task, j], minlength=n_raters * n_labels)
                for j in range(n_labels)
            ],
            axis=1,
        ).reshape(n_raters, n_labels, n_labels)
        sums = np.where(gave[:, :, None], np.maximum(sums, EPSILON), 0.0)
        normalised: np.ndarray = sums / sums.sum(axis=1, keepdims=True)
        return normalised

    def by_unit(values: np.ndarray) -> np.ndarray:
        return np.stack(
            [np.bincount(task, weights=values[:, j], minlength=n_units) for j in range(n_labels)],
            axis=1,
        )

    votes = by_unit(np.eye(n_labels)[given])
    probas = votes / votes.sum(axis=1, keepdims=True)
    priors = probas.mean(axis=0)
    errors = m_step(probas)
    change, iterations = math.inf, 0
    while iterations < max_iter and not change < tol:
        log_likelihood = np.log2(np.maximum(priors, EPSILON)) + by_unit(
            np.log2(errors[worker, given])
        )
        scaled = np.exp2(log_likelihood - log_likelihood.max(axis=1, keepdims=True))
        updated = scaled / scaled.sum(axis=1, keepdims=True)
        change = float(np.max(np.abs(updated - probas)))
        probas = updated
        priors = probas.mean(axis=0)
        errors = m_step(probas)
        iterations += 1
    probas = np.maximum(probas, EPSILON)
    return probas / probas.sum(axis=1, keepdims=True), priors, errors, iterations, change
