"""Writing imported prior annotations: their claim labels, evidence and flagged spans.

A prior annotation is matched on (candidate, annotator) and compared by fingerprint: the same one
again writes nothing, a different one is refused. Prior annotations count as votes when labelling
starts, so none is added after that.
"""

from __future__ import annotations

from labeling.importers.schema import PRIOR_PROVENANCE_FIELDS, PriorAnnotationIn, RecordError, echo
from labeling.models import PriorAnnotation, PriorClaimLabel, PriorEvidence, PriorSpan
from labeling.services.claim_labels import Evidence, claim_labels_write
from labeling.services.imports.common import BULK_BATCH, fingerprint
from labeling.services.imports.state import Chunk, ChunkKeys, ImportState

# A new prior annotation: its unsaved row, what the record gave, {source id: version id}.
NewPrior = tuple[PriorAnnotation, PriorAnnotationIn, dict[str, int]]


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
) -> PriorAnnotation:
    return PriorAnnotation(
        candidate_id=candidate_id,
        annotator=prior.annotator,
        origin=prior.origin,
        answer_label=prior.answer_label,
        answer_reason=prior.answer_reason,
        note=prior.note,
        raw=prior.raw,
        labelled_at=prior.labelled_at,
        policy_id=None if prior.policy_version is None else state.policy_ids[prior.policy_version],
        time_spent_seconds=prior.time_spent_seconds,
        fingerprint=fp,
        import_batch=state.batch,
    )


def _new_priors(state: ImportState, chunk: Chunk, keys: ChunkKeys) -> list[NewPrior]:
    """Return the chunk's prior annotations that are not stored yet.

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
                new.append((_prior_row(state, candidate_id, prior, fp), prior, sources))
    return new


def _spans(new: list[NewPrior]) -> list[PriorSpan]:
    """Return the unsaved flagged spans of saved new prior annotations."""
    spans = []
    for row, prior, sources in new:
        for span in prior.spans:
            evidence = span.evidence
            spans.append(
                PriorSpan(
                    prior_annotation_id=row.pk,
                    start=span.start,
                    end=span.end,
                    quote=span.quote,
                    labels=span.labels,
                    note=span.note,
                    evidence_source_version_id=sources[evidence.source] if evidence else None,
                    evidence_start=evidence.start if evidence else None,
                    evidence_end=evidence.end if evidence else None,
                    evidence_quote=evidence.quote if evidence else None,
                )
            )
    return spans


def write_prior_annotations(state: ImportState, chunk: Chunk, keys: ChunkKeys) -> None:
    """Create the chunk's new prior annotations with their claim labels, evidence and spans.

    Raises:
        RecordError: as :func:`_new_priors`.
    """
    new = _new_priors(state, chunk, keys)
    PriorAnnotation.objects.bulk_create([row for row, _, _ in new], batch_size=BULK_BATCH)
    labels = [
        (
            PriorClaimLabel(
                prior_annotation_id=row.pk,
                claim_id=keys.claims[(row.candidate_id, claim_label.claim)],
                label=claim_label.label,
                reason=claim_label.reason,
                boundary_error=claim_label.boundary_error,
                raw_label=claim_label.raw_label,
            ),
            [
                Evidence(sources[ev.source], ev.start, ev.end, ev.quote)
                for ev in claim_label.evidence
            ],
        )
        for row, prior, sources in new
        for claim_label in prior.claim_labels
    ]
    spans = _spans(new)
    label_rows, evidence_rows = claim_labels_write(PriorEvidence, labels, batch_size=BULK_BATCH)
    PriorSpan.objects.bulk_create(spans, batch_size=BULK_BATCH)
    state.created["prior_annotations"] += len(new)
    state.created["prior_claim_labels"] += len(label_rows)
    state.created["prior_evidence"] += len(evidence_rows)
    state.created["prior_spans"] += len(spans)
