"""Building a release's files from its pinned state.

``release_build_execute`` (the body of ``release_build_task``) streams every file into the
build's working directory, ``certlabel-builds/build-<id>-<attempt>`` (labels are read in chunks and
written as they come: JSONL, CSV and one Parquet row group per chunk), writes the manifest and a
zip of the whole, and either stores the files (a release's first build) or compares them byte
by byte with the stored ones (a rebuild).
Nothing in a content file depends on when or where it was built.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import logging
import operator
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from certification.locks import release_build_lock
from certification.models import BuildStatus, Release, ReleaseBuild
from certification.selectors import (
    release_content_build,
    release_file_stream,
    release_files,
    release_storage,
)
from certification.services.releases.card import dataset_card
from certification.services.releases.provenance import ProvenanceCollector
from certification.services.releases.records import (
    CHUNK,
    ReleaseReader,
    prefetch_possible,
    pseudonymise_raters,
)
from labeling import dispatch, engine
from labeling.exceptions import Conflict, NotFound
from labeling.release_format import (
    ARCHIVE,
    CARD,
    CONTENT_FILES,
    CSV_ESCAPE_PATTERN,
    FORMAT_NAME,
    LABEL_RECORD_KEYS,
    LABELS_CSV,
    LABELS_JSONL,
    LABELS_PARQUET,
    LEDGER,
    LINE_SEPARATORS,
    MANIFEST,
    MEDIA_TYPES,
    PENDING,
    PROVENANCE,
    REPORT,
    SCHEMA_VERSION,
    SOURCES_JSONL,
    TABLE_COLUMNS,
    CountBlock,
    PolicyVersionCounts,
    canonical_json_bytes,
    pretty_json,
    sha256_file,
)

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

# A fixed time for every zip member (the earliest a zip can hold): no build time in the archive.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# The keys of a labels.jsonl record in canonical (sorted) order: the line is assembled from them.
_RECORD_KEYS = tuple(sorted(LABEL_RECORD_KEYS))


# -- the flat table (CSV and Parquet) -------------------------------------------------------------


# The canonical encoder without its checks, for the whole-record fast path of encode_record.
_DUMP = functools.partial(orjson.dumps, option=orjson.OPT_SORT_KEYS)
# A labels.jsonl line: each top-level value in its key's (sorted) place.
_LINE = ("{" + ",".join(f'"{key}":%b' for key in _RECORD_KEYS) + "}").encode()


class QuestionEncodings:
    """The encodings of the last question seen, reused by the records that share its dict.

    The reader gives a question's candidates one dict, so consecutive records share it. One per
    build. Encoded as :func:`encode_record` encodes a record: by orjson alone unless the
    canonical form needs more (the other values are parts of the question's).
    """

    def __init__(self) -> None:
        self._question: dict[str, Any] | None = None
        self._encoded: dict[str, Any] = {}

    def get(self, question: dict[str, Any]) -> dict[str, Any]:
        """Return the question's encodings.

        They are ``question`` (bytes), ``sources``, ``slices`` and ``metadata`` (text).
        """
        if self._question is not question:
            self._question = question
            try:
                self._encoded = _question_encodings(question, _DUMP)
            except TypeError:
                self._encoded = _question_encodings(question, canonical_json_bytes)
            else:
                line = self._encoded["question"]
                if LINE_SEPARATORS[0] in line or LINE_SEPARATORS[1] in line:
                    self._encoded = _question_encodings(question, canonical_json_bytes)
        return self._encoded


def _question_encodings(question: dict[str, Any], dump: Callable[[Any], bytes]) -> dict[str, Any]:
    """The encodings :meth:`QuestionEncodings.get` returns, each value encoded by ``dump``."""
    return {
        "question": dump(question),
        "sources": dump(question["sources"]).decode(),
        "slices": dump(question["slices"]).decode(),
        "metadata": dump(question["metadata"]).decode(),
    }


def encode_record(
    record: dict[str, Any], questions: QuestionEncodings | None = None
) -> tuple[bytes, dict[str, Any]]:
    """Return the labels.jsonl line of ``record`` (UTF-8, no newline) and its flat table row.

    The line is assembled from the record's top-level values (keys in sorted order), each as
    ``canonical_json_bytes`` encodes it (so the line is ``canonical_json_bytes(record)`` but
    where one value needs the standard library), encoded once and shared with the row's
    ``*_json`` columns.
    The values are first encoded by orjson alone; only a record it refuses (an integer beyond
    64 bits) or whose line holds U+2028/U+2029 (which the canonical form escapes) is encoded
    again value by value by :func:`~labeling.release_format.canonical_json_bytes`. Every
    value but the question's is part of the line, so one look at the line covers them all.
    """
    encoded = (questions or QuestionEncodings()).get(record["question"])
    try:
        line, row = _encode(record, encoded, _DUMP)
    except TypeError:
        return _encode(record, encoded, canonical_json_bytes)
    if LINE_SEPARATORS[0] in line or LINE_SEPARATORS[1] in line:
        return _encode(record, encoded, canonical_json_bytes)
    return line, row


def _encode(
    record: dict[str, Any], encoded: dict[str, Any], dump: Callable[[Any], bytes]
) -> tuple[bytes, dict[str, Any]]:
    """:func:`encode_record` with each value encoded by ``dump``."""
    question, candidate = record["question"], record["candidate"]
    resolution = record["resolution"]
    annotations = dump(record["annotations"])
    claims = dump(record["claims"])
    evaluator_labels = dump(record["evaluator_labels"])
    values = {
        "annotations": annotations,
        "candidate": dump(candidate),
        "claims": claims,
        "evaluator_labels": evaluator_labels,
        "question": encoded["question"],
        "resolution": dump(resolution),
    }
    line = _LINE % tuple(map(values.__getitem__, _RECORD_KEYS))
    resolution = resolution or {}
    row = {
        "question_id": question["id"],
        "question_text": question["text"],
        "group_key": question["group_key"],
        "partition": question["partition"],
        "candidate_id": candidate["id"],
        "candidate_text": candidate["text"],
        "generator": candidate["generator"],
        "sample_index": candidate["sample_index"],
        "canonical_form": candidate["canonical_form"],
        "retrieval_score": candidate["retrieval_score"],
        "confidence": candidate["confidence"],
        "acceptance_score": candidate["acceptance_score"],
        "frequency_rank": candidate["frequency_rank"],
        "is_selected": candidate["is_selected"],
        "status": resolution.get("status", PENDING),
        "answer_label": resolution.get("answer_label"),
        "answer_reason": resolution.get("answer_reason"),
        "unresolved_reason": resolution.get("unresolved_reason"),
        "rationale": resolution.get("rationale"),
        "adjudicator": resolution.get("adjudicator"),
        "resolved_at": resolution.get("resolved_at"),
        "policy_version": resolution.get("policy_version"),
        "n_claims": len(record["claims"]),
        "n_annotations": len(record["annotations"]),
        "claims_json": claims.decode(),
        "resolved_claim_labels_json": dump(resolution.get("claim_labels", [])).decode(),
        "annotations_json": annotations.decode(),
        "evaluator_labels_json": evaluator_labels.decode(),
        "sources_json": encoded["sources"],
        "slices_json": encoded["slices"],
        "question_metadata_json": encoded["metadata"],
        "generator_settings_json": dump(candidate["generator_settings"]).decode(),
        "candidate_metadata_json": dump(candidate["metadata"]).decode(),
    }
    return line, row


# PyArrow is imported where a build writes its tables: every web process loads this module (the
# engine's work kinds, the release pages) and must not load PyArrow with it.
@functools.cache
def arrow_schema() -> pa.Schema:
    """The Arrow schema of labels.parquet and labels.csv (:data:`TABLE_COLUMNS`)."""
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
    }
    return pa.schema([(name, types[kind]) for name, kind in TABLE_COLUMNS])


def csv_safe_table(table: pa.Table) -> pa.Table:
    """Return ``table`` with every string cell escaped for CSV.

    The rule of :func:`~labeling.release_format.csv_cell`, applied by Arrow to whole columns: a
    string starting (after any ``'``) with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
    return gets one more leading ``'``. Other columns are unchanged.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for column in table.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = pc.replace_substring_regex(
                column, pattern=CSV_ESCAPE_PATTERN, replacement="'\\1", max_replacements=1
            )
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=table.schema)


