"""The items where the evaluator and the people disagree, as rows of a downloadable table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from certification.stats.audit.labels import (
    UNAVAILABLE,
    UNRESOLVED,
    DisagreementKind,
    Polarity,
    evaluator_label_of,
    human_label_of,
)
from certification.stats.errors import StatsError


@dataclass(frozen=True)
class AuditRecord:
    """One audited item, aligned across the evaluator and the adjudicated human label.

    ``evaluator_label`` is :data:`UNAVAILABLE` or ``None`` when there is none, ``human_label``
    :data:`UNRESOLVED` or ``None`` when not resolved; ``rationale`` is "" when none was written.
    """

    item: str
    evaluator_label: str | None
    human_label: str | None
    rationale: str = ""


@dataclass(frozen=True)
class Disagreement:
    """One row of the documented disagreement table.

    ``kind`` is ``"false positive"`` (evaluator positive, people negative), ``"false negative"``
    (evaluator negative, people positive) or ``"label mismatch"`` (same polarity, different
    schema labels; only at ``level="label"``).
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

    Records keep their order. ``level="binary"`` lists the core's discordant items (the pairs
    McNemar counts); ``"label"`` also items whose polarity agrees but labels differ (meaningful
    when the evaluator speaks the people's schema).

    Raises:
        StatsError: if ``level`` is unknown.
    """
    if level not in ("binary", "label"):
        raise StatsError(f"level must be 'binary' or 'label', got {level!r}")
    rows: list[Disagreement] = []
    for record in records:
        e = evaluator_label_of(record.evaluator_label)
        h = human_label_of(record.human_label)
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
