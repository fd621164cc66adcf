"""Adapter for RAGTruth (ParticleMedia/RAGTruth): ``response.jsonl`` and ``source_info.jsonl``.

Niu et al. (2024), "RAGTruth", ACL. One native record per ``source_id``, in order of its first
response; the mapping is in docs/adapters.md ("RAGTruth"). Written from the repository README's
schema and the paper (section 3); the data files are not shipped. A label span past the
response's end, or whose ``text`` is not ``response[start:end]``, is refused naming the line and
the field (``labels[0].end``); all of one prompt's responses must share one ``split``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import IO, Any

from labeling.exceptions import WorkloadImportFailed
from labeling.importers.base import ImportOptions, RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.faithbench import overlaps
from labeling.importers.native import parse_json_line
from labeling.importers.record_errors import RecordError, echo
from labeling.importers.zipped import ZippedFiles
from labeling.vocabulary import (
    ABSTAINED,
    ADMISSIBLE,
    CONTRADICTED,
    INADMISSIBLE,
    NOT_SUPPORTED,
    SUPPORTED,
)

RESPONSES = "response.jsonl"
SOURCES = "source_info.jsonl"
ANNOTATOR = "ragtruth"

# label_type -> claim label (Niu et al., 2024, section 3.1): a conflict contradicts the
# retrieved content, baseless information is not in it.
LABEL_TYPES = {
    "Evident Conflict": CONTRADICTED,
    "Subtle Conflict": CONTRADICTED,
    "Evident Baseless Info": NOT_SUPPORTED,
    "Subtle Baseless Info": NOT_SUPPORTED,
}
PARTITIONS = {"train": "calibration", "test": "test"}
QUALITIES = frozenset({"good", "incorrect_refusal", "truncated"})
TASKS = {
    "QA": "Answer the question from the passages.",
    "Summary": "Summarize the passage.",
    "Data2txt": "Write an overview of the business from its structured data.",
}
PASSAGE = re.compile(r"(?:^|\n\n)passage (\d+):")
DATA_MARKER = "Structured data:"

# The dataset part of the guideline of this format's policy preset (Markdown; the rest,
# explaining every label, is written by labeling.policy_presets).
DATA_NOTES = """\
Each item is one LLM's response to a RAGTruth prompt (question answering over passages, a news
summary, or an overview of a business's structured data); judge each claim against the pinned
sources only.

How the imported RAGTruth span labels became prior labels (annotator "ragtruth", per claim):

- A labelled span belongs to a claim when it overlaps it with positive length; a zero-length
  span belongs to the claim that contains its start.
- Evident Conflict and Subtle Conflict -> contradicted. Evident Baseless Info and Subtle
  Baseless Info -> not_supported, also when the span is marked implicit_true (true, but not in
  the sources: still not supported by them).
