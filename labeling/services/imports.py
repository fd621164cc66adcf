"""Atomic, idempotent, streaming import of workload records into a project.

Every format (native JSONL and the dataset adapters in ``labeling/importers``) yields native
records; :func:`workload_import` validates and writes them. Guarantees:

- **Atomic.** One transaction; any invalid record refuses the whole import and nothing is
  written. Up to ``MAX_ERRORS`` errors are collected (validation continues after the first, so a
  user can fix several at once), each naming the record, the field and the reason.
- **Idempotent.** Rows are matched on natural keys (question ``external_id``, candidate ``id``,
  source ``id`` + sha256, evaluator name + version, prior annotator). Re-importing the same
  content creates nothing. A question or candidate whose content differs from what is stored is
  refused (labels point at it); a source whose text changed becomes a new source version.
- **Streaming.** Records are processed in chunks of ``CHUNK_SIZE`` with bulk inserts, so memory
  does not grow with the file.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, reset_queries, transaction
from django.utils import timezone
from pydantic import ValidationError

from labeling.bulk import insert_rows
from labeling.exceptions import InvalidInput, WorkloadImportFailed
from labeling.importers import SourcedRecord, formats
from labeling.importers.native import file_sha256
from labeling.importers.schema import (
    CandidateIn,
    PolicyVocabulary,
    RecordError,
    WorkloadRecord,
    check_record,
    format_validation_error,
    locate_claim,
)
from labeling.locks import project_lock
from labeling.models import (
    CandidateAnswer,
    Claim,
    Evaluator,
    EvaluatorLabel,
    ImportBatch,
    Item,
    LabelPolicy,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
    PriorSpan,
    Project,
    Question,
    RetrievalLink,
    SourceDocument,
    SourceVersion,
)
from labeling.services.assignments import items_enqueue

logger = logging.getLogger(__name__)

CHUNK_SIZE = 500
GC_EVERY_CHUNKS = 20
MAX_ERRORS = 20
BULK_BATCH = 2000


@dataclass
class ImportResult:
    """What an import did: the batch (None when nothing new was written) and row counts."""

    batch: ImportBatch | None
    records: int
    created: dict[str, int]
    already_imported: bool = False
    notes: dict[str, Any] = field(default_factory=dict)


def fingerprint(value: Any) -> str:
    """Return the sha256 of the canonical JSON of ``value`` (sorted keys, no spaces, UTF-8).

    Numbers compare by value because the parser reads integral numbers as ints
    (``labeling.importers.native.loads_strict``): ``2`` and ``2.0`` give one fingerprint.
    """
    data = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def text_sha256(text: str) -> str:
    """Return the hex sha256 of the UTF-8 encoding of ``text`` (the pin of a source version)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def policy_vocabulary(policy: LabelPolicy) -> PolicyVocabulary:
    """Return the label values ``policy`` allows."""
    return PolicyVocabulary(
        answer_labels=frozenset(policy.answer_labels),
        claim_labels=frozenset(policy.claim_labels),
        reasons=frozenset(policy.unavailable_reasons),
    )


def frequency_ranks(candidates: list[CandidateIn]) -> list[int | None]:
    """Rank each candidate's canonical form by frequency among the question's K samples.

    Rank 1 is the most frequent form; candidates sharing a form share its rank (dense ranks).
    Tie rule: among forms with equal counts, the form first seen at the lower sample index ranks
    higher. Candidates without a canonical form (e.g. no extractable answer) get None.
    """
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for position, candidate in enumerate(candidates):
        form = candidate.canonical_form
        if form is None:
            continue
        counts[form] += 1
        index = position if candidate.sample_index is None else candidate.sample_index
        first_seen[form] = min(first_seen.get(form, index), index)
    order = sorted(counts, key=lambda form: (-counts[form], first_seen[form]))
    rank = {form: r for r, form in enumerate(order, start=1)}
    return [None if c.canonical_form is None else rank[c.canonical_form] for c in candidates]


CANDIDATE_COLUMNS = (
    "question_id",
    "key",
    "text",
    "generator",
    "generator_settings",
    "sample_index",
    "canonical_form",
    "retrieval_score",
    "confidence",
    "acceptance_score",
    "frequency_rank",
    "is_selected",
    "metadata",
    "fingerprint",
)
QUESTION_COLUMNS = (
    "project_id",
    "external_id",
    "text",
    "group_key",
    "slices",
    "metadata",
    "fingerprint",
    "import_batch_id",
    "created_at",
)
VERSION_COLUMNS = (
    "document_id",
    "text",
    "sha256",
    "length",
    "uri",
    "published_at",
    "observed_at",
    "import_batch_id",
    "created_at",
)
CLAIM_COLUMNS = ("candidate_id", "index", "text", "start", "end", "unanchored", "machine_split")


