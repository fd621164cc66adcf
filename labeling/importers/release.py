"""Adapter for certlabel releases (``--format release``): a release directory or its zip.

A release (``labeling/release_format.py``, README "Releases") is verified first: its manifest
must be a certlabel release of a schema major this reader knows, and every file's sha256 and
size and every count must match the manifest; otherwise the import is refused before anything
is read or written. The release then becomes native records (``schema.py``), which the one
import service writes, plus what a release carries besides records:

- **policies**: the manifest's ``policies`` (every label policy version: ``version``,
  ``guideline``, ``evidence_relation``, ``answer_labels``, ``claim_labels``,
  ``unavailable_reasons``), restored as listed; ``policy`` (the release's own) must be one of
  them.
- **partition**: the manifest's ``partition`` ``seed`` and ``proportions``, with which the
  questions' partitions are frozen.
- **source versions**: every line of ``sources.jsonl``, written first and in its order (id,
  version), so each text gets the same version number it has in the release; each line's
  ``sha256`` and ``length`` are checked against its text.

``labels.jsonl`` holds one record per candidate, ordered by question: consecutive lines of one
question become one native record. Question ``id`` → ``external_id``; its ``sources`` (id,
version, sha256, rank, score) take their text and uri from ``sources.jsonl`` and keep their
``version`` (checked by the import). Candidates, claims (``start``/``end`` null → unanchored)
and evaluator labels are taken as they are. Each annotation becomes a prior annotation by its
pseudonym (``comment`` → ``note``; ``labelled_at``, ``policy_version``, ``time_spent_seconds``,
``boundary_error``, ``raw_label``, spans and ``raw`` kept); the resolution becomes an imported
resolution. An evidence span names a source version (id, version, sha256): it must be a version
the question retrieves, with that sha256.

Limitation: a native record holds one text per source id, so a question that retrieves two
versions of one document is refused with an error naming it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from labeling.exceptions import WorkloadImportFailed
from labeling.importers import PolicyTemplate, RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.schema import RecordError, check_storable
from labeling.release_format import (
    LABEL_RECORD_KEYS,
    LABELS_JSONL,
    MANIFEST,
    SOURCES_JSONL,
    ReleaseFormatError,
    verify_release,
)

NAME = "release"
GUIDELINE = (
    "Restored from a certlabel release: the release's label policy versions (manifest.json "
    "policies) replace this one."
)
# A release's zip holds a few files; more members than this is not a release.
MAX_ZIP_MEMBERS = 1000

QUESTION_KEYS = ("id", "text", "group_key", "partition", "slices", "metadata", "sources")
CANDIDATE_KEYS = (
    "id",
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
)
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
PINNED = ("uri", "published_at", "observed_at")
_ESCAPE = re.compile(r"\\u(?:0000|d[89a-f][0-9a-f]{2})", re.IGNORECASE)


class _Malformed(Exception):
    """A line that is not a release record (missing or mistyped key)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {key!r}")
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
        RecordError: not UTF-8, not a JSON object, NaN/Infinity, a repeated key, or NUL or a
            lone surrogate in a string.
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
        raise _Malformed(f"expected an object holding {key!r}")
    if key not in obj:
        raise _Malformed(f"missing {key!r}")
    return obj[key]


def _list(obj: Any, key: str) -> list[Any]:
    value = _need(obj, key)
    if not isinstance(value, list):
        raise _Malformed(f"{key!r} is not a list")
    return value


