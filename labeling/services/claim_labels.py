"""The one writer of claim labels and their evidence spans.

Four kinds of claim label carry evidence: an annotation revision's (``ClaimLabel`` with
``EvidenceSpan``), a resolution's (``ResolvedClaimLabel`` with ``ResolvedEvidence``: written by
adjudication, by the comparison of votes and by the workload import), an imported prior
annotation's (``PriorClaimLabel`` with ``PriorEvidence``) and a gold item's reference
(``GoldClaimLabel`` with ``GoldEvidence``). :func:`claim_labels_write` writes any of them:
the labels in the order given, then their evidence, label by label and span by span in the
order given, two bulk inserts in all. Whole-project work gives plain rows instead (no model
instance per row): the workload import to :func:`claim_label_rows_insert` (``COPY`` on
PostgreSQL, ids reserved up front), the comparison of votes, which a start runs on every item
and a submit on one, to :func:`claim_label_values_write` (ids from the INSERT: two statements).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from django.db import models

from labeling.bulk import insert_rows
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
from labeling.rows import insert, insert_like

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
) -> tuple[list[LabelRow], list[EvidenceRow]]:
    """Insert unsaved claim label rows and, for each, its evidence rows of ``evidence_model``.

    Args:
        evidence_model: the evidence table of the labels' kind (``EvidenceSpan`` for
            ``ClaimLabel``, ``ResolvedEvidence`` for ``ResolvedClaimLabel``, ``PriorEvidence``
            for ``PriorClaimLabel``).
        labels: ``(unsaved label row, its evidence spans)`` pairs, all of one label model.

    Returns:
        The saved label rows (with primary keys) and evidence rows, in the order given.
    """
    # Plain statements (labeling/rows.py): every submit writes its claim labels.
    rows = insert([row for row, _ in labels])
    evidence = insert(
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
        ]
    )
    return rows, evidence


EVIDENCE_COLUMNS = ("claim_label_id", "source_version_id", "start", "end", "quote")

# A cited span as a plain row: (source version id, start, end, quote).
EvidenceRowValues = tuple[int, int, int, str]


def claim_label_rows_insert(
    label_model: type[models.Model],
    label_columns: Sequence[str],
    evidence_model: type[models.Model],
    labels: Sequence[tuple[Sequence[Any], Sequence[EvidenceRowValues]]],
) -> tuple[int, int]:
    """Insert claim labels given as plain rows and, for each, its evidence rows.

    The import's path to what :func:`claim_labels_write` does: the same rows in the same order
    (labels in the order given, then their evidence label by label, span by span), through
    :func:`labeling.bulk.insert_rows`.

    Args:
        label_model: the label table (``PriorClaimLabel``, ``ResolvedClaimLabel``).
        label_columns: its database columns, in the order of each label row's values.
        evidence_model: the evidence table of the labels' kind (``PriorEvidence``,
            ``ResolvedEvidence``).
        labels: ``(label row values, its spans as (source version id, start, end, quote))``.

    Returns:
        The numbers of label rows and evidence rows inserted.

    Raises:
        django.db.IntegrityError: a row breaks a constraint.

    Must run inside ``transaction.atomic`` (as :func:`labeling.bulk.insert_rows`).
    """
    ids = insert_rows(label_model, label_columns, [row for row, _ in labels], with_ids=True)
    evidence = _evidence_rows(ids, labels)
    insert_rows(evidence_model, EVIDENCE_COLUMNS, evidence)
    return len(ids), len(evidence)


def _evidence_rows(
    label_ids: Sequence[int], labels: Sequence[tuple[Any, Sequence[EvidenceRowValues]]]
) -> list[tuple[Any, ...]]:
    """The evidence rows (``EVIDENCE_COLUMNS``) of the labels, given the labels' new ids."""
    return [
        (label_id, *span)
        for label_id, (_, spans) in zip(label_ids, labels, strict=True)
        for span in spans
    ]


def claim_label_values_write(
    label_template: models.Model,
    label_columns: Sequence[str],
    evidence_model: type[models.Model],
    labels: Sequence[tuple[Sequence[Any], Sequence[EvidenceRowValues]]],
) -> tuple[int, int]:
    """Insert claim labels given as plain values and, for each, its evidence rows.

    The rows :func:`claim_labels_write` writes, in the same order, through
    :func:`labeling.rows.insert_like`: each label is ``label_template`` with the fields
    ``label_columns`` (attnames) taken from its values, which are in the database's form.

    Args:
        label_template: an unsaved label of the kind written (``ResolvedClaimLabel()``).
        label_columns: the fields each label's values set, in order.
        evidence_model: the evidence table of the labels' kind (``ResolvedEvidence``).
        labels: ``(label values, its spans as (source version id, start, end, quote))``.

    Returns:
        The numbers of label rows and evidence rows inserted.

    Raises:
        django.db.IntegrityError: a row breaks a constraint.
    """
    ids = insert_like(label_template, label_columns, [row for row, _ in labels])
    evidence = _evidence_rows(ids, labels)
    insert_like(evidence_model(), EVIDENCE_COLUMNS, evidence)
    return len(ids), len(evidence)
