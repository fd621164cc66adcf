"""Adapter for RAGAS-style evaluation sets: JSONL, CSV, Parquet or a Hugging Face dataset on disk.

RAGAS (Es et al., 2024, EACL demo) rows, in its 0.1 or 0.2 column names, become one native
record each; every column besides the question, contexts, answer and :data:`KEPT_COLUMNS` is a
score column, one answer-level evaluator label per row (null, an empty cell or NaN is
"unavailable", never a verdict). The mapping and the file kinds are in docs/adapters.md ("RAGAS
evaluation sets"). pyarrow is imported only when an Arrow or Parquet file is read (the web
process loads this module to list the formats). Refused, naming the row and the column: a missing
question, context or answer column, contexts that are not a list of strings, an empty answer, a
non-numeric score, and score columns without a declared evaluator version.
"""

from __future__ import annotations

import ast
import codecs
import csv
import hashlib
import json
import math
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

from labeling.exceptions import WorkloadImportFailed
from labeling.importers.base import ImportOptions, RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.native import MAX_LINE_BYTES, loads_strict, read_jsonl
from labeling.importers.record_errors import (
    RecordError,
    check_depth,
    check_storable,
    echo,
    path_key,
)
from labeling.importers.zipped import ZippedFiles

if TYPE_CHECKING:
    import pyarrow as pa

# Each field under its RAGAS >= 0.2 name first, then its RAGAS 0.1 name.
QUESTION = ("user_input", "question")
CONTEXTS = ("retrieved_contexts", "contexts")
ANSWER = ("response", "answer")
REFERENCE = ("reference", "ground_truth")
ID_COLUMN = "id"
# RAGAS columns that are not scores: kept verbatim in the question's metadata.
KEPT_COLUMNS = frozenset(
    {
        "ground_truths",
        "reference_contexts",
        "retrieved_context_ids",
        "reference_context_ids",
        "multi_responses",
        "rubrics",
        "synthesizer_name",
        "persona_name",
        "query_style",
        "query_length",
    }
)
CANDIDATE_ID = "response"
# Rows per Arrow / Parquet batch read at once.
BATCH_ROWS = 500
UNAVAILABLE_CELLS = frozenset({"", "nan", "NaN", "NAN", "null", "None"})


class _FileError(RecordError):
    """A problem of the whole table (a missing column): reported once, then reading stops."""


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _column(row: dict[str, Any], names: tuple[str, ...], where: str) -> str | None:
    """Return the one column of ``names`` the row has, or None when neither is there."""
    given = [name for name in names if name in row]
    if len(given) > 1:
        raise _FileError(where, given[1], f"both {given[0]} and {given[1]} are given; keep one")
    return given[0] if given else None


def _required(row: dict[str, Any], names: tuple[str, ...], where: str) -> str:
    """Return the one column of ``names`` the row has; refuse the table without either."""
    column = _column(row, names, where)
    if column is None:
        raise _FileError(
            where, names[0], f"missing column: give {names[0]} (or {names[1]}, RAGAS 0.1)"
        )
    return column