def _json(value: Any) -> str:
    """Serialise a JSONField value for :func:`insert_rows`, as Django's JSONField does."""
    return json.dumps(value)


# A version's metadata is pinned with its text: a re-import may not silently change it.
PINNED_SOURCE_FIELDS = ("uri", "published_at", "observed_at")


def _check_pinned_metadata(
    chunk: list[tuple[str, WorkloadRecord]], pinned: dict[tuple[str, str], tuple[Any, ...]]
) -> None:
    """Refuse a source whose text is known (stored, or earlier in the chunk) with other metadata.

    Raises:
        RecordError: naming the source field that differs.
    """
    for location, record in chunk:
        for s, source in enumerate(record.sources):
            key = (source.id, text_sha256(source.text))
            given = tuple(getattr(source, name) for name in PINNED_SOURCE_FIELDS)
            known = pinned.setdefault(key, given)
            for name, old, new in zip(PINNED_SOURCE_FIELDS, known, given, strict=True):
                if old != new:
                    raise RecordError(
                        location,
                        f"sources[{s}].{name}",
                        f"source {source.id!r} with this text was imported with a different "
                        f"{name}; a version's metadata is pinned with its text",
                    )


def _db_datetime(value: Any) -> Any:
    """Adapt an aware datetime (or None) for :func:`insert_rows`, as a DateTimeField does."""
    return None if value is None else connection.ops.adapt_datetimefield_value(value)


def _question_fields(record: WorkloadRecord) -> dict[str, Any]:
    return {
        "text": record.text,
        "group_key": record.group_key,
        "slices": record.slices,
        "metadata": record.metadata,
    }


def _candidate_fields(candidate: CandidateIn, sample_index: int) -> dict[str, Any]:
    data = candidate.model_dump(mode="json", exclude={"evaluator_labels", "prior_annotations"})
    data["sample_index"] = sample_index
    return data


def _differing_field(stored: dict[str, Any], given: dict[str, Any]) -> str:
    for name in given:
        if stored.get(name) != given[name]:
            return name
    return "(content)"


