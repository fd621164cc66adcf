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

A format may give more than records (``RecordSource``): the label policies the project must hold
(restored into a project without questions), pinned source versions written first and in order
(so a document's version numbers follow the input), and the seed and proportions with which the
records' ``partition`` values are frozen. Records may carry resolutions (a certified release's);
they are written as imported resolutions, and their items are resolved.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, reset_queries, transaction
from django.utils import timezone
from pydantic import ValidationError

from labeling.bulk import insert_rows
from labeling.exceptions import InvalidInput, WorkloadImportFailed
from labeling.importers import RecordSource, SourcedRecord, formats
from labeling.importers.native import file_sha256
from labeling.importers.schema import (
    PRIOR_PROVENANCE_FIELDS,
    CandidateIn,
    PartitionIn,
    PolicyIn,
    PolicyVocabulary,
    PriorAnnotationIn,
    RecordError,
    ResolutionIn,
    SourceVersionIn,
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
    ItemStatus,
    LabelPolicy,
    Partition,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
    PriorSpan,
    Project,
    Question,
    Resolution,
    ResolvedClaimLabel,
    ResolvedEvidence,
    RetrievalLink,
    SourceDocument,
    SourceVersion,
)
from labeling.services.assignments import items_enqueue
from labeling.signals import announce_resolutions

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
    "partition",
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
RESOLUTION_COLUMNS = (
    "item_id",
    "number",
    "status",
    "policy_id",
    "answer_label",
    "answer_reason",
    "rationale",
    "unresolved_reason",
    "adjudicator_pseudonym",
    "import_batch_id",
    "created_at",
)
PARTITION_ORDER: tuple[str, ...] = tuple(Partition.values)


def _json(value: Any) -> str:
    """Serialise a JSONField value for :func:`insert_rows`, as Django's JSONField does."""
    return json.dumps(value)


# A version's metadata is pinned with its text: a re-import may not silently change it.
PINNED_SOURCE_FIELDS = ("uri", "published_at", "observed_at")


