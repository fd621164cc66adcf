"""Evaluator audit: how far an automated judge agrees with adjudicated human labels.

An *evaluator* (an LLM judge, a detector such as HHEM or an NLI model) labels items; a sample of
the same items is labelled blind by people and adjudicated. This package compares the two on the
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

Modules: :mod:`~certification.stats.audit.labels` (sentinels, reasons, polarity),
:mod:`~certification.stats.audit.matrix` (confusion matrix and binary counts),
:mod:`~certification.stats.audit.proportions` (exact intervals, McNemar),
:mod:`~certification.stats.audit.metrics` (:func:`audit`, :func:`audit_by_slice`) and
:mod:`~certification.stats.audit.disagreements`. Every public name is importable from
``certification.stats.audit``.
"""

from certification.stats.audit.disagreements import AuditRecord, Disagreement, disagreements
from certification.stats.audit.labels import (
    DISAGREEMENT_COLUMNS,
    LABELS_NOT_COMPARABLE,
    NO_COMPARED_ITEMS,
    NO_EVALUATOR_NEGATIVES,
    NO_EVALUATOR_POSITIVES,
    NO_HUMAN_NEGATIVES,
    NO_HUMAN_POSITIVES,
    UNAVAILABLE,
    UNRESOLVED,
    DisagreementKind,
    Polarity,
)
from certification.stats.audit.matrix import BinaryCounts, ConfusionMatrix, confusion_matrix
from certification.stats.audit.metrics import (
    AuditMetrics,
    WeightedRates,
    audit,
    audit_by_slice,
    metrics_from_matrix,
)
from certification.stats.audit.proportions import McNemarExact, Proportion, mcnemar_exact

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
    "DisagreementKind",
]
