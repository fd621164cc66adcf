"""Evaluator audit: how far an automated judge agrees with adjudicated human labels.

An *evaluator* (an LLM judge, a detector such as HHEM or an NLI model) labels items; a sample of
the same items is labelled blind by people and adjudicated. This module compares the two on the
items that have both.

Shapes. Labels come as two aligned sequences of length n_items, ``Sequence[str | None]``: the
evaluator's label and the resolved human label of the same item. Two values are never verdicts
and are never dropped:

- :data:`UNAVAILABLE` (or ``None``) in the evaluator sequence: the evaluator returned nothing
  usable (time-out, refusal, parse failure). It gets its own *row* of the confusion matrix.
- :data:`UNRESOLVED` (or ``None``) in the human sequence: the item has no resolved human label yet
  (adjudication pending or impossible). It gets its own *column*.

Polarity. The binary statistics need to know which labels are "positive"; certlabel's convention
is positive = "error / not supported", the reference is the resolved human label.
A :class:`Polarity` declares the positive labels of each side (the evaluator may speak a binary
vocabulary, e.g. ``"hallucinated"``, while people use the policy's schema). Every other label is
negative. The binary *core* is the 2 × 2 table of items where the evaluator is available and the
human label is resolved; the counts outside it stay in the 3 × 3 :class:`BinaryCounts`.

What is computed (:func:`audit`), all on the core, each proportion with its integer numerator and
denominator and a two-sided exact Clopper–Pearson interval (reusing
:mod:`certification.stats.intervals`):

- accuracy, sensitivity TP/(TP+FN), specificity TN/(TN+FP), PPV TP/(TP+FP), NPV TN/(TN+FN), and the
  evaluator's and the people's positive rates;
- Cohen's kappa of the binary core with the Fleiss–Cohen–Everitt standard error and Wald interval
  (:func:`certification.stats.agreement.cohen_kappa`), and the same over the full label schema
  when the evaluator speaks the people's labels;
- McNemar's exact test on the discordant pairs (:func:`mcnemar_exact`).

A statistic with a zero denominator is undefined: ``value`` None and a ``reason``, never 0, 1 or
NaN.

What the numbers describe. The intervals are exact for the *audited items as a sample*. When the
audit sample was drawn with unequal inclusion probabilities (e.g. stratified by evaluator verdict
with more flagged items than their share), PPV and NPV still estimate population quantities, as
long as every item with the same evaluator verdict had the same inclusion probability (they
condition on the verdict); sensitivity, specificity, accuracy and kappa then describe the sample,
not the population. Pass ``weights`` (1 / inclusion probability) to :func:`audit` for Hájek-weighted
population point estimates (:class:`WeightedRates`); those have no exact interval.

Sources: Clopper and Pearson (1934) for the intervals; Cohen (1960) and Fleiss, Cohen and Everitt
(1969) for kappa; McNemar, Q. (1947), "Note on the sampling error of the difference between
correlated proportions or percentages", Psychometrika 12(2), 153–157, exact (binomial) form as in
``statsmodels.stats.contingency_tables.mcnemar(table, exact=True)``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from certification.stats.agreement import CohenKappa, cohen_kappa
from certification.stats.errors import StatsError
from certification.stats.intervals import (
    Interval,
    check_count,
    check_open_unit,
    clopper_pearson,
)

__all__ = [
    "DISAGREEMENT_COLUMNS",
    "LABELS_NOT_COMPARABLE",
    "NO_COMPARED_ITEMS",
    "NO_EVALUATOR_NEGATIVES",
    "NO_EVALUATOR_POSITIVES",
    "NO_HUMAN_NEGATIVES",
    "NO_HUMAN_POSITIVES",
    "UNAVAILABLE",
    "UNRESOLVED",
    "AuditMetrics",
    "AuditRecord",
    "BinaryCounts",
    "ConfusionMatrix",
    "Disagreement",
    "McNemarExact",
    "Polarity",
    "Proportion",
    "WeightedRates",
    "audit",
    "audit_by_slice",
    "confusion_matrix",
    "disagreements",
    "mcnemar_exact",
    "metrics_from_matrix",
]

#: The evaluator produced no usable label for the item (its own row; never a verdict).
UNAVAILABLE = "unavailable"
#: The item has no resolved human label (its own column; never a verdict).
UNRESOLVED = "unresolved"

# Reasons a statistic is undefined; stored in reports, so their wording is part of the contract.
NO_COMPARED_ITEMS = "no item with both an evaluator label and a resolved human label"
NO_HUMAN_POSITIVES = "no human positives among the compared items"
NO_HUMAN_NEGATIVES = "no human negatives among the compared items"
NO_EVALUATOR_POSITIVES = "no evaluator positives among the compared items"
NO_EVALUATOR_NEGATIVES = "no evaluator negatives among the compared items"
LABELS_NOT_COMPARABLE = "the evaluator's labels are not in the human label schema"

#: Column names of the downloadable disagreement table, in :meth:`Disagreement.as_row` order.
DISAGREEMENT_COLUMNS = (
    "item",
    "evaluator_label",
    "human_label",
    "kind",
    "adjudicator_rationale",
)

DisagreementKind = Literal["false positive", "false negative", "label mismatch"]


# -- polarity ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Polarity:
    """Which labels count as positive, for the people and for the evaluator.

    Attributes:
        name: what "positive" means, shown with the statistics, e.g. ``"error / not supported"``.
        human_positive: human labels counted positive; every other resolved label is negative.
        evaluator_positive: evaluator labels counted positive; every other available label is
            negative.

    Raises:
        StatsError: if a positive set is empty or contains :data:`UNAVAILABLE`,
            :data:`UNRESOLVED` or ``None`` (they are never verdicts).
    """

    name: str
    human_positive: frozenset[str]
    evaluator_positive: frozenset[str]

    def __post_init__(self) -> None:
        """Refuse an empty positive set or one holding a sentinel."""
        for side, labels in (
            ("human_positive", self.human_positive),
            ("evaluator_positive", self.evaluator_positive),
        ):
            if not isinstance(labels, frozenset) or not labels:
                raise StatsError(f"{side} must be a non-empty frozenset of labels")
            if None in labels or labels & {UNAVAILABLE, UNRESOLVED}:
                raise StatsError(f"{side} may not contain {UNAVAILABLE!r}, {UNRESOLVED!r} or None")

    @classmethod
    def same(cls, positive: Iterable[str], *, name: str = "error / not supported") -> Polarity:
        """Return a polarity for an evaluator that uses the people's label schema.

        Args:
            positive: labels counted positive on both sides, e.g. ``{"unsupported",
                "contradicted"}``.
            name: what "positive" means.

        Returns:
            The :class:`Polarity` with the same positive set on both sides.

        Raises:
            StatsError: as the class.
        """
        labels = frozenset(positive)
        return cls(name=name, human_positive=labels, evaluator_positive=labels)


def _evaluator_label(label: str | None) -> str:
    return UNAVAILABLE if label is None else label


def _human_label(label: str | None) -> str:
    return UNRESOLVED if label is None else label


def _check_aligned(evaluator_labels: Sequence[object], human_labels: Sequence[object]) -> None:
    if isinstance(evaluator_labels, str) or isinstance(human_labels, str):
        raise StatsError("labels must be sequences of labels, not a single string")
    if len(evaluator_labels) != len(human_labels):
        raise StatsError(
            "evaluator and human labels must be aligned (one of each per item), got "
            f"{len(evaluator_labels)} and {len(human_labels)}"
        )


# -- confusion matrix -------------------------------------------------------------------------
@dataclass(frozen=True)
class BinaryCounts:
    """The 3 × 3 binary table derived by a :class:`Polarity`; nothing is dropped.

    Rows are evaluator {positive, negative, unavailable}, columns human {positive, negative,
    unresolved}. The 2 × 2 core is TP, FP, FN, TN.

    Attributes:
        tp: evaluator positive, human positive.
        fp: evaluator positive, human negative.
        fn: evaluator negative, human positive.
        tn: evaluator negative, human negative.
        unavailable_positive: evaluator unavailable, human positive.
        unavailable_negative: evaluator unavailable, human negative.
        unavailable_unresolved: evaluator unavailable, human unresolved.
        unresolved_flagged: evaluator positive, human unresolved.
        unresolved_unflagged: evaluator negative, human unresolved.
    """

    tp: int
    fp: int
    fn: int
    tn: int
    unavailable_positive: int
    unavailable_negative: int
    unavailable_unresolved: int
    unresolved_flagged: int
    unresolved_unflagged: int

    @property
    def n_compared(self) -> int:
        """Items in the core: evaluator available and human label resolved."""
        return self.tp + self.fp + self.fn + self.tn

    @property
    def n_unavailable(self) -> int:
        """Items the evaluator did not label (any human column)."""
        return self.unavailable_positive + self.unavailable_negative + self.unavailable_unresolved

    @property
    def n_unresolved(self) -> int:
        """Items without a resolved human label (any evaluator row)."""
        return self.unresolved_flagged + self.unresolved_unflagged + self.unavailable_unresolved

    @property
    def n_total(self) -> int:
        """Every item in the table."""
        return (
            self.n_compared
            + self.n_unavailable
            + self.unresolved_flagged
            + self.unresolved_unflagged
        )

    def as_table(self) -> tuple[tuple[int, int, int], ...]:
        """Return the 3 × 3 table as nested tuples.

        Rows are evaluator (positive, negative, unavailable), columns human (positive, negative,
        unresolved).
        """
        return (
            (self.tp, self.fp, self.unresolved_flagged),
            (self.fn, self.tn, self.unresolved_unflagged),
            (self.unavailable_positive, self.unavailable_negative, self.unavailable_unresolved),
        )

    def core(self) -> NDArray[np.int64]:
        """Return the 2 × 2 core ``[[TP, FP], [FN, TN]]`` (rows evaluator, columns human)."""
        return np.array([[self.tp, self.fp], [self.fn, self.tn]], dtype=np.int64)


@dataclass(frozen=True)
class ConfusionMatrix:
    """Evaluator labels (rows) against resolved human labels (columns), every label kept.

    Attributes:
        evaluator_labels: row labels; the declared order first, then labels seen but not declared
            (sorted), then :data:`UNAVAILABLE` (always present, possibly with zero counts).
        human_labels: column labels, likewise, ending with :data:`UNRESOLVED`.
        counts: ``len(evaluator_labels) × len(human_labels)`` integer counts, as nested tuples
            (immutable and JSON-friendly); ``counts[i][j]`` items the evaluator labelled
            ``evaluator_labels[i]`` and people ``human_labels[j]``.
        polarity: the declared polarity.
        binary: the 3 × 3 binary table derived from ``counts`` by ``polarity``.
    """

    evaluator_labels: tuple[str, ...]
    human_labels: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]
    polarity: Polarity
    binary: BinaryCounts

    @property
    def n_total(self) -> int:
        """Every item in the table."""
        return sum(sum(row) for row in self.counts)

    def as_array(self) -> NDArray[np.int64]:
        """Return ``counts`` as a fresh ``int64`` array (rows evaluator, columns human)."""
        return np.array(self.counts, dtype=np.int64).reshape(
            len(self.evaluator_labels), len(self.human_labels)
        )


def _label_order(declared: Sequence[str] | None, seen: Iterable[str], sentinel: str) -> list[str]:
    order = [label for label in (declared or ()) if label != sentinel]
    if len(set(order)) != len(order):
        raise StatsError("a declared label order may not repeat a label")
    known = set(order)
    order += sorted({label for label in seen if label not in known and label != sentinel})
    return [*order, sentinel]


def confusion_matrix(
    evaluator_labels: Sequence[str | None],
    human_labels: Sequence[str | None],
    polarity: Polarity,
    *,
    evaluator_order: Sequence[str] | None = None,
    human_order: Sequence[str] | None = None,
) -> ConfusionMatrix:
    """Cross-tabulate evaluator labels against resolved human labels.

    Args:
        evaluator_labels: shape (n_items,); :data:`UNAVAILABLE` or ``None`` = no evaluator label.
        human_labels: shape (n_items,), the same items; :data:`UNRESOLVED` or ``None`` = no
            resolved human label.
        polarity: which labels are positive on each side.
        evaluator_order: the evaluator's label schema in display order; declared labels get a row
            even when no item has them.
        human_order: the human label schema in display order, likewise for columns.

    Returns:
        The :class:`ConfusionMatrix`. n_items = 0 gives an all-zero table with only the declared
        labels and the two sentinels.

    Raises:
        StatsError: if the sequences have different lengths or a declared order repeats a label.
    """
    _check_aligned(evaluator_labels, human_labels)
    pairs = Counter(
        (_evaluator_label(e), _human_label(h))
        for e, h in zip(evaluator_labels, human_labels, strict=True)
    )
    rows = _label_order(evaluator_order, (e for e, _ in pairs), UNAVAILABLE)
    cols = _label_order(human_order, (h for _, h in pairs), UNRESOLVED)
    counts = tuple(tuple(pairs.get((r, c), 0) for c in cols) for r in rows)
    return ConfusionMatrix(
        evaluator_labels=tuple(rows),
        human_labels=tuple(cols),
        counts=counts,
        polarity=polarity,
        binary=_binary(pairs, polarity),
    )


def _binary(pairs: Mapping[tuple[str, str], int], polarity: Polarity) -> BinaryCounts:
    cells: Counter[tuple[str, str]] = Counter()
    for (e, h), count in pairs.items():
        row = "u" if e == UNAVAILABLE else ("p" if e in polarity.evaluator_positive else "n")
        col = "u" if h == UNRESOLVED else ("p" if h in polarity.human_positive else "n")
        cells[row, col] += count
    return BinaryCounts(
        tp=cells["p", "p"],
        fp=cells["p", "n"],
        fn=cells["n", "p"],
        tn=cells["n", "n"],
        unavailable_positive=cells["u", "p"],
        unavailable_negative=cells["u", "n"],
        unavailable_unresolved=cells["u", "u"],
        unresolved_flagged=cells["p", "u"],
        unresolved_unflagged=cells["n", "u"],
    )


# -- statistics -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Proportion:
    """A proportion with its counts and exact interval, or undefined.

    Attributes:
        numerator: integer count of successes.
        denominator: integer count of trials (0 makes the proportion undefined).
        value: numerator / denominator in [0, 1], or None when undefined.
        interval: two-sided Clopper–Pearson interval, or None when undefined.
        reason: why the proportion is undefined, or None.
    """

    numerator: int
    denominator: int
    value: float | None
    interval: Interval | None
    reason: str | None

    @property
    def defined(self) -> bool:
        """Whether the proportion has a value."""
        return self.value is not None

    @property
    def lower(self) -> float | None:
        """Lower interval limit in [0, 1], or None."""
        return None if self.interval is None else self.interval.lower

    @property
    def upper(self) -> float | None:
        """Upper interval limit in [0, 1], or None."""
        return None if self.interval is None else self.interval.upper


def _proportion(k: int, n: int, confidence: float, reason: str) -> Proportion:
    if n == 0:
        return Proportion(k, n, None, None, reason)
    return Proportion(k, n, k / n, clopper_pearson(k, n, confidence=confidence), None)


@dataclass(frozen=True)
class McNemarExact:
    """McNemar's exact test of marginal homogeneity on the binary core.

    H0: P(evaluator positive, human negative) = P(evaluator negative, human positive), i.e. the
    evaluator flags as often as people do. Under H0, given the n discordant items, the false
    positives are Binomial(n, 1/2).

    Attributes:
        false_negatives: discordant items the evaluator missed (evaluator negative, human
            positive); statsmodels' b for the table ``[[TP, FN], [FP, TN]]``.
        false_positives: discordant items the evaluator flagged wrongly; statsmodels' c.
        n_discordant: ``false_negatives + false_positives``.
        statistic: min(b, c), the binomial count the p-value is computed from.
        p_value: two-sided exact p-value min(1, 2 P[Binomial(n, 1/2) <= min(b, c)]), in (0, 1];
            1 when there is no discordant item (the test has no information; a p-value of 1
            never rejects, as for a threshold that accepts nothing).
    """

    false_negatives: int
    false_positives: int
    n_discordant: int
    statistic: int
    p_value: float


def mcnemar_exact(false_negatives: int, false_positives: int) -> McNemarExact:
    """McNemar's exact (binomial) test from the two discordant counts.

    Args:
        false_negatives: integer count b >= 0 (evaluator negative, human positive).
        false_positives: integer count c >= 0 (evaluator positive, human negative).

    Returns:
        The :class:`McNemarExact`. The tail sum is computed in exact rational arithmetic, so the
        p-value is the correctly rounded value of 2 sum_{i <= min(b, c)} C(n, i) / 2^n.

    Raises:
        StatsError: if a count is not a non-negative integer.

    Source: McNemar (1947); ``statsmodels.stats.contingency_tables.mcnemar(table, exact=True)``
    (``2 * binom.cdf(min(b, c), b + c, 0.5)``, capped at 1). Check: b = 10, c = 5 gives
    0.3017578125.
    """
    b = check_count(false_negatives, name="false_negatives")
    c = check_count(false_positives, name="false_positives")
    n = b + c
    low = min(b, c)
    tail = Fraction(sum(math.comb(n, i) for i in range(low + 1)), 2**n)
    return McNemarExact(
        false_negatives=b,
        false_positives=c,
        n_discordant=n,
        statistic=low,
        p_value=float(min(Fraction(1), 2 * tail)),
    )


@dataclass(frozen=True)
class WeightedRates:
    """Hájek-weighted population point estimates from an unequal-probability audit sample.

    Each rate is sum(w · numerator indicator) / sum(w · denominator indicator) over the compared
    items, with w = 1 / inclusion probability; None (with the reason in ``reasons``) when the
    weighted denominator is 0. These are consistent point estimates of the population rates under
    the sampling design; they carry no exact interval (the Clopper–Pearson intervals of
    :class:`AuditMetrics` are for the audited items as a sample).

    Attributes:
        accuracy: weighted (TP + TN) / compared.
        sensitivity: weighted TP / (TP + FN).
        specificity: weighted TN / (TN + FP).
        ppv: weighted TP / (TP + FP).
        npv: weighted TN / (TN + FN).
        human_positive_rate: weighted (TP + FN) / compared.
        evaluator_positive_rate: weighted (TP + FP) / compared.
        reasons: (rate name, reason) for each undefined rate.
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

    Attributes:
        matrix: the full confusion matrix, unavailable and unresolved included.
        confidence: two-sided level of every interval, in (0, 1).
        n_total: items in the table.
        n_compared: items in the binary core (evaluator available, human resolved); the
            denominator of accuracy.
        n_unavailable: items the evaluator did not label.
        n_unresolved: items without a resolved human label.
        accuracy: (TP + TN) / n_compared.
        sensitivity: TP / (TP + FN), the share of human positives the evaluator flags.
        specificity: TN / (TN + FP).
        ppv: TP / (TP + FP), the share of evaluator flags people confirm.
        npv: TN / (TN + FN).
        human_positive_rate: (TP + FN) / n_compared.
        evaluator_positive_rate: (TP + FP) / n_compared.
        kappa: Cohen's kappa of the binary core with standard error and Wald interval.
        label_kappa: Cohen's kappa over the full label schema (items with both labels), or
            undefined (:data:`LABELS_NOT_COMPARABLE`) when the evaluator uses labels people do not.
        mcnemar: McNemar's exact test on the core's discordant pairs.
        weighted: Hájek-weighted population point estimates, when weights were given.
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

    Args:
        matrix: from :func:`confusion_matrix`.
        confidence: two-sided level of the Clopper–Pearson and kappa intervals, in (0, 1).
        weighted: weighted population estimates to attach (see :func:`audit`), or None.

    Returns:
        The :class:`AuditMetrics`. Undefined statistics carry a reason: every proportion is
        undefined with :data:`NO_COMPARED_ITEMS` when the core is empty; sensitivity with
        :data:`NO_HUMAN_POSITIVES` (and so on) when only its own denominator is zero; kappa as
        :func:`certification.stats.agreement.cohen_kappa` (fewer than 2 items, no variation).

    Raises:
        StatsError: if ``confidence`` is outside (0, 1).

    Check: TP 40, FN 10, FP 5, TN 145: sensitivity 0.8, CP95 (0.662817, 0.899698); specificity
    0.966667, CP95 (0.923928, 0.989090); accuracy 0.925; McNemar exact p 0.3017578125.
    """
    level = check_open_unit(confidence, name="confidence")
    b = matrix.binary
    n = b.n_compared

    def rate(k: int, d: int, reason: str) -> Proportion:
        return _proportion(k, d, level, NO_COMPARED_ITEMS if n == 0 else reason)

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
    ev = [_evaluator_label(e) for e in evaluator_labels]
    hu = [_human_label(h) for h in human_labels]
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

    Args:
        evaluator_labels: shape (n_items,); :data:`UNAVAILABLE` or ``None`` = no evaluator label.
        human_labels: shape (n_items,), the same items; :data:`UNRESOLVED` or ``None`` = not
            resolved.
        polarity: which labels are positive (certlabel's convention: "error / not supported").
        confidence: two-sided level of every interval, in (0, 1).
        evaluator_order: the evaluator's label schema in display order (optional).
        human_order: the human label schema in display order (optional).
        weights: shape (n_items,), 1 / inclusion probability of each item in the audit sample,
            all > 0; when given, :attr:`AuditMetrics.weighted` holds Hájek-weighted population
            point estimates (sensitivity and specificity need them when the sample over-represents
            one evaluator verdict).

    Returns:
        :func:`metrics_from_matrix` of :func:`confusion_matrix`.

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

    Args:
        evaluator_labels: shape (n_items,), as :func:`audit`.
        human_labels: shape (n_items,), as :func:`audit`.
        slices: shape (n_items,), the slice key of each item along one dimension; ``None`` is a
            slice of its own ("no value"), never dropped.
        polarity: which labels are positive.
        confidence: two-sided level of every interval, in (0, 1).
        evaluator_order: the evaluator's label schema in display order (optional).
        human_order: the human label schema in display order (optional).
        weights: shape (n_items,), 1 / inclusion probability, as :func:`audit` (optional).

    Returns:
        ``{slice key: AuditMetrics}`` in order of the keys' ``repr``; slices whose statistics are
        undefined (a slice without human positives has no sensitivity) report them as such. No
        multiplicity correction is applied: each slice's interval is at ``confidence`` on its own.

    Raises:
        StatsError: as :func:`audit`, or if ``slices`` is not aligned with the labels or holds an
            unhashable key.
    """
    _check_aligned(evaluator_labels, human_labels)
    if len(slices) != len(evaluator_labels):
        raise StatsError(
            f"slices must have one key per item ({len(evaluator_labels)}), got {len(slices)}"
        )
    array_weights = None if weights is None else _check_weights(weights, len(evaluator_labels))
    ev_order = _label_order(evaluator_order, map(_evaluator_label, evaluator_labels), UNAVAILABLE)
    hu_order = _label_order(human_order, map(_human_label, human_labels), UNRESOLVED)
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