class _Sources:
    """The versions of ``sources.jsonl``: an index by (id, version), texts read on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index: dict[tuple[str, int], tuple[int, str, tuple[Any, ...]]] = {}
        self.stream: IO[bytes] = path.open("rb")
        errors: list[RecordError] = []
        offset = 0
        for number, raw in enumerate(self.stream, start=1):
            location = f"{SOURCES_JSONL} line {number}"
            try:
                line = parse_line(raw, location)
                key = (_need(line, "id"), _need(line, "version"))
                if not isinstance(key[0], str) or type(key[1]) is not int:
                    raise _Malformed("id must be a string and version an integer")
                if key in self.index:
                    raise RecordError(
                        location, "version", f"version {key[1]} of {key[0]!r} repeats"
                    )
                pinned = tuple(_need(line, name) for name in PINNED)
                self.index[key] = (offset, _need(line, "sha256"), pinned)
            except RecordError as exc:
                errors.append(exc)
            except _Malformed as exc:
                errors.append(RecordError(location, "(record)", f"not a source version: {exc}"))
            offset += len(raw)
            if len(errors) >= 20:
                break
        if errors:
            self.stream.close()
            raise WorkloadImportFailed(errors)

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
                            f"the text's sha256 is {digest}, the line says {expected}",
                        )
                    if len(text) != _need(line, "length"):
                        raise RecordError(
                            location,
                            "length",
                            f"the text has {len(text)} code points, the line says {line['length']}",
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

    def __init__(self, sources: _Sources) -> None:
        self.sources = sources

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
                    f"version {key[1]} of {key[0]!r} is not in {SOURCES_JSONL}",
                )
            _, sha256, pinned = self.sources.index[key]
            if _need(source, "sha256") != sha256:
                raise RecordError(
                    at,
                    f"{field}.sha256",
                    f"differs from the sha256 of version {key[1]} of {key[0]!r} in {SOURCES_JSONL}",
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
                    f"{key[0]!r}; a native record holds one version per source",
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
        source, version = _need(span, "source"), _need(span, "version")
        if source not in cited or cited[source][0] != version:
            raise RecordError(
                at,
                f"{field}.version",
                f"cites version {version} of {source!r}, which the question does not retrieve",
            )
        if _need(span, "sha256") != cited[source][1]:
            raise RecordError(
                at,
                f"{field}.sha256",
                f"differs from the sha256 of version {version} of {source!r}",
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
        candidate = {key: _need(line["candidate"], key) for key in CANDIDATE_KEYS}
        claims = []
        for k, claim in enumerate(_list(line, "claims")):
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
        candidate["evaluator_labels"] = [
            {key: _need(label, key) for key in EVALUATOR_LABEL_KEYS}
            for label in _list(line, "evaluator_labels")
        ]
        candidate["prior_annotations"] = [
            self._annotation(annotation, cited, at, f"annotations[{a}]")
            for a, annotation in enumerate(_list(line, "annotations"))
        ]
        resolution = line["resolution"]
        if resolution is not None:
            native = {key: _need(resolution, key) for key in RESOLUTION_KEYS}
            native["claim_labels"] = [
                {
                    "claim": _need(label, "claim"),
                    "label": _need(label, "label"),
                    "reason": _need(label, "reason"),
                    "evidence": self._evidence_list(
                        label, cited, at, f"resolution.claim_labels[{q}]"
                    ),
                }
                for q, label in enumerate(_list(resolution, "claim_labels"))
            ]
            candidate["resolution"] = native
        return candidate

    def _annotation(
        self, annotation: Any, cited: dict[str, tuple[int, str]], at: str, field: str
    ) -> dict[str, Any]:
        spans = []
        for s, span in enumerate(_list(annotation, "spans")):
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
                    else self._evidence(evidence, cited, at, f"{field}.spans[{s}].evidence"),
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
            "claim_labels": [
                {
                    "claim": _need(label, "claim"),
                    "label": _need(label, "label"),
                    "reason": _need(label, "reason"),
                    "boundary_error": _need(label, "boundary_error"),
                    "raw_label": _need(label, "raw_label"),
                    "evidence": self._evidence_list(label, cited, at, f"{field}.claim_labels[{q}]"),
                }
                for q, label in enumerate(_list(annotation, "claim_labels"))
            ],
            "spans": spans,
            "raw": _need(annotation, "raw"),
        }


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
        sources = _Sources(root / SOURCES_JSONL)
    except BaseException:
        if cleanup is not None:
            cleanup()
        raise
    digest = hashlib.sha256((root / MANIFEST).read_bytes()).hexdigest()
    counters: dict[str, Any] = {
        "schema_version": manifest.get("schema_version"),
        "source_versions": len(sources.index),
    }

    def close() -> None:
        sources.close()
        if cleanup is not None:
            cleanup()

    return RecordSource(
        _records(root / LABELS_JSONL, _Converter(sources), counters),
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


def _safe_member(name: str) -> bool:
    path = PurePosixPath(name)
    return not (
        not name
        or name.startswith("/")
        or "\\" in name
        or ".." in path.parts
        or (path.parts and ":" in path.parts[0])
    )


def _extract(stream: IO[bytes], filename: str, target: Path) -> Path:
    """Extract a release zip into ``target``; return the directory holding manifest.json.

    The files may be at the top of the archive or in one top directory.

    Raises:
        WorkloadImportFailed: not a zip, an unsafe member (absolute path, ``..``, backslash or
            drive), a repeated member, too many members, or no manifest.json.
    """
    try:
        archive = zipfile.ZipFile(stream)
    except (zipfile.BadZipFile, OSError):
        raise WorkloadImportFailed(
            [RecordError(filename, "(file)", "not a zip archive (a release is its release.zip)")]
        ) from None
    with archive:
        members = archive.infolist()
        problems = []
        names = [m.filename for m in members]
        if len(members) > MAX_ZIP_MEMBERS:
            problems.append(f"{len(members)} members; a release has a few files")
        problems += [
            f"member {name!r} is an absolute path or leaves the archive; refused"
            for name in names
            if not _safe_member(name)
        ]
        if len(set(names)) != len(names):
            problems.append("a member name repeats")
        if problems:
            raise WorkloadImportFailed([RecordError(filename, "(archive)", p) for p in problems])
        for member in members:
            path = target.joinpath(*PurePosixPath(member.filename).parts)
            if member.is_dir():
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, path.open("wb") as out:
                shutil.copyfileobj(source, out)
    if (target / MANIFEST).is_file():
        return target
    tops = list(target.iterdir())
    if len(tops) == 1 and (tops[0] / MANIFEST).is_file():
        return tops[0]
    raise WorkloadImportFailed([RecordError(filename, "(archive)", f"no {MANIFEST} in the zip")])


def open_zip(stream: IO[bytes], filename: str) -> RecordSource:
    """Read a release zip: extract it safely into a temporary directory, then :func:`_open`.

    The temporary directory is removed when the import closes the source.
    """
    temporary = tempfile.TemporaryDirectory(prefix="certlabel-release-")
    try:
        stream.seek(0)
        root = _extract(stream, filename, Path(temporary.name))
    except BaseException:
        temporary.cleanup()
        raise
    return _open(root, temporary.cleanup)


FORMAT = WorkloadFormat(
    NAME,
    "a certlabel release (release.zip, or its directory on the command line)",
    open_zip,
    PolicyTemplate(GUIDELINE),
    open_directory,
)