class _Writer:
    """Writes validated records chunk by chunk inside the caller's transaction."""

    def __init__(self, project: Project, batch: ImportBatch) -> None:
        self.project = project
        self.batch = batch
        self.created: Counter[str] = Counter()
        self.evaluators = {(e.name, e.version): e.pk for e in project.evaluators.all()}
        # {document key: id} of the documents met so far (filled by _source_versions).
        self.document_ids: dict[str, int] = {}

    # -- sources ------------------------------------------------------------------------------
    def _source_versions(
        self, chunk: list[tuple[str, WorkloadRecord]]
    ) -> dict[tuple[str, str], int]:
        """Return {(document key, sha256): version id}, creating missing documents and versions."""
        wanted: dict[tuple[str, str], Any] = {}
        uris: dict[str, str] = {}
        for _, record in chunk:
            for source in record.sources:
                wanted.setdefault((source.id, text_sha256(source.text)), source)
                uris.setdefault(source.id, source.uri)
        if not wanted:
            return {}
        docs = dict(
            SourceDocument.objects.filter(project=self.project, key__in=uris).values_list(
                "key", "pk"
            )
        )
        new_docs = [(self.project.pk, k, u) for k, u in uris.items() if k not in docs]
        doc_ids = insert_rows(SourceDocument, ("project_id", "key", "uri"), new_docs, with_ids=True)
        self.created["source_documents"] += len(new_docs)
        docs.update({key: pk for (_, key, _), pk in zip(new_docs, doc_ids, strict=True)})
        by_doc_id = {docs[k]: k for k in uris}
        self.document_ids.update(docs)
        versions: dict[tuple[str, str], int] = {}
        pinned: dict[tuple[str, str], tuple[Any, ...]] = {}
        for doc_id, sha, pk, *meta in SourceVersion.objects.filter(
            document_id__in=by_doc_id, sha256__in={sha for _, sha in wanted}
        ).values_list("document_id", "sha256", "pk", *PINNED_SOURCE_FIELDS):
            versions[(by_doc_id[doc_id], sha)] = pk
            pinned[(by_doc_id[doc_id], sha)] = tuple(meta)
        _check_pinned_metadata(chunk, pinned)
        missing = [(k, source) for k, source in wanted.items() if k not in versions]
        now = _db_datetime(timezone.now())
        version_ids = insert_rows(
            SourceVersion,
            VERSION_COLUMNS,
            [
                (
                    docs[key],
                    source.text,
                    sha,
                    len(source.text),
                    source.uri,
                    _db_datetime(source.published_at),
                    _db_datetime(source.observed_at),
                    self.batch.pk,
                    now,
                )
                for (key, sha), source in missing
            ],
            with_ids=True,
        )
        self.created["source_versions"] += len(missing)
        versions.update({k: pk for (k, _), pk in zip(missing, version_ids, strict=True)})
        return versions

    def _evaluator_id(self, name: str, version: str) -> int:
        key = (name, version)
        if key not in self.evaluators:
            evaluator = Evaluator.objects.create(project=self.project, name=name, version=version)
            self.created["evaluators"] += 1
            self.evaluators[key] = evaluator.pk
        return self.evaluators[key]

    # -- one chunk ----------------------------------------------------------------------------
    def write(self, chunk: list[tuple[str, WorkloadRecord]]) -> None:
        """Write one chunk of validated records.

        Raises:
            RecordError: a record conflicts with what is stored (changed question or candidate,
                changed evaluator label or prior annotation, new question after the freeze).
        """
        versions = self._source_versions(chunk)
        existing = {
            q.external_id: q
            for q in Question.objects.filter(
                project=self.project, external_id__in=[r.external_id for _, r in chunk]
            )
        }
        questions: dict[str, int] = {}
        new_questions: list[tuple[str, tuple[Any, ...]]] = []
        now = _db_datetime(timezone.now())
        for location, record in chunk:
            given = _question_fields(record)
            stored = existing.get(record.external_id)
            if stored is None:
                if self.project.partition_frozen_at is not None:
                    raise RecordError(
                        location,
                        "external_id",
                        f"question {record.external_id!r} is new but the project's partition is "
                        "frozen; new questions cannot join a frozen split",
                    )
                row = (
                    self.project.pk,
                    record.external_id,
                    record.text,
                    record.group_key,
                    _json(record.slices),
                    _json(record.metadata),
                    fingerprint(given),
                    self.batch.pk,
                    now,
                )
                new_questions.append((record.external_id, row))
                continue
            if stored.fingerprint != fingerprint(given):
                name = _differing_field(_question_fields_of(stored), given)
                raise RecordError(
                    location,
                    name,
                    f"question {record.external_id!r} was imported before (earlier in this file "
                    f"or in an earlier import) with a different {name}; questions are immutable "
                    "(use a new external_id)",
                )
            questions[record.external_id] = stored.pk
        question_ids = insert_rows(
            Question, QUESTION_COLUMNS, [row for _, row in new_questions], with_ids=True
        )
        questions.update(
            {
                external_id: pk
                for (external_id, _), pk in zip(new_questions, question_ids, strict=True)
            }
        )
        self.created["questions"] += len(new_questions)
        existing_ids = {q.pk for q in existing.values()}

        self._links(chunk, questions, versions, existing_ids)
        candidates, new_claim_ids = self._candidates(chunk, questions, existing_ids)
        claim_ids = self._claim_ids(new_claim_ids, existing_ids)
        self._evaluator_labels(chunk, questions, candidates, claim_ids, existing_ids)
        self._prior_annotations(chunk, questions, candidates, claim_ids, versions, existing_ids)

    def _links(self, chunk, questions, versions, existing_ids) -> None:
        """Link questions to their source versions.

        After the partition freeze, an imported question may gain a new version of a document it
        already cites, never a new document: that could join groups across partitions.
        """
        linked: dict[tuple[int, int], tuple[Any, Any]] = {}
        cited: dict[int, set[int]] = defaultdict(set)
        for question_id, version_id, document_id, rank, score in RetrievalLink.objects.filter(
            question_id__in=existing_ids
        ).values_list(
            "question_id", "source_version_id", "source_version__document_id", "rank", "score"
        ):
            linked[(question_id, version_id)] = (rank, score)
            cited[question_id].add(document_id)
        frozen = self.project.partition_frozen_at is not None
        links = []
        for location, record in chunk:
            question_id = questions[record.external_id]
            for s, source in enumerate(record.sources):
                version_id = versions[(source.id, text_sha256(source.text))]
                if (question_id, version_id) in linked:
                    if linked[(question_id, version_id)] != (source.rank, source.score):
                        raise RecordError(
                            location,
                            f"sources[{s}]",
                            f"question {record.external_id!r} was linked to source "
                            f"{source.id!r} with a different rank or score",
                        )
                    continue
                if (
                    frozen
                    and question_id in existing_ids
                    and self.document_ids[source.id] not in cited[question_id]
                ):
                    raise RecordError(
                        location,
                        f"sources[{s}].id",
                        f"question {record.external_id!r} would gain source {source.id!r}, which "
                        "it did not cite when the partition was frozen; a new source could join "
                        "groups across partitions",
                    )
                linked[(question_id, version_id)] = (source.rank, source.score)
                links.append((question_id, version_id, source.rank, source.score))
        insert_rows(RetrievalLink, ("question_id", "source_version_id", "rank", "score"), links)
        self.created["retrieval_links"] += len(links)

    def _candidates(self, chunk, questions, existing_ids):
        """Create new questions' candidates, items and claims; check existing ones are unchanged.

        Returns {(question id, candidate key): candidate id} for every candidate of the chunk and
        {(candidate id, claim index): claim id} for the claims created.
        """
        stored: dict[int, dict[str, tuple[int, str]]] = defaultdict(dict)
        for pk, question_id, key, fp in CandidateAnswer.objects.filter(
            question_id__in=existing_ids
        ).values_list("pk", "question_id", "key", "fingerprint"):
            stored[question_id][key] = (pk, fp)
        ids: dict[tuple[int, str], int] = {}
        new: list[tuple[int, CandidateIn]] = []
        rows: list[tuple[Any, ...]] = []
        for location, record in chunk:
            question_id = questions[record.external_id]
            known = stored.get(question_id, {})
            ranks = frequency_ranks(record.candidates)
            for position, (candidate, rank) in enumerate(
                zip(record.candidates, ranks, strict=True)
            ):
                index = position if candidate.sample_index is None else candidate.sample_index
                fp = fingerprint(_candidate_fields(candidate, index))
                if question_id in existing_ids:
                    if candidate.id not in known:
                        raise RecordError(
                            location,
                            f"candidates[{position}].id",
                            f"candidate {candidate.id!r} is new but question "
                            f"{record.external_id!r} is already imported; a question's candidates "
                            "are fixed at its first import",
                        )
                    pk, stored_fp = known[candidate.id]
                    if stored_fp != fp:
                        raise RecordError(
                            location,
                            f"candidates[{position}]",
                            f"candidate {candidate.id!r} is already imported with different "
                            "content (text, scores or claims); candidates are immutable",
                        )
                    ids[(question_id, candidate.id)] = pk
                    continue
                new.append((question_id, candidate))
                rows.append(
                    (
                        question_id,
                        candidate.id,
                        candidate.text,
                        candidate.generator,
                        _json(candidate.generator_settings),
                        index,
                        candidate.canonical_form,
                        candidate.retrieval_score,
                        candidate.confidence,
                        candidate.acceptance_score,
                        candidate.frequency_rank or rank,
                        candidate.is_selected,
                        _json(candidate.metadata),
                        fp,
                    )
                )
            if question_id in existing_ids and len(known) != len(record.candidates):
                raise RecordError(
                    location,
                    "candidates",
                    f"question {record.external_id!r} has {len(known)} stored candidates but "
                    f"{len(record.candidates)} in this record",
                )
        candidate_ids = insert_rows(CandidateAnswer, CANDIDATE_COLUMNS, rows, with_ids=True)
        now = _db_datetime(timezone.now())
        insert_rows(
            Item,
            ("project_id", "candidate_id", "created_at"),
            [(self.project.pk, pk, now) for pk in candidate_ids],
        )
        claim_rows: list[tuple[Any, ...]] = []
        for pk, (question_id, candidate) in zip(candidate_ids, new, strict=True):
            ids[(question_id, candidate.id)] = pk
            after = 0
            for index, claim in enumerate(candidate.claims):
                start, end = claim.start, claim.end
                if start is None:
                    start = locate_claim(candidate.text, claim.text, after)
                    end = None if start is None else start + len(claim.text)
                if start is not None and end is not None:
                    after = end
                else:
                    self.created["unanchored_claims"] += 1
                claim_rows.append(
                    (pk, index, claim.text, start, end, start is None, claim.machine_split)
                )
        claim_ids = insert_rows(Claim, CLAIM_COLUMNS, claim_rows, with_ids=True)
        self.created["candidates"] += len(new)
        self.created["items"] += len(new)
        self.created["claims"] += len(claim_rows)
        return ids, {(row[0], row[1]): pk for row, pk in zip(claim_rows, claim_ids, strict=True)}

    def _claim_ids(self, new_claim_ids, existing_ids) -> dict[tuple[int, int], int]:
        claim_ids = dict(new_claim_ids)
        if existing_ids:
            for candidate_id, index, pk in Claim.objects.filter(
                candidate__question_id__in=existing_ids
            ).values_list("candidate_id", "index", "pk"):
                claim_ids[(candidate_id, index)] = pk
        return claim_ids

    def _evaluator_labels(self, chunk, questions, candidates, claim_ids, existing_ids) -> None:
        stored = {
            (e, c, k): (label, score, available)
            for e, c, k, label, score, available in EvaluatorLabel.objects.filter(
                candidate__question_id__in=existing_ids
            ).values_list("evaluator_id", "candidate_id", "claim_id", "label", "score", "available")
        }
        new = []
        for location, record in chunk:
            question_id = questions[record.external_id]
            for c, candidate in enumerate(record.candidates):
                candidate_id = candidates[(question_id, candidate.id)]
                for e, label in enumerate(candidate.evaluator_labels):
                    evaluator_id = self._evaluator_id(label.evaluator, label.version)
                    claim_id = (
                        None if label.claim is None else claim_ids[(candidate_id, label.claim)]
                    )
                    key = (evaluator_id, candidate_id, claim_id)
                    value = (label.label, label.score, label.available)
                    if key in stored:
                        if _same_label(stored[key], value):
                            continue
                        raise RecordError(
                            location,
                            f"candidates[{c}].evaluator_labels[{e}]",
                            f"evaluator {label.evaluator}@{label.version} already labelled this "
                            "target differently; a changed judge is a new evaluator version",
                        )
                    stored[key] = value
                    new.append(
                        EvaluatorLabel(
                            evaluator_id=evaluator_id,
                            candidate_id=candidate_id,
                            claim_id=claim_id,
                            label=label.label,
                            score=label.score,
                            available=label.available,
                            raw=label.raw,
                            import_batch=self.batch,
                        )
                    )
        EvaluatorLabel.objects.bulk_create(new, batch_size=BULK_BATCH)
        self.created["evaluator_labels"] += len(new)

    def _prior_annotations(self, chunk, questions, candidates, claim_ids, versions, existing_ids):
        stored = {
            (c, a): fp
            for c, a, fp in PriorAnnotation.objects.filter(
                candidate__question_id__in=existing_ids
            ).values_list("candidate_id", "annotator", "fingerprint")
        }
        new: list[tuple[PriorAnnotation, Any, dict[str, str]]] = []
        for location, record in chunk:
            question_id = questions[record.external_id]
            sources = {s.id: versions[(s.id, text_sha256(s.text))] for s in record.sources}
            for c, candidate in enumerate(record.candidates):
                candidate_id = candidates[(question_id, candidate.id)]
                for p, prior in enumerate(candidate.prior_annotations):
                    fp = fingerprint(prior.model_dump(mode="json"))
                    key = (candidate_id, prior.annotator)
                    if key in stored:
                        if stored[key] == fp:
                            continue
                        raise RecordError(
                            location,
                            f"candidates[{c}].prior_annotations[{p}]",
                            f"annotator {prior.annotator!r} already has a different prior "
                            "annotation of this candidate",
                        )
                    if self.project.labelling_started_at is not None:
                        # Prior annotations are counted as votes when labelling starts; a new one
                        # now would silently change an item's vote count or resolution.
                        raise RecordError(
                            location,
                            f"candidates[{c}].prior_annotations[{p}]",
                            "labelling has started: prior annotations are counted as votes when "
                            "labelling starts, so a new one cannot be added now",
                        )
                    stored[key] = fp
                    row = PriorAnnotation(
                        candidate_id=candidate_id,
                        annotator=prior.annotator,
                        origin=prior.origin,
                        answer_label=prior.answer_label,
                        answer_reason=prior.answer_reason,
                        note=prior.note,
                        raw=prior.raw,
                        fingerprint=fp,
                        import_batch=self.batch,
                    )
                    new.append((row, prior, sources))
        PriorAnnotation.objects.bulk_create([row for row, _, _ in new], batch_size=BULK_BATCH)
        claim_labels: list[tuple[PriorClaimLabel, Any, dict[str, str]]] = []
        spans = []
        for row, prior, sources in new:
            for claim_label in prior.claim_labels:
                claim_labels.append(
                    (
                        PriorClaimLabel(
                            prior_annotation_id=row.pk,
                            claim_id=claim_ids[(row.candidate_id, claim_label.claim)],
                            label=claim_label.label,
                            reason=claim_label.reason,
                            raw_label=claim_label.raw_label,
                        ),
                        claim_label,
                        sources,
                    )
                )
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
        PriorClaimLabel.objects.bulk_create(
            [cl for cl, _, _ in claim_labels], batch_size=BULK_BATCH
        )
        evidence_rows = [
            PriorEvidence(
                claim_label_id=cl.pk,
                source_version_id=sources[ev.source],
                start=ev.start,
                end=ev.end,
                quote=ev.quote,
            )
            for cl, given, sources in claim_labels
            for ev in given.evidence
        ]
        PriorEvidence.objects.bulk_create(evidence_rows, batch_size=BULK_BATCH)
        PriorSpan.objects.bulk_create(spans, batch_size=BULK_BATCH)
        self.created["prior_annotations"] += len(new)
        self.created["prior_claim_labels"] += len(claim_labels)
        self.created["prior_evidence"] += len(evidence_rows)
        self.created["prior_spans"] += len(spans)