# -- disagreements ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditRecord:
    """One audited item, aligned across the evaluator and the adjudicated human label.

    Attributes:
        item: the item's identifier (shown in the disagreement table).
        evaluator_label: the evaluator's label, :data:`UNAVAILABLE` or ``None`` if none.
        human_label: the resolved human label, :data:`UNRESOLVED` or ``None`` if not resolved.
        rationale: the adjudicator's rationale for the resolved label ("" if none was written).
    """

    item: str
    evaluator_label: str | None
    human_label: str | None
    rationale: str = ""


@dataclass(frozen=True)
class Disagreement:
    """One row of the documented disagreement table.

    Attributes:
        item: the item's identifier.
        evaluator_label: what the evaluator said.
        human_label: the resolved human label.
        kind: ``"false positive"`` (evaluator positive, people negative), ``"false negative"``
            (evaluator negative, people positive) or ``"label mismatch"`` (same polarity,
            different schema labels; only at ``level="label"``).
        rationale: the adjudicator's rationale.
    """

    item: str
    evaluator_label: str
    human_label: str
    kind: DisagreementKind
    rationale: str

    def as_row(self) -> tuple[str, str, str, str, str]:
        """Return the row in :data:`DISAGREEMENT_COLUMNS` order, for a CSV download."""
        return (self.item, self.evaluator_label, self.human_label, self.kind, self.rationale)