def table_row(record: dict[str, Any]) -> dict[str, Any]:
    """Flatten one labels.jsonl record into a row of :data:`TABLE_COLUMNS` (nested as JSON)."""
    return encode_record(record)[1]


class TableWriter:
    """Writes flat rows to labels.parquet and labels.csv, one Arrow table per chunk of rows.

    Both files come from the same Arrow table (one Parquet row group per chunk; CSV by Arrow's
    writer: a header line, every string quoted, a null as an empty field and an empty string
    as ``""``, booleans ``true``/``false``, LF line ends, and strings a spreadsheet would run
    as a formula escaped with a leading ``'``: :func:`csv_safe_table`).
    """

    def __init__(self, directory: Path) -> None:
        import pyarrow.csv as pa_csv
        import pyarrow.parquet as pq

        self._names = [name for name, _ in TABLE_COLUMNS]
        # A row's values in column order, taken in one call; a chunk's rows are turned into
        # columns at flush.
        self._values = operator.itemgetter(*self._names)
        self._rows: list[tuple[Any, ...]] = []
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="release-table")
        self._pending: Future[None] | None = None
        self._parquet = pq.ParquetWriter(
            directory / LABELS_PARQUET, arrow_schema(), compression="zstd", write_statistics=False
        )
        self._csv = pa_csv.CSVWriter(
            str(directory / LABELS_CSV),
            arrow_schema(),
            write_options=pa_csv.WriteOptions(quoting_style="needed"),
        )

    def add(self, row: dict[str, Any]) -> None:
        """Add one row (written by the next :meth:`flush`)."""
        self._rows.append(self._values(row))

    def flush(self) -> None:
        """Hand the rows added since the last flush to the writing thread.

        They become a Parquet row group and CSV lines; waits for the previous chunk's write
        first.
        """
        if not self._rows:
            return
        import pyarrow as pa

        columns = dict(zip(self._names, zip(*self._rows, strict=True), strict=True))
        table = pa.Table.from_pydict(columns, schema=arrow_schema())
        self._rows = []
        self._wait()
        self._pending = self._pool.submit(self._write, table)

    def _write(self, table: pa.Table) -> None:
        # Arrow encodes and compresses without the GIL: this overlaps the next chunk's reading.
        self._parquet.write_table(table)
        self._csv.write_table(csv_safe_table(table))

    def _wait(self) -> None:
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def close(self) -> None:
        """Flush, wait for the writes and close both files."""
        try:
            self.flush()
            self._wait()
        finally:
            self._pool.shutdown(wait=True)
            self._parquet.close()
            self._csv.close()