def _question_fields_of(question: Question) -> dict[str, Any]:
    return {
        "text": question.text,
        "group_key": question.group_key,
        "slices": question.slices,
        "metadata": question.metadata,
    }


def _same_label(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any]) -> bool:
    # Scores go through the database as floats: an int 1 and a float 1.0 are the same score.
    same_score = a[1] == b[1] or (
        a[1] is not None and b[1] is not None and float(a[1]) == float(b[1])
    )
    return a[0] == b[0] and a[2] == b[2] and same_score


def _validated(
    records: Iterable[SourcedRecord], vocabulary: PolicyVocabulary, errors: list[RecordError]
) -> Iterator[tuple[str, WorkloadRecord]]:
    """Yield the records that pass validation; append the others' errors to ``errors``."""
    for location, raw in records:
        if len(errors) >= MAX_ERRORS:
            return
        if isinstance(raw, RecordError):
            errors.append(raw)
            continue
        try:
            record = WorkloadRecord.model_validate(raw)
            check_record(record, vocabulary, location)
        except ValidationError as exc:
            errors.append(format_validation_error(exc, location))
            continue
        except RecordError as exc:
            errors.append(exc)
            continue
        except RecursionError:
            errors.append(RecordError(location, "(record)", "nested too deeply"))
            continue
        yield location, record


