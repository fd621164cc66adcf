"""The native workload record (schema version 1): one question per JSONL line.

Validated with pydantic in strict mode (no silent coercion: ``"3"`` is not an int) and
``extra="forbid"`` (a misspelt field is an error, not ignored). Cross-field rules that need the
record as a whole (spans against texts, references between sources and evidence) are checked in
:func:`check_record`, which raises :class:`RecordError` with a dotted field path.

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
from collections.abc import Callable, Mapping, Sequence
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

from labeling.models import CANNOT_DECIDE, UnresolvedReason
from labeling.vocabulary import CONSENSUS, UNRESOLVED

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
class RecordError(Exception):
    """A problem with one field of one record: where, which field, and why (never the record)."""

    location: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: field {self.field}: {self.reason}"


@dataclass(frozen=True)
class PolicyVocabulary:
    """The label values a project's policy allows: answer labels, claim labels, reasons."""

    answer_labels: frozenset[str]
    claim_labels: frozenset[str]
    reasons: frozenset[str]


# NUL (PostgreSQL text cannot hold it) and UTF-16 surrogates (not encodable as UTF-8).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


#: The most code points of an input value an error reason repeats.
ECHO_LIMIT = 40


def _short(text: str, limit: int = ECHO_LIMIT) -> str:
    """Render at most ``limit`` code points of ``text`` for an error message."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def echo(value: Any, limit: int = ECHO_LIMIT) -> str:
    """Render an input value for an error reason: its ``repr``, at most ``limit`` code points.

    A string shows at most ``limit`` of its own code points (quoted, ``…`` when cut); any other
    value (a number, a list, an object from the file) at most ``limit`` code points of its
    ``repr``. A reason never repeats a long value in full.
    """
    if isinstance(value, str):
        return _short(value, limit)
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


#: The deepest nesting of arrays and objects an imported JSON value may have (a record counts
#: as depth 1). Real records nest a handful of levels; deeper values could not be stored or
#: serialised again (Python's recursion limit) and are refused where they enter.
MAX_JSON_DEPTH = 64


def _field_of(parts: Sequence[str | int]) -> list[str | int]:
    """The leading path parts that name a field: up to the first key not followed by an index."""
    out: list[str | int] = []
    for n, part in enumerate(parts):
        out.append(part)
        if isinstance(part, str) and not (n + 1 < len(parts) and isinstance(parts[n + 1], int)):
            break
    return out


def check_depth(value: Any, location: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse a parsed JSON value nested deeper than ``limit`` arrays and objects.

    The walk is iterative, so a value of any depth is checked without recursion.

    Raises:
        RecordError: naming the field under which the value is too deep (the path down to the
            first key that does not hold a list, e.g. ``candidates[0].generator_settings``)
            and the limit.
    """
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, parts = stack.pop()
        if isinstance(node, dict):
            children: Any = node.items()
        elif isinstance(node, list):
            children = enumerate(node)
        else:
            continue
        if depth > limit:
            field = dotted(_field_of(parts)) or "(record)"
            raise RecordError(
                location,
                field,
                f"nested deeper than {limit} levels of arrays and objects",
            )
        for key, child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, (*parts, key)))


def check_storable(value: Any, location: str, path: str = "") -> None:
    """Refuse any string, key or value, that a database cannot store faithfully.

    NUL (U+0000: PostgreSQL ``text`` and ``jsonb`` refuse it) and lone UTF-16 surrogates (not
    encodable as UTF-8) are refused wherever they occur in a parsed record, metadata included.

    Raises:
        RecordError: naming the field's dotted path and the code point's position.
    """
    if isinstance(value, str):
        bad = _UNSTORABLE.search(value)
        if bad is None:
            return
        i, ch = bad.start(), bad.group()
        what = "NUL (U+0000)" if ch == "\x00" else f"a lone surrogate U+{ord(ch):04X}"
        raise RecordError(location, path or "(record)", f"contains {what} at code point {i}")
    if isinstance(value, dict):
        for key, item in value.items():
            where = dotted([path, key]) if path else path_key(key)
            check_storable(key, location, where)
            check_storable(item, location, where)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            check_storable(item, location, f"{path}[{n}]")


def _check_span(
    text: str, start: int, end: int, quote: str, field: str, location: str, what: str
) -> None:
    if end < start:
        raise RecordError(location, field, f"span end {end} is before its start {start}")
    if end > len(text):
        raise RecordError(
            location,
            field,
            f"span end {end} is past the end of the {what} ({len(text)} code points)",
        )
    if text[start:end] != quote:
        raise RecordError(
            location,
            field,
            f"quote {_short(quote)} differs from the {what} at [{start}:{end}], "
            f"which is {_short(text[start:end])}",
        )