# -- the build --------------------------------------------------------------------------------


def _write_json(path: Path, value: Any) -> None:
    path.write_text(pretty_json(value), encoding="utf-8")


def _labels(
    reader: ReleaseReader, directory: Path, build: ReleaseBuild
) -> tuple[dict[str, Any], ProvenanceCollector]:
    """Write labels.jsonl, labels.csv and labels.parquet; return the counts and provenance."""
    ids = reader.candidate_ids()
    ReleaseBuild.objects.filter(pk=build.pk).update(progress_total=len(ids) + 1)
    overall = CountBlock()
    partitions: dict[str, CountBlock] = {}
    versions = PolicyVersionCounts.empty()
    provenance = ProvenanceCollector(reader)
    table = TableWriter(directory)
    questions = QuestionEncodings()
    try:
        # Closed here, on this thread, whatever happens: a prefetching reader left to the garbage
        # collector would hand its clean-up to reading threads that may be gone already.
        with (
            (directory / LABELS_JSONL).open("wb", buffering=1 << 20) as jsonl,
            contextlib.closing(reader.records(ids, prefetch=prefetch_possible())) as records,
        ):
            for done, record in enumerate(records, start=1):
                line, row = encode_record(record, questions)
                jsonl.write(line)
                jsonl.write(b"\n")
                table.add(row)
                overall.add(record)
                partition = record["question"]["partition"] or "unpartitioned"
                partitions.setdefault(partition, CountBlock()).add(record)
                versions.add(record)
                provenance.add(record)
                if done % CHUNK == 0:
                    table.flush()
                    ReleaseBuild.objects.filter(pk=build.pk).update(progress_done=done)
    finally:
        table.close()
    counts = {
        "overall": overall.as_json(),
        "per_partition": {name: block.as_json() for name, block in sorted(partitions.items())},
        # Labels made under different policy versions are counted apart, never pooled.
        "per_policy_version": versions.as_json(),
    }
    return counts, provenance


