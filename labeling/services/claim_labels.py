"""The one writer of claim labels and their evidence spans.

Four kinds of vote carry claim labels with evidence (:class:`labeling.models.ClaimLabelBase`,
:class:`labeling.models.EvidenceBase`): an annotation revision's (``ClaimLabel`` with
``EvidenceSpan``), a resolution's (``ResolvedClaimLabel`` with ``ResolvedEvidence``: written by
adjudication, by the comparison of votes and by the workload import), an imported prior
annotation's (``PriorClaimLabel`` with ``PriorEvidence``) and a gold item's reference
(``GoldClaimLabel`` with ``GoldEvidence``). :func:`claim_labels_write` writes any of them from
plain values (no model instance per row): a submit's few labels and a start's thousands alike.
:func:`claim_labels_json` reads a vote's labels back as the conflict errors show them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import QuerySet

from labeling.bulk import insert_rows
from labeling.models import ClaimLabelBase, EvidenceBase
from labeling.offsets import UNIT_CODEPOINT
from labeling.rows import insert_like

EVIDENCE_COLUMNS = ("claim_label_id", "source_version_id", "start", "end", "quote")

# A cited span as plain values: (source version id, start, end, quote), code points.
EvidenceValues = tuple[int, int, int, str]


def evidence_model(label_model: type[ClaimLabelBase]) -> type[EvidenceBase]:
    """The evidence table of a kind of claim label (its ``evidence`` relation)."""
    meta: Any = label_model._meta  # each concrete kind has the relation, the base none
    related: type[EvidenceBase] = meta.get_field("evidence").related_model
    return related


def claim_labels_write(
    label_model: type[ClaimLabelBase],
    columns: Sequence[str],
    labels: Sequence[tuple[Sequence[Any], Iterable[EvidenceValues]]],
    *,
    copy: bool = False,
) -> tuple[list[int], list[int]]:
    """Insert claim labels given as plain values and, for each, its evidence rows.

    The labels go in in the order given, then their evidence, label by label and span by span
    in the order given: two statements for a few rows (:func:`labeling.rows.insert_like`).

    Args:
        label_model: the label table (``ClaimLabel``, ``ResolvedClaimLabel``, ...); its
            evidence table is that of its ``evidence`` relation.
        columns: the fields (attnames, e.g. ``resolution_id``) each label's values set, in
            order, in the database's form (ints, strings, booleans, None, JSON text); the
            others take the model's defaults (not with ``copy``, which writes only these).
        labels: ``(label values, its spans as (source version id, start, end, quote))``.
        copy: whole-import chunks: :func:`labeling.bulk.insert_rows` (``COPY`` on PostgreSQL,
            ids reserved up front); must run inside ``transaction.atomic``.

    Returns:
        The ids of the new labels and of their evidence rows, in the order written.

    Raises:
        django.db.IntegrityError: a row breaks a constraint.
    """
    spans = evidence_model(label_model)
    rows = [row for row, _ in labels]
    if copy:
        ids = insert_rows(label_model, columns, rows, with_ids=True)
    else:
        ids = insert_like(label_model(), columns, rows)
    evidence = [
        (label_id, *span)
        for label_id, (_, cited) in zip(ids, labels, strict=True)
        for span in cited
    ]
    if copy:
        return ids, insert_rows(spans, EVIDENCE_COLUMNS, evidence, with_ids=True)
    return ids, insert_like(spans(), EVIDENCE_COLUMNS, evidence)


def claim_labels_json(labels: QuerySet[Any], flag: str) -> list[dict[str, Any]]:
    """A vote's claim labels in claim order, with their evidence (code points), as JSON data.

    ``labels`` selects one vote's labels (of any kind); ``flag`` names the kind's own boolean
    field that each entry carries (``boundary_error``, ``evidence_waived``). Two queries.
    """
    return [
        {
            "claim_id": cl.claim_id,
            "label": cl.label,
            "reason": cl.reason,
            flag: getattr(cl, flag),
            "evidence": [
                {
                    "source_version_id": e.source_version_id,
                    "start": e.start,
                    "end": e.end,
                    "quote": e.quote,
                    "unit": UNIT_CODEPOINT,
                }
                for e in cl.evidence.all()
            ],
        }
        for cl in labels.prefetch_related("evidence").order_by("claim__index")
    ]
