"""Writing imported prior annotations: their claim labels, evidence and flagged spans.

A prior annotation is matched on (candidate, annotator) and compared by fingerprint: the same one
again writes nothing, a different one is refused. Prior annotations count as votes when labelling
starts, so none is added after that.
"""

from __future__ import annotations

from typing import Any

from labeling.bulk import insert_rows
from labeling.importers.record_errors import RecordError, echo
from labeling.importers.schema import PRIOR_PROVENANCE_FIELDS, PriorAnnotationIn
from labeling.models import PriorAnnotation, PriorClaimLabel, PriorSpan
from labeling.rows import db_datetime
from labeling.services.claim_labels import EvidenceValues, claim_labels_write
from labeling.services.imports.common import fingerprint, json_or_null, json_value
from labeling.services.imports.state import Chunk, ChunkKeys, ImportState

PRIOR_COLUMNS = (
    "candidate_id",
    "annotator",
    "origin",
    "answer_label",
    "answer_reason",
    "note",
    "raw",
    "labelled_at",
    "policy_id",
    "time_spent_seconds",
    "fingerprint",
    "import_batch_id",
)
PRIOR_LABEL_COLUMNS = (
    "prior_annotation_id",
    "claim_id",
    "label",
    "reason",
    "boundary_error",
    "raw_label",
)
SPAN_COLUMNS = (
    "prior_annotation_id",
    "start",
    "end",
    "quote",
    "labels",
    "note",
    "evidence_source_version_id",
    "evidence_start",
    "evidence_end",
    "evidence_quote",
)

# A new prior annotation: its candidate's id, what the record gave, {source id: version id}.
NewPrior = tuple[int, PriorAnnotationIn, dict[str, int]]


def prior_fingerprint(prior: PriorAnnotationIn) -> str:
    """Return the fingerprint of a prior annotation (its natural key is candidate + annotator).

    The provenance fields added for releases are left out while not given, so a prior imported
    before they existed keeps its fingerprint.
    """
    data = prior.model_dump(mode="json")
    for name in PRIOR_PROVENANCE_FIELDS:
        if data[name] is None:
            del data[name]
    for claim_label in data["claim_labels"]:
        if not claim_label["boundary_error"]:
            del claim_label["boundary_error"]
    return fingerprint(data)


def _prior_row(
    state: ImportState, candidate_id: int, prior: PriorAnnotationIn, fp: str
) -> tuple[Any, ...]:
    """Return the ``PRIOR_COLUMNS`` row of a new prior annotation."""
    seconds = prior.time_spent_seconds
    return (
        candidate_id,
        prior.annotator,
        prior.origin,
        prior.answer_label,
        prior.answer_reason,
        prior.note,
        json_or_null(prior.raw),
        db_datetime(prior.labelled_at),
        None if prior.policy_version is None else state.policy_ids[prior.policy_version],
        None if seconds is None else float(seconds),
        fp,
        state.batch.pk,
    )


def _new_priors(
    state: ImportState, chunk: Chunk, keys: ChunkKeys
) -> tuple[list[NewPrior], list[tuple[Any, ...]]]:
    """Return the chunk's prior annotations that are not stored yet, and their rows.

    Raises:
        RecordError: an annotator already has a different prior annotation of the candidate
            under the same policy version, or labelling has started.
    """
    # One prior annotation per candidate, annotator and policy version (a release of an item
    # labelled again under a new version holds one of each version).
    stored: dict[tuple[int, str, int | None], str] = {
        (c, a, v): fp
        for c, a, v, fp in PriorAnnotation.objects.filter(
            candidate__question_id__in=keys.existing_ids
        ).values_list("candidate_id", "annotator", "policy__version", "fingerprint")
    }
    new: list[NewPrior] = []
    rows: list[tuple[Any, ...]] = []
    for location, record in chunk:
        question_id = keys.questions[record.external_id]
        sources = keys.sources(record)
        for c, candidate in enumerate(record.candidates):
            candidate_id = keys.candidates[(question_id, candidate.id)]
            for p, prior in enumerate(candidate.prior_annotations):
                fp = prior_fingerprint(prior)
                key = (candidate_id, prior.annotator, prior.policy_version)
                if key in stored:
                    if stored[key] == fp:
                        continue
                    raise RecordError(
                        location,
                        f"candidates[{c}].prior_annotations[{p}]",
                        f"annotator {echo(prior.annotator)} already has a different prior "
                        "annotation of this candidate under this policy version",
                    )
                if state.project.labelling_started_at is not None:
                    # Prior annotations are counted as votes when labelling starts; a new one
                    # now would silently change an item's vote count or resolution.
                    raise RecordError(
                        location,
                        f"candidates[{c}].prior_annotations[{p}]",
                        "labelling has started: prior annotations are counted as votes when "
                        "labelling starts, so a new one cannot be added now",
                    )
                stored[key] = fp
                new.append((candidate_id, prior, sources))
                rows.append(_prior_row(state, candidate_id, prior, fp))
    return new, rows


def _span_rows(new: list[NewPrior], prior_ids: list[int]) -> list[tuple[Any, ...]]:
    """Return the ``SPAN_COLUMNS`` rows of the flagged spans of saved new prior annotations."""
    rows: list[tuple[Any, ...]] = []
    for prior_id, (_, prior, sources) in zip(prior_ids, new, strict=True):
        for span in prior.spans:
            evidence = span.evidence
            rows.append(
                (
                    prior_id,
                    span.start,
                    span.end,
                    span.quote,
                    json_value(span.labels),
                    span.note,
                    *(
                        (sources[evidence.source], evidence.start, evidence.end, evidence.quote)
                        if evidence
                        else (None, None, None, None)
                    ),
                )
            )
    return rows


def _label_rows(
    keys: ChunkKeys, new: list[NewPrior], prior_ids: list[int]
) -> list[tuple[tuple[Any, ...], list[EvidenceValues]]]:
    """Return the ``PRIOR_LABEL_COLUMNS`` rows of saved new prior annotations, with evidence."""
    claims = keys.claims
    return [
        (
            (
                prior_id,
                claims[(candidate_id, claim_label.claim)],
                claim_label.label,
                claim_label.reason,
                claim_label.boundary_error,
                json_or_null(claim_label.raw_label),
            ),
            [(sources[ev.source], ev.start, ev.end, ev.quote) for ev in claim_label.evidence],
        )
        for prior_id, (candidate_id, prior, sources) in zip(prior_ids, new, strict=True)
        for claim_label in prior.claim_labels
    ]


def write_prior_annotations(state: ImportState, chunk: Chunk, keys: ChunkKeys) -> None:
    """Create the chunk's new prior annotations with their claim labels, evidence and spans.

    Raises:
        RecordError: as :func:`_new_priors`.
    """
    new, rows = _new_priors(state, chunk, keys)
    prior_ids = insert_rows(PriorAnnotation, PRIOR_COLUMNS, rows, with_ids=True)
    labels, evidence = claim_labels_write(
        PriorClaimLabel, PRIOR_LABEL_COLUMNS, _label_rows(keys, new, prior_ids), copy=True
    )
    spans = _span_rows(new, prior_ids)
    insert_rows(PriorSpan, SPAN_COLUMNS, spans)
    state.created["prior_annotations"] += len(new)
    state.created["prior_claim_labels"] += len(labels)
    state.created["prior_evidence"] += len(evidence)
    state.created["prior_spans"] += len(spans)
