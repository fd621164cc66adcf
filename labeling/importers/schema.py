"""The native workload record (schema version 1): one question per JSONL line.

Validated with pydantic in strict mode (no silent coercion: ``"3"`` is not an int) and
``extra="forbid"`` (a misspelt field is an error, not ignored). Cross-field rules that need the
record as a whole (spans against texts, references between sources and evidence) are checked in
:func:`labeling.importers.record_rules.check_record`, which raises
:class:`~labeling.importers.record_errors.RecordError` with a dotted field path.

Offsets are Unicode code points of the text exactly as given, 0-based, end-exclusive: the quote
of a span ``(start, end)`` in ``text`` is ``text[start:end]`` in Python. Texts are never stripped
or normalised. The full field reference is in README.md ("Native workload format").

Fields that restore a certified release (``labeling/importers/release.py``) are optional and
default to "not given": a record's ``partition``, a source's ``version``, a claim's
``unanchored``, a prior annotation's ``labelled_at``/``policy_version``/``time_spent_seconds``, a
prior claim label's ``boundary_error`` and a candidate's ``resolution``. :class:`PolicyIn`,
:class:`PartitionIn` and :class:`SourceVersionIn` are what a format may give besides records.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictFloat,
    StrictInt,
)

SCHEMA_VERSION = 1

NonEmptyStr = Annotated[str, Field(min_length=1)]
Key = Annotated[str, Field(min_length=1, max_length=255)]
Label = Annotated[str, Field(min_length=1, max_length=64)]
# Integer columns are 32-bit (PositiveIntegerField on PostgreSQL: at most 2**31 - 1).
MAX_INT = 2**31 - 1
Offset = Annotated[StrictInt, Field(ge=0, le=MAX_INT)]
VersionNumber = Annotated[StrictInt, Field(ge=1, le=MAX_INT)]
# A pseudonym is an opaque id, never a name: an e-mail address or text with spaces (a person's
# name) is refused, so it cannot be republished in every later release.
Pseudonym = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^@\s]+$")]
MAX_SEED = 2**63 - 1  # a BigIntegerField


MAX_NUMBER_INT = 2**63 - 1  # an integer written in a number field is stored as a 64-bit value


def _finite(value: float | int) -> float | int:
    if isinstance(value, int) and not -MAX_NUMBER_INT <= value <= MAX_NUMBER_INT:
        # SQLite binds a Python int as a 64-bit integer: a larger one would be an OverflowError
        raise ValueError(
            "expected a finite number that fits 64 bits: an integer of at most 19 digits, or a "
            "decimal such as 1e30"
        )
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite:
        raise ValueError("expected a finite number that fits a 64-bit float")
    return value


Number = Annotated[StrictFloat | StrictInt, AfterValidator(_finite)]
UnitNumber = Annotated[Number, Field(ge=0, le=1)]

_ISO_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def _iso_string(value: Any) -> Any:
    if not isinstance(value, str) or not _ISO_DATETIME.match(value):
        raise ValueError("expected an ISO 8601 string with a UTC offset, e.g. 2024-05-01T12:00:00Z")
    return value


def _in_utc(value: datetime) -> datetime:
    # Stored in UTC; an instant whose UTC year leaves 1..9999 cannot be stored or read back.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the instant is outside the years 1 to 9999 in UTC") from None


# ISO 8601 with a UTC offset. JSON has no datetime type, so the string is parsed (hence not
# strict), but only a string: numbers are not read as Unix times.
Timestamp = Annotated[
    AwareDatetime, Strict(False), BeforeValidator(_iso_string), AfterValidator(_in_utc)
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class EvidenceIn(_Strict):
    """A span of a pinned source of the same record, cited as evidence."""

    source: Key
    start: Offset
    end: Offset
    quote: str


class ClaimIn(_Strict):
    """An atomic claim; ``start``/``end`` optional (located in the answer when omitted).

    ``unanchored: true`` stores the claim without a span and without locating it (then ``start``
    and ``end`` must be omitted).
    """

    text: NonEmptyStr
    start: Offset | None = None
    end: Offset | None = None
    machine_split: StrictBool = False
    unanchored: StrictBool = False


class EvaluatorLabelIn(_Strict):
    """An evaluator's output; ``available: false`` records that it produced nothing."""

    evaluator: Key
    version: Key
    claim: Offset | None = None
    label: Label | None = None
    score: Number | None = None
    available: StrictBool = True
    raw: Any = None


class EvaluatorLabelRecord(_Strict):
    """One line of an evaluator-label file: a label of an already imported candidate or claim.

    ``unavailable: true`` records that the evaluator produced nothing (never a verdict): it then
    has no label and no score. Used by ``labeling.services.evaluator_labels_import``.
    """

    question: Key
    candidate: Key
    claim: Offset | None = None
    evaluator: Key
    version: Key
    label: Label | None = None
    score: Number | None = None
    unavailable: StrictBool = False
    raw: Any = None


class PriorClaimLabelIn(_Strict):
    """A prior annotator's label of one claim (by index), with optional evidence."""

    claim: Offset
    label: Label | None = None
    reason: Label | None = None
    raw_label: Any = None
    boundary_error: StrictBool = False
    evidence: list[EvidenceIn] = Field(default_factory=list)


class PriorSpanIn(_Strict):
    """A span of the answer that a prior annotator flagged, with the dataset's raw labels."""

    start: Offset
    end: Offset
    quote: str
    labels: list[str] = Field(default_factory=list)
    note: str = ""
    evidence: EvidenceIn | None = None


