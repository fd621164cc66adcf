"""Adapter for certlabel releases (``--format release``): a release directory or its zip.

The release is verified first (:mod:`labeling.release_format`: schema major, every file's sha256
and size, every count), before anything is read or written; a zip is extracted by
``extract_release_zip``. It imports into a project without questions only, restoring the policy
versions, the partition and the source versions (in file order, so each text keeps its version
number). Reading is strict: exactly the fields of schema 1.0, except that a newer minor version's
extra fields are ignored and counted (``unknown_fields_ignored``); a ``consensus`` resolution
must be the agreement of its record's votes (:func:`_check_resolution`). A question that
retrieves two versions of one document is refused. Details: docs/adapters.md ("Release").
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
import zipfile
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO, Any

from labeling.exceptions import WorkloadImportFailed
from labeling.importers.base import RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.record_errors import (
    RecordError,
    check_depth,
    check_storable,
    echo,
    path_key,
)
from labeling.importers.validation import validated_stream
from labeling.models import CANNOT_DECIDE
from labeling.release_format import (
    ANNOTATION_CLAIM_LABEL_KEYS,
    ANNOTATION_KEYS,
    CANDIDATE_KEYS,
    CLAIM_KEYS,
    EVALUATOR_LABEL_KEYS,
    EVIDENCE_KEYS,
    LABEL_RECORD_KEYS,
    LABELS_JSONL,
    MANIFEST,
    QUESTION_KEYS,
    QUESTION_SOURCE_KEYS,
    RESOLUTION_KEYS,
    RESOLUTION_RECORD_KEYS,
    RESOLVED_CLAIM_LABEL_KEYS,
    SCHEMA_VERSION,
    SOURCE_LINE_KEYS,
    SOURCES_JSONL,
    SPAN_KEYS,
    ReleaseFormatError,
    extract_release_zip,
    verify_release,
)
from labeling.vocabulary import ADJUDICATED, CONSENSUS, EVIDENCE_UNAVAILABLE

NAME = "release"
# The keys of every object of labels.jsonl and sources.jsonl, as schema 1.0 defines them (the
# exporter, certification/services/releases/records.py, writes exactly these).
PINNED = ("uri", "published_at", "observed_at")
# ImportBatch.report notes: fields a newer minor schema version added, ignored.
IGNORED = "unknown_fields_ignored"
_ESCAPE = re.compile(r"\\u(?:0000|d[89a-f][0-9a-f]{2})", re.IGNORECASE)


class _Malformed(Exception):
    """A line that is not a release record (missing or mistyped key)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {echo(key)}")
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"number {literal[:20]} is out of range")
    return value


