"""Label conventions of an audit: the sentinels, the reasons a statistic is undefined, polarity.

:data:`UNAVAILABLE` (or ``None``) in the evaluator sequence and :data:`UNRESOLVED` (or ``None``) in
the human sequence are never verdicts and never dropped. A :class:`Polarity` declares the positive
labels of each side (positive = "error / not supported"); every other label is negative. The
reason strings are stored in reports, so their wording is part of the contract.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from certification.stats.errors import StatsError
from labeling.vocabulary import UNRESOLVED as UNRESOLVED

#: The evaluator produced no usable label for the item (its own row; never a verdict).
UNAVAILABLE = "unavailable"
# UNRESOLVED (the vocabulary's resolution status, re-exported above): the item has no resolved
# human label (its own column; never a verdict).

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


@dataclass(frozen=True)
class Polarity:
    """Which labels count as positive, for the people and for the evaluator.

    ``name`` says what "positive" means, shown with the statistics (``"error / not
    supported"``); every other resolved human label, and every other available evaluator label,
    is negative.

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

        Raises:
            StatsError: as the class.
        """
        labels = frozenset(positive)
        return cls(name=name, human_positive=labels, evaluator_positive=labels)


def evaluator_label_of(label: str | None) -> str:
    """The evaluator's label, or :data:`UNAVAILABLE` for None."""
    return UNAVAILABLE if label is None else label


def human_label_of(label: str | None) -> str:
    """The resolved human label, or :data:`UNRESOLVED` for None."""
    return UNRESOLVED if label is None else label


def check_aligned(evaluator_labels: Sequence[object], human_labels: Sequence[object]) -> None:
    """Raise StatsError unless the two label sequences are sequences of one length."""
    if isinstance(evaluator_labels, str) or isinstance(human_labels, str):
        raise StatsError("labels must be sequences of labels, not a single string")
    if len(evaluator_labels) != len(human_labels):
        raise StatsError(
            "evaluator and human labels must be aligned (one of each per item), got "
            f"{len(evaluator_labels)} and {len(human_labels)}"
        )
