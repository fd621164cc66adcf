"""The public entry points of the workload import: records, a file, a directory."""

from __future__ import annotations

import gc
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from django.contrib.auth.models import AbstractBaseUser, User
from django.db import connection, reset_queries, transaction

from labeling.bulk import custom_plans, tables_analyze
from labeling.derived import derived_mark
from labeling.exceptions import InvalidInput, PermissionDenied, WorkloadImportFailed
from labeling.importers import (
    ImportOptions,
    RecordSource,
    SourcedRecord,
    WorkloadFormat,
    claims_choice_error,
    evaluator_version_error,
    formats,
)
from labeling.importers.claims import ClaimSplitter
from labeling.importers.native import file_sha256 as stream_sha256
from labeling.importers.record_errors import RecordError, echo
from labeling.importers.record_rules import check_record
from labeling.importers.schema import PolicyVocabulary, SourceVersionIn, WorkloadRecord
from labeling.importers.validation import validated_stream
from labeling.locks import items_lock, project_label_writes_lock, project_lock
from labeling.models import (
    CandidateAnswer,
    Claim,
    EvaluatorLabel,
    ImportBatch,
    Item,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
    Project,
    Question,
    RetrievalLink,
    Role,
    SourceDocument,
    SourceVersion,
)
from labeling.permissions import MANAGERS, require_role
from labeling.services.imports.common import (
    CHUNK_SIZE,
    GC_EVERY_CHUNKS,
    ImportResult,
    policy_vocabulary,
)
from labeling.services.imports.policies import freeze_partition, partition_spec, restore_policies
from labeling.services.imports.state import Chunk
from labeling.services.imports.writer import ImportWriter
from labeling.services.labelling_queue import items_enqueue
from labeling.services.members import membership_set
from labeling.services.vote_tally import vote_tally_refresh
from labeling.signals import announce_resolutions

logger = logging.getLogger(__name__)

# An import that creates this many rows refreshes the statistics of the tables it writes before
# it commits (labeling.bulk.tables_analyze), so that the plans of what follows fit their sizes.
ANALYZE_ROWS = 20_000
IMPORTED_TABLES = (
    SourceDocument,
    SourceVersion,
    Question,
    RetrievalLink,
    CandidateAnswer,
    Claim,
    Item,
    EvaluatorLabel,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
)


def _record_parser(
    vocabulary: PolicyVocabulary, policies: dict[int, PolicyVocabulary]
) -> Callable[[str, Any], WorkloadRecord]:
    """Return the check of one workload record against the project's policies."""

    def parse(location: str, raw: Any) -> WorkloadRecord:
        record = WorkloadRecord.model_validate(raw)
        check_record(record, vocabulary, location, policies)
        return record

    return parse


def _source_version(_location: str, raw: Any) -> SourceVersionIn:
    return SourceVersionIn.model_validate(raw)


def _write_versions(
    writer: ImportWriter, versions: list[tuple[str, SourceVersionIn]], errors: list[RecordError]
) -> None:
    """Write a chunk of preamble source versions (unless an error was met); empty the list."""
    if versions and not errors:
        try:
            writer.write_source_versions(versions)
        except RecordError as exc:
            errors.append(exc)
    versions.clear()


def _write_preamble(
    writer: ImportWriter, source_versions: Iterable[SourcedRecord], errors: list[RecordError]
) -> None:
    """Validate and write the source versions given before any record, in chunks."""
    versions: list[tuple[str, SourceVersionIn]] = []
    for item in validated_stream(source_versions, _source_version, errors):
        versions.append(item)
        if len(versions) >= CHUNK_SIZE:
            _write_versions(writer, versions, errors)
    _write_versions(writer, versions, errors)