@transaction.atomic
def workload_import(
    *,
    project: Project,
    records: Iterable[SourcedRecord],
    format: str,
    filename: str,
    file_sha256: str,
    actor: AbstractBaseUser | None = None,
    notes: Callable[[], dict[str, Any]] | None = None,
) -> ImportResult:
    """Import ``records`` into ``project`` atomically and idempotently.

    Args:
        project: the target project; it must have a label policy (its newest version is used to
            check label values).
        records: ``(location, object-or-RecordError)`` pairs, streamed.
        format: the name of the format the records came from (recorded on the batch).
        filename: the file's name, for the batch record.
        file_sha256: sha256 of the whole input; a file already imported into this project is
            not read again.
        actor: the user importing, or None from the command line.
        notes: called after the last record to get the adapter's own counters (quirks met).

    Returns:
        An :class:`ImportResult`; ``batch`` is None when the import created nothing.

    Raises:
        WorkloadImportFailed: one or more records are invalid or conflict with stored rows;
            nothing was written. Its ``errors`` give location, field and reason.
        InvalidInput: the project has no label policy.

    Concurrency: opens its own transaction and locks the Project row, so imports into one
    project run one at a time.
    """
    project = project_lock(project.pk)
    previous = ImportBatch.objects.filter(project=project, file_sha256=file_sha256).first()
    if previous is not None:
        return ImportResult(batch=previous, records=0, created={}, already_imported=True)
    policy = project.policies.order_by("-version").first()
    if policy is None:
        raise InvalidInput(f"project {project.slug!r} has no label policy; create one first")
    vocabulary = policy_vocabulary(policy)
    batch = ImportBatch.objects.create(
        project=project,
        format=format,
        # A file name from the OS may hold undecodable bytes (surrogate escapes): keep it storable.
        filename=filename.encode("utf-8", "replace").decode("utf-8")[:500],
        file_sha256=file_sha256,
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    writer = _Writer(project, batch)
    errors: list[RecordError] = []
    chunk: list[tuple[str, WorkloadRecord]] = []
    in_chunk: set[str] = set()
    n_records = 0

    def flush() -> None:
        if chunk and not errors:
            try:
                writer.write(chunk)
            except RecordError as exc:
                errors.append(exc)
        chunk.clear()
        in_chunk.clear()
        # With DEBUG on, Django keeps every query's SQL: memory would grow with the file. A
        # caller that captures queries on purpose (force_debug_cursor) keeps its log.
        if not connection.force_debug_cursor:
            reset_queries()

    # The cyclic collector would rescan the import's many live objects again and again (a fifth
    # of the time in the benchmark); it is paused and run once per GC_EVERY_CHUNKS chunks.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for location, record in _validated(records, vocabulary, errors):
            n_records += 1
            # A repeated external_id is checked against its first occurrence once that is written.
            if record.external_id in in_chunk or len(chunk) >= CHUNK_SIZE:
                flush()
                if n_records % (CHUNK_SIZE * GC_EVERY_CHUNKS) < CHUNK_SIZE:
                    gc.collect()
            chunk.append((location, record))
            in_chunk.add(record.external_id)
        flush()
    finally:
        if gc_was_enabled:
            gc.enable()
    if errors:
        raise WorkloadImportFailed(errors)

    created = {k: v for k, v in sorted(writer.created.items()) if v}
    extra = notes() if notes is not None else {}
    if not any(v for k, v in created.items() if k != "unanchored_claims"):
        batch.delete()
        return ImportResult(batch=None, records=n_records, created={}, notes=extra)
    batch.report = {"records": n_records, "created": created, "notes": extra}
    batch.save(update_fields=["report"])
    if created.get("items") and project.labelling_started_at is not None:
        # Labelling is under way: new items join the end of the queue with the project's overlap.
        items_enqueue(
            project=project,
            item_ids=list(
                Item.objects.filter(candidate__question__import_batch=batch).values_list(
                    "pk", flat=True
                )
            ),
        )
    logger.info(
        "workload_import.done",
        extra={"project": project.slug, "batch": batch.pk, "records": n_records},
    )
    return ImportResult(batch=batch, records=n_records, created=created, notes=extra)


class _CountingStream:
    """A binary stream that reports every byte read (lines or blocks) to ``progress``."""

    def __init__(self, stream: IO[bytes], progress: Callable[[int], object]) -> None:
        self.stream = stream
        self.progress = progress

    def __iter__(self) -> Iterator[bytes]:
        for line in self.stream:
            self.progress(len(line))
            yield line

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.progress(len(data))
        return data

    def readline(self, size: int = -1) -> bytes:
        data = self.stream.readline(size)
        self.progress(len(data))
        return data

    def seek(self, *args: Any) -> int:
        return self.stream.seek(*args)


def workload_import_file(
    *,
    project: Project,
    stream: IO[bytes],
    format_name: str,
    filename: str,
    actor: AbstractBaseUser | None = None,
    progress: Callable[[int], object] | None = None,
) -> ImportResult:
    """Read a seekable binary file in ``format_name`` and import it with :func:`workload_import`.

    The one entry point of the command, the upload page and the API. ``progress`` (optional) is
    called with the number of bytes read so far in each step, e.g. ``tqdm.update``.

    Raises:
        InvalidInput: ``format_name`` is not a known format, or the project has no policy.
        WorkloadImportFailed: invalid records; nothing was written.
    """
    known = formats()
    if format_name not in known:
        raise InvalidInput(f"unknown format {format_name!r}; one of {sorted(known)}")
    fmt = known[format_name]
    digest = file_sha256(stream)
    source = fmt.open(stream if progress is None else _CountingStream(stream, progress), filename)
    return workload_import(
        project=project,
        records=source,
        format=fmt.name,
        filename=filename,
        file_sha256=digest,
        actor=actor,
        notes=source.notes,
    )
