"""Per-annotator rates against reference labels, each with an exact Clopper–Pearson interval.

Shapes. As in :mod:`certification.stats.agreement`, a *ratings* matrix is n_units × n_raters,
``Sequence[Sequence[Label | None]]`` (``None`` = the rater did not label the unit), with
``raters`` naming its columns. *references* is aligned with the units: one reference label per
unit, ``None`` where the unit has none (an unresolved item, an item without a gold reference).
Labels are nominal strings.

Per rater: :func:`accuracy_against` (accuracy, confusion matrix with reference rows, per-label
recall, kappa) and :func:`dispute_rates` (the share of labels on units whose labels differ).

Sources: Clopper, C. J. and Pearson, E. S. (1934), Biometrika 26(4), 404–413 (the exact
interval, as ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``); Cohen, J. (1960),
Educational and Psychological Measurement 20(1), 37–46 (kappa).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from certification.stats.agreement import CohenKappa, cohen_kappa
from certification.stats.errors import StatsError
from certification.stats.intervals import Proportion, check_open_unit, proportion_of

Label = str


#: Why a rate with no trial is undefined (never 0).
NO_TRIALS = "no trials: the rate is undefined"


def rate(numerator: int, denominator: int, *, confidence: float = 0.95) -> Proportion:
    """Return ``numerator / denominator`` with its two-sided exact interval.

    With no trial the value and interval are None and the reason :data:`NO_TRIALS`.

    Raises:
        StatsError: non-integer counts, numerator > denominator, confidence outside (0, 1).
    """
    check_open_unit(confidence, name="confidence")
    if denominator == 0:
        if numerator != 0:
            raise StatsError(f"numerator must be 0 when the denominator is, got {numerator}")
        numerator = 0
    return proportion_of(numerator, denominator, confidence, NO_TRIALS)


@dataclass(frozen=True)
class RaterAccuracy:
    """One rater's labels against the references (see :func:`accuracy_against`).

    ``accuracy`` = labels equal to the reference / labels on units with a reference.
    ``labels`` (sorted) is every label the rater or a reference used on the rater's units;
    ``confusion[i][j]`` counts units with reference ``labels[i]`` the rater labelled
    ``labels[j]``. ``per_label`` gives, per reference label, the share of those units the rater
    gave it. ``kappa`` is against the references (undefined under 2 units or no variation).
    """

    rater: str
    accuracy: Proportion
    labels: tuple[Label, ...]
    confusion: tuple[tuple[int, ...], ...]
    per_label: tuple[tuple[Label, Proportion], ...]
    kappa: CohenKappa


def check_shape(
    ratings: Sequence[Sequence[Label | None]], raters: Sequence[str], n_units: int | None = None
) -> None:
    """Raise StatsError unless the ratings are one row per unit, one entry per distinct rater."""
    if len(set(raters)) != len(raters):
        raise StatsError("rater ids must be distinct")
    for i, row in enumerate(ratings):
        if len(row) != len(raters):
            raise StatsError(f"ratings row {i} has {len(row)} entries, expected {len(raters)}")
    if n_units is not None and n_units != len(ratings):
        raise StatsError(f"references has {n_units} entries, expected one per unit")


def accuracy_against(
    ratings: Sequence[Sequence[Label | None]],
    raters: Sequence[str],
    references: Sequence[Label | None],
    *,
    confidence: float = 0.95,
) -> tuple[RaterAccuracy, ...]:
    """Each rater's accuracy, confusion matrix, per-label rates and kappa against references.

    ``ratings`` is n_units × n_raters labels (``None`` = not labelled); a ``None`` reference
    leaves the unit out of every figure. Raters without a unit with a reference are left out;
    the others come in ``raters`` order.

    Raises:
        StatsError: ragged ratings, duplicate raters, references of the wrong length, or a
            confidence outside (0, 1).
    """
    check_shape(ratings, raters, len(references))
    check_open_unit(confidence, name="confidence")
    results = []
    for column, rater in enumerate(raters):
        pairs = [
            (ref, row[column])
            for row, ref in zip(ratings, references, strict=True)
            if ref is not None and row[column] is not None
        ]
        if not pairs:
            continue
        labels = tuple(sorted({label for pair in pairs for label in pair if label is not None}))
        index = {label: i for i, label in enumerate(labels)}
        table = np.zeros((len(labels), len(labels)), dtype=np.int64)
        for ref, vote in pairs:
            table[index[ref], index[vote]] += 1  # type: ignore[index]
        correct = int(np.trace(table))
        per_label = tuple(
            (label, rate(int(table[i, i]), int(table[i].sum()), confidence=confidence))
            for i, label in enumerate(labels)
            if int(table[i].sum()) > 0
        )
        results.append(
            RaterAccuracy(
                rater=rater,
                accuracy=rate(correct, len(pairs), confidence=confidence),
                labels=labels,
                confusion=tuple(tuple(int(c) for c in row) for row in table),
                per_label=per_label,
                kappa=cohen_kappa(table, confidence=confidence),
            )
        )
    return tuple(results)


def dispute_rates(
    ratings: Sequence[Sequence[Label | None]],
    raters: Sequence[str],
    *,
    confidence: float = 0.95,
) -> dict[str, Proportion]:
    """Per rater: the share of their labels on compared units that sit on a disputed unit.

    A unit is *compared* when it has 2 or more labels, *disputed* when those labels are not all
    equal (at the answer level such an item enters the disagreement queue; at the claim level
    the claim is one of the differing claims shown to the adjudicator).

    ``ratings`` is n_units × n_raters labels (``None`` = not labelled). A rater with no compared
    unit has the undefined rate 0/0.

    Raises:
        StatsError: ragged ratings or duplicate raters.
    """
    check_shape(ratings, raters)
    disputed = dict.fromkeys(raters, 0)
    compared = dict.fromkeys(raters, 0)
    for row in ratings:
        present = [(rater, v) for rater, v in zip(raters, row, strict=True) if v is not None]
        if len(present) < 2:
            continue
        differs = len({v for _, v in present}) > 1
        for rater, _ in present:
            compared[rater] += 1
            disputed[rater] += int(differs)
    return {r: rate(disputed[r], compared[r], confidence=confidence) for r in raters}