- Several spans on one claim: the most severe wins (contradicted > not_supported).
- A claim that no span overlaps -> supported: RAGTruth annotators mark hallucinations only.
Answer level: any span not marked implicit_true -> inadmissible; none (or only implicit_true
spans) -> admissible. A response whose quality is incorrect_refusal (it refused although the
sources answer the prompt) -> abstained, and its claims get no label.
"""


def claim_label(label_types: list[str]) -> str:
    """Map the ``label_type``s of the spans overlapping one claim to its label.

    No span gives ``supported`` (annotators mark hallucinations only); otherwise the most
    severe of :data:`LABEL_TYPES` wins: ``contradicted`` > ``not_supported``.
    """
    mapped = {LABEL_TYPES[t] for t in label_types}
    if not mapped:
        return SUPPORTED
    return CONTRADICTED if CONTRADICTED in mapped else NOT_SUPPORTED


def answer_label(spans: list[dict[str, Any]], quality: str) -> str:
    """Map a response's spans and ``quality`` to its answer label.

    ``incorrect_refusal`` gives ``abstained``; else any span not marked ``implicit_true`` gives
    ``inadmissible``, and none gives ``admissible``.
    """
    if quality == "incorrect_refusal":
        return ABSTAINED
    return INADMISSIBLE if any(not s["implicit_true"] for s in spans) else ADMISSIBLE


def _new_counters(options: ImportOptions) -> dict[str, Any]:
    return {
        "sources": 0,
        "responses": 0,
        "responses_with_spans": 0,
        "spans": 0,
        "label_types": {t: 0 for t in LABEL_TYPES},
        "implicit_true_spans": 0,
        "due_to_null_spans": 0,
        "spans_outside_claims": 0,
        "claims_with_mixed_span_labels": 0,
        "quality": {q: 0 for q in sorted(QUALITIES)},
        "task_types": {t: 0 for t in TASKS},
        "qa_passages_unsplit": 0,
        "prompts_without_the_task": 0,
        "empty_responses": 0,
        "sources_without_responses": 0,
        "partition": {},
        "claim_splitting": options.splitter.counts,
    }


def _typed(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        value = None
    if not isinstance(value, kind):
        got = "missing" if key not in obj else type(obj[key]).__name__
        names = "/".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise RecordError(where, key, f"expected {names}, got {got}")
    return value


def _one_of(value: Any, names: Collection[str]) -> bool:
    """Whether ``value`` is one of the string ``names`` (a list or object is not: no TypeError)."""
    return isinstance(value, str) and value in names


class _Lines:
    """A JSONL file indexed by line offsets, so lines are read again one by one when needed."""

    def __init__(self, path: Path, name: str) -> None:
        self.name = name
        self.stream: IO[bytes] = path.open("rb")

    def scan(self) -> Iterator[tuple[int, str, dict[str, Any] | RecordError]]:
        """Yield ``(offset, location, object-or-error)`` for each non-blank line."""
        offset = 0
        for number, raw in enumerate(self.stream, start=1):
            at = offset
            offset += len(raw)
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if raw.strip():
                location = f"{self.name} line {number}"
                yield at, location, parse_json_line(raw, location)

    def read(self, offset: int, location: str) -> dict[str, Any]:
        self.stream.seek(offset)
        parsed = parse_json_line(self.stream.readline(), location)
        if isinstance(parsed, RecordError):
            raise parsed
        return parsed

    def close(self) -> None:
        self.stream.close()


class _Reader:
    """Indexes both files, then maps each prompt and its responses to one native record."""

    def __init__(self, responses: Path, sources: Path, options: ImportOptions) -> None:
        self.options = options
        self.counters = _new_counters(options)
        self.errors: list[RecordError] = []
        self.sources = _Lines(sources, SOURCES)
        self.responses = _Lines(responses, RESPONSES)
        self.source_lines: dict[str, tuple[int, str]] = {}
        self.groups: dict[str, list[tuple[int, str]]] = {}
        self.splits: dict[str, str | None] = {}
        self._index()

    def _error(self, error: RecordError) -> None:
        self.errors.append(error)

    def _index(self) -> None:
        for offset, location, obj in self.sources.scan():
            try:
                if isinstance(obj, RecordError):
                    raise obj
                source_id = _typed(obj, "source_id", str, location)
                if source_id in self.source_lines:
                    raise RecordError(location, "source_id", f"source_id {echo(source_id)} repeats")
                self.source_lines[source_id] = (offset, location)
            except RecordError as exc:
                self._error(exc)
        given = set()
        for offset, location, obj in self.responses.scan():
            try:
                if isinstance(obj, RecordError):
                    raise obj
                source_id = _typed(obj, "source_id", str, location)
                split = obj.get("split")
                if split is not None and not _one_of(split, PARTITIONS):
                    raise RecordError(
                        location, "split", f"expected train, test or null, got {echo(split)}"
                    )
                given.add(split is not None)
                if source_id in self.splits and self.splits[source_id] != split:
                    raise RecordError(
                        location,
                        "split",
                        f"{echo(split)}, but an earlier response to source_id "
                        f"{echo(source_id)} is in {echo(self.splits[source_id])}: one prompt's "
                        "responses are in one split",
                    )
                self.splits[source_id] = split
                self.groups.setdefault(source_id, []).append((offset, location))
            except RecordError as exc:
                self._error(exc)
        if given == {True, False}:
            self._error(RecordError(RESPONSES, "split", "give split on every response or on none"))
        self.counters["sources_without_responses"] = len(self.source_lines.keys() - self.groups)

    def partition(self) -> SourcedRecord | None:
        """The partition spec: the split's shares of the prompts (None without splits)."""
        splits = [s for s in self.splits.values() if s is not None]
        if self.errors or not splits:
            return None
        shares = {PARTITIONS[s]: splits.count(s) / len(splits) for s in sorted(set(splits))}
        self.counters["partition"] = {PARTITIONS[s]: splits.count(s) for s in sorted(set(splits))}
        return RESPONSES, {"seed": 0, "proportions": shares}

    def records(self) -> Iterator[SourcedRecord]:
        if self.errors:
            for error in self.errors:
                yield error.location, error
            return
        for source_id, lines in self.groups.items():
            location = f"{RESPONSES} {lines[0][1].split(' ', 1)[1]}, source_id {source_id}"
            try:
                yield location, self._record(source_id, lines)
            except RecordError as exc:
                yield exc.location, exc

    def _record(self, source_id: str, lines: list[tuple[int, str]]) -> dict[str, Any]:
        first = lines[0][1]
        if source_id not in self.source_lines:
            raise RecordError(
                first, "source_id", f"source_id {echo(source_id)} is not in {SOURCES}"
            )
        offset, where = self.source_lines[source_id]
        info = self.sources.read(offset, where)
        task = _typed(info, "task_type", str, where)
        if task not in TASKS:
            raise RecordError(
                where, "task_type", f"unknown task type {echo(task)}; one of {list(TASKS)}"
            )
        prompt = _typed(info, "prompt", str, where)
        origin = _typed(info, "source", str, where)
        text, sources = self._task(source_id, task, info, prompt, where)
        self.counters["sources"] += 1
        self.counters["task_types"][task] += 1
        split = self.splits[source_id]
        candidates = [
            self._candidate(self.responses.read(at, loc), loc, index)
            for index, (at, loc) in enumerate(lines)
        ]
        record: dict[str, Any] = {
            "external_id": f"ragtruth:{source_id}",
            "text": text,
            "group_key": source_id,
            "slices": {"task_type": task, "source": origin},
            "metadata": {"dataset": "ragtruth", "source_id": source_id, "prompt": prompt},
            "sources": sources,
            "candidates": candidates,
        }
        if split is not None:
            record["partition"] = PARTITIONS[split]
        return record

    def _task(
        self, source_id: str, task: str, info: dict[str, Any], prompt: str, where: str
    ) -> tuple[str, list[dict[str, Any]]]:
        """Return the question text and the sources of one prompt."""
        key = f"ragtruth:{source_id}"
        if task == "Summary":
            passage = _typed(info, "source_info", str, where)
            before, found, _ = prompt.partition(passage)
            return self._instruction(before if found else "", task), [{"id": key, "text": passage}]
        data = _typed(info, "source_info", dict, where)
        if task == "Data2txt":
            before, found, _ = prompt.partition(DATA_MARKER)
            text = json.dumps(data, ensure_ascii=False, indent=2)
            return self._instruction(before if found else "", task), [{"id": key, "text": text}]
        question = _typed(data, "question", str, where + " source_info")
        passages = _typed(data, "passages", str, where + " source_info")
        return question, self._passages(key, passages)

    def _instruction(self, before: str, task: str) -> str:
        text = before.rstrip()
        if not text:
            self.counters["prompts_without_the_task"] += 1
            return TASKS[task]
        return text

    def _passages(self, key: str, passages: str) -> list[dict[str, Any]]:
        """Split the QA passages at their ``passage N:`` marks (one source if they do not parse)."""
        marks = list(PASSAGE.finditer(passages))
        if not marks or marks[0].start() != 0 or marks[0].group(1) != "1":
            self.counters["qa_passages_unsplit"] += 1
            return [{"id": key, "text": passages, "rank": 1}]
        sources: list[dict[str, Any]] = []
        for i, mark in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(passages)
            text = passages[mark.end() : end]
            if i + 1 == len(marks):
                text = text.rstrip("\n")
            number = int(mark.group(1))
            if any(s["rank"] == number for s in sources):
                self.counters["qa_passages_unsplit"] += 1
                return [{"id": key, "text": passages, "rank": 1}]
            sources.append({"id": f"{key}:passage-{number}", "text": text, "rank": number})
        return sources

    def _candidate(self, obj: dict[str, Any], where: str, index: int) -> dict[str, Any]:
        response_id = _typed(obj, "id", str, where)
        response = _typed(obj, "response", str, where)
        model = _typed(obj, "model", str, where)
        temperature = _typed(obj, "temperature", (int, float), where)
        quality = obj.get("quality", "good")
        if not _one_of(quality, QUALITIES):
            raise RecordError(
                where, "quality", f"unknown quality {echo(quality)}; one of {sorted(QUALITIES)}"
            )
        labels = _typed(obj, "labels", list, where)
        spans = [self._span(raw, response, where, f"labels[{i}]") for i, raw in enumerate(labels)]
        claims = self.options.splitter.claims(response)
        self._count(response, quality, spans, claims)
        return {
            "id": response_id,
            "text": response,
            "generator": model,
            "generator_settings": {"temperature": temperature},
            "sample_index": index,
            "metadata": {"split": obj.get("split"), "quality": quality},
            "claims": claims,
            "prior_annotations": [self._annotation(spans, claims, quality)],
        }

    def _span(self, raw: Any, response: str, where: str, at: str) -> dict[str, Any]:
        """Check one label: offsets inside the response, its text the response's there."""
        if not isinstance(raw, dict):
            raise RecordError(where, at, f"expected an object, got {type(raw).__name__}")
        start = _typed(raw, "start", int, where) if "start" in raw else None
        end = _typed(raw, "end", int, where) if "end" in raw else None
        if start is None or end is None:
            missing = "start" if start is None else "end"
            raise RecordError(where, f"{at}.{missing}", "missing: a label needs start and end")
        if start < 0 or end < start:
            raise RecordError(where, f"{at}.end", f"span [{start}:{end}] is not a span")
        if end > len(response):
            raise RecordError(
                where,
                f"{at}.end",
                f"span end {end} is past the end of the response ({len(response)} code points)",
            )
        text = raw.get("text")
        if text != response[start:end]:
            raise RecordError(
                where,
                f"{at}.text",
                f"{echo(text)} is not the response at [{start}:{end}], which is "
                f"{echo(response[start:end])}",
            )
        label_type = raw.get("label_type")
        if not _one_of(label_type, LABEL_TYPES):
            raise RecordError(
                where,
                f"{at}.label_type",
                f"unknown label type {echo(label_type)}; one of {list(LABEL_TYPES)}",
            )
        meta = raw.get("meta")
        if meta is not None and not isinstance(meta, str):
            raise RecordError(where, f"{at}.meta", f"expected str, got {type(meta).__name__}")
        flags = {}
        for name in ("implicit_true", "due_to_null"):
            value = raw.get(name, False)
            if not isinstance(value, bool):
                raise RecordError(
                    where, f"{at}.{name}", f"expected true or false, got {echo(value)}"
                )
            flags[name] = value
        return {
            "start": start,
            "end": end,
            "text": text,
            "label_type": label_type,
            "meta": meta or "",
            **flags,
        }

    def _annotation(
        self, spans: list[dict[str, Any]], claims: list[dict[str, Any]], quality: str
    ) -> dict[str, Any]:
        claim_labels = []
        for index, claim in enumerate(claims):
            types = [
                s["label_type"]
                for s in spans
                if overlaps((s["start"], s["end"]), (claim["start"], claim["end"]))
            ]
            if len({LABEL_TYPES[t] for t in types}) > 1:
                self.counters["claims_with_mixed_span_labels"] += 1
            refused = quality == "incorrect_refusal"
            claim_labels.append(
                {
                    "claim": index,
                    "label": None if refused else claim_label(types),
                    "raw_label": "incorrect_refusal" if refused else types,
                }
            )
        return {
            "annotator": ANNOTATOR,
            "answer_label": answer_label(spans, quality),
            "claim_labels": claim_labels,
            "spans": [
                {
                    "start": s["start"],
                    "end": s["end"],
                    "quote": s["text"],
                    "labels": [s["label_type"]]
                    + [f for f in ("implicit_true", "due_to_null") if s[f]],
                    "note": s["meta"],
                }
                for s in spans
            ],
        }

    def _count(
        self, response: str, quality: str, spans: list[dict[str, Any]], claims: list[dict[str, Any]]
    ) -> None:
        counters = self.counters
        counters["responses"] += 1
        counters["quality"][quality] += 1
        counters["empty_responses"] += not response.strip()
        counters["responses_with_spans"] += bool(spans)
        for span in spans:
            counters["spans"] += 1
            counters["label_types"][span["label_type"]] += 1
            counters["implicit_true_spans"] += span["implicit_true"]
            counters["due_to_null_spans"] += span["due_to_null"]
            bounds = (span["start"], span["end"])
            if not any(overlaps(bounds, (c["start"], c["end"])) for c in claims):
                counters["spans_outside_claims"] += 1

    def close(self) -> None:
        self.sources.close()
        self.responses.close()


