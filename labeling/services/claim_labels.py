"""The one writer of claim labels and their evidence spans.

Four kinds of claim label carry evidence: an annotation revision's (``ClaimLabel`` with
``EvidenceSpan``), a resolution's (``ResolvedClaimLabel`` with ``ResolvedEvidence``: written by
adjudication, by the comparison of votes and by the workload import), an imported prior
annotation's (``PriorClaimLabel`` with ``PriorEvidence``) and a gold item's reference
(``GoldClaimLabel`` with ``GoldEvidence``). :func:`claim_labels_write` writes any of them:
the labels in the order given, then their evidence, label by label and span by span in the
order given, two bulk inserts in all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from labeling.models import (
    ClaimLabel,
    EvidenceSpan,
    GoldClaimLabel,
    GoldEvidence,
    PriorClaimLabel,
    PriorEvidence,
    ResolvedClaimLabel,
    ResolvedEvidence,
)

LabelRow = TypeVar("LabelRow", ClaimLabel, ResolvedClaimLabel, PriorClaimLabel, GoldClaimLabel)
EvidenceRow = TypeVar("EvidenceRow", EvidenceSpan, ResolvedEvidence, PriorEvidence, GoldEvidence)


class EvidenceLike(Protocol):
    """A cited span: offsets (code points) into a pinned source version and the quoted text."""

    @property
    def source_version_id(self) -> int: ...  # noqa: D102

    @property
    def start(self) -> int: ...  # noqa: D102

    @property
    def end(self) -> int: ...  # noqa: D102

    @property
    def quote(self) -> str: ...  # noqa: D102


@dataclass(frozen=True)
class Evidence:
    """A cited span, for callers whose spans name their source otherwise (the import)."""

    source_version_id: int
    start: int
    end: int
    quote: str


def claim_labels_write(
    evidence_model: type[EvidenceRow],
    labels: Sequence[tuple[LabelRow, Iterable[EvidenceLike]]],
    *,
    batch_size: int | None = None,
) -> tuple[list[LabelRow], list[EvidenceRow]]:
    """Insert unsaved claim label rows and, for each, its evidence rows of ``evidence_model``.

    Args:
        evidence_model: the evidence table of the labels' kind (``EvidenceSpan`` for
            ``ClaimLabel``, ``ResolvedEvidence`` for ``ResolvedClaimLabel``, ``PriorEvidence``
            for ``PriorClaimLabel``).
        labels: ``(unsaved label row, its evidence spans)`` pairs, all of one label model.
        batch_size: rows per INSERT statement (None: as many as the database takes).

    Returns:
        The saved label rows (with primary keys) and evidence rows, in the order given.
    """
    if not labels:
        return [], []
    model = type(labels[0][0])
    rows = model.objects.bulk_create([row for row, _ in labels], batch_size=batch_size)
    evidence = evidence_model.objects.bulk_create(
        [
            evidence_model(
                claim_label_id=row.pk,
                source_version_id=span.source_version_id,
                start=span.start,
                end=span.end,
                quote=span.quote,
            )
            for row, (_, spans) in zip(rows, labels, strict=True)
            for span in spans
        ],
        batch_size=batch_size,
    )
    return rows, evidence