def _json_value(value: Any, where: str, field: str) -> Any:
    """Refuse a value JSON cannot hold (a timestamp, bytes, NaN in a kept column)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RecordError(where, field, "expected a finite number or null")
        return value
    if isinstance(value, list):
        return [_json_value(v, where, f"{field}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {
            str(k): _json_value(v, where, f"{field}.{path_key(str(k))}") for k, v in value.items()
        }
    raise RecordError(where, field, f"a {type(value).__name__} cannot be kept; expected JSON data")


def python_list_of_strings(text: str) -> list[str] | None:
    """Read a Python list literal of strings, as pandas writes a list cell; None if it is not.

    RAGAS' own CSV files (``EvaluationDataset.to_csv()``, ``result.to_pandas().to_csv()``) hold
    ``str(list)``: ``['Water boils at 100 C.', "It's"]``, which is not JSON. The text is parsed
    (never evaluated) and accepted only when the whole expression is a list whose elements are
    all string literals: what ``ast.literal_eval`` would return, restricted to that shape.
    """
    try:
        body = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(body, ast.List):
        return None
    elements = body.elts
    if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elements):
        return None
    return [e.value for e in elements]  # type: ignore[attr-defined]


class _Rows:
    """Maps the rows of one table to native records, with the import's options and counters."""

    def __init__(self, options: ImportOptions, counters: dict[str, Any], csv_cells: bool) -> None:
        self.options = options
        self.counters = counters
        # CSV cells are strings: contexts are JSON-encoded and scores are parsed.
        self.csv_cells = csv_cells

    def record(self, row: dict[str, Any], where: str) -> dict[str, Any]:
        """Map one row (column -> value); raises RecordError naming the column."""
        q_col = _required(row, QUESTION, where)
        c_col = _required(row, CONTEXTS, where)
        a_col = _required(row, ANSWER, where)
        r_col = _column(row, REFERENCE, where)
        self.counters["rows_with_0_1_names"] += q_col != QUESTION[0]
        question = row[q_col]
        if not isinstance(question, str) or not question.strip():
            raise RecordError(where, q_col, f"expected a non-empty question, got {echo(question)}")
        contexts = self._contexts(row[c_col], where, c_col)
        answer = row[a_col]
        if not isinstance(answer, str):
            raise RecordError(where, a_col, f"expected the answer as a string, got {echo(answer)}")
        if not answer.strip():
            raise RecordError(where, a_col, "empty answer: there is nothing to label")
        metadata: dict[str, Any] = {"dataset": "ragas"}
        if r_col is not None and row[r_col] not in (None, ""):
            reference = row[r_col]
            if not isinstance(reference, str):
                raise RecordError(where, r_col, f"expected a string or null, got {echo(reference)}")
            metadata["reference"] = reference
        else:
            self.counters["rows_without_reference"] += 1
        known = {q_col, c_col, a_col, r_col, ID_COLUMN}
        for name in sorted(KEPT_COLUMNS & row.keys()):
            metadata[name] = _json_value(self._cell_json(row[name], where, name), where, name)
        labels = [
            self._score(name, row[name], where)
            for name in row
            if name not in known and name not in KEPT_COLUMNS
        ]
        sources: dict[str, dict[str, Any]] = {}
        for context in contexts:
            source_id = f"ragas:{_key(context)}"
            if source_id in sources:
                self.counters["contexts_repeated_in_a_row"] += 1
                continue
            sources[source_id] = {"id": source_id, "text": context, "rank": len(sources) + 1}
        if not contexts:
            self.counters["rows_without_contexts"] += 1
        row_id = row.get(ID_COLUMN)
        if row_id is None:
            key = json.dumps([question, contexts, answer], ensure_ascii=False)
            external_id = f"ragas:{_key(key)}"
        elif isinstance(row_id, str | int) and not isinstance(row_id, bool) and str(row_id):
            external_id = f"ragas:{row_id}"
        else:
            raise RecordError(
                where, ID_COLUMN, f"expected a non-empty string or integer, got {echo(row_id)}"
            )
        self.counters["rows"] += 1
        record = {
            "external_id": external_id,
            "text": question,
            "metadata": metadata,
            "sources": list(sources.values()),
            "candidates": [
                {
                    "id": CANDIDATE_ID,
                    "text": answer,
                    "claims": self.options.splitter.claims(answer),
                    "evaluator_labels": labels,
                }
            ],
        }
        # Strings from CSV, Arrow and Parquet have not been through the strict JSON reader.
        check_storable(record, where)
        check_depth(record, where)
        return record

    def _cell_json(self, value: Any, where: str, field: str) -> Any:
        """A CSV cell holding a list or object is JSON-encoded (or a Python list); decode it."""
        if not self.csv_cells or not isinstance(value, str) or value[:1] not in ("[", "{"):
            return value
        try:
            return loads_strict(value, where)
        except RecordError as exc:
            raise RecordError(where, field, exc.reason) from None
        except (ValueError, RecursionError):
            strings = python_list_of_strings(value)
            if strings is None:
                raise RecordError(where, field, "expected a JSON-encoded value") from None
            return strings

    def _contexts(self, value: Any, where: str, field: str) -> list[str]:
        if self.csv_cells and isinstance(value, str):
            try:
                value = loads_strict(value, where)
            except RecordError as exc:
                raise RecordError(where, field, exc.reason) from None
            except (ValueError, RecursionError):
                value = python_list_of_strings(value)
                if value is None:
                    raise RecordError(
                        where,
                        field,
                        'expected a list of strings, JSON ["first context", "second"] or '
                        "Python ['first context', 'second'] as pandas writes it",
                    ) from None
        if not isinstance(value, list):
            raise RecordError(
                where, field, f"expected a list of context strings, got {type(value).__name__}"
            )
        for index, context in enumerate(value):
            if not isinstance(context, str):
                raise RecordError(
                    where, f"{field}[{index}]", f"expected a string, got {type(context).__name__}"
                )
        return value

    def _score(self, name: str, value: Any, where: str) -> dict[str, Any]:
        """Map one score cell to an evaluator label (unavailable for null / NaN / empty)."""
        version = self.options.evaluator_version
        field = path_key(name)
        if not version:
            raise _FileError(
                where,
                field,
                f"column {echo(name)} is read as an evaluator score (every column besides the "
                "question, contexts, answer, reference and id is); declare the version of the "
                "evaluator that computed the scores (evaluator_version, e.g. ragas-0.2.6)",
            )
        self.counters["score_columns"].setdefault(name, 0)
        raw = value
        if self.csv_cells and isinstance(value, str):
            raw = value
            if value.strip() in UNAVAILABLE_CELLS:
                value = None
            else:
                try:
                    value = float(value)
                except ValueError:
                    raise RecordError(where, field, f"score {echo(raw)} is not a number") from None
                if value.is_integer() and abs(value) < 2**53:
                    value = int(value)
        if isinstance(value, float) and math.isnan(value):
            value, raw = None, None
        label: dict[str, Any] = {"evaluator": name, "version": version}
        if value is None:
            self.counters["scores_unavailable"] += 1
            return {**label, "available": False, "raw": raw}
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RecordError(where, field, f"score {echo(value)} is not a number")
        if not math.isfinite(value):
            raise RecordError(where, field, f"score {echo(raw)} is not a finite number")
        self.counters["score_columns"][name] += 1
        return {**label, "score": value, "raw": raw}