class _Chunker:
    """Collects validated records into chunks and writes each (until the first error)."""

    def __init__(self, writer: ImportWriter, errors: list[RecordError]) -> None:
        self.writer = writer
        self.errors = errors
        self.chunk: Chunk = []
        self.in_chunk: set[str] = set()
        self.records = 0

    def add(self, location: str, record: WorkloadRecord) -> None:
        """Add one record; write the chunk first when it is full or holds the same question."""
        self.records += 1
        # A repeated external_id is checked against its first occurrence once that is written.
        if record.external_id in self.in_chunk or len(self.chunk) >= CHUNK_SIZE:
            self.flush()
            if self.records % (CHUNK_SIZE * GC_EVERY_CHUNKS) < CHUNK_SIZE:
                gc.collect()
        self.chunk.append((location, record))
        self.in_chunk.add(record.external_id)

    def flush(self) -> None:
        """Write the chunk (unless an error was met) and empty it."""
        if self.chunk and not self.errors:
            try:
                self.writer.write(self.chunk)
            except RecordError as exc:
                self.errors.append(exc)
        self.chunk.clear()
        self.in_chunk.clear()
        # With DEBUG on, Django keeps every query's SQL: memory would grow with the file. A
        # caller that captures queries on purpose (force_debug_cursor) keeps its log.
        if not connection.force_debug_cursor:
            reset_queries()


def _write_stream(
    writer: ImportWriter,
    records: Iterable[SourcedRecord],
    source_versions: Iterable[SourcedRecord] | None,
    parse: Callable[[str, Any], WorkloadRecord],
    errors: list[RecordError],
) -> int:
    """Validate and write the preamble and the records; return the number of valid records."""
    chunker = _Chunker(writer, errors)
    # The cyclic collector would rescan the import's many live objects again and again; it is
    # paused and run once per GC_EVERY_CHUNKS chunks. The objects that exist before the import
    # (Django's, the models') are frozen meanwhile, so each of those runs scans what the import
    # made, not the whole process.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    gc.freeze()
    try:
        if source_versions is not None:
            _write_preamble(writer, source_versions, errors)
        for location, record in validated_stream(records, parse, errors):
            chunker.add(location, record)
        chunker.flush()
    finally:
        gc.unfreeze()
        if gc_was_enabled:
            gc.enable()
    return chunker.records


def _refuse_restore(project: Project, format: str, filename: str) -> WorkloadImportFailed:
    return WorkloadImportFailed(
        [
            RecordError(
                filename,
                "project",
                f"project {project.slug!r} already holds questions; the {format} format "
                "imports into an empty project only (import it into a new project)",
            )
        ]
    )


def _create_batch(
    project: Project,
    format: str,
    filename: str,
    file_sha256: str,
    actor: AbstractBaseUser | None,
) -> ImportBatch:
    return ImportBatch.objects.create(
        project=project,
        format=format,
        # A file name from the OS may hold undecodable bytes (surrogate escapes): keep it storable.
        filename=filename.encode("utf-8", "replace").decode("utf-8")[:500],
        file_sha256=file_sha256,
        created_by=cast(User, actor) if actor is not None and actor.is_authenticated else None,
    )


def _prior_votes_count(project: Project, batch: ImportBatch) -> None:
    """Count the votes of the items that got imported prior annotations into the vote tally.

    Items imported earlier are locked first (a submit may change their votes meanwhile); the
    batch's own new items are not visible to anyone else before the commit.
    """
    voted = sorted(
        set(
            PriorAnnotation.objects.filter(import_batch=batch).values_list(
                "candidate__item__id", flat=True
            )
        )
    )
    new = set(
        Item.objects.filter(candidate__question__import_batch=batch).values_list("pk", flat=True)
    )
    items_lock([pk for pk in voted if pk not in new])
    vote_tally_refresh(project=project, item_ids=voted)


