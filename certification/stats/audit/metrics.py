"""The audit metrics of one evaluator: from a confusion matrix, from label sequences, per slice.

Accuracy, sensitivity, specificity, PPV, NPV and positive rates on the binary core, each with an
exact interval; Cohen's kappa of the binary core and of the full label schema
(:func:`certification.stats.agreement.cohen_kappa`); McNemar's exact test; and, given weights
(1 / inclusion probability), Hájek-weighted population point estimates without an interval.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.agreement import CohenKappa, cohen_kappa
from certification.stats.audit.labels import (
    LABELS_NOT_COMPARABLE,
    NO_COMPARED_ITEMS,
    NO_EVALUATOR_NEGATIVES,
    NO_EVALUATOR_POSITIVES,
    NO_HUMAN_NEGATIVES,
    NO_HUMAN_POSITIVES,
    UNAVAILABLE,
    UNRESOLVED,
    Polarity,
    check_aligned,
    evaluator_label_of,
    human_label_of,
)
from certification.stats.audit.matrix import ConfusionMatrix, confusion_matrix, label_order
from certification.stats.audit.proportions import (
    McNemarExact,
    Proportion,
    mcnemar_exact,
    proportion_of,
)
from certification.stats.errors import StatsError
from certification.stats.intervals import (
    check_open_unit,
)


@dataclass(frozen=True)
class WeightedRates:
    """Hájek-weighted population point estimates from an unequal-probability audit sample.

    Each rate is sum(w · numerator indicator) / sum(w · denominator indicator) over the compared
    items, with w = 1 / inclusion probability; None (with the reason in ``reasons``) when the
    weighted denominator is 0. These are consistent point estimates of the population rates under
    the sampling design; they carry no exact interval (the Clopper–Pearson intervals of
    :class:`AuditMetrics` are for the audited items as a sample).
    """

    accuracy: float | None
    sensitivity: float | None
    specificity: float | None
    ppv: float | None
    npv: float | None
    human_positive_rate: float | None
    evaluator_positive_rate: float | None
    reasons: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class AuditMetrics:
    """Everything the audit reports for one evaluator version (or one slice of it).

    ``matrix`` includes unavailable and unresolved items; ``n_compared`` counts the binary core
    (evaluator available, human resolved), the denominator of the rates; ``sensitivity`` is the
    share of human positives the evaluator flags, ``ppv`` the share of its flags people confirm.
    ``label_kappa`` is over the full label schema, undefined (:data:`LABELS_NOT_COMPARABLE`) when
    the evaluator uses labels people do not; ``weighted`` is set when weights were given. Rates
    (also :class:`WeightedRates`'): accuracy (TP + TN) / n, sensitivity TP / (TP + FN),
    specificity TN / (TN + FP), PPV TP / (TP + FP), NPV TN / (TN + FN), positive rates
    (TP + FN) / n and (TP + FP) / n, with n = ``n_compared``.
    """

    matrix: ConfusionMatrix
    confidence: float
    n_total: int
    n_compared: int
    n_unavailable: int
    n_unresolved: int
    accuracy: Proportion
    sensitivity: Proportion
    specificity: Proportion
    ppv: Proportion
    npv: Proportion
    human_positive_rate: Proportion
    evaluator_positive_rate: Proportion
    kappa: CohenKappa
    label_kappa: CohenKappa
    mcnemar: McNemarExact
    weighted: WeightedRates | None


def _label_kappa(matrix: ConfusionMatrix, confidence: float) -> CohenKappa:
    rows = [label for label in matrix.evaluator_labels if label != UNAVAILABLE]
    cols = [label for label in matrix.human_labels if label != UNRESOLVED]
    counts = matrix.as_array()[:-1, :-1]
    n = int(counts.sum())
    col_index = {label: j for j, label in enumerate(cols)}
    used_rows = [i for i, label in enumerate(rows) if counts[i].sum() > 0]
    if any(rows[i] not in col_index for i in used_rows):
        return CohenKappa(n, None, None, None, None, None, None, confidence, LABELS_NOT_COMPARABLE)
    square = np.zeros((len(cols), len(cols)), dtype=np.int64)
    for i in used_rows:
        square[col_index[rows[i]]] += counts[i]
    return cohen_kappa(square, confidence=confidence)


def metrics_from_matrix(
    matrix: ConfusionMatrix,
    *,
    confidence: float = 0.95,
    weighted: WeightedRates | None = None,
) -> AuditMetrics:
    """Compute every audit statistic from a confusion matrix.

    Undefined statistics carry a reason: every proportion :data:`NO_COMPARED_ITEMS` when the core
    is empty; sensitivity :data:`NO_HUMAN_POSITIVES` (and so on) when only its own denominator is
    zero; kappa as :func:`certification.stats.agreement.cohen_kappa`.

    Raises:
        StatsError: if ``confidence`` is outside (0, 1).

    Check: TP 40, FN 10, FP 5, TN 145: sensitivity 0.8, CP95 (0.662817, 0.899698); specificity
    0.966667, CP95 (0.923928, 0.989090); accuracy 0.925; McNemar exact p 0.3017578125.
    """
    level = check_open_unit(confidence, name="confidence")
    b = matrix.binary
    n = b.n_compared

    def rate(k: int, d: int, reason: str) -> Proportion:
        return proportion_of(k, d, level, NO_COMPARED_ITEMS if n == 0 else reason)

    return AuditMetrics(
        matrix=matrix,
        confidence=level,
        n_total=b.n_total,
        n_compared=n,
        n_unavailable=b.n_unavailable,
        n_unresolved=b.n_unresolved,
        accuracy=rate(b.tp + b.tn, n, NO_COMPARED_ITEMS),
        sensitivity=rate(b.tp, b.tp + b.fn, NO_HUMAN_POSITIVES),
        specificity=rate(b.tn, b.tn + b.fp, NO_HUMAN_NEGATIVES),
        ppv=rate(b.tp, b.tp + b.fp, NO_EVALUATOR_POSITIVES),
        npv=rate(b.tn, b.tn + b.fn, NO_EVALUATOR_NEGATIVES),
        human_positive_rate=rate(b.tp + b.fn, n, NO_COMPARED_ITEMS),
        evaluator_positive_rate=rate(b.tp + b.fp, n, NO_COMPARED_ITEMS),
        kappa=cohen_kappa(b.core(), confidence=level),
        label_kappa=_label_kappa(matrix, level),
        mcnemar=mcnemar_exact(b.fn, b.fp),
        weighted=weighted,
    )


def _check_weights(weights: ArrayLike, n: int) -> NDArray[np.float64]:
    array = np.asarray(weights, dtype=np.float64)
    if array.shape != (n,):
        raise StatsError(f"weights must have shape ({n},), got {array.shape}")
    if n and not (np.all(np.isfinite(array)) and float(array.min()) > 0.0):
        raise StatsError("weights must be finite and > 0 (1 / inclusion probability)")
    return array


def _weighted_rates(
    evaluator_labels: Sequence[str | None],
    human_labels: Sequence[str | None],
    polarity: Polarity,
    weights: NDArray[np.float64],
) -> WeightedRates:
    ev = [evaluator_label_of(e) for e in evaluator_labels]
    hu = [human_label_of(h) for h in human_labels]
    compared = np.array([e != UNAVAILABLE and h != UNRESOLVED for e, h in zip(ev, hu, strict=True)])
    e_pos = np.array([e in polarity.evaluator_positive for e in ev], dtype=bool) & compared
    h_pos = np.array([h in polarity.human_positive for h in hu], dtype=bool) & compared
    e_neg = compared & ~e_pos
    h_neg = compared & ~h_pos
    reasons: list[tuple[str, str]] = []

    def ratio(name: str, num: NDArray[np.bool_], den: NDArray[np.bool_], why: str) -> float | None:
        total = float(weights[den].sum())
        if total <= 0.0:
            reasons.append((name, NO_COMPARED_ITEMS if not compared.any() else why))
            return None
        return float(weights[num & den].sum()) / total

    agree = (e_pos & h_pos) | (e_neg & h_neg)
    return WeightedRates(
        accuracy=ratio("accuracy", agree, compared, NO_COMPARED_ITEMS),
        sensitivity=ratio("sensitivity", e_pos, h_pos, NO_HUMAN_POSITIVES),
        specificity=ratio("specificity", e_neg, h_neg, NO_HUMAN_NEGATIVES),
        ppv=ratio("ppv", h_pos, e_pos, NO_EVALUATOR_POSITIVES),
        npv=ratio("npv", h_neg, e_neg, NO_EVALUATOR_NEGATIVES),
        human_positive_rate=ratio("human_positive_rate", h_pos, compared, NO_COMPARED_ITEMS),
        evaluator_positive_rate=ratio(
            "evaluator_positive_rate", e_pos, compared, NO_COMPARED_ITEMS
        ),
        reasons=tuple(reasons),
    )


def audit(
    evaluator_labels: Sequence[str | None],
    human_labels: Sequence[str | None],
    polarity: Polarity,
    *,
    confidence: float = 0.95,
    evaluator_order: Sequence[str] | None = None,
    human_order: Sequence[str] | None = None,
    weights: ArrayLike | None = None,
) -> AuditMetrics:
    """Audit an evaluator against resolved human labels: confusion matrix and every statistic.

    ``None`` or :data:`UNAVAILABLE` means no evaluator label, ``None`` or :data:`UNRESOLVED` no
    resolved human label. ``weights`` (shape (n_items,), all > 0) are 1 / inclusion probability;
    given, :attr:`AuditMetrics.weighted` holds Hájek-weighted population point estimates
    (sensitivity and specificity need them when the sample over-represents one verdict).

    Raises:
        StatsError: if the sequences are not aligned, a declared order repeats a label, the
            weights have the wrong shape or a non-positive value, or ``confidence`` is outside
            (0, 1).

    See the module docstring for the sources and for what the intervals describe.
    """
    matrix = confusion_matrix(
        evaluator_labels,
        human_labels,
        polarity,
        evaluator_order=evaluator_order,
        human_order=human_order,
    )
    weighted = None
    if weights is not None:
        weighted = _weighted_rates(
            evaluator_labels,
            human_labels,
            polarity,
            _check_weights(weights, len(evaluator_labels)),
        )
    return metrics_from_matrix(matrix, confidence=confidence, weighted=weighted)


def audit_by_slice(
    evaluator_labels: Sequence[str | None],
    human_labels: Sequence[str | None],
    slices: Sequence[Hashable],
    polarity: Polarity,
    *,
    confidence: float = 0.95,
    evaluator_order: Sequence[str] | None = None,
    human_order: Sequence[str] | None = None,
    weights: ArrayLike | None = None,
) -> dict[Hashable, AuditMetrics]:
    """Audit every slice (domain, question type, generator, ...) separately.

    Every slice's table has the same rows and columns (the labels seen anywhere, after the
    declared orders), so the tables compare cell by cell.

    A ``None`` slice key is a slice of its own, never dropped. Returns slices in order of the
    keys' ``repr``; no multiplicity correction: each slice's interval is at ``confidence`` alone.

    Raises:
        StatsError: as :func:`audit`, or if ``slices`` is not aligned with the labels or holds an
            unhashable key.
    """
    check_aligned(evaluator_labels, human_labels)
    if len(slices) != len(evaluator_labels):
        raise StatsError(
            f"slices must have one key per item ({len(evaluator_labels)}), got {len(slices)}"
        )
    array_weights = None if weights is None else _check_weights(weights, len(evaluator_labels))
    ev_order = label_order(evaluator_order, map(evaluator_label_of, evaluator_labels), UNAVAILABLE)
    hu_order = label_order(human_order, map(human_label_of, human_labels), UNRESOLVED)
    members: dict[Hashable, list[int]] = {}
    try:
        for i, key in enumerate(slices):
            members.setdefault(key, []).append(i)
    except TypeError as exc:
        raise StatsError(f"slice keys must be hashable: {exc}") from None
    result: dict[Hashable, AuditMetrics] = {}
    for key in sorted(members, key=repr):
        index = members[key]
        result[key] = audit(
            [evaluator_labels[i] for i in index],
            [human_labels[i] for i in index],
            polarity,
            confidence=confidence,
            evaluator_order=ev_order,
            human_order=hu_order,
            weights=None if array_weights is None else array_weights[index],
        )
    return result