def _convert(rows: Iterable[tuple[str, Any]], mapper: _Rows) -> Iterator[SourcedRecord]:
    """Map each ``(location, row-or-error)``; a table-wide problem is reported once."""
    for location, row in rows:
        if isinstance(row, RecordError):
            yield location, row
            continue
        try:
            yield location, mapper.record(row, location)
        except _FileError as exc:
            yield location, RecordError(exc.location, exc.field, exc.reason)
            return
        except RecordError as exc:
            yield location, exc


def _csv_rows(stream: IO[bytes], filename: str) -> Iterator[tuple[str, Any]]:
    """Yield ``("row N", {column: cell})`` for each data row of a UTF-8 CSV with a header."""
    csv.field_size_limit(MAX_LINE_BYTES)
    lines = codecs.iterdecode(iter(stream.readline, b""), "utf-8-sig")
    reader = csv.reader(lines)
    number = 0
    try:
        header = next(reader, None)
        if header is None:
            return
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            yield (
                "row 1",
                RecordError(filename, "(header)", f"column {echo(repeated[0])} appears twice"),
            )
            return
        for cells in reader:
            number += 1
            location = f"row {number}"
            if not cells:
                number -= 1
                continue
            if len(cells) != len(header):
                yield (
                    location,
                    RecordError(
                        location, "(row)", f"{len(cells)} cells, but the header has {len(header)}"
                    ),
                )
                continue
            yield location, dict(zip(header, cells, strict=True))
    except UnicodeDecodeError as exc:
        yield (
            f"row {number + 1}",
            RecordError(f"row {number + 1}", "(row)", f"not valid UTF-8 ({exc.reason})"),
        )
    except csv.Error as exc:
        yield f"row {number + 1}", RecordError(f"row {number + 1}", "(row)", f"invalid CSV: {exc}")