def locate_claim(answer: str, claim: str, after: int) -> int | None:
    """Return the code-point start of ``claim`` in ``answer``, preferring one at or after ``after``.

    Args:
        answer: the candidate answer text.
        claim: the claim text, matched exactly (no stripping, no normalisation).
        after: the end of the previous claim; claims usually follow the answer's order.

    Returns:
        The start offset, or None when ``claim`` is not a substring of ``answer`` (unanchored).
    """
    pos = answer.find(claim, after)
    if pos < 0:
        pos = answer.find(claim)
    return pos if pos >= 0 else None


def check_record(
    record: WorkloadRecord,
    vocabulary: PolicyVocabulary,
    location: str,
    policies: Mapping[int, PolicyVocabulary] | None = None,
) -> None:
    """Check the rules that span fields of one record.

    Args:
        record: the parsed record.
        vocabulary: the labels of the project's newest policy (the default).
        location: where the record came from, for errors.
        policies: the project's policy versions by number; a prior annotation or resolution
            that names a ``policy_version`` must name one of them, and its labels are checked
            against that version. None: no version may be named.

    Raises:
        RecordError: naming the first offending field as a dotted path, e.g.
            ``candidates[2].claims[0].end``.
    """
    rules = _RecordRules(location, vocabulary, policies or {}, _source_texts(record, location))
    seen_ids: set[str] = set()
    seen_indexes: set[int] = set()
    for c, candidate in enumerate(record.candidates):
        at = f"candidates[{c}]"
        if candidate.id in seen_ids:
            raise RecordError(location, f"{at}.id", f"candidate id {echo(candidate.id)} repeats")
        seen_ids.add(candidate.id)
        index = c if candidate.sample_index is None else candidate.sample_index
        if index in seen_indexes:
            raise RecordError(location, f"{at}.sample_index", f"sample index {index} repeats")
        seen_indexes.add(index)
        _check_claims(candidate, at, location)
        _check_evaluator_labels(candidate, at, vocabulary, location)
        _check_prior_annotations(candidate, at, rules)
        if candidate.resolution is not None:
            _check_resolution(
                candidate.resolution, len(candidate.claims), f"{at}.resolution", rules
            )
        if candidate.gold is not None:
            _check_gold(candidate, f"{at}.gold", location, rules.evidence)


@dataclass(frozen=True)
class _RecordRules:
    """What the rules of one record share: where it came from, its policies and source texts."""

    location: str
    vocabulary: PolicyVocabulary
    policies: Mapping[int, PolicyVocabulary]
    sources: Mapping[str, str]

    def policy_of(self, version: int | None, field: str) -> PolicyVocabulary:
        """The policy version ``version`` names (the newest when None)."""
        if version is None:
            return self.vocabulary
        if version not in self.policies:
            raise RecordError(
                self.location,
                field,
                f"policy version {version} is not a label policy version of the project "
                f"(versions {sorted(self.policies)})",
            )
        return self.policies[version]

    def evidence(self, evidence: EvidenceIn, field: str) -> None:
        """Check that ``evidence`` cites a source of the record and quotes its text."""
        if evidence.source not in self.sources:
            raise RecordError(
                self.location,
                f"{field}.source",
                f"unknown source {echo(evidence.source)} (not in sources)",
            )
        _check_span(
            self.sources[evidence.source],
            evidence.start,
            evidence.end,
            evidence.quote,
            field,
            self.location,
            f"text of source {echo(evidence.source)}",
        )


def _source_texts(record: WorkloadRecord, location: str) -> dict[str, str]:
    """The record's source texts by id; a repeated id must repeat its text and version."""
    sources: dict[str, str] = {}
    source_versions: dict[str, int | None] = {}
    for s, source in enumerate(record.sources):
        if source.id in sources and sources[source.id] != source.text:
            raise RecordError(
                location,
                f"sources[{s}].id",
                f"source id {echo(source.id)} repeats with another text",
            )
        if source.id in sources and source_versions[source.id] != source.version:
            raise RecordError(
                location,
                f"sources[{s}].version",
                f"source id {echo(source.id)} repeats with another version",
            )
        sources[source.id] = source.text
        source_versions[source.id] = source.version
    return sources


def _check_claims(candidate: CandidateIn, at: str, location: str) -> None:
    """A claim's span: both ends or neither, none when unanchored, quoting the answer."""
    for k, claim in enumerate(candidate.claims):
        field = f"{at}.claims[{k}]"
        if (claim.start is None) != (claim.end is None):
            raise RecordError(location, field, "give both start and end, or neither")
        if claim.unanchored and claim.start is not None:
            raise RecordError(
                location, f"{field}.unanchored", "an unanchored claim has no start and end"
            )
        if claim.start is not None and claim.end is not None:
            _check_span(
                candidate.text, claim.start, claim.end, claim.text, field, location, "answer"
            )