def disagreements(
    records: Iterable[AuditRecord],
    polarity: Polarity,
    *,
    level: Literal["binary", "label"] = "binary",
) -> tuple[Disagreement, ...]:
    """List the items on which the evaluator and the resolved human label disagree.

    Items with an unavailable evaluator label or an unresolved human label are not
    disagreements (they are counted in their own row and column of the confusion matrix).

    Args:
        records: the audited items, in the order the table should keep.
        polarity: which labels are positive.
        level: ``"binary"`` lists the core's discordant items (false positives and false
            negatives, the pairs McNemar counts); ``"label"`` also lists items whose polarity
            agrees but whose labels differ (meaningful when the evaluator speaks the people's
            schema).

    Returns:
        The :class:`Disagreement` rows in input order; empty when there is none.

    Raises:
        StatsError: if ``level`` is unknown.
    """
    if level not in ("binary", "label"):
        raise StatsError(f"level must be 'binary' or 'label', got {level!r}")
    rows: list[Disagreement] = []
    for record in records:
        e = _evaluator_label(record.evaluator_label)
        h = _human_label(record.human_label)
        if e == UNAVAILABLE or h == UNRESOLVED:
            continue
        e_pos = e in polarity.evaluator_positive
        h_pos = h in polarity.human_positive
        kind: DisagreementKind | None = None
        if e_pos and not h_pos:
            kind = "false positive"
        elif h_pos and not e_pos:
            kind = "false negative"
        elif level == "label" and e != h:
            kind = "label mismatch"
        if kind is not None:
            rows.append(Disagreement(str(record.item), e, h, kind, record.rationale))
    return tuple(rows)
