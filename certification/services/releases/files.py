"""A release's files from its pinned state: records encoded, the flat tables, the manifest, the zip.

:func:`build_files` streams every file into a directory (labels are read in chunks and written
as they come: JSONL, CSV and one Parquet row group per chunk), then writes the manifest and a
zip of the whole. Nothing in a content file depends on when or where it was built.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import shutil
import zipfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from certification.models import Release, ReleaseBuild
from certification.services.releases.card import dataset_card
from certification.services.releases.provenance import ProvenanceCollector
from certification.services.releases.records import (
    CHUNK,
    ReleaseReader,
    prefetch_possible,
    pseudonymise_raters,
)
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


# A fixed time for every zip member (the earliest a zip can hold): no build time in the archive.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# The keys of a labels.jsonl record in canonical (sorted) order: the line is assembled from them.
_RECORD_KEYS = tuple(sorted(LABEL_RECORD_KEYS))


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


# -- the flat table (CSV and Parquet) -------------------------------------------------------------


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


# -- the files --------------------------------------------------------------------------------


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