def _check_evaluator_labels(
    candidate: CandidateIn, at: str, vocabulary: PolicyVocabulary, location: str
) -> None:
    """An evaluator label: a claim of the candidate; a label or score when available; known."""
    n_claims = len(candidate.claims)
    for e, ev in enumerate(candidate.evaluator_labels):
        field = f"{at}.evaluator_labels[{e}]"
        if ev.claim is not None and ev.claim >= n_claims:
            raise RecordError(
                location, f"{field}.claim", f"claim index {ev.claim} but {n_claims} claims"
            )
        if not ev.available and (ev.label is not None or ev.score is not None):
            raise RecordError(
                location, field, "an unavailable evaluator label has no label and no score"
            )
        if ev.available and ev.label is None and ev.score is None:
            raise RecordError(location, field, "give a label or a score, or set available to false")
        allowed = vocabulary.claim_labels if ev.claim is not None else vocabulary.answer_labels
        if ev.label is not None and ev.label not in allowed:
            raise RecordError(
                location, f"{field}.label", f"{echo(ev.label)} is not one of {sorted(allowed)}"
            )


def _check_prior_annotations(candidate: CandidateIn, at: str, rules: _RecordRules) -> None:
    """Prior annotations: one per annotator and policy version, labels of that version, spans."""
    location = rules.location
    n_claims = len(candidate.claims)
    # One annotation per annotator and policy version: an item labelled again under a new
    # version holds one of each.
    annotators: set[tuple[str, int | None]] = set()
    for p, prior in enumerate(candidate.prior_annotations):
        field = f"{at}.prior_annotations[{p}]"
        if (prior.annotator, prior.policy_version) in annotators:
            raise RecordError(
                location,
                f"{field}.annotator",
                f"annotator {echo(prior.annotator)} repeats"
                + ("" if prior.policy_version is None else " under this policy version"),
            )
        annotators.add((prior.annotator, prior.policy_version))
        used = rules.policy_of(prior.policy_version, f"{field}.policy_version")
        # cannot_decide is a vote (it never agrees), as in live annotations.
        _check_label(
            prior.answer_label,
            used.answer_labels | {CANNOT_DECIDE},
            f"{field}.answer_label",
            location,
        )
        _check_label(prior.answer_reason, used.reasons, f"{field}.answer_reason", location)
        labelled: set[int] = set()
        for q, claim_label in enumerate(prior.claim_labels):
            cfield = f"{field}.claim_labels[{q}]"
            _check_claim_index(claim_label.claim, labelled, n_claims, cfield, location)
            _check_label(
                claim_label.label,
                used.claim_labels | {CANNOT_DECIDE},
                f"{cfield}.label",
                location,
            )
            _check_label(claim_label.reason, used.reasons, f"{cfield}.reason", location)
            for v, evidence in enumerate(claim_label.evidence):
                rules.evidence(evidence, f"{cfield}.evidence[{v}]")
        for s, span in enumerate(prior.spans):
            sfield = f"{field}.spans[{s}]"
            _check_span(
                candidate.text, span.start, span.end, span.quote, sfield, location, "answer"
            )
            if span.evidence is not None:
                rules.evidence(span.evidence, f"{sfield}.evidence")


def _check_resolution(
    resolution: ResolutionIn, n_claims: int, field: str, rules: _RecordRules
) -> None:
    """A candidate's resolution: its fields and policy, then its evidence (each span once)."""
    used = rules.policy_of(resolution.policy_version, f"{field}.policy_version")
    _check_resolution_fields(resolution, used, n_claims, field, rules.location)
    for q, resolved in enumerate(resolution.claim_labels):
        spans: set[tuple[str, int, int]] = set()
        for v, evidence in enumerate(resolved.evidence):
            efield = f"{field}.claim_labels[{q}].evidence[{v}]"
            rules.evidence(evidence, efield)
            if evidence.end <= evidence.start:
                raise RecordError(
                    rules.location,
                    f"{efield}.end",
                    "resolved evidence cites at least one code point",
                )
            key = (evidence.source, evidence.start, evidence.end)
            if key in spans:
                raise RecordError(rules.location, efield, "the same span is cited twice")
            spans.add(key)


def _check_claim_index(
    claim: int, labelled: set[int], n_claims: int, field: str, location: str
) -> None:
    """A claim label's ``claim``: an index of the candidate's claims, labelled once (added)."""
    if claim >= n_claims:
        raise RecordError(location, f"{field}.claim", f"claim index {claim} but {n_claims} claims")
    if claim in labelled:
        raise RecordError(location, f"{field}.claim", f"claim {claim} labelled twice")
    labelled.add(claim)