class PriorAnnotationIn(_Strict):
    """A label the data already carries, by a pseudonymous annotator.

    ``labelled_at`` (when it was made), ``policy_version`` (the project's policy version it was
    made under) and ``time_spent_seconds`` are optional provenance.
    """

    annotator: Pseudonym
    origin: Literal["human", "automatic"] = "human"
    answer_label: Label | None = None
    answer_reason: Label | None = None
    note: str = ""
    labelled_at: Timestamp | None = None
    policy_version: VersionNumber | None = None
    time_spent_seconds: Annotated[Number, Field(ge=0)] | None = None
    claim_labels: list[PriorClaimLabelIn] = Field(default_factory=list)
    spans: list[PriorSpanIn] = Field(default_factory=list)
    raw: Any = None


# The fields added for releases; dropped from fingerprints while at their default, so records
# imported before they existed keep their fingerprints (a re-import stays a no-op).
PRIOR_PROVENANCE_FIELDS = ("labelled_at", "policy_version", "time_spent_seconds")


class ResolvedClaimLabelIn(_Strict):
    """A resolution's label of one claim (by index), with its evidence."""

    claim: Offset
    label: Label
    reason: Label | None = None
    evidence: list[EvidenceIn] = Field(default_factory=list)


class ResolutionIn(_Strict):
    """The resolved label of a candidate, as a release carries it (imported, never recomputed).

    Mirrors the database constraints of ``Resolution``: ``consensus`` and ``adjudicated`` carry
    an ``answer_label`` and no ``unresolved_reason``; ``unresolved`` carries an
    ``unresolved_reason``, no answer label or reason and no claim labels. ``adjudicator`` (a
    pseudonym) is required for ``adjudicated`` and ``unresolved`` and must be null for
    ``consensus``. ``resolved_at`` defaults to the import's time and ``policy_version`` to the
    project's newest policy.
    """

    status: Literal["consensus", "adjudicated", "unresolved"]
    answer_label: Label | None = None
    answer_reason: Label | None = None
    unresolved_reason: Label | None = None
    rationale: str = ""
    adjudicator: Pseudonym | None = None
    resolved_at: Timestamp | None = None
    policy_version: VersionNumber | None = None
    claim_labels: list[ResolvedClaimLabelIn] = Field(default_factory=list)


class GoldIn(_Strict):
    """The reference labels that make a candidate's item a gold item (managers' secret).

    ``claim_labels`` label every claim of the candidate once, by index; the labels are checked
    against the project's labelling policy (the newest draft before labelling starts) as an
    annotation is, without ``cannot_decide``. Evidence offsets are code points.
    """

    answer_label: Label
    answer_reason: Label | None = None
    rationale: str = ""
    claim_labels: list[ResolvedClaimLabelIn] = Field(default_factory=list)


class CandidateIn(_Strict):
    """One candidate answer with its claims, evaluator labels and prior annotations."""

    id: Key
    text: str
    generator: Annotated[str, Field(max_length=255)] = ""
    generator_settings: dict[str, Any] = Field(default_factory=dict)
    sample_index: Offset | None = None
    canonical_form: str | None = None
    retrieval_score: UnitNumber | None = None
    confidence: UnitNumber | None = None
    acceptance_score: Number | None = None
    frequency_rank: Annotated[StrictInt, Field(ge=1, le=MAX_INT)] | None = None
    is_selected: StrictBool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    claims: list[ClaimIn] = Field(default_factory=list)
    evaluator_labels: list[EvaluatorLabelIn] = Field(default_factory=list)
    prior_annotations: list[PriorAnnotationIn] = Field(default_factory=list)
    resolution: ResolutionIn | None = None
    gold: GoldIn | None = None


SourceKey = Annotated[str, Field(min_length=1, max_length=512)]


class SourceVersionIn(_Strict):
    """A pinned source version given on its own (a format's preamble, before any record).

    ``version``, when given, is the number the text must have among its document's versions in
    the project (1 for the first text, by creation order); the import checks it.
    """

    id: SourceKey
    text: str
    uri: str = ""
    published_at: Timestamp | None = None
    observed_at: Timestamp | None = None
    version: VersionNumber | None = None


class SourceIn(_Strict):
    """A retrieved source: ``id`` names the document within the project; the text is pinned.

    ``version`` as in :class:`SourceVersionIn`.
    """

    id: SourceKey
    text: str
    uri: str = ""
    published_at: Timestamp | None = None
    observed_at: Timestamp | None = None
    rank: Offset | None = None
    score: Number | None = None
    version: VersionNumber | None = None


class WorkloadRecord(_Strict):
    """One question with its sources and candidates (one JSONL line)."""

    schema_version: Literal[1] = 1
    external_id: Key
    text: str
    group_key: Annotated[str, Field(max_length=255)] = ""
    partition: Literal["dev", "calibration", "test"] | None = None
    slices: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    sources: list[SourceIn] = Field(default_factory=list)
    candidates: Annotated[list[CandidateIn], Field(min_length=1)]


class PolicyIn(_Strict):
    """A label policy version a format gives (a release's ``policies``), restored as is."""

    version: VersionNumber
    guideline: str
    evidence_relation: Literal["source_relative", "external_truth"]
    answer_labels: Annotated[list[Label], Field(min_length=1)]
    claim_labels: Annotated[list[Label], Field(min_length=1)]
    unavailable_reasons: list[Label]


class PartitionIn(_Strict):
    """The frozen split a format gives with partitioned records: seed and declared proportions."""

    seed: Annotated[StrictInt, Field(ge=0, le=MAX_SEED)]
    proportions: dict[Literal["dev", "calibration", "test"], UnitNumber]


@dataclass(frozen=True)
class PolicyVocabulary:
    """The label values a project's policy allows: answer labels, claim labels, reasons."""

    answer_labels: frozenset[str]
    claim_labels: frozenset[str]
    reasons: frozenset[str]