def parse_line(raw: bytes, location: str) -> dict[str, Any]:
    """Parse one JSONL line of a release strictly, keeping numbers as written (1.0 stays a float).

    Raises:
        RecordError: not UTF-8, not a JSON object, NaN/Infinity, a repeated key, NUL or a
            lone surrogate in a string, or a value nested deeper than ``MAX_JSON_DEPTH``.
    """
    try:
        text = raw.decode("utf-8")
        value = json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite,
            object_pairs_hook=_unique_keys,
        )
    except UnicodeDecodeError as exc:
        raise RecordError(location, "(line)", f"not valid UTF-8 at byte {exc.start}") from None
    except RecursionError:
        raise RecordError(location, "(line)", "JSON nested too deeply") from None
    except ValueError as exc:
        raise RecordError(location, "(line)", f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RecordError(location, "(line)", "expected a JSON object")
    check_depth(value, location)
    if _ESCAPE.search(text):
        check_storable(value, location)
    return value


# Verification problems read "file: reason"; a reason that starts with one of these names the
# field (a manifest key, or the sha256 or size of a file).
_PROBLEM_FIELD = re.compile(
    r"^(schema_version|format|files\[\d+\]\.name|counts\.[a-z_]+|sha256|size)\b"
)


def _refused(problems: list[str]) -> WorkloadImportFailed:
    """Turn release verification problems ("file: reason") into an import refusal."""
    errors = []
    for problem in problems:
        name, _, reason = problem.partition(": ")
        if not reason:
            name, reason = "release", problem
        match = _PROBLEM_FIELD.match(reason)
        errors.append(RecordError(name, match.group(1) if match else "(file)", reason))
    return WorkloadImportFailed(errors)


def _need(obj: Any, key: str) -> Any:
    if not isinstance(obj, dict):
        raise _Malformed(f"expected an object holding {echo(key)}")
    if key not in obj:
        raise _Malformed(f"missing {echo(key)}")
    return obj[key]


def _list(obj: Any, key: str) -> list[Any]:
    value = _need(obj, key)
    if not isinstance(value, list):
        raise _Malformed(f"{echo(key)} is not a list")
    return value


def _minor(version: str) -> int:
    """The minor number of a verified ``schema_version`` ("1.2" → 2)."""
    return int(version.split(".")[1])


class _Fields:
    """Checks that release objects hold only the fields the format defines.

    A field the reader does not know is refused (naming the line and the field), unless the
    release's schema minor version is newer than the reader's (``lenient``): a newer minor may
    add fields, which are then ignored and counted in ``counters[IGNORED]``.
    """

    def __init__(self, lenient: bool, counters: dict[str, Any]) -> None:
        self.lenient = lenient
        self.counters = counters
        if lenient:
            counters[IGNORED] = 0

    def check(
        self, obj: Any, known: Collection[str], at: str, field: str, repeats: int = 1
    ) -> None:
        """Refuse (or count, ``repeats`` times) the keys of ``obj`` that are not ``known``.

        Raises:
            RecordError: an unknown key (strict reading), naming ``field`` + the key.
            _Malformed: ``obj`` is not an object.
        """
        if not isinstance(obj, dict):
            raise _Malformed(f"{field or 'the line'} is not an object")
        unknown = [key for key in obj if key not in known]
        if not unknown:
            return
        if self.lenient:
            self.counters[IGNORED] += len(unknown) * repeats
            return
        name = path_key(unknown[0])
        # the release's own (verified) schema version: it is not newer than the reader's
        version = self.counters.get("schema_version", SCHEMA_VERSION)
        raise RecordError(
            at,
            f"{field}.{name}" if field else name,
            f"unknown field: release schema {version} does not define it (only a newer "
            "minor schema version may add fields, which are then ignored)",
        )


class _Sources:
    """The versions of ``sources.jsonl``: an index by (id, version), texts read on demand."""

    def __init__(self, path: Path, fields: _Fields) -> None:
        self.path = path
        self.index: dict[tuple[str, int], tuple[int, str, tuple[Any, ...]]] = {}
        self.stream: IO[bytes] = path.open("rb")
        self.fields = fields
        errors: list[RecordError] = []
        for _ in validated_stream(self._lines(), self._index_line, errors):
            pass
        if errors:
            self.stream.close()
            raise WorkloadImportFailed(errors)

    def _lines(self) -> Iterator[tuple[str, tuple[int, bytes]]]:
        """Yield ``(location, (offset, line))`` for each line of the file."""
        offset = 0
        for number, raw in enumerate(self.stream, start=1):
            yield f"{SOURCES_JSONL} line {number}", (offset, raw)
            offset += len(raw)

    def _index_line(self, location: str, line_at: tuple[int, bytes]) -> None:
        """Index one line: its offset, sha256 and pinned metadata by (id, version).

        Raises:
            RecordError: the line is not a source version, has unknown fields, or repeats.
        """
        offset, raw = line_at
        try:
            line = parse_line(raw, location)
            self.fields.check(line, SOURCE_LINE_KEYS, location, "")
            key = (_need(line, "id"), _need(line, "version"))
            if not isinstance(key[0], str) or type(key[1]) is not int:
                raise _Malformed("id must be a string and version an integer")
            if key in self.index:
                raise RecordError(
                    location, "version", f"version {key[1]} of {echo(key[0])} repeats"
                )
            pinned = tuple(_need(line, name) for name in PINNED)
            self.index[key] = (offset, _need(line, "sha256"), pinned)
        except _Malformed as exc:
            raise RecordError(location, "(record)", f"not a source version: {exc}") from None

    def text(self, key: tuple[str, int]) -> str:
        """The text of a version (read again from its line)."""
        self.stream.seek(self.index[key][0])
        return parse_line(self.stream.readline(), SOURCES_JSONL)["text"]

    def preamble(self) -> Iterator[SourcedRecord]:
        """Yield every version as a native source version, checking its sha256 and length."""
        with self.path.open("rb") as stream:
            for number, raw in enumerate(stream, start=1):
                location = f"{SOURCES_JSONL} line {number}"
                try:
                    line = parse_line(raw, location)
                    text = _need(line, "text")
                    if not isinstance(text, str):
                        raise RecordError(location, "text", "expected a string")
                    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
                    expected = _need(line, "sha256")
                    if digest != expected:
                        raise RecordError(
                            location,
                            "sha256",
                            f"the text's sha256 is {digest}, the line says {echo(expected)}",
                        )
                    if len(text) != _need(line, "length"):
                        raise RecordError(
                            location,
                            "length",
                            f"the text has {len(text)} code points, the line says "
                            f"{echo(line['length'])}",
                        )
                    yield (
                        location,
                        {
                            "id": _need(line, "id"),
                            "version": _need(line, "version"),
                            "text": text,
                            **{name: _need(line, name) for name in PINNED},
                        },
                    )
                except RecordError as exc:
                    yield location, exc
                except _Malformed as exc:
                    yield location, RecordError(location, "(record)", str(exc))

    def close(self) -> None:
        """Close the file read for texts."""
        self.stream.close()


class _Converter:
    """Turns the lines of one question of labels.jsonl into a native record."""

    def __init__(self, sources: _Sources, fields: _Fields) -> None:
        self.sources = sources
        self.fields = fields

    def record(self, lines: list[tuple[int, dict[str, Any]]]) -> tuple[str, Any]:
        """Return (location, native record or RecordError) for one question's lines."""
        first, last = lines[0][0], lines[-1][0]
        location = (
            f"{LABELS_JSONL} line {first}"
            if first == last
            else f"{LABELS_JSONL} lines {first}-{last}"
        )
        at = f"{LABELS_JSONL} line {first}"
        try:
            question = _need(lines[0][1], "question")
            # every line repeats the question: its fields are checked once, counted per line
            self.fields.check(question, QUESTION_KEYS, at, "question", len(lines))
            for k, source in enumerate(_list(question, "sources")):
                field = f"question.sources[{k}]"
                self.fields.check(source, QUESTION_SOURCE_KEYS, at, field, len(lines))
            for number, line in lines[1:]:
                if _need(line, "question") != question:
                    raise RecordError(
                        f"{LABELS_JSONL} line {number}",
                        "question",
                        f"differs from the question on line {first}; a question's lines agree",
                    )
            sources, native_sources = self._sources(question, at)
            return location, {
                "external_id": _need(question, "id"),
                "text": _need(question, "text"),
                "group_key": _need(question, "group_key"),
                "partition": _need(question, "partition"),
                "slices": _need(question, "slices"),
                "metadata": _need(question, "metadata"),
                "sources": native_sources,
                "candidates": [
                    self._candidate(line, f"{LABELS_JSONL} line {number}", sources)
                    for number, line in lines
                ],
            }
        except RecordError as exc:
            return location, exc
        except _Malformed as exc:
            return location, RecordError(location, "(record)", f"not a release record: {exc}")
        except TypeError:
            # e.g. a list where an id belongs: nothing of the value is echoed
            return location, RecordError(
                location, "(record)", "not a release record: a value has the wrong type"
            )

    def _sources(
        self, question: dict[str, Any], at: str
    ) -> tuple[dict[str, tuple[int, str]], list[dict[str, Any]]]:
        """Return ({source id: (version, sha256)}, native sources) of a question."""
        cited: dict[str, tuple[int, str]] = {}
        native = []
        for k, source in enumerate(_list(question, "sources")):
            field = f"question.sources[{k}]"
            key = (_need(source, "id"), _need(source, "version"))
            if not isinstance(key[0], str) or type(key[1]) is not int:
                raise RecordError(at, field, "id must be a string and version an integer")
            if key not in self.sources.index:
                raise RecordError(
                    at,
                    f"{field}.version",
                    f"version {key[1]} of {echo(key[0])} is not in {SOURCES_JSONL}",
                )
            _, sha256, pinned = self.sources.index[key]
            if _need(source, "sha256") != sha256:
                raise RecordError(
                    at,
                    f"{field}.sha256",
                    f"differs from the sha256 of version {key[1]} "
                    f"of {echo(key[0])} in {SOURCES_JSONL}",
                )
            for name, value in zip(PINNED[1:], pinned[1:], strict=True):
                if _need(source, name) != value:
                    raise RecordError(
                        at, f"{field}.{name}", f"differs from {SOURCES_JSONL} for this version"
                    )
            if key[0] in cited:
                raise RecordError(
                    at,
                    f"{field}.version",
                    f"the question retrieves versions {cited[key[0]][0]} and {key[1]} of "
                    f"{echo(key[0])}; a native record holds one version per source",
                )
            cited[key[0]] = (key[1], sha256)
            native.append(
                {
                    "id": key[0],
                    "version": key[1],
                    "text": self.sources.text(key),
                    "uri": pinned[0],
                    "published_at": pinned[1],
                    "observed_at": pinned[2],
                    "rank": _need(source, "rank"),
                    "score": _need(source, "score"),
                }
            )
        return cited, native

    def _evidence(
        self, span: Any, cited: dict[str, tuple[int, str]], at: str, field: str
    ) -> dict[str, Any]:
        """A release evidence span (source, version, sha256, start, end, quote) → native."""
        self.fields.check(span, EVIDENCE_KEYS, at, field)
        source, version = _need(span, "source"), _need(span, "version")
        if source not in cited or cited[source][0] != version:
            raise RecordError(
                at,
                f"{field}.version",
                f"cites version {echo(version)} of {echo(source)}, which the question does not "
                "retrieve",
            )
        if _need(span, "sha256") != cited[source][1]:
            raise RecordError(
                at,
                f"{field}.sha256",
                f"differs from the sha256 of version {echo(version)} of {echo(source)}",
            )
        return {
            "source": source,
            "start": _need(span, "start"),
            "end": _need(span, "end"),
            "quote": _need(span, "quote"),
        }

    def _evidence_list(
        self, label: Any, cited: dict[str, tuple[int, str]], at: str, field: str
    ) -> list[dict[str, Any]]:
        return [
            self._evidence(span, cited, at, f"{field}.evidence[{v}]")
            for v, span in enumerate(_list(label, "evidence"))
        ]

    def _candidate(
        self, line: dict[str, Any], at: str, cited: dict[str, tuple[int, str]]
    ) -> dict[str, Any]:
        missing = [key for key in LABEL_RECORD_KEYS if key not in line]
        if missing:
            raise RecordError(at, "(record)", f"not a release record: missing {missing}")
        check = self.fields.check
        check(line, LABEL_RECORD_KEYS, at, "")
        check(line["candidate"], CANDIDATE_KEYS, at, "candidate")
        candidate = {key: _need(line["candidate"], key) for key in CANDIDATE_KEYS}
        claims = []
        for k, claim in enumerate(_list(line, "claims")):
            check(claim, CLAIM_KEYS, at, f"claims[{k}]")
            if _need(claim, "index") != k:
                raise RecordError(at, f"claims[{k}].index", f"expected {k} (claims in order)")
            start, end = _need(claim, "start"), _need(claim, "end")
            claims.append(
                {
                    "text": _need(claim, "text"),
                    "start": start,
                    "end": end,
                    "machine_split": _need(claim, "machine_split"),
                    "unanchored": start is None and end is None,
                }
            )
        candidate["claims"] = claims
        evaluator_labels = []
        for e, label in enumerate(_list(line, "evaluator_labels")):
            check(label, EVALUATOR_LABEL_KEYS, at, f"evaluator_labels[{e}]")
            evaluator_labels.append({key: _need(label, key) for key in EVALUATOR_LABEL_KEYS})
        candidate["evaluator_labels"] = evaluator_labels
        candidate["prior_annotations"] = [
            self._annotation(annotation, cited, at, f"annotations[{a}]")
            for a, annotation in enumerate(_list(line, "annotations"))
        ]
        resolution = line["resolution"]
        if resolution is not None:
            check(resolution, RESOLUTION_RECORD_KEYS, at, "resolution")
            native = {key: _need(resolution, key) for key in RESOLUTION_KEYS}
            native["claim_labels"] = []
            for q, label in enumerate(_list(resolution, "claim_labels")):
                field = f"resolution.claim_labels[{q}]"
                check(label, RESOLVED_CLAIM_LABEL_KEYS, at, field)
                native["claim_labels"].append(
                    {
                        "claim": _need(label, "claim"),
                        "label": _need(label, "label"),
                        "reason": _need(label, "reason"),
                        "evidence": self._evidence_list(label, cited, at, field),
                    }
                )
            candidate["resolution"] = native
            _check_resolution(line, at)
        return candidate

    def _annotation(
        self, annotation: Any, cited: dict[str, tuple[int, str]], at: str, field: str
    ) -> dict[str, Any]:
        check = self.fields.check
        check(annotation, ANNOTATION_KEYS, at, field)
        spans = []
        for s, span in enumerate(_list(annotation, "spans")):
            sfield = f"{field}.spans[{s}]"
            check(span, SPAN_KEYS, at, sfield)
            evidence = _need(span, "evidence")
            spans.append(
                {
                    "start": _need(span, "start"),
                    "end": _need(span, "end"),
                    "quote": _need(span, "quote"),
                    "labels": _need(span, "labels"),
                    "note": _need(span, "note"),
                    "evidence": None
                    if evidence is None
                    else self._evidence(evidence, cited, at, f"{sfield}.evidence"),
                }
            )
        claim_labels = []
        for q, label in enumerate(_list(annotation, "claim_labels")):
            cfield = f"{field}.claim_labels[{q}]"
            check(label, ANNOTATION_CLAIM_LABEL_KEYS, at, cfield)
            claim_labels.append(
                {
                    "claim": _need(label, "claim"),
                    "label": _need(label, "label"),
                    "reason": _need(label, "reason"),
                    "boundary_error": _need(label, "boundary_error"),
                    "raw_label": _need(label, "raw_label"),
                    "evidence": self._evidence_list(label, cited, at, cfield),
                }
            )
        return {
            "annotator": _need(annotation, "annotator"),
            "origin": _need(annotation, "origin"),
            "answer_label": _need(annotation, "answer_label"),
            "answer_reason": _need(annotation, "answer_reason"),
            "note": _need(annotation, "comment"),
            "labelled_at": _need(annotation, "labelled_at"),
            "policy_version": _need(annotation, "policy_version"),
            "time_spent_seconds": _need(annotation, "time_spent_seconds"),
            "claim_labels": claim_labels,
            "spans": spans,
            "raw": _need(annotation, "raw"),
        }


def _vote_key(label: Any, reason: Any) -> tuple[Any, Any]:
    """Return what the comparison compares: the label, and the reason only with that label.

    As ``labeling.selectors.vote_reads`` does: the reason counts only with ``evidence_unavailable``.
    """
    return (label, reason if label == EVIDENCE_UNAVAILABLE else None)


def _check_resolution(line: dict[str, Any], at: str) -> None:
    """Check a resolution against the record's claims and annotations (a converted line).

    ``consensus`` and ``adjudicated`` label every claim of the candidate (adjudication and
    comparison both do). A ``consensus`` is what ``labeling.services.comparison`` writes when
    the votes agree, so it mirrors ``votes_compare``: the votes are the annotations with an
    answer label (at least one) made under the resolution's policy version (or under none);
    each has the resolution's answer label, and the same label for every claim, reasons
    counting only with ``evidence_unavailable``; ``cannot_decide`` and a claim a vote leaves
    unlabelled never agree. Evidence spans are not compared.

    Raises:
        RecordError: naming the first resolution or annotation field that breaks a rule.
    """
    resolution = line["resolution"]
    status = resolution["status"]
    if status not in (CONSENSUS, ADJUDICATED):
        return
    n_claims = len(line["claims"])
    resolved: dict[Any, tuple[Any, Any]] = {}
    for label in resolution["claim_labels"]:
        resolved.setdefault(label["claim"], _vote_key(label["label"], label["reason"]))
    missing = [k for k in range(n_claims) if k not in resolved]
    if missing:
        shown = ", ".join(str(k) for k in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise RecordError(
            at,
            "resolution.claim_labels",
            f"a{'n' if status == ADJUDICATED else ''} {status} resolution labels every claim "
            f"of the candidate; no label for claim {shown}",
        )
    if status != CONSENSUS:
        return
    annotations = line["annotations"]
    # The votes compared are those made under the resolution's policy version: an item labelled
    # again under a new version keeps the earlier version's annotations beside them.
    # (When none is of that version, all are compared: the versions are checked later.)
    version = resolution.get("policy_version")
    labelled = [
        (a, annotation)
        for a, annotation in enumerate(annotations)
        if annotation["answer_label"] not in (None, "")
    ]
    votes = [
        (a, annotation)
        for a, annotation in labelled
        if version is None or annotation["policy_version"] in (None, version)
    ] or labelled
    if not votes:
        raise RecordError(
            at,
            "resolution.status",
            "a consensus resolution is the agreement of the record's annotations, but it has "
            + (
                "none"
                if not annotations
                else "no annotation with an answer label (only those are votes)"
            ),
        )
    agreed = _vote_key(resolution["answer_label"], resolution["answer_reason"])
    for a, annotation in votes:
        field = f"annotations[{a}]"
        label = annotation["answer_label"]
        if label == CANNOT_DECIDE:
            raise RecordError(
                at,
                f"{field}.answer_label",
                "cannot_decide never agrees, but the resolution is a consensus",
            )
        key = _vote_key(label, annotation["answer_reason"])
        if key[0] != agreed[0]:
            raise RecordError(
                at,
                f"{field}.answer_label",
                "differs from the answer_label of the consensus resolution (a consensus is "
                "the agreement of every vote)",
            )
        if key != agreed:
            raise RecordError(
                at,
                f"{field}.answer_reason",
                f"differs from the answer_reason of the consensus resolution (with "
                f"{EVIDENCE_UNAVAILABLE} the reason is part of the vote)",
            )
        given: dict[Any, tuple[int, dict[str, Any]]] = {}
        for q, claim_label in enumerate(annotation["claim_labels"]):
            given.setdefault(claim_label["claim"], (q, claim_label))
        for k in range(n_claims):
            if k not in given:
                raise RecordError(
                    at,
                    f"{field}.claim_labels",
                    f"no label for claim {k}, but the resolution is a consensus (every vote "
                    "labels every claim alike)",
                )
            q, claim_label = given[k]
            cfield = f"{field}.claim_labels[{q}]"
            if claim_label["label"] in (None, CANNOT_DECIDE):
                raise RecordError(
                    at,
                    f"{cfield}.label",
                    f"{CANNOT_DECIDE if claim_label['label'] else 'no label'} never agrees, "
                    "but the resolution is a consensus",
                )
            key = _vote_key(claim_label["label"], claim_label["reason"])
            if key[0] != resolved[k][0]:
                raise RecordError(
                    at,
                    f"{cfield}.label",
                    f"differs from the consensus resolution's label of claim {k} (a consensus "
                    "is the agreement of every vote)",
                )
            if key != resolved[k]:
                raise RecordError(
                    at,
                    f"{cfield}.reason",
                    f"differs from the consensus resolution's reason for claim {k} (with "
                    f"{EVIDENCE_UNAVAILABLE} the reason is part of the vote)",
                )


def _records(
    path: Path, converter: _Converter, counters: dict[str, Any]
) -> Iterator[SourcedRecord]:
    """Yield one native record per question of labels.jsonl (its consecutive lines)."""
    seen: set[str] = set()
    group: list[tuple[int, dict[str, Any]]] = []
    current: Any = None

    def flush() -> Iterator[SourcedRecord]:
        if group:
            counters["questions"] = counters.get("questions", 0) + 1
            counters["candidates"] = counters.get("candidates", 0) + len(group)
            yield converter.record(group)
            group.clear()

    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            location = f"{LABELS_JSONL} line {number}"
            try:
                line = parse_line(raw, location)
                question_id = _need(_need(line, "question"), "id")
            except RecordError as exc:
                yield location, exc
                continue
            except _Malformed as exc:
                yield location, RecordError(location, "question", f"not a release record: {exc}")
                continue
            if group and question_id != current:
                yield from flush()
            if not group:
                if not isinstance(question_id, str) or question_id in seen:
                    yield (
                        location,
                        RecordError(
                            location,
                            "question.id",
                            "this question's lines are not consecutive (labels.jsonl is ordered "
                            "by question id)",
                        ),
                    )
                    continue
                seen.add(question_id)
                current = question_id
            group.append((number, line))
        yield from flush()


def _policies(manifest: dict[str, Any]) -> list[SourcedRecord]:
    """The manifest's policies as ``(location, object)``; ``policy`` must be one of them.

    Raises:
        WorkloadImportFailed: ``policies`` is not a list, or ``policy`` is not one of them.
    """
    listed = manifest.get("policies")
    if not isinstance(listed, list) or not listed:
        raise WorkloadImportFailed(
            [RecordError(MANIFEST, "policies", "expected the list of label policy versions")]
        )
    current = manifest.get("policy")  # {"version": N}, possibly with the policy's content
    version = current.get("version") if isinstance(current, dict) else current
    match = [p for p in listed if isinstance(p, dict) and p.get("version") == version]
    if not match or (
        isinstance(current, dict) and any(match[0].get(k) != v for k, v in current.items())
    ):
        raise WorkloadImportFailed(
            [
                RecordError(
                    MANIFEST, "policy", "the release's policy is not one of the listed policies"
                )
            ]
        )
    return [(f"{MANIFEST} policies[{i}]", policy) for i, policy in enumerate(listed)]


def _partition(manifest: dict[str, Any]) -> SourcedRecord | None:
    """The manifest's frozen split as ``(location, {seed, proportions})``, or None.

    ``partition`` is ``{"frozen", "seed", "proportions"}``; an unfrozen split (``frozen`` false
    or no seed) gives None.
    """
    partition = manifest.get("partition")
    if (
        not isinstance(partition, dict)
        or partition.get("frozen") is False
        or partition.get("seed") is None
    ):
        return None
    return (
        f"{MANIFEST} partition",
        {"seed": partition["seed"], "proportions": partition.get("proportions")},
    )


def _open(root: Path, cleanup: Callable[[], None] | None = None) -> RecordSource:
    """Verify the release in ``root`` and return its records (see the module docstring).

    Raises:
        WorkloadImportFailed: the release does not verify (every problem listed), or its
            manifest or sources.jsonl cannot be read; nothing was written.
    """
    try:
        try:
            manifest = verify_release(root)
        except ReleaseFormatError as exc:
            raise _refused(exc.problems) from None
        policies = _policies(manifest)
        counters: dict[str, Any] = {"schema_version": manifest["schema_version"]}
        # A newer minor version of the schema may add fields: this reader ignores them.
        fields = _Fields(_minor(manifest["schema_version"]) > _minor(SCHEMA_VERSION), counters)
        sources = _Sources(root / SOURCES_JSONL, fields)
    except BaseException:
        if cleanup is not None:
            cleanup()
        raise
    digest = hashlib.sha256((root / MANIFEST).read_bytes()).hexdigest()
    counters["source_versions"] = len(sources.index)

    def close() -> None:
        sources.close()
        if cleanup is not None:
            cleanup()

    return RecordSource(
        _records(root / LABELS_JSONL, _Converter(sources, fields), counters),
        counters,
        source_versions=sources.preamble(),
        policies=policies,
        partition=_partition(manifest),
        digest=digest,
        cleanup=close,
    )


def open_directory(directory: Path) -> RecordSource:
    """Read the release in ``directory`` (see :func:`_open`)."""
    return _open(directory)


def _zip_refused(problems: list[str], filename: str) -> WorkloadImportFailed:
    """Turn the problems of :func:`extract_release_zip` into an import refusal.

    A problem of the manifest ("manifest.json: reason") names its field as verification does;
    any other names the archive.
    """
    errors = []
    for problem in problems:
        if problem.startswith(f"{MANIFEST}: "):
            errors += _refused([problem]).errors
        else:
            errors.append(RecordError(filename, "(archive)", problem))
    return WorkloadImportFailed(errors)


def open_zip(stream: IO[bytes], filename: str) -> RecordSource:
    """Read a release zip: extract it into a temporary directory, then :func:`_open`.

    Extraction is :func:`labeling.release_format.extract_release_zip`: only the manifest and the
    files it lists, each member capped at the size the manifest gives it, at the top of the zip
    or in one folder; no link, duplicate, absolute path or ``..``. Anything else is refused
    before more is written, so a crafted zip cannot fill the disk. The temporary directory is
    removed when the import closes the source, or at once when the zip is refused.

    Raises:
        WorkloadImportFailed: not a zip, or a member refused (naming it).
    """
    temporary = tempfile.TemporaryDirectory(prefix="certlabel-release-")
    try:
        stream.seek(0)
        if not zipfile.is_zipfile(stream):
            raise WorkloadImportFailed(
                [
                    RecordError(
                        filename, "(file)", "not a zip archive (a release is its release.zip)"
                    )
                ]
            )
        stream.seek(0)
        try:
            root = extract_release_zip(stream, Path(temporary.name))
        except ReleaseFormatError as exc:
            raise _zip_refused(exc.problems, filename) from None
    except BaseException:
        temporary.cleanup()
        raise
    return _open(root, temporary.cleanup)


FORMAT = WorkloadFormat(
    NAME,
    "a certlabel release (release.zip, or its directory on the command line)",
    open_zip,
    open_directory=open_directory,
)