def _finish(
    project: Project,
    batch: ImportBatch,
    writer: ImportWriter,
    n_records: int,
    notes: Callable[[], dict[str, Any]] | None,
) -> ImportResult:
    """Report what was written (or drop an empty batch), enqueue new items, announce."""
    created = {k: v for k, v in sorted(writer.created.items()) if v}
    extra = notes() if notes is not None else {}
    if not any(v for k, v in created.items() if k != "unanchored_claims"):
        batch.delete()
        return ImportResult(batch=None, records=n_records, created={}, notes=extra)
    batch.report = {"records": n_records, "created": created, "notes": extra}
    batch.save(update_fields=["report"])
    if sum(created.values()) >= ANALYZE_ROWS:
        tables_analyze(IMPORTED_TABLES)
    if created.get("prior_annotations"):
        _prior_votes_count(project, batch)
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
    # Imported prior annotations, evaluator labels and resolutions feed every derived result
    # (announce_resolutions marks only the kinds that read the resolved items).
    derived_mark(project_id=project.pk)
    announce_resolutions(project_id=project.pk, resolved=writer.resolved)
    logger.info(
        "workload_import.done",
        extra={"project": project.slug, "batch": batch.pk, "records": n_records},
    )
    return ImportResult(batch=batch, records=n_records, created=created, notes=extra)


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

    ``project`` must have a label policy (its newest version checks label values); ``records``
    are ``(location, object-or-RecordError)`` pairs, streamed; an input whose ``file_sha256``
    this project already imported is not read again; ``notes`` is called after the last record
    for the adapter's counters. ``source_versions`` are written before any record, in order (a
    document's versions are numbered by creation order). ``policies`` are the label policy
    versions the project must hold, restored (creating versions, and giving an unfrozen version
    other content): such a format (a release) imports into a project without questions only,
    unless it is the very input imported before (then "already imported"). ``partition`` gives
    the seed and proportions with which the records' ``partition`` values are frozen.

    Partitions follow :func:`~labeling.services.imports.questions.check_partition`; when
    partitioned questions were created, the split is frozen with ``partition``'s seed and
    proportions at the end of the import. Resolutions
    (:mod:`~labeling.services.imports.resolutions`) resolve their items, which labelling then
    never serves; items resolved are announced after commit.

    ``batch`` of the result is None when the import created nothing.

    Raises:
        NotFound: ``actor`` is not a member of the project.
        PermissionDenied: ``actor`` is not a manager of the project.
        WorkloadImportFailed: one or more records are invalid or conflict with stored rows;
            nothing was written. Its ``errors`` give location, field and reason.
        InvalidInput: the project has no label policy.

    Concurrency: opens its own transaction and locks the Project row, so imports into one
    project run one at a time.
    """
    require_role(
        project=project, actor=actor, roles=MANAGERS, action="import", outsider=PermissionDenied
    )
    # The label-write lock before the project row (labeling/locks.py): a release freeze of
    # this project waits for the import, one of another project does not.
    project_label_writes_lock(project.pk)
    project = project_lock(project.pk)
    previous = ImportBatch.objects.filter(project=project, file_sha256=file_sha256).first()
    if previous is not None:
        return ImportResult(batch=previous, records=0, created={}, already_imported=True)
    has_questions = Question.objects.filter(project=project).exists()
    if policies is not None and has_questions:
        raise _refuse_restore(project, format, filename)
    fresh = not has_questions and project.partition_frozen_at is None
    partition_location, spec = partition_spec(partition)
    restored: Counter[str] = Counter()
    if policies is not None:
        restore_policies(project, policies, not has_questions, restored)
        if actor is not None and actor.is_authenticated:
            # A restored project is the importer's: a staff user who is not a member yet
            # becomes its manager, so the project does not stay without one.
            membership_set(project=project, user=actor, role=Role.MANAGER)
    parse = _project_parser(project)
    writer = ImportWriter(
        project, _create_batch(project, format, filename, file_sha256, actor), fresh
    )
    writer.created.update(restored)
    errors: list[RecordError] = []
    with custom_plans():  # the chunks' statements, planned for the tables as they grow
        n_records = _write_stream(writer, records, source_versions, parse, errors)
    if writer.partitioned and not errors:
        if spec is None:
            errors.append(
                RecordError(
                    partition_location,
                    "partition",
                    "the records give partitions but the input gives no seed and proportions "
                    "to freeze the split with",
                )
            )
        else:
            freeze_partition(project, spec)
            writer.created["partitioned_questions"] += writer.partitioned
    if errors:
        raise WorkloadImportFailed(errors)
    return _finish(project, writer.batch, writer, n_records, notes)


def _project_parser(project: Project) -> Callable[[str, Any], WorkloadRecord]:
    """Return the record check against the project's newest policy (and its other versions).

    Raises:
        InvalidInput: the project has no label policy.
    """
    policy = project.policies.order_by("-version").first()
    if policy is None:
        raise InvalidInput(f"project {project.slug!r} has no label policy; create one first")
    vocabularies = {p.version: policy_vocabulary(p) for p in project.policies.all()}
    return _record_parser(policy_vocabulary(policy), vocabularies)


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

    def readable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        # pyarrow's file wrapper (Parquet) checks it before reading.
        return self.stream.closed


def workload_import_file(
    *,
    project: Project,
    stream: IO[bytes],
    format_name: str,
    filename: str,
    actor: AbstractBaseUser | None = None,
    progress: Callable[[int], object] | None = None,
    claims: str | None = None,
    evaluator_version: str | None = None,
) -> ImportResult:
    """Read a seekable binary file in ``format_name`` and import it with :func:`workload_import`.

    The one entry point of the command, the upload page and the API. ``progress`` (optional) is
    called with the number of bytes read so far in each step, e.g. ``tqdm.update``. ``claims``
    is the claim splitting (a key of :data:`~labeling.importers.claims.CLAIM_MODES`) of a format
    whose answers come without claims; None takes the default (sentences). The batch report
    records it (``notes.claim_splitting``). ``evaluator_version`` declares the version of the
    evaluator whose scores the file carries (a format with ``evaluator_scores``: RAGAS).

    Raises:
        NotFound, PermissionDenied: as :func:`workload_import` (before the file is read).
        InvalidInput: ``format_name`` is not a known format, ``claims`` is unknown or given for
            a format that carries its own claims (field ``claims``), ``evaluator_version`` is
            given for a format without evaluator scores (field ``evaluator_version``), or the
            project has no policy.
        WorkloadImportFailed: invalid records; nothing was written.
    """
    require_role(
        project=project, actor=actor, roles=MANAGERS, action="import", outsider=PermissionDenied
    )
    fmt = _format(format_name)
    options = _import_options(fmt, claims, evaluator_version)
    digest = stream_sha256(stream)
    # The counting wrapper reads like the stream it wraps (the readers use only these methods).
    counted = stream if progress is None else cast(IO[bytes], _CountingStream(stream, progress))
    if fmt.open_with_options is not None:
        source = fmt.open_with_options(counted, filename, options)
    else:
        source = fmt.open(counted, filename)
    return _import_source(project, source, fmt.name, filename, source.digest or digest, actor)


def _format(format_name: str) -> WorkloadFormat:
    """Return the format ``format_name``.

    Raises:
        InvalidInput: no such format.
    """
    known = formats()
    if format_name not in known:
        raise InvalidInput(f"unknown format {echo(format_name)}; one of {sorted(known)}")
    return known[format_name]


def _import_options(
    fmt: WorkloadFormat, claims: str | None, evaluator_version: str | None
) -> ImportOptions:
    """Return the import's choices for ``fmt`` (the default splitting when none is chosen).

    Raises:
        InvalidInput: an unknown claim splitting, a splitting for a format that gives its own
            claims (field ``claims``), or an evaluator version for a format without evaluator
            scores (field ``evaluator_version``).
    """
    wrong_version = evaluator_version_error(fmt.name, evaluator_version)
    if wrong_version is not None:
        raise InvalidInput(wrong_version, field="evaluator_version")
    refused = claims_choice_error(fmt.name, claims)
    if refused is not None:
        raise InvalidInput(refused, field="claims")
    if claims is None:
        return ImportOptions(evaluator_version=evaluator_version)
    return ImportOptions(ClaimSplitter(claims), evaluator_version)


def workload_import_directory(
    *,
    project: Project,
    directory: Path,
    format_name: str,
    actor: AbstractBaseUser | None = None,
    claims: str | None = None,
    evaluator_version: str | None = None,
) -> ImportResult:
    """Import a directory in ``format_name`` (a release, a datasets folder, RAGTruth's files).

    The batch is identified by the digest the format gives (a release: its manifest's sha256).
    ``claims`` and ``evaluator_version`` as in :func:`workload_import_file`.

    Raises:
        NotFound, PermissionDenied: as :func:`workload_import` (before the directory is read).
        InvalidInput: the format is unknown or reads files only, an option as in
            :func:`workload_import_file`, or the project has no policy.
        WorkloadImportFailed: the input does not verify, or invalid records; nothing written.
    """
    require_role(
        project=project, actor=actor, roles=MANAGERS, action="import", outsider=PermissionDenied
    )
    fmt = _format(format_name)
    options = _import_options(fmt, claims, evaluator_version)
    if fmt.open_directory_with_options is not None:
        source = fmt.open_directory_with_options(directory, options)
    elif fmt.open_directory is not None:
        source = fmt.open_directory(directory)
    else:
        raise InvalidInput(f"format {echo(fmt.name)} reads a file, not a directory")
    if source.digest is None:
        source.close()
        raise InvalidInput(
            f"format {echo(fmt.name)} gave no digest for directory {echo(directory.name)}"
        )
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
