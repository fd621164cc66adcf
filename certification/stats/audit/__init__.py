"""Evaluator audit: how far an automated judge agrees with adjudicated human labels.

Labels come as two aligned ``Sequence[str | None]`` of length n_items: the evaluator's label and
the resolved human label of the same item. :data:`UNAVAILABLE` (or ``None``) on the evaluator side
gets its own row of the confusion matrix, :data:`UNRESOLVED` (or ``None``) on the human side its
own column; neither is ever dropped. A :class:`Polarity` declares each side's positive labels
(certlabel's convention: positive = "error / not supported"); the binary *core* is the 2 × 2
table of items with both labels, the rest stays in the 3 × 3 :class:`BinaryCounts`.

:func:`audit` computes on the core, each proportion with its integer counts and an exact
Clopper–Pearson interval: accuracy, sensitivity, specificity, PPV, NPV and both positive rates;
Cohen's kappa (Fleiss–Cohen–Everitt standard error, Wald interval), binary and over the full
schema when both sides speak it; McNemar's exact test. A zero denominator gives ``value`` None
with a ``reason``, never 0, 1 or NaN.

The intervals are exact for the audited items as a sample. With unequal inclusion probabilities,
PPV and NPV still estimate population quantities if the probability depends only on the
evaluator's verdict; the other figures describe the sample. ``weights`` (1 / inclusion
probability) give Hájek-weighted population point estimates (:class:`WeightedRates`), without
exact intervals.

Sources: Clopper and Pearson (1934); Cohen (1960); Fleiss, Cohen and Everitt (1969); McNemar
(1947), Psychometrika 12(2), 153–157, exact form as ``statsmodels`` ``mcnemar(table, exact=True)``.
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