def _batches_rows(batches: Iterable[pa.RecordBatch], first: int = 0) -> Iterator[tuple[str, Any]]:
    number = first
    for batch in batches:
        for row in batch.to_pylist():
            number += 1
            yield f"row {number}", row


def _arrow_rows(stream: IO[bytes], where: str) -> Iterator[tuple[str, Any]]:
    """Yield the rows of an Arrow IPC stream, a batch at a time."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        reader = ipc.open_stream(stream)
        yield from _batches_rows(reader)
    except (pa.ArrowException, OSError) as exc:
        yield where, RecordError(where, "(file)", f"not a readable Arrow IPC stream ({exc})")


def _arrow_file_rows(stream: IO[bytes], where: str) -> Iterator[tuple[str, Any]]:
    """Yield the rows of an Arrow IPC file (``ARROW1``, random access), a batch at a time."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        reader = ipc.open_file(stream)
        yield from _batches_rows(reader.get_batch(i) for i in range(reader.num_record_batches))
    except (pa.ArrowException, OSError) as exc:
        yield where, RecordError(where, "(file)", f"not a readable Arrow IPC file ({exc})")


def _parquet_rows(stream: IO[bytes], where: str) -> Iterator[tuple[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        yield from _batches_rows(pq.ParquetFile(stream).iter_batches(batch_size=BATCH_ROWS))
    except (pa.ArrowException, OSError) as exc:
        yield where, RecordError(where, "(file)", f"not a readable Parquet file ({exc})")


def _data_files(state: Any, where: str) -> list[str]:
    """The ``data-*.arrow`` names ``state.json`` lists, in order (plain names only)."""
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not files:
        raise RecordError(where, "_data_files", "expected a non-empty list of data files")
    names = []
    for index, entry in enumerate(files):
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not isinstance(name, str) or PurePosixPath(name).name != name or name in ("", ".", ".."):
            raise RecordError(where, f"_data_files[{index}].filename", "expected a file name")
        names.append(name)
    return names


def _read_state(data: bytes, where: str) -> list[str]:
    try:
        state = loads_strict(data.decode("utf-8"), where)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise RecordError(where, "(file)", "not valid JSON") from None
    return _data_files(state, where)


def _dataset_rows(open_member: Any, state: bytes) -> Iterator[tuple[str, Any]]:
    """Yield the rows of a ``save_to_disk`` folder: its data files in ``state.json``'s order."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        names = _read_state(state, "state.json")
    except RecordError as exc:
        yield exc.location, exc
        return
    number = 0
    for name in names:
        try:
            stream = open_member(name)
        except KeyError:
            yield name, RecordError(name, "(file)", "listed in state.json but missing")
            return
        except RecordError as exc:
            yield name, exc
            return
        with stream:
            try:
                reader = ipc.open_stream(stream)
                for location, row in _batches_rows(reader, number):
                    number += 1
                    yield location, row
            except (pa.ArrowException, OSError) as exc:
                yield name, RecordError(name, "(file)", f"not a readable Arrow IPC stream ({exc})")
                return


def _new_counters(options: ImportOptions) -> dict[str, Any]:
    return {
        "rows": 0,
        "rows_with_0_1_names": 0,
        "score_columns": {},
        "scores_unavailable": 0,
        "rows_without_reference": 0,
        "rows_without_contexts": 0,
        "contexts_repeated_in_a_row": 0,
        "claim_splitting": options.splitter.counts,
    }


def _zip_dataset(stream: IO[bytes], filename: str) -> tuple[Iterator[tuple[str, Any]], Any]:
    """Open a zip of a ``save_to_disk`` folder (at the top of the zip or in one folder)."""
    try:
        zipped = ZippedFiles(
            stream,
            filename,
            "state.json",
            "one Hugging Face datasets folder (state.json, dataset_info.json, data-*.arrow), "
            "as Dataset.save_to_disk writes it",
        )
    except RecordError as exc:
        return iter([(filename, exc)]), None

    def open_member(name: str) -> IO[bytes]:
        if not zipped.has(name):
            raise KeyError(name)
        return zipped.extract(name).open("rb")

    return _dataset_rows(open_member, zipped.extract("state.json").read_bytes()), zipped.close


def open_ragas(stream: IO[bytes], filename: str, options: ImportOptions) -> RecordSource:
    """Open a RAGAS table (Parquet, Arrow, a zipped datasets folder, JSONL or CSV), lazily."""
    counters = _new_counters(options)
    head = stream.read(8)
    stream.seek(0)
    cleanup = None
    if head.startswith(b"PAR1"):
        rows: Iterator[tuple[str, Any]] = _parquet_rows(stream, filename)
        csv_cells = False
    elif head.startswith(b"PK\x03\x04"):
        rows, cleanup = _zip_dataset(stream, filename)
        csv_cells = False
    elif head.startswith(b"\xff\xff\xff\xff"):
        rows, csv_cells = _arrow_rows(stream, filename), False
    elif head.startswith(b"ARROW1"):
        rows, csv_cells = _arrow_file_rows(stream, filename), False
    elif head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        rows, csv_cells = read_jsonl(stream), False
    else:
        rows, csv_cells = _csv_rows(stream, filename), True
    mapper = _Rows(options, counters, csv_cells)
    return RecordSource(_convert(rows, mapper), counters, cleanup=cleanup)


def _directory_digest(directory: Path, names: list[str]) -> str:
    """The sha256 of ``state.json`` and the data files it lists (names and bytes, in order)."""
    digest = hashlib.sha256()
    for name in ["state.json", *names]:
        digest.update(name.encode("utf-8") + b"\0")
        with (directory / name).open("rb") as stream:
            shutil.copyfileobj(stream, _Hasher(digest))
    return digest.hexdigest()


class _Hasher:
    """A write-only file object that feeds a hash (for ``shutil.copyfileobj``)."""

    def __init__(self, digest: Any) -> None:
        self.digest = digest

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return len(data)


def open_ragas_directory(directory: Path, options: ImportOptions) -> RecordSource:
    """Open a Hugging Face ``datasets`` folder written by ``Dataset.save_to_disk``.

    Reads ``state.json`` (its ``_data_files``) and each listed ``data-*.arrow`` (Arrow IPC
    stream format) in order. The import is identified by the sha256 of ``state.json`` and the
    data files.

    Raises:
        WorkloadImportFailed: a ``DatasetDict`` folder (``dataset_dict.json``: import one
            split's folder), no ``state.json``, or a data file it lists is missing.
    """
    counters = _new_counters(options)
    mapper = _Rows(options, counters, csv_cells=False)
    state_path = directory / "state.json"
    where = directory.name or str(directory)

    def refused(reason: str) -> WorkloadImportFailed:
        return WorkloadImportFailed([RecordError(where, "(folder)", reason)])

    if (directory / "dataset_dict.json").is_file():
        raise refused(
            "a DatasetDict folder: import the folder of one split (e.g. train/), one at a time"
        )
    if not state_path.is_file():
        raise refused(
            "no state.json: expected a folder written by Dataset.save_to_disk (state.json, "
            "dataset_info.json, data-*.arrow)"
        )
    state = state_path.read_bytes()
    try:
        names = _read_state(state, "state.json")
    except RecordError as exc:
        raise WorkloadImportFailed([exc]) from None
    missing = [name for name in names if not (directory / name).is_file()]
    if missing:
        raise refused(f"{echo(missing[0])} is listed in state.json but missing")
    rows = _dataset_rows(lambda name: (directory / name).open("rb"), state)
    return RecordSource(
        _convert(rows, mapper), counters, digest=_directory_digest(directory, names)
    )


FORMAT = WorkloadFormat(
    "ragas",
    "RAGAS evaluation set (JSONL, CSV, Parquet, or a Hugging Face datasets folder, zipped): one "
    "question per row, contexts as sources, the answer with split claims, score columns as "
    "evaluator scores",
    lambda stream, filename: open_ragas(stream, filename, ImportOptions()),
    open_with_options=open_ragas,
    open_directory_with_options=open_ragas_directory,
    evaluator_scores=True,
)