def _check_gold(
    candidate: CandidateIn,
    field: str,
    location: str,
    check_evidence: Callable[[EvidenceIn, str], None],
) -> None:
    """Check a candidate's ``gold``: no votes beside it, each claim labelled once, spans valid.

    The labels themselves are checked against the policy when the reference is written
    (:func:`labeling.services.gold.gold_reference_set`), with the same field names.
    """
    gold = candidate.gold
    if gold is None:
        return
    for votes in ("prior_annotations", "resolution"):
        if getattr(candidate, votes):
            raise RecordError(
                location,
                field,
                f"a gold item has no votes: give gold or {votes}, not both",
            )
    n_claims = len(candidate.claims)
    labelled: set[int] = set()
    for q, claim_label in enumerate(gold.claim_labels):
        cfield = f"{field}.claim_labels[{q}]"
        _check_claim_index(claim_label.claim, labelled, n_claims, cfield, location)
        for v, evidence in enumerate(claim_label.evidence):
            check_evidence(evidence, f"{cfield}.evidence[{v}]")
    missing = sorted(set(range(n_claims)) - labelled)
    if missing:
        raise RecordError(
            location,
            f"{field}.claim_labels",
            f"every claim needs a reference label; claims {missing} have none",
        )


def _check_resolution_fields(
    resolution: ResolutionIn,
    vocabulary: PolicyVocabulary,
    n_claims: int,
    field: str,
    location: str,
) -> None:
    """Check a resolution's fields against its status (the database constraints) and policy."""

    def refuse(name: str, reason: str) -> None:
        raise RecordError(location, f"{field}.{name}", reason)

    status = resolution.status
    if status == UNRESOLVED:
        if resolution.unresolved_reason is None:
            refuse("unresolved_reason", "an unresolved resolution needs an unresolved_reason")
        if resolution.unresolved_reason not in UnresolvedReason.values:
            refuse(
                "unresolved_reason",
                f"{echo(resolution.unresolved_reason)} is not "
                f"one of {sorted(UnresolvedReason.values)}",
            )
        for name in ("answer_label", "answer_reason"):
            if getattr(resolution, name) is not None:
                refuse(name, f"an unresolved resolution has no {name}")
        if resolution.claim_labels:
            refuse("claim_labels", "an unresolved resolution has no claim labels")
    else:
        if resolution.answer_label is None:
            refuse("answer_label", f"a {status} resolution needs an answer_label")
        if resolution.unresolved_reason is not None:
            refuse("unresolved_reason", f"a {status} resolution has no unresolved_reason")
    if status == CONSENSUS and resolution.adjudicator is not None:
        refuse("adjudicator", "a consensus resolution has no adjudicator")
    if status != CONSENSUS and resolution.adjudicator is None:
        refuse("adjudicator", f"an {status} resolution names its adjudicator (a pseudonym)")
    _check_label(
        resolution.answer_label, vocabulary.answer_labels, f"{field}.answer_label", location
    )
    _check_label(resolution.answer_reason, vocabulary.reasons, f"{field}.answer_reason", location)
    labelled: set[int] = set()
    for q, claim_label in enumerate(resolution.claim_labels):
        cfield = f"{field}.claim_labels[{q}]"
        _check_claim_index(claim_label.claim, labelled, n_claims, cfield, location)
        _check_label(claim_label.label, vocabulary.claim_labels, f"{cfield}.label", location)
        _check_label(claim_label.reason, vocabulary.reasons, f"{cfield}.reason", location)


def _check_label(value: str | None, allowed: frozenset[str], field: str, location: str) -> None:
    if value is not None and value not in allowed:
        raise RecordError(location, field, f"{echo(value)} is not one of {sorted(allowed)}")


def format_validation_error(exc: Any, location: str) -> RecordError:
    """Turn the first error of a pydantic ``ValidationError`` into a :class:`RecordError`.

    The input value is deliberately left out: errors never echo records.
    """
    first = exc.errors(include_input=False, include_url=False)[0]
    return RecordError(location, dotted(first["loc"]) or "(record)", first["msg"])


def path_key(key: str) -> str:
    """Render a record's key for a field path: escaped if unprintable, at most 40 characters.

    Keys come from the input (e.g. metadata keys), so a path must neither carry characters a
    response cannot encode nor repeat a long key; the empty key is written ``""``.
    """
    if key == "":
        return '""'  # an empty key is still named: a field is never the empty string
    if not key.isprintable():
        key = key.encode("unicode_escape", "backslashreplace").decode("ascii")
    return key if len(key) <= 40 else key[:40] + "…"


def dotted(parts: Sequence[str | int]) -> str:
    """Join a pydantic-style location into ``a[0].b`` form (keys through :func:`path_key`)."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{path_key(part)}" if out else path_key(part)
    return out