@dataclass(frozen=True)
class _SourceEntry:
    """A source met in the input: where (location and field path), the source and its sha256."""

    location: str
    path: str  # "sources[2]" in a record, "" for a source version given on its own
    source: Any  # SourceIn or SourceVersionIn
    sha256: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.source.id, self.sha256)

    def field(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name


def _record_sources(chunk: list[tuple[str, WorkloadRecord]]) -> list[_SourceEntry]:
    return [
        _SourceEntry(location, f"sources[{s}]", source, text_sha256(source.text))
        for location, record in chunk
        for s, source in enumerate(record.sources)
    ]


def _check_pinned_metadata(
    entries: list[_SourceEntry], pinned: dict[tuple[str, str], tuple[Any, ...]]
) -> None:
    """Refuse a source whose text is known (stored, or earlier in the chunk) with other metadata.

    Raises:
        RecordError: naming the source field that differs.
    """
    for entry in entries:
        source = entry.source
        given = tuple(getattr(source, name) for name in PINNED_SOURCE_FIELDS)
        known = pinned.setdefault(entry.key, given)
        for name, old, new in zip(PINNED_SOURCE_FIELDS, known, given, strict=True):
            if old != new:
                raise RecordError(
                    entry.location,
                    entry.field(name),
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
    data = candidate.model_dump(
        mode="json", exclude={"evaluator_labels", "prior_annotations", "resolution"}
    )
    data["sample_index"] = sample_index
    # ``unanchored`` came later: left out while false, so earlier fingerprints still match.
    for claim in data["claims"]:
        if not claim["unanchored"]:
            del claim["unanchored"]
    return data


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


def _resolution_key(
    status: str,
    answer_label: str | None,
    answer_reason: str | None,
    unresolved_reason: str | None,
    rationale: str,
    adjudicator: Any,
    policy_id: int,
    claims: dict[int, tuple[str, str | None, frozenset[tuple[int, int, int, str]]]],
) -> tuple[Any, ...]:
    """What two resolutions must share to be the same: every field and label, evidence as a set."""
    return (
        status,
        answer_label,
        answer_reason,
        unresolved_reason,
        rationale,
        adjudicator,
        policy_id,
        tuple(sorted(claims.items())),
    )


def _differing_field(stored: dict[str, Any], given: dict[str, Any]) -> str:
    for name in given:
        if stored.get(name) != given[name]:
            return name
    return "(content)"


class _Writer:
    """Writes validated records chunk by chunk inside the caller's transaction."""

    def __init__(self, project: Project, batch: ImportBatch, fresh: bool) -> None:
        """``fresh``: the project had no questions and no frozen split when the import began."""
        self.project = project
        self.batch = batch
        self.fresh = fresh
        self.created: Counter[str] = Counter()
        self.evaluators = {(e.name, e.version): e.pk for e in project.evaluators.all()}
        # {document key: id} of the documents met so far (filled by _source_versions).
        self.document_ids: dict[str, int] = {}
        self.policy_ids = dict(project.policies.values_list("version", "pk"))
        self.newest_policy_id = self.policy_ids[max(self.policy_ids)]
        # Partitions: whether records give one (the first record decides), the group tokens of
        # the partitioned questions created, and (item id, status) of the resolutions written.
        self.with_partition: tuple[bool, str] | None = None
        self.partitioned = 0
        self.partition_tokens: dict[tuple[str, str], tuple[str, str]] = {}
        self.resolved: list[tuple[int, str]] = []

    # -- sources ------------------------------------------------------------------------------
    def write_source_versions(self, chunk: list[tuple[str, SourceVersionIn]]) -> None:
        """Write source versions given on their own (a preamble), in order.

        Raises:
            RecordError: a version's metadata differs from the stored one, or its ``version``
                number is not the number it has in the project.
        """
        self._source_versions(
            [_SourceEntry(loc, "", source, text_sha256(source.text)) for loc, source in chunk]
        )

    def _source_versions(self, entries: list[_SourceEntry]) -> dict[tuple[str, str], int]:
        """Return {(document key, sha256): version id}, creating missing documents and versions.

        Versions are created in the order of ``entries``; a given ``version`` number is checked
        against the text's number among its document's versions (by creation order).
        """
        wanted: dict[tuple[str, str], Any] = {}
        uris: dict[str, str] = {}
        for entry in entries:
            wanted.setdefault(entry.key, entry.source)
            uris.setdefault(entry.source.id, entry.source.uri)
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
        _check_pinned_metadata(entries, pinned)
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
        self._check_version_numbers(entries)
        return versions

    def _check_version_numbers(self, entries: list[_SourceEntry]) -> None:
        """Refuse a source whose given ``version`` is not its number among its document's texts.

        A document's versions are numbered 1, 2, ... in creation (primary key) order, as a
        release numbers them.
        """
        numbered = [e for e in entries if e.source.version is not None]
        if not numbered:
            return
        documents = {self.document_ids[e.source.id] for e in numbered}
        numbers: dict[tuple[int, str], int] = {}
        count: Counter[int] = Counter()
        for document_id, sha in (
            SourceVersion.objects.filter(document_id__in=documents)
            .order_by("document_id", "pk")
            .values_list("document_id", "sha256")
        ):
            count[document_id] += 1
            numbers[(document_id, sha)] = count[document_id]
        for entry in numbered:
            number = numbers[(self.document_ids[entry.source.id], entry.sha256)]
            if number != entry.source.version:
                raise RecordError(
                    entry.location,
                    entry.field("version"),
                    f"source {entry.source.id!r} with this text is version {number} of its "
                    f"document in this project, not {entry.source.version} (the project holds "
                    "other versions of it, or they were given out of order)",
                )

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
        versions = self._source_versions(_record_sources(chunk))
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
            self._check_partition(location, record, stored)
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
                    record.partition,
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
        self._resolutions(chunk, questions, candidates, claim_ids, versions, existing_ids)

    def _check_partition(self, location: str, record: WorkloadRecord, stored: Any) -> None:
        """Check a record's ``partition`` (see :func:`workload_import`); remember its groups.

        Raises:
            RecordError: records with and without a partition, a partition for a new question
                of a project that had questions, a partition other than the stored one, or a
                question sharing a group or source document with one in another partition.
        """
        given = record.partition is not None
        if self.with_partition is None:
            self.with_partition = (given, location)
        elif self.with_partition[0] != given:
            first = "gives" if self.with_partition[0] else "gives no"
            raise RecordError(
                location,
                "partition",
                f"the first record ({self.with_partition[1]}) {first} partition: give every "
                "record a partition, or none",
            )
        if not given:
            return
        if stored is not None:
            if stored.partition != record.partition:
                raise RecordError(
                    location,
                    "partition",
                    f"question {record.external_id!r} is in partition {stored.partition!r} in "
                    f"this project, not {record.partition!r}",
                )
            return
        if not self.fresh:
            raise RecordError(
                location,
                "partition",
                f"question {record.external_id!r} is new and gives a partition, but project "
                f"{self.project.slug!r} already had questions or a frozen split; partitions "
                "are imported only with all of a project's questions",
            )
        tokens = [("source document", s.id) for s in record.sources]
        if record.group_key:
            tokens.append(("group_key", record.group_key))
        for token in tokens:
            partition, other = self.partition_tokens.setdefault(
                token, (record.partition, record.external_id)
            )
            if partition != record.partition:
                raise RecordError(
                    location,
                    "partition",
                    f"question {record.external_id!r} is in {record.partition!r} but shares "
                    f"{token[0]} {token[1]!r} with question {other!r} in {partition!r}; "
                    "questions sharing a group_key or a source document are in one partition",
                )
        self.partitioned += 1

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
                if start is None and not claim.unanchored:
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
                    fp = prior_fingerprint(prior)
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
                        labelled_at=prior.labelled_at,
                        policy_id=None
                        if prior.policy_version is None
                        else self.policy_ids[prior.policy_version],
                        time_spent_seconds=prior.time_spent_seconds,
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
                            boundary_error=claim_label.boundary_error,
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

    # -- resolutions ----------------------------------------------------------------------------
    def _resolutions(self, chunk, questions, candidates, claim_ids, versions, existing_ids):
        """Write the records' resolutions as imported resolutions and resolve their items.

        A candidate whose item already has a resolution must give the same one (then nothing is
        written). A new resolution is written only for an item created by this import or before
        labelling starts: an item under way is resolved by its annotators.

        Raises:
            RecordError: a different resolution is stored, or labelling is under way.
        """
        # (location, field, candidate id, new candidate?, resolution, {source key: version id})
        given: list[tuple[str, str, int, bool, ResolutionIn, dict[str, int]]] = []
        for location, record in chunk:
            if all(candidate.resolution is None for candidate in record.candidates):
                continue
            question_id = questions[record.external_id]
            sources = {s.id: versions[(s.id, text_sha256(s.text))] for s in record.sources}
            for c, candidate in enumerate(record.candidates):
                if candidate.resolution is not None:
                    given.append(
                        (
                            location,
                            f"candidates[{c}].resolution",
                            candidates[(question_id, candidate.id)],
                            # A question's candidates are created with it.
                            question_id not in existing_ids,
                            candidate.resolution,
                            sources,
                        )
                    )
        if not given:
            return
        items = {
            candidate_id: (pk, resolution_id, version)
            for pk, candidate_id, resolution_id, version in Item.objects.filter(
                candidate_id__in=[g[2] for g in given]
            ).values_list("pk", "candidate_id", "resolution_id", "version")
        }
        stored = self._stored_resolutions([r for _, r, _ in items.values() if r is not None])
        rows: list[tuple[Any, ...]] = []
        labels: list[tuple[int, int, Any, dict[str, int]]] = []  # (row, candidate, label, sources)
        updates: list[Item] = []
        now = timezone.now()
        for location, at, candidate_id, new, resolution, sources in given:
            item_id, resolution_id, version = items[candidate_id]
            policy_id = (
                self.newest_policy_id
                if resolution.policy_version is None
                else self.policy_ids[resolution.policy_version]
            )
            claims = {
                cl.claim: (
                    cl.label,
                    cl.reason,
                    frozenset((sources[e.source], e.start, e.end, e.quote) for e in cl.evidence),
                )
                for cl in resolution.claim_labels
            }
            key = _resolution_key(
                resolution.status,
                resolution.answer_label,
                resolution.answer_reason,
                resolution.unresolved_reason,
                resolution.rationale,
                resolution.adjudicator,
                policy_id,
                claims,
            )
            if resolution_id is not None:
                stored_key, stored_at = stored[resolution_id]
                same_time = resolution.resolved_at is None or resolution.resolved_at == stored_at
                if stored_key == key and same_time:
                    continue
                raise RecordError(
                    location,
                    at,
                    "the candidate already has a different resolution in this project; a "
                    "resolution is imported once (correct it by adjudication)",
                )
            if self.project.labelling_started_at is not None and not new:
                raise RecordError(
                    location,
                    at,
                    "labelling has started: the item is resolved by its annotators, a "
                    "resolution cannot be imported for it now",
                )
            rows.append(
                (
                    item_id,
                    1,
                    resolution.status,
                    policy_id,
                    resolution.answer_label,
                    resolution.answer_reason,
                    resolution.rationale,
                    resolution.unresolved_reason,
                    resolution.adjudicator,
                    self.batch.pk,
                    _db_datetime(resolution.resolved_at or now),
                )
            )
            for claim_label in resolution.claim_labels:
                labels.append((len(rows) - 1, candidate_id, claim_label, sources))
            updates.append(Item(pk=item_id, status=ItemStatus.RESOLVED, version=version + 1))
            self.resolved.append((item_id, resolution.status))
        resolution_ids = insert_rows(Resolution, RESOLUTION_COLUMNS, rows, with_ids=True)
        for item, resolution_id in zip(updates, resolution_ids, strict=True):
            item.resolution_id = resolution_id
        label_rows = ResolvedClaimLabel.objects.bulk_create(
            [
                ResolvedClaimLabel(
                    resolution_id=resolution_ids[row],
                    claim_id=claim_ids[(candidate_id, label.claim)],
                    label=label.label,
                    reason=label.reason,
                )
                for row, candidate_id, label, _ in labels
            ],
            batch_size=BULK_BATCH,
        )
        evidence = [
            ResolvedEvidence(
                claim_label_id=row.pk,
                source_version_id=sources[e.source],
                start=e.start,
                end=e.end,
                quote=e.quote,
            )
            for row, (_, _, label, sources) in zip(label_rows, labels, strict=True)
            for e in label.evidence
        ]
        ResolvedEvidence.objects.bulk_create(evidence, batch_size=BULK_BATCH)
        Item.objects.bulk_update(
            updates, ["status", "resolution", "version"], batch_size=BULK_BATCH
        )
        self.created["resolutions"] += len(rows)
        self.created["resolved_claim_labels"] += len(label_rows)
        self.created["resolved_evidence"] += len(evidence)

    def _stored_resolutions(self, ids: list[int]) -> dict[int, tuple[tuple[Any, ...], Any]]:
        """Return {resolution id: (its :func:`_resolution_key`, its time)} of stored ones."""
        if not ids:
            return {}
        evidence: dict[int, set[tuple[int, int, int, str]]] = defaultdict(set)
        for label_id, version_id, start, end, quote in ResolvedEvidence.objects.filter(
            claim_label__resolution_id__in=ids
        ).values_list("claim_label_id", "source_version_id", "start", "end", "quote"):
            evidence[label_id].add((version_id, start, end, quote))
        claims: dict[int, dict[int, Any]] = defaultdict(dict)
        for pk, resolution_id, index, label, reason in ResolvedClaimLabel.objects.filter(
            resolution_id__in=ids
        ).values_list("pk", "resolution_id", "claim__index", "label", "reason"):
            claims[resolution_id][index] = (label, reason, frozenset(evidence[pk]))
        out = {}
        for row in Resolution.objects.filter(pk__in=ids).values(
            "pk",
            "status",
            "answer_label",
            "answer_reason",
            "unresolved_reason",
            "rationale",
            "adjudicator_id",
            "adjudicator_pseudonym",
            "policy_id",
            "created_at",
        ):
            # An adjudication made here names an account, never equal to an imported pseudonym.
            adjudicator = (
                ("user", row["adjudicator_id"])
                if row["adjudicator_id"] is not None
                else row["adjudicator_pseudonym"]
            )
            key = _resolution_key(
                row["status"],
                row["answer_label"],
                row["answer_reason"],
                row["unresolved_reason"],
                row["rationale"],
                adjudicator,
                row["policy_id"],
                claims[row["pk"]],
            )
            out[row["pk"]] = (key, row["created_at"])
        return out


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
    records: Iterable[SourcedRecord],
    vocabulary: PolicyVocabulary,
    errors: list[RecordError],
    policies: dict[int, PolicyVocabulary] | None = None,
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
            check_record(record, vocabulary, location, policies)
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


def _validated_sources(
    sources: Iterable[SourcedRecord], errors: list[RecordError]
) -> Iterator[tuple[str, SourceVersionIn]]:
    """Yield the source versions that pass validation; append the others' errors."""
    for location, raw in sources:
        if len(errors) >= MAX_ERRORS:
            return
        if isinstance(raw, RecordError):
            errors.append(raw)
            continue
        try:
            yield location, SourceVersionIn.model_validate(raw)
        except ValidationError as exc:
            errors.append(format_validation_error(exc, location))


POLICY_CONTENT = (
    "guideline",
    "evidence_relation",
    "answer_labels",
    "claim_labels",
    "unavailable_reasons",
)


def _restore_policies(
    project: Project, given: list[SourcedRecord], fresh: bool, created: Counter[str]
) -> None:
    """Make the project's label policy versions exactly those ``given`` (a release's).

    Into a project without questions, missing versions are created and an unfrozen version with
    other content (e.g. the default policy ``--create`` made) takes the given content. Into any
    other project, the given versions must already be there, identical, and no other.

    Raises:
        WorkloadImportFailed: an invalid policy, or policies that differ from the project's.
    """
    errors: list[RecordError] = []
    specs: dict[int, tuple[str, PolicyIn]] = {}
    for location, raw in given:
        if isinstance(raw, RecordError):
            errors.append(raw)
            continue
        try:
            spec = PolicyIn.model_validate(raw)
        except ValidationError as exc:
            errors.append(format_validation_error(exc, location))
            continue
        if spec.version in specs:
            errors.append(RecordError(location, "version", f"version {spec.version} repeats"))
        specs[spec.version] = (location, spec)
    if not specs and not errors:
        errors.append(RecordError("(input)", "policies", "no label policy is given"))
    if errors:
        raise WorkloadImportFailed(errors)
    existing = {p.version: p for p in project.policies.order_by("version")}
    extra = sorted(set(existing) - set(specs))
    if extra:
        location = specs[min(specs)][0]
        raise WorkloadImportFailed(
            [
                RecordError(
                    location,
                    "version",
                    f"project {project.slug!r} has label policy version(s) {extra}, which the "
                    f"input does not list (it lists {sorted(specs)})",
                )
            ]
        )
    for version in sorted(specs):
        location, spec = specs[version]
        content = spec.model_dump(include=set(POLICY_CONTENT))
        policy = existing.get(version)
        if policy is not None:
            stored = {name: getattr(policy, name) for name in POLICY_CONTENT}
            if stored == content:
                continue
            if fresh and policy.frozen_at is None:
                for name, value in content.items():
                    setattr(policy, name, value)
                policy.save(update_fields=list(POLICY_CONTENT))
                created["label_policies"] += 1
                continue
            name = _differing_field(stored, content)
            reason = f"label policy version {version} of project {project.slug!r} has another "
            raise WorkloadImportFailed(
                [
                    RecordError(
                        location,
                        name,
                        reason + f"{name}; policies are restored only into a project without "
                        "questions",
                    )
                ]
            )
        newer = [v for v in existing if v > version]
        if not fresh or newer:
            why = (
                f"it has version {max(newer)} already"
                if newer
                else "policies are restored only into a project without questions"
            )
            raise WorkloadImportFailed(
                [
                    RecordError(
                        location,
                        "version",
                        f"project {project.slug!r} has no label policy version {version}; {why}",
                    )
                ]
            )
        previous = existing[max(existing)] if existing else None
        existing[version] = LabelPolicy.objects.create(
            project=project, version=version, previous=previous, **content
        )
        created["label_policies"] += 1


def _partition_spec(partition: SourcedRecord | None) -> tuple[str, PartitionIn | None]:
    """Validate a format's partition spec: seed and proportions summing to 1.

    Raises:
        WorkloadImportFailed: naming the field.
    """
    if partition is None:
        return "(input)", None
    location, raw = partition
    if isinstance(raw, RecordError):
        raise WorkloadImportFailed([raw])
    try:
        spec = PartitionIn.model_validate(raw)
    except ValidationError as exc:
        raise WorkloadImportFailed([format_validation_error(exc, location)]) from None
    total = sum(spec.proportions.values())
    if abs(total - 1) > 1e-9:
        raise WorkloadImportFailed(
            [RecordError(location, "proportions", f"proportions sum to {total}, not 1")]
        )
    return location, spec


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
    source_versions: Iterable[SourcedRecord] | None = None,
    policies: list[SourcedRecord] | None = None,
    partition: SourcedRecord | None = None,
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
        source_versions: ``(location, SourceVersionIn object)`` pairs written before any record,
            in this order (a document's versions are numbered by creation order).
        policies: ``(location, PolicyIn object)`` pairs: the label policy versions the project
            must hold, restored (creating versions, and giving an unfrozen version other
            content). A format that gives them (a release) restores a project, so it imports
            into a project without questions only: into any other the import is refused,
            unless it is the very input imported before (then "already imported").
        partition: ``(location, PartitionIn object)``: the seed and proportions with which the
            records' ``partition`` values are frozen.

    Partitions. A record's ``partition`` is accepted only when the import creates the project's
    questions from scratch (no questions and no frozen split before it), or for a question
    already stored in that partition (a re-import). Every record gives one, or none does.
    Questions sharing a ``group_key`` or a source document must be in one partition. When
    partitioned questions were created, the split is frozen with ``partition``'s seed and
    proportions at the end of the import.

    Resolutions. A candidate's ``resolution`` is written as resolution number 1 of its item
    (with this batch, and ``resolved_at`` as its time) and the item is resolved: labelling never
    serves it nor compares its votes. A candidate already resolved must give the same
    resolution (then nothing is written). Items resolved are announced after commit.

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
    has_questions = Question.objects.filter(project=project).exists()
    if policies is not None and has_questions:
        raise WorkloadImportFailed(
            [
                RecordError(
                    filename,
                    "project",
                    f"project {project.slug!r} already holds questions; the {format} format "
                    "imports into an empty project only (import it into a new project)",
                )
            ]
        )
    fresh = not has_questions and project.partition_frozen_at is None
    partition_location, partition_spec = _partition_spec(partition)
    restored: Counter[str] = Counter()
    if policies is not None:
        _restore_policies(project, policies, not has_questions, restored)
    policy = project.policies.order_by("-version").first()
    if policy is None:
        raise InvalidInput(f"project {project.slug!r} has no label policy; create one first")
    vocabulary = policy_vocabulary(policy)
    vocabularies = {p.version: policy_vocabulary(p) for p in project.policies.all()}
    batch = ImportBatch.objects.create(
        project=project,
        format=format,
        # A file name from the OS may hold undecodable bytes (surrogate escapes): keep it storable.
        filename=filename.encode("utf-8", "replace").decode("utf-8")[:500],
        file_sha256=file_sha256,
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    writer = _Writer(project, batch, fresh)
    writer.created.update(restored)
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
        if source_versions is not None:
            versions: list[tuple[str, SourceVersionIn]] = []
            for item in _validated_sources(source_versions, errors):
                versions.append(item)
                if len(versions) >= CHUNK_SIZE:
                    _write_versions(writer, versions, errors)
            _write_versions(writer, versions, errors)
        for location, record in _validated(records, vocabulary, errors, vocabularies):
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
    if writer.partitioned and not errors:
        if partition_spec is None:
            errors.append(
                RecordError(
                    partition_location,
                    "partition",
                    "the records give partitions but the input gives no seed and proportions "
                    "to freeze the split with",
                )
            )
        else:
            _freeze_partition(project, partition_spec)
            writer.created["partitioned_questions"] += writer.partitioned
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
    announce_resolutions(project_id=project.pk, resolved=writer.resolved)
    logger.info(
        "workload_import.done",
        extra={"project": project.slug, "batch": batch.pk, "records": n_records},
    )
    return ImportResult(batch=batch, records=n_records, created=created, notes=extra)


def _write_versions(
    writer: _Writer, versions: list[tuple[str, SourceVersionIn]], errors: list[RecordError]
) -> None:
    """Write a chunk of preamble source versions (unless an error was met); empty the list."""
    if versions and not errors:
        try:
            writer.write_source_versions(versions)
        except RecordError as exc:
            errors.append(exc)
    versions.clear()


def _freeze_partition(project: Project, spec: PartitionIn) -> None:
    """Record the split the import created: the given seed and proportions, frozen now."""
    project.partition_seed = spec.seed
    project.partition_proportions = {
        p: float(dict(spec.proportions).get(p, 0.0)) for p in PARTITION_ORDER
    }
    project.partition_frozen_at = timezone.now()
    project.save(update_fields=["partition_seed", "partition_proportions", "partition_frozen_at"])


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

    def tell(self) -> int:
        return self.stream.tell()

    def seekable(self) -> bool:
        return True


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
    return _import_source(project, source, fmt.name, filename, source.digest or digest, actor)


def workload_import_directory(
    *,
    project: Project,
    directory: Path,
    format_name: str,
    actor: AbstractBaseUser | None = None,
) -> ImportResult:
    """Import a directory in ``format_name`` (a format with ``open_directory``: a release).

    The batch is identified by the digest the format gives (a release: its manifest's sha256).

    Raises:
        InvalidInput: the format is unknown or reads files only, or the project has no policy.
        WorkloadImportFailed: the input does not verify, or invalid records; nothing written.
    """
    known = formats()
    if format_name not in known:
        raise InvalidInput(f"unknown format {format_name!r}; one of {sorted(known)}")
    fmt = known[format_name]
    if fmt.open_directory is None:
        raise InvalidInput(f"format {fmt.name!r} reads a file, not a directory")
    source = fmt.open_directory(directory)
    if source.digest is None:
        source.close()
        raise InvalidInput(f"format {fmt.name!r} gave no digest for directory {directory.name!r}")
    return _import_source(project, source, fmt.name, directory.name, source.digest, actor)


def _import_source(
    project: Project,
    source: RecordSource,
    format_name: str,
    filename: str,
    digest: str,
    actor: AbstractBaseUser | None,
) -> ImportResult:
    """Run :func:`workload_import` on everything ``source`` gives, then close it."""
    try:
        return workload_import(
            project=project,
            records=source,
            format=format_name,
            filename=filename,
            file_sha256=digest,
            actor=actor,
            notes=source.notes,
            source_versions=source.source_versions,
            policies=source.policies,
            partition=source.partition,
        )
    finally:
        source.close()
