"""Adapter for certlabel releases (``--format release``): a release directory or its zip.

The release is verified first (:mod:`labeling.release_format`: schema major, every file's sha256
and size, every count), before anything is read or written; a zip is extracted by
``extract_release_zip``. It imports into a project without questions only, restoring the policy
versions, the partition and the source versions (in file order, so each text keeps its version
number). Reading is strict: exactly the fields of schema 1.0, except that a newer minor version's
extra fields are ignored and counted (``unknown_fields_ignored``); a ``consensus`` resolution
must be the agreement of its record's votes
(:func:`labeling.importers.release_resolutions.resolution_check`). A question that retrieves two
versions of one document is refused. Lines are read by :mod:`labeling.importers.release_lines`.
Details: docs/adapters.md ("Release").
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from labeling.exceptions import WorkloadImportFailed
from labeling.importers.base import RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.record_errors import RecordError, echo
from labeling.importers.release_lines import (
    PINNED,
    Malformed,
    ReleaseFields,
    ReleaseSources,
    need,
    need_list,
    parse_line,
)
from labeling.importers.release_resolutions import resolution_check
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
    SOURCES_JSONL,
    SPAN_KEYS,
    ReleaseFormatError,
)
from labeling.release_verify import extract_release_zip, verify_release

NAME = "release"


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


def _minor(version: str) -> int:
    """The minor number of a verified ``schema_version`` ("1.2" → 2)."""
    return int(version.split(".")[1])


class _Converter:
    """Turns the lines of one question of labels.jsonl into a native record."""

    def __init__(self, sources: ReleaseSources, fields: ReleaseFields) -> None:
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
            question = need(lines[0][1], "question")
            # every line repeats the question: its fields are checked once, counted per line
            self.fields.check(question, QUESTION_KEYS, at, "question", len(lines))
            for k, source in enumerate(need_list(question, "sources")):
                field = f"question.sources[{k}]"
                self.fields.check(source, QUESTION_SOURCE_KEYS, at, field, len(lines))
            for number, line in lines[1:]:
                if need(line, "question") != question:
                    raise RecordError(
                        f"{LABELS_JSONL} line {number}",
                        "question",
                        f"differs from the question on line {first}; a question's lines agree",
                    )
            sources, native_sources = self._sources(question, at)
            return location, {
                "external_id": need(question, "id"),
                "text": need(question, "text"),
                "group_key": need(question, "group_key"),
                "partition": need(question, "partition"),
                "slices": need(question, "slices"),
                "metadata": need(question, "metadata"),
                "sources": native_sources,
                "candidates": [
                    self._candidate(line, f"{LABELS_JSONL} line {number}", sources)
                    for number, line in lines
                ],
            }
        except RecordError as exc:
            return location, exc
        except Malformed as exc:
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
        for k, source in enumerate(need_list(question, "sources")):
            field = f"question.sources[{k}]"
            key = (need(source, "id"), need(source, "version"))
            if not isinstance(key[0], str) or type(key[1]) is not int:
                raise RecordError(at, field, "id must be a string and version an integer")
            if key not in self.sources.index:
                raise RecordError(
                    at,
                    f"{field}.version",
                    f"version {key[1]} of {echo(key[0])} is not in {SOURCES_JSONL}",
                )
            _, sha256, pinned = self.sources.index[key]
            if need(source, "sha256") != sha256:
                raise RecordError(
                    at,
                    f"{field}.sha256",
                    f"differs from the sha256 of version {key[1]} "
                    f"of {echo(key[0])} in {SOURCES_JSONL}",
                )
            for name, value in zip(PINNED[1:], pinned[1:], strict=True):
                if need(source, name) != value:
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
                    "rank": need(source, "rank"),
                    "score": need(source, "score"),
                }
            )
        return cited, native

    def _evidence(
        self, span: Any, cited: dict[str, tuple[int, str]], at: str, field: str
    ) -> dict[str, Any]:
        """A release evidence span (source, version, sha256, start, end, quote) → native."""
        self.fields.check(span, EVIDENCE_KEYS, at, field)
        source, version = need(span, "source"), need(span, "version")
        if source not in cited or cited[source][0] != version:
            raise RecordError(
                at,
                f"{field}.version",
                f"cites version {echo(version)} of {echo(source)}, which the question does not "
                "retrieve",
            )
        if need(span, "sha256") != cited[source][1]:
            raise RecordError(
                at,
                f"{field}.sha256",
                f"differs from the sha256 of version {echo(version)} of {echo(source)}",
            )
        return {
            "source": source,
            "start": need(span, "start"),
            "end": need(span, "end"),
            "quote": need(span, "quote"),
        }

    def _evidence_list(
        self, label: Any, cited: dict[str, tuple[int, str]], at: str, field: str
    ) -> list[dict[str, Any]]:
        return [
            self._evidence(span, cited, at, f"{field}.evidence[{v}]")
            for v, span in enumerate(need_list(label, "evidence"))
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
        candidate = {key: need(line["candidate"], key) for key in CANDIDATE_KEYS}
        claims = []
        for k, claim in enumerate(need_list(line, "claims")):
            check(claim, CLAIM_KEYS, at, f"claims[{k}]")
            if need(claim, "index") != k:
                raise RecordError(at, f"claims[{k}].index", f"expected {k} (claims in order)")
            start, end = need(claim, "start"), need(claim, "end")
            claims.append(
                {
                    "text": need(claim, "text"),
                    "start": start,
                    "end": end,
                    "machine_split": need(claim, "machine_split"),
                    "unanchored": start is None and end is None,
                }
            )
        candidate["claims"] = claims
        evaluator_labels = []
        for e, label in enumerate(need_list(line, "evaluator_labels")):
            check(label, EVALUATOR_LABEL_KEYS, at, f"evaluator_labels[{e}]")
            evaluator_labels.append({key: need(label, key) for key in EVALUATOR_LABEL_KEYS})
        candidate["evaluator_labels"] = evaluator_labels
        candidate["prior_annotations"] = [
            self._annotation(annotation, cited, at, f"annotations[{a}]")
            for a, annotation in enumerate(need_list(line, "annotations"))
        ]
        resolution = line["resolution"]
        if resolution is not None:
            check(resolution, RESOLUTION_RECORD_KEYS, at, "resolution")
            native = {key: need(resolution, key) for key in RESOLUTION_KEYS}
            native["claim_labels"] = []
            for q, label in enumerate(need_list(resolution, "claim_labels")):
                field = f"resolution.claim_labels[{q}]"
                check(label, RESOLVED_CLAIM_LABEL_KEYS, at, field)
                native["claim_labels"].append(
                    {
                        "claim": need(label, "claim"),
                        "label": need(label, "label"),
                        "reason": need(label, "reason"),
                        "evidence": self._evidence_list(label, cited, at, field),
                    }
                )
            candidate["resolution"] = native
            resolution_check(line, at)
        return candidate

    def _annotation(
        self, annotation: Any, cited: dict[str, tuple[int, str]], at: str, field: str
    ) -> dict[str, Any]:
        check = self.fields.check
        check(annotation, ANNOTATION_KEYS, at, field)
        spans = []
        for s, span in enumerate(need_list(annotation, "spans")):
            sfield = f"{field}.spans[{s}]"
            check(span, SPAN_KEYS, at, sfield)
            evidence = need(span, "evidence")
            spans.append(
                {
                    "start": need(span, "start"),
                    "end": need(span, "end"),
                    "quote": need(span, "quote"),
                    "labels": need(span, "labels"),
                    "note": need(span, "note"),
                    "evidence": None
                    if evidence is None
                    else self._evidence(evidence, cited, at, f"{sfield}.evidence"),
                }
            )
        claim_labels = []
        for q, label in enumerate(need_list(annotation, "claim_labels")):
            cfield = f"{field}.claim_labels[{q}]"
            check(label, ANNOTATION_CLAIM_LABEL_KEYS, at, cfield)
            claim_labels.append(
                {
                    "claim": need(label, "claim"),
                    "label": need(label, "label"),
                    "reason": need(label, "reason"),
                    "boundary_error": need(label, "boundary_error"),
                    "raw_label": need(label, "raw_label"),
                    "evidence": self._evidence_list(label, cited, at, cfield),
                }
            )
        return {
            "annotator": need(annotation, "annotator"),
            "origin": need(annotation, "origin"),
            "answer_label": need(annotation, "answer_label"),
            "answer_reason": need(annotation, "answer_reason"),
            "note": need(annotation, "comment"),
            "labelled_at": need(annotation, "labelled_at"),
            "policy_version": need(annotation, "policy_version"),
            "time_spent_seconds": need(annotation, "time_spent_seconds"),
            "claim_labels": claim_labels,
            "spans": spans,
            "raw": need(annotation, "raw"),
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
                question_id = need(need(line, "question"), "id")
            except RecordError as exc:
                yield location, exc
                continue
            except Malformed as exc:
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
    """The manifest's frozen split as ``(location, {seed, proportions})``; None when unfrozen."""
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
        fields = ReleaseFields(
            _minor(manifest["schema_version"]) > _minor(SCHEMA_VERSION), counters
        )
        sources = ReleaseSources(root / SOURCES_JSONL, fields)
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

    Extraction is :func:`labeling.release_verify.extract_release_zip`: only the manifest and the
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