def _sources(reader: ReleaseReader, directory: Path) -> int:
    lines = 0
    with (directory / SOURCES_JSONL).open("wb", buffering=1 << 20) as stream:
        for record in reader.source_records():
            stream.write(canonical_json_bytes(record))
            stream.write(b"\n")
            lines += 1
    return lines


def _release_json(release: Release) -> dict[str, Any]:
    parent = release.parent
    return {
        "version": release.version,
        "parent": None if parent is None else {"version": parent.version},
        "policy_version": release.policy.version,
        "notes": release.notes,
    }


def _file_entry(directory: Path, name: str) -> dict[str, Any]:
    sha256, size = sha256_file(directory / name)
    return {"name": name, "sha256": sha256, "size": size, "media_type": MEDIA_TYPES[name]}


def _manifest(
    release: Release, reader: ReleaseReader, counts: dict[str, Any], files: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "project": {"slug": release.project_slug, "name": release.project_name},
        "release": _release_json(release),
        "policy": {"version": release.policy.version},
        "policies": reader.policy_records(),
        "partition": release.partition,
        "certifies": release.certifies,
        "pseudonyms": "r-<16 hex>: HMAC-SHA256 of an account under the project's secret key; "
        "imported annotators keep their imported pseudonyms",
        "offsets": "Unicode code points of the stored text, 0-based, end-exclusive",
        "files": files,
        "counts": counts,
    }


def _zip_members(archive: zipfile.ZipFile, folder: str, directory: Path, names: list[str]) -> None:
    """Append the files ``names`` of ``directory`` to ``archive`` under ``folder/``.

    Each entry has fixed times and permissions (no build time in the archive).
    """
    for name in names:
        info = zipfile.ZipInfo(f"{folder}/{name}", date_time=ZIP_TIME)
        # Parquet is compressed already; text gets the fastest deflate (level 1: much faster
        # than the default 6 for a few points of size).
        if name == LABELS_PARQUET:
            info.compress_type = zipfile.ZIP_STORED
        else:
            info.compress_type = zipfile.ZIP_DEFLATED
            # Public as ``compress_level`` from Python 3.13; typeshed does not declare the 3.11
            # attribute, which zipfile reads when writing the member.
            info._compresslevel = 1  # type: ignore[attr-defined]
        info.external_attr = 0o644 << 16
        info.create_system = 3  # Unix, whatever the machine
        with (directory / name).open("rb") as source, archive.open(info, "w") as member:
            shutil.copyfileobj(source, member, 1 << 20)


def build_files(release: Release, directory: Path, build: ReleaseBuild) -> list[dict[str, Any]]:
    """Write every file of ``release`` into ``directory``; return the files' entries.

    The entries (name, sha256, size, media type) are the manifest's and each content file's,
    manifest first. Progress (candidates written) is saved on ``build`` as it goes.
    """
    reader = ReleaseReader(release)
    counts, provenance = _labels(reader, directory, build)
    # The archive starts with the three label files, zipped by a thread (zlib runs without the
    # GIL) while the other files are written and hashed; the manifest comes last.
    folder = f"{release.project_slug}-{release.version}"
    labels = [LABELS_JSONL, LABELS_CSV, LABELS_PARQUET]
    with zipfile.ZipFile(directory / ARCHIVE, "w") as archive, ThreadPoolExecutor(1) as pool:
        zipping = pool.submit(_zip_members, archive, folder, directory, labels)
        try:
            files = _other_files(release, reader, provenance, counts, directory)
        finally:
            zipping.result()
        rest = [name for name in (*CONTENT_FILES, MANIFEST) if name not in labels]
        _zip_members(archive, folder, directory, rest)
    return [_file_entry(directory, MANIFEST), *files]


