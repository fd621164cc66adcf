"""The certlabel release format (schema 1.x): file names, canonical JSON, hashing, counts.

Pure Python (no Django): written by ``certification.services.releases``, read by
``labeling.importers.release`` and ``manage.py verify_release`` after
:mod:`labeling.release_verify` verified it; the files are described in
docs/releases.md ("Files"). Invariants: a reader refuses an unknown schema major; offsets are
Unicode code points, 0-based, end-exclusive; content files hold no wall-clock value of the
build, so the same database state gives byte-identical files; times that are data are ISO 8601
in UTC (``+00:00``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from labeling import vocabulary
from labeling.vocabulary import EVIDENCE_UNAVAILABLE

# 1.1: labels.csv escapes cells a spreadsheet would read as a formula (csv_cell).
# 1.2: the manifest counts labels per label policy version (counts.per_policy_version).
# 1.3: each run of the manifest's certifies says whether it certifies (certified, reason), and
#      report.json holds each run's per-question decisions on its test partition (decisions).
# 1.4: each run of the manifest's certifies gives each method of its spec on its own (methods).
SCHEMA_VERSION = "1.4"
SCHEMA_MAJOR = 1
FORMAT_NAME = "certlabel-release"

MANIFEST = "manifest.json"
LABELS_JSONL = "labels.jsonl"
LABELS_CSV = "labels.csv"
LABELS_PARQUET = "labels.parquet"
SOURCES_JSONL = "sources.jsonl"
LEDGER = "ledger.json"
REPORT = "report.json"
PROVENANCE = "provenance.jsonld"
CARD = "README.md"
ARCHIVE = "release.zip"

# Every file a release holds besides the manifest, in the manifest's order.
CONTENT_FILES = (
    LABELS_JSONL,
    LABELS_CSV,
    LABELS_PARQUET,
    SOURCES_JSONL,
    LEDGER,
    REPORT,
    PROVENANCE,
    CARD,
)
MEDIA_TYPES = {
    MANIFEST: "application/json",
    LABELS_JSONL: "application/jsonl",
    LABELS_CSV: "text/csv",
    LABELS_PARQUET: "application/vnd.apache.parquet",
    SOURCES_JSONL: "application/jsonl",
    LEDGER: "application/json",
    REPORT: "application/json",
    PROVENANCE: "application/ld+json",
    CARD: "text/markdown",
    ARCHIVE: "application/zip",
}

# -- CSV cells ------------------------------------------------------------------------------
#: The characters with which a spreadsheet cell starts a formula (``=HYPERLINK(...)``, ``+``,
#: ``-``, ``@``) or after which it looks for one (a leading tab or carriage return).
CSV_FORMULA_START = "=+-@\t\r"
#: A cell that needs the escape, as a regular expression (RE2 and Python alike): a formula start,
#: after any number of ``'`` (so that a value that already starts with ``'=`` is escaped too,
#: and unescaping is exact).
CSV_ESCAPE_PATTERN = "^('*[=+\\-@\t\r])"


def csv_cell(value: Any) -> Any:
    """Return ``value`` as a CSV cell that no spreadsheet runs as a formula.

    A string that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (after any
    number of ``'``) gets one more leading ``'``; any other value is returned unchanged. A reader
    gets the value back exactly with :func:`csv_cell_value`. Every CSV the application writes
    (the audit disagreement download, a release's ``labels.csv``) applies this rule.
    """
    if isinstance(value, str) and value.lstrip("'")[:1] in _FORMULA_START_SET:
        return "'" + value
    return value


def csv_cell_value(cell: str) -> str:
    """Undo :func:`csv_cell`: the value a CSV cell written by certlabel stands for."""
    if cell.startswith("'") and cell.lstrip("'")[:1] in _FORMULA_START_SET:
        return cell[1:]
    return cell


_FORMULA_START_SET = frozenset(CSV_FORMULA_START)

# The keys of one labels.jsonl record (each documented in README "Releases").
LABEL_RECORD_KEYS = (
    "question",
    "candidate",
    "claims",
    "annotations",
    "resolution",
    "evaluator_labels",
)
# The keys of every object in labels.jsonl and sources.jsonl (README "Releases"): the exporter
# writes exactly these (tests/certification/services/test_release_build.py checks it) and the
# importer refuses any other key in a release of this schema version.
QUESTION_KEYS = ("id", "text", "group_key", "partition", "slices", "metadata", "sources")
QUESTION_SOURCE_KEYS = ("id", "version", "sha256", "rank", "score", "published_at", "observed_at")
SOURCE_LINE_KEYS = (
    "id",
    "version",
    "sha256",
    "length",
    "uri",
    "published_at",
    "observed_at",
    "text",
)
CLAIM_KEYS = ("index", "text", "start", "end", "machine_split")
ANNOTATION_KEYS = (
    "annotator",
    "origin",
    "policy_version",
    "labelled_at",
    "time_spent_seconds",
    "answer_label",
    "answer_reason",
    "comment",
    "claim_labels",
    "spans",
    "raw",
)
ANNOTATION_CLAIM_LABEL_KEYS = (
    "claim",
    "label",
    "reason",
    "boundary_error",
    "raw_label",
    "evidence",
)
SPAN_KEYS = ("start", "end", "quote", "labels", "note", "evidence")
EVIDENCE_KEYS = ("source", "version", "sha256", "start", "end", "quote")
RESOLVED_CLAIM_LABEL_KEYS = ("claim", "label", "reason", "evidence")
# The one list of a candidate's own fields: (key in a release record, ``CandidateAnswer`` field),
# in release order. The exporter reads the fields, the release reader checks the keys and the
# workload import writes the columns (``labeling.services.imports.questions``).
CANDIDATE_FIELDS: tuple[tuple[str, str], ...] = (
    ("id", "key"),
    ("text", "text"),
    ("generator", "generator"),
    ("generator_settings", "generator_settings"),
    ("sample_index", "sample_index"),
    ("canonical_form", "canonical_form"),
    ("retrieval_score", "retrieval_score"),
    ("confidence", "confidence"),
    ("acceptance_score", "acceptance_score"),
    ("frequency_rank", "frequency_rank"),
    ("is_selected", "is_selected"),
    ("metadata", "metadata"),
)
CANDIDATE_KEYS = tuple(key for key, _ in CANDIDATE_FIELDS)
CANDIDATE_MODEL_FIELDS = tuple(name for _, name in CANDIDATE_FIELDS)
EVALUATOR_LABEL_KEYS = ("evaluator", "version", "claim", "label", "score", "available", "raw")
RESOLUTION_KEYS = (
    "status",
    "answer_label",
    "answer_reason",
    "unresolved_reason",
    "rationale",
    "adjudicator",
    "resolved_at",
    "policy_version",
)
RESOLUTION_RECORD_KEYS = (*RESOLUTION_KEYS, "claim_labels")

PENDING = vocabulary.PENDING  # a candidate with no resolution yet (still open or in the queue)

# The flat table (CSV and Parquet): name and Arrow type name, one row per candidate.
TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("question_id", "string"),
    ("question_text", "string"),
    ("group_key", "string"),
    ("partition", "string"),
    ("candidate_id", "string"),
    ("candidate_text", "string"),
    ("generator", "string"),
    ("sample_index", "int64"),
    ("canonical_form", "string"),
    ("retrieval_score", "float64"),
    ("confidence", "float64"),
    ("acceptance_score", "float64"),
    ("frequency_rank", "int64"),
    ("is_selected", "bool"),
    ("status", "string"),
    ("answer_label", "string"),
    ("answer_reason", "string"),
    ("unresolved_reason", "string"),
    ("rationale", "string"),
    ("adjudicator", "string"),
    ("resolved_at", "string"),
    ("policy_version", "int64"),
    ("n_claims", "int64"),
    ("n_annotations", "int64"),
    ("claims_json", "string"),
    ("resolved_claim_labels_json", "string"),
    ("annotations_json", "string"),
    ("evaluator_labels_json", "string"),
    ("sources_json", "string"),
    ("slices_json", "string"),
    ("question_metadata_json", "string"),
    ("generator_settings_json", "string"),
    ("candidate_metadata_json", "string"),
)


class ReleaseFormatError(Exception):
    """A release that cannot be read or does not verify; ``problems`` lists every finding."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# U+2028 and U+2029 in UTF-8: the canonical form escapes them (see canonical_json_bytes).
LINE_SEPARATORS = ("\u2028".encode(), "\u2029".encode())


def canonical_json_bytes(value: Any) -> bytes:
    """Return ``value`` as canonical JSON in UTF-8: sorted keys, no spaces, text not escaped.

    Encoded by orjson (faster than the standard library on release records); floats are written
    in their shortest round-trip
    form (``1e-05`` as ``0.00001``). An integer beyond 64 bits, which orjson refuses, is
    written by the standard library with the same rules. Callers pass finite numbers only
    (JSON has no NaN; releases turn a non-finite float into null).
    """
    try:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        data = json.dumps(
            value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()
    # U+2028 and U+2029 are valid inside JSON strings but end a line for many readers (Python's
    # str.splitlines, JavaScript before ES2019): escape them so one record stays one line.
    if LINE_SEPARATORS[0] in data or LINE_SEPARATORS[1] in data:
        data = data.replace(LINE_SEPARATORS[0], b"\\u2028").replace(LINE_SEPARATORS[1], b"\\u2029")
    return data


def canonical_json(value: Any) -> str:
    """Return ``value`` as canonical JSON text (see :func:`canonical_json_bytes`)."""
    return canonical_json_bytes(value).decode()


def pretty_json(value: Any) -> str:
    """Return ``value`` as sorted, indented JSON ending with a newline (the ``*.json`` files)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


def iso_utc(value: datetime | None) -> str | None:
    """Return ``value`` in UTC as ISO 8601 with ``+00:00`` (microseconds when not zero)."""
    return None if value is None else value.astimezone(UTC).isoformat()


def finite_or_none(value: float | None) -> float | None:
    """Return ``value`` unless it is NaN or infinite (then None: JSON cannot hold it)."""
    if value is None or math.isfinite(value):
        return value
    return None


def sha256_stream(stream: IO[bytes], chunk: int = 1 << 20) -> tuple[str, int]:
    """Return (hex sha256, size in bytes) of everything left in ``stream``."""
    digest = hashlib.sha256()
    size = 0
    while block := stream.read(chunk):
        digest.update(block)
        size += len(block)
    return digest.hexdigest(), size


def sha256_file(path: Path) -> tuple[str, int]:
    """Return (hex sha256, size in bytes) of the file at ``path``."""
    with path.open("rb") as stream:
        return sha256_stream(stream)


def schema_major(version: Any) -> int:
    """Return the major number of a manifest's ``schema_version`` ("1.0" → 1).

    Raises:
        ReleaseFormatError: the value is not a "MAJOR.MINOR" string.
    """
    if not isinstance(version, str) or not version.count(".") == 1:
        raise ReleaseFormatError(
            [f"manifest.json: schema_version {echo_value(version)} is not 'MAJOR.MINOR'"]
        )
    major, minor = version.split(".")
    if not (major.isdigit() and minor.isdigit()):
        raise ReleaseFormatError(
            [f"manifest.json: schema_version {echo_value(version)} is not 'MAJOR.MINOR'"]
        )
    return int(major)


def check_schema_version(manifest: Mapping[str, Any]) -> None:
    """Refuse a manifest of another format or of a schema major this reader does not know.

    Raises:
        ReleaseFormatError: naming the field and the supported major.
    """
    if manifest.get("format") != FORMAT_NAME:
        raise ReleaseFormatError(
            [
                f"manifest.json: format is {echo_value(manifest.get('format'))}, "
                f"expected {FORMAT_NAME!r}"
            ]
        )
    major = schema_major(manifest.get("schema_version"))
    if major != SCHEMA_MAJOR:
        raise ReleaseFormatError(
            [
                f"manifest.json: schema_version {echo_value(manifest['schema_version'])} has major "
                f"{major}; "
                f"this certlabel reads major {SCHEMA_MAJOR} only"
            ]
        )


@dataclass
class CountBlock:
    """Counts of one population (all candidates, or one partition) of a labels file."""

    items: int = 0
    consensus: int = 0
    adjudicated: int = 0
    unresolved: int = 0
    pending: int = 0
    answers_unavailable: int = 0
    claims: int = 0
    resolved_claim_labels: int = 0
    claims_unavailable: int = 0
    annotations: int = 0
    evaluator_labels: int = 0

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one labels.jsonl record."""
        self.items += 1
        self.claims += len(record["claims"])
        self.annotations += len(record["annotations"])
        self.evaluator_labels += len(record["evaluator_labels"])
        resolution = record["resolution"]
        if resolution is None:
            self.pending += 1
            return
        setattr(self, resolution["status"], getattr(self, resolution["status"]) + 1)
        if resolution["answer_label"] == EVIDENCE_UNAVAILABLE:
            self.answers_unavailable += 1
        for label in resolution["claim_labels"]:
            self.resolved_claim_labels += 1
            if label["label"] == EVIDENCE_UNAVAILABLE:
                self.claims_unavailable += 1

    def as_json(self) -> dict[str, Any]:
        """Return every count with its denominator (``{"count", "denominator", "of"}``)."""
        resolved = self.consensus + self.adjudicated + self.unresolved
        labelled = self.consensus + self.adjudicated  # resolutions that carry an answer label

        def share(count: int, denominator: int, of: str) -> dict[str, Any]:
            return {"count": count, "denominator": denominator, "of": of}

        return {
            "items": {"count": self.items, "denominator": None, "of": None},
            "resolved": share(resolved, self.items, "items"),
            "consensus": share(self.consensus, self.items, "items"),
            "adjudicated": share(self.adjudicated, self.items, "items"),
            "unresolved": share(self.unresolved, self.items, "items"),
            "pending": share(self.pending, self.items, "items"),
            "evidence_unavailable_answers": share(
                self.answers_unavailable, labelled, "consensus and adjudicated items"
            ),
            "claims": {"count": self.claims, "denominator": None, "of": None},
            "resolved_claim_labels": share(self.resolved_claim_labels, self.claims, "claims"),
            "evidence_unavailable_claims": share(
                self.claims_unavailable, self.resolved_claim_labels, "resolved claim labels"
            ),
            "annotations": {"count": self.annotations, "denominator": None, "of": None},
            "evaluator_labels": {"count": self.evaluator_labels, "denominator": None, "of": None},
        }


#: The ``per_policy_version`` key of labels whose policy version is not known (imported).
UNKNOWN_POLICY_VERSION = "unknown"


def _version_sort_key(key: str) -> tuple[int, int]:
    return (1, 0) if key == UNKNOWN_POLICY_VERSION else (0, int(key))


@dataclass
class PolicyVersionCounts:
    """Labels of a labels file per label policy version they were made under, never pooled.

    Annotations (people's and imported) count under their ``policy_version``; an item's
    resolution under its own. A label without a known version counts under ``"unknown"``.
    """

    annotations: dict[str, int]
    resolutions: dict[str, dict[str, int]]
    items: int = 0
    total_annotations: int = 0

    @classmethod
    def empty(cls) -> PolicyVersionCounts:
        """Return counts of no record."""
        return cls(annotations={}, resolutions={})

    @staticmethod
    def key(version: Any) -> str:
        """The ``per_policy_version`` key of a label's ``policy_version`` (None: unknown)."""
        return UNKNOWN_POLICY_VERSION if version is None else str(version)

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one labels.jsonl record."""
        self.items += 1
        for annotation in record["annotations"]:
            key = self.key(annotation.get("policy_version"))
            self.annotations[key] = self.annotations.get(key, 0) + 1
            self.total_annotations += 1
        resolution = record["resolution"]
        if resolution is not None:
            statuses = self.resolutions.setdefault(self.key(resolution.get("policy_version")), {})
            statuses[resolution["status"]] = statuses.get(resolution["status"], 0) + 1

    def as_json(self) -> dict[str, Any]:
        """Return, per version key (ascending, ``unknown`` last), counts with denominators.

        Each version: ``annotations`` (of all annotations), ``resolved`` (items whose current
        resolution was made under it, of all items) and ``consensus`` / ``adjudicated`` /
        ``unresolved`` (of the same items).
        """
        keys = sorted(set(self.annotations) | set(self.resolutions), key=_version_sort_key)

        def share(count: int, denominator: int, of: str) -> dict[str, Any]:
            return {"count": count, "denominator": denominator, "of": of}

        out: dict[str, Any] = {}
        for key in keys:
            statuses = self.resolutions.get(key, {})
            out[key] = {
                "annotations": share(
                    self.annotations.get(key, 0), self.total_annotations, "annotations"
                ),
                "resolved": share(sum(statuses.values()), self.items, "items"),
                **{
                    status: share(statuses.get(status, 0), self.items, "items")
                    for status in (
                        vocabulary.CONSENSUS,
                        vocabulary.ADJUDICATED,
                        vocabulary.UNRESOLVED,
                    )
                },
            }
        return out


def label_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Return the manifest's ``counts`` of labels.jsonl records.

    Overall, per partition and per label policy version (:class:`PolicyVersionCounts`).
    The partition of a question without one is ``"unpartitioned"``. Labels count as 1M at the
    scale the benchmark builds, so this streams: ``records`` may be a generator.
    """
    overall = CountBlock()
    partitions: dict[str, CountBlock] = {}
    versions = PolicyVersionCounts.empty()
    for record in records:
        overall.add(record)
        partitions.setdefault(record["question"]["partition"] or "unpartitioned", CountBlock()).add(
            record
        )
        versions.add(record)
    return {
        "overall": overall.as_json(),
        "per_partition": {name: block.as_json() for name, block in sorted(partitions.items())},
        "per_policy_version": versions.as_json(),
    }


def echo_value(value: Any, limit: int = 40) -> str:
    """A value from the release for a problem's text: its repr, at most ``limit`` code points."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