def _open(
    responses: Path, sources: Path, options: ImportOptions, cleanup: Any, digest: str | None
) -> RecordSource:
    reader = _Reader(responses, sources, options)

    def close() -> None:
        reader.close()
        if cleanup is not None:
            cleanup()

    return RecordSource(
        reader.records(),
        reader.counters,
        partition=reader.partition(),
        digest=digest,
        cleanup=close,
    )


def open_ragtruth(stream: IO[bytes], filename: str, options: ImportOptions) -> RecordSource:
    """Open a zip of RAGTruth's ``response.jsonl`` and ``source_info.jsonl`` (top or one folder).

    Raises:
        WorkloadImportFailed: not such a zip.
    """
    try:
        zipped = ZippedFiles(stream, filename, RESPONSES, f"RAGTruth's {RESPONSES} and {SOURCES}")
    except RecordError as exc:
        raise WorkloadImportFailed([exc]) from None
    try:
        responses, sources = zipped.extract(RESPONSES), zipped.extract(SOURCES)
        return _open(responses, sources, options, zipped.close, None)
    except RecordError as exc:
        zipped.close()
        raise WorkloadImportFailed([exc]) from None
    except BaseException:
        zipped.close()
        raise


def open_ragtruth_directory(directory: Path, options: ImportOptions) -> RecordSource:
    """Open a directory holding RAGTruth's ``response.jsonl`` and ``source_info.jsonl``.

    The import is identified by the sha256 of both files.

    Raises:
        WorkloadImportFailed: either file is missing.
    """
    paths = [directory / RESPONSES, directory / SOURCES]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise WorkloadImportFailed(
            [RecordError(directory.name or str(directory), "(folder)", f"no {missing[0]}")]
        )
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as stream:
            while block := stream.read(1 << 20):
                digest.update(block)
    return _open(paths[0], paths[1], options, None, digest.hexdigest())


FORMAT = WorkloadFormat(
    "ragtruth",
    "RAGTruth (response.jsonl and source_info.jsonl, zipped or as a directory): one question "
    "per prompt, its responses as candidates, labelled hallucination spans as prior labels",
    lambda stream, filename: open_ragtruth(stream, filename, ImportOptions()),
    "ragtruth",
    open_with_options=open_ragtruth,
    open_directory_with_options=open_ragtruth_directory,
)