def _other_files(
    release: Release,
    reader: ReleaseReader,
    provenance: ProvenanceCollector,
    counts: dict[str, Any],
    directory: Path,
) -> list[dict[str, Any]]:
    """Write sources, ledger, report, provenance, card and manifest.

    Returns the content files' entries.
    """
    counts["sources"] = _sources(reader, directory)
    key = release.project.pseudonym_key
    report = pseudonymise_raters(release.report, key)
    _write_json(
        directory / LEDGER,
        [
            {"spec": entry["spec"], "run": entry["run"], "ledger": entry["ledger"]}
            for entry in report["heldout"]
        ],
    )
    _write_json(directory / REPORT, report)
    with (directory / PROVENANCE).open("w", encoding="utf-8", newline="\n") as stream:
        provenance.write(release, stream)
    (directory / CARD).write_text(dataset_card(release, counts), encoding="utf-8")
    files = [_file_entry(directory, name) for name in CONTENT_FILES]
    _write_json(directory / MANIFEST, _manifest(release, reader, counts, files))
    return files


#: The folder, under the release storage (when local) or the system's temporary directory,
#: where each build writes its files: ``build-<build id>-<attempt>``.
WORK_FOLDER = "certlabel-builds"


def _local_root() -> str | None:
    """Return the release storage's directory when it is a local one, else None.

    Files are then built beside their final place and moved, not copied; None means the
    system's temporary directory.
    """
    storage = release_storage()
    if not isinstance(storage, FileSystemStorage):
        return None
    root = Path(storage.location)
    root.mkdir(parents=True, exist_ok=True)
    return str(root)


def build_work_root() -> Path:
    """The one parent folder of every build's working directory on this machine.

    ``CERTLABEL_BUILD_ROOT`` when set; else beside a local release storage (files are then
    moved into place, not copied); else a folder of the system's temporary directory named
    after the database, so that deployments (and test databases) sharing a machine never clean
    up each other's builds.
    """
    if settings.CERTLABEL_BUILD_ROOT:
        return Path(settings.CERTLABEL_BUILD_ROOT)
    local = _local_root()
    if local is not None:
        return Path(local) / WORK_FOLDER
    database = str(connection.settings_dict.get("NAME") or "")
    suffix = hashlib.sha256(database.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"{WORK_FOLDER}-{suffix}"


def build_workdir(build_id: int, attempt: int) -> Path:
    """The working directory of attempt ``attempt`` of build ``build_id``.

    Named by both, so that a folder can be traced to its build and a new attempt never shares
    a folder with a killed one.
    """
    return build_work_root() / f"build-{build_id}-{attempt}"


def _workdirs() -> list[tuple[int, int, Path]]:
    """Every build working directory: (build id, attempt, path)."""
    root = build_work_root()
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        parts = path.name.split("-")
        if path.is_dir() and len(parts) == 3 and parts[0] == "build":
            if parts[1].isdigit() and parts[2].isdigit():
                found.append((int(parts[1]), int(parts[2]), path))
    return found


def build_workdirs_clean() -> list[int]:
    """Remove the working directories of builds that are not running; return their build ids.

    A killed build leaves its directory behind. A folder is kept only while its build is running
    that very attempt; every other one goes (the build finished, failed, was set back to
    pending by recovery, or no longer exists).

    Concurrency: the folders are listed before the builds are read. A folder exists only after
    its attempt's claim committed, so the read sees that attempt running (keep) or over
    (remove): a live build's folder is never removed.
    """
    found = _workdirs()
    if not found:
        return []
    running = dict(
        ReleaseBuild.objects.filter(
            pk__in={pk for pk, _, _ in found}, status=BuildStatus.RUNNING
        ).values_list("pk", "attempts")
    )
    removed = []
    for pk, attempt, path in found:
        if running.get(pk) != attempt:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(pk)
    if removed:
        logger.info("release_build.workdirs_removed", extra={"build_ids": sorted(removed)})
    return sorted(removed)


def _store(directory: Path, prefix: str) -> None:
    """Put every file of a built release into the release storage under ``prefix``."""
    storage = release_storage()
    for name in (MANIFEST, *CONTENT_FILES, ARCHIVE):
        path = prefix + name
        if storage.exists(path):
            storage.delete(path)  # a retried build's leftovers
        if isinstance(storage, FileSystemStorage):
            target = Path(storage.path(path))
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(directory / name, target)  # a rename within one file system
            continue
        with (directory / name).open("rb") as stream:
            saved = storage.save(path, File(stream, name=name))
        if saved != path:
            raise RuntimeError(f"release storage saved {path} as {saved}")


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block; restore its state after.

    A build allocates millions of small dicts, lists and tuples (the records and rows,
    acyclic: reference counting frees them), and every few hundred allocations the collector
    would walk the objects alive, the whole application included (50,000 candidates on
    SQLite: 11.0-12.3 s of CPU for the build with the collector running, 7.4-8.2 s paused).
    The collector is process-wide: while a build runs, other threads' cycles wait too.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _claim(build_id: int, lease_owner: str) -> ReleaseBuild:
    """Take the build's lease for ``lease_owner``; return the build (done: as it is).

    Raises:
        NotFound: no such build.
        Conflict: the build is held by a live worker elsewhere, failed, or out of attempts.
    """
    attempt = engine.claim(
        ReleaseBuild,
        build_id,
        lease_owner=lease_owner,
        when=Q(status__in=[BuildStatus.PENDING, BuildStatus.RUNNING]),
        cap=engine.max_attempts(),
        status=BuildStatus.RUNNING,
        enqueued_at=None,
        error="",
        progress_done=0,
    )
    build = ReleaseBuild.objects.select_related("release", "release__project").filter(pk=build_id)
    found = build.first()
    if found is None:
        raise NotFound(f"no release build {build_id}")
    if attempt is None and found.status != BuildStatus.DONE:
        raise Conflict(f"release build {build_id} is {found.status} (held by {found.lease_owner})")
    return found


def release_build_execute(*, build_id: int, task_id: str | None = None) -> ReleaseBuild:
    """Build (or rebuild and compare) the files of a release; the Celery task's body.

    A first build stores the files under ``<project id>/<release id>/<build id>/`` of the
    release storage. A rebuild writes to its working directory only (:func:`build_workdir`)
    and records, per file, whether its bytes equal the first build's (``matches``,
    ``mismatches``). A done build is returned unchanged (the task may be delivered twice).
    While it builds, its lease's heartbeat is written (:class:`labeling.engine.Lease`); the
    working directory is removed at the end, and one a killed build left behind is removed by
    the next start of that build or by :func:`build_workdirs_clean`.

    Args:
        build_id: the build.
        task_id: the Celery task's id (a retry of the same task takes its own lease back).

    Raises:
        NotFound: no such build.
        Conflict: the build is held by a live worker elsewhere.
    """
    me = engine.owner(task_id)
    build = _claim(build_id, me)
    if build.status == BuildStatus.DONE:
        return build
    release = build.release
    build_workdirs_clean()  # what killed builds left on this machine
    directory = build_workdir(build.pk, build.attempts)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    try:
        with engine.Lease(ReleaseBuild, build.pk, lease_owner=me), cycle_collector_paused():
            update = _build_and_compare(release, build, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    written = engine.release(
        ReleaseBuild,
        build.pk,
        lease_owner=me,
        status=BuildStatus.DONE,
        finished_at=timezone.now(),
        progress_done=F("progress_total"),
        **update,
    )
    if written:
        logger.info(
            "release_build.done",
            extra={
                "build_id": build.pk,
                "release_id": release.pk,
                "manifest_sha256": update["manifest_sha256"],
            },
        )
    build.refresh_from_db()
    return build


def _build_and_compare(release: Release, build: ReleaseBuild, directory: Path) -> dict[str, Any]:
    """Write the files into ``directory``; store or compare them; return the build's fields."""
    entries = build_files(release, directory, build)
    archive_sha256, archive_size = sha256_file(directory / ARCHIVE)
    manifest_sha256 = next(e["sha256"] for e in entries if e["name"] == MANIFEST)
    update: dict[str, Any] = {
        "files": entries,
        "manifest_sha256": manifest_sha256,
        "archive_sha256": archive_sha256,
        "archive_size": archive_size,
    }
    if build.is_rebuild:
        first = release_content_build(release)
        if first is None or first.status != BuildStatus.DONE:
            raise Conflict(f"release {release.version} has no finished build to compare with")
        stored = {e["name"]: e for e in first.files}
        mismatches = [
            {
                "name": entry["name"],
                "sha256": entry["sha256"],
                "stored_sha256": stored.get(entry["name"], {}).get("sha256"),
            }
            for entry in entries
            if stored.get(entry["name"], {}).get("sha256") != entry["sha256"]
        ]
        if first.archive_sha256 != archive_sha256:
            mismatches.append(
                {"name": ARCHIVE, "sha256": archive_sha256, "stored_sha256": first.archive_sha256}
            )
        update.update(matches=not mismatches, mismatches=mismatches)
    else:
        prefix = f"{release.project_id}/{release.pk}/{build.pk}/"
        _store(directory, prefix)
        update["storage_prefix"] = prefix
    return update


RELEASE_BUILD = "release_build"


def release_build_send(build_id: int) -> None:
    """Send a build's task to a worker (the engine's sender for release builds).

    The task is registered as ``RELEASE_BUILD`` by ``certification.tasks``
    (:mod:`labeling.dispatch`).
    """
    dispatch.task(RELEASE_BUILD).delay(build_id)


def release_build_work_kind() -> engine.WorkKind:
    """Release builds as the engine recovers them (registered in ``ready``).

    After each pass the working directories of builds that are not running are removed.
    """
    return engine.WorkKind(
        name=RELEASE_BUILD,
        model=ReleaseBuild,
        send=release_build_send,
        to_do=lambda: Q(status__in=[BuildStatus.PENDING, BuildStatus.RUNNING]),
        failed=lambda attempts: {
            "status": BuildStatus.FAILED,
            "error": f"failed: its worker stopped {attempts} times; not started again",
        },
        after_pass=build_workdirs_clean,
    )


def release_build_fail(
    *, build_id: int, error: str, lease_owner: str | None = None
) -> ReleaseBuild:
    """Mark a build failed with ``error``; a done build is left as it is.

    With ``lease_owner``, only if this owner still holds the build's lease (a worker whose
    lease the recovery pass took back fails nothing: the build is pending again).

    Raises:
        NotFound: no such build.
    """
    with transaction.atomic():
        build = release_build_lock(build_id)
        if build is None:
            raise NotFound(f"no release build {build_id}")
        not_ours = lease_owner is not None and build.lease_owner != lease_owner
        if build.status != BuildStatus.DONE and not not_ours:
            build.status = BuildStatus.FAILED
            build.error = error[:5000] or "failed"
            build.finished_at = timezone.now()
            build.lease_owner = ""
            build.save(update_fields=["status", "error", "finished_at", "lease_owner"])
    return build


def release_export(*, release: Release, directory: Path) -> Path:
    """Copy the files of ``release`` (its done first build) into ``directory/<slug>-<version>``.

    Raises:
        NotFound: the release has no done build yet.
    """
    build = release_content_build(release)
    if build is None or build.status != BuildStatus.DONE:
        raise NotFound(f"release {release.version} has no finished build")
    target = directory / f"{release.project_slug}-{release.version}"
    target.mkdir(parents=True, exist_ok=True)
    for file in release_files(build):
        with (
            release_file_stream(build=build, file=file) as source,
            (target / file.name).open("wb") as out,
        ):
            shutil.copyfileobj(source, out, 1 << 20)
    return target
