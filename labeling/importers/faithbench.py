"""Adapter for FaithBench release files (``data_for_release/batch_N.json``, vectara/FaithBench).

One question per distinct source text, one candidate per summary (``b{batch}-s{sample_id}``:
``sample_id`` is unique only within a batch), claims split by pysbd, prior annotations per batch
annotator (:func:`claim_label`, :func:`answer_label`) and evaluator labels (:data:`BINARY_JUDGES`,
:data:`SCORE_DETECTORS`); see docs/adapters.md ("FaithBench"). Texts are kept exactly as given (no
strip, no Unicode normalisation): upstream offsets count code points.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import IO, Any

import pysbd

from labeling.importers.base import RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.claims import split_sentences
from labeling.importers.native import loads_strict
from labeling.importers.record_errors import RecordError, echo
from labeling.vocabulary import ADMISSIBLE, CONTRADICTED, INADMISSIBLE, NOT_SUPPORTED, SUPPORTED

TASK = "Summarize the passage."

# The commit of vectara/FaithBench the release files come from; it versions every evaluator.
EVALUATOR_VERSION = "faithbench-cf89797"

# Binary judges: 1 = consistent, 0 = hallucinated (upstream scripts/binarize.py).
BINARY_JUDGES = ("gpt-3.5-turbo", "gpt-4-turbo", "gpt_4o", "trueteacher", "true_nli")
BINARY_VERDICT = {1: ADMISSIBLE, 0: INADMISSIBLE}
# Continuous detectors (Vectara HHEM): a consistency score in [0, 1], higher = more consistent.
SCORE_DETECTORS = ("hhemv1", "hhem-2.1", "hhem-2.1-english")

UNWANTED = frozenset({"Unwanted", "Unwanted.Intrinsic", "Unwanted.Extrinsic"})
KNOWN_LABELS = UNWANTED | {"Questionable", "Benign"}

FILENAME = re.compile(r"batch_(\d+)\.json")

# The dataset part of the guideline of this format's policy preset (Markdown; the rest,
# explaining every label, is written by labeling.policy_presets).
DATA_NOTES = f"""\
Task shown as the question of every item: "{TASK}" The item is a summary of the pinned source
passage; judge each sentence (claim) of the summary against that passage only.

Claims are the summary's sentences, split by pysbd (machine split; flag a wrong boundary as
boundary_error).

How the imported FaithBench flags became prior labels (per annotator, per claim):

- A flagged span belongs to a claim when it overlaps it with positive length; a zero-length
  span belongs to the claim that contains its start.
- Unwanted.Intrinsic -> contradicted. Unwanted.Extrinsic, bare Unwanted, Questionable and
  Benign -> not_supported (Benign = not in the source but true or harmless: still not supported
  by the source). A span with an empty label list is kept but labels nothing: the two in this
  data carry no category, and one note praises the whole summary.
- Several labels on one span, or several spans on one claim: the most severe wins
  (contradicted > not_supported).
- A claim that none of the annotator's spans overlaps -> supported: FaithBench annotators flag
  problems only, and every annotator of a batch saw every sample of that batch.
Answer level: any Unwanted, Unwanted.Intrinsic or Unwanted.Extrinsic flag -> inadmissible;
only Benign / Questionable flags, or none -> admissible.
"""


def pseudonym(annotator_id: str) -> str:
    """Return the pseudonymous annotator key stored for a FaithBench ``annotator_id``.

    ``"fb-"`` + the first 12 hex digits of sha256(``"faithbench:" + annotator_id``). Real names
    (``annotator_name``) are never stored.
    """
    digest = hashlib.sha256(f"faithbench:{annotator_id}".encode()).hexdigest()
    return "fb-" + digest[:12]


def text_key(text: str) -> str:
    """Return the first 16 hex digits of the sha256 of ``text`` (UTF-8): question and source key."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def overlaps(span: tuple[int, int], claim: tuple[int, int]) -> bool:
    """Whether span ``[s, e)`` shares a code point with claim ``[cs, ce)`` (empty: cs <= s < ce)."""
    (s, e), (cs, ce) = span, claim
    if s == e:
        return cs <= s < ce
    return max(s, cs) < min(e, ce)


def is_contradictory(labels: Sequence[str]) -> bool:
    """Return whether one span's label list mixes incompatible FaithBench labels.

    Incompatible: both Intrinsic and Extrinsic, or more than one of the families Unwanted*
    (``Unwanted`` is the parent of its two subtypes), Questionable and Benign.
    """
    families = {"Unwanted" if label in UNWANTED else label for label in labels}
    both_subtypes = {"Unwanted.Intrinsic", "Unwanted.Extrinsic"} <= set(labels)
    return len(families) > 1 or both_subtypes


def span_label(labels: Sequence[str]) -> str:
    """Map one flagged span's label list to a claim label (the most severe label wins).

    ``Unwanted.Intrinsic`` anywhere in the list gives ``contradicted``; every other list
    (Unwanted.Extrinsic, bare Unwanted, Questionable, Benign) gives ``not_supported``. Callers
    skip empty lists (a span with no category labels nothing; see :func:`claim_label`).
    """
    return CONTRADICTED if "Unwanted.Intrinsic" in labels else NOT_SUPPORTED


def claim_label(label_lists: Sequence[Sequence[str]]) -> str:
    """Map the label lists of one annotator's spans overlapping a claim to the claim's label.

    No overlapping span with a category gives ``supported`` (annotators flag problems only;
    an empty label list is a flag without a category and labels nothing); otherwise the most
    severe :func:`span_label` wins: ``contradicted`` > ``not_supported``.
    """
    mapped = {span_label(labels) for labels in label_lists if labels}
    if not mapped:
        return SUPPORTED
    return CONTRADICTED if CONTRADICTED in mapped else NOT_SUPPORTED


def answer_label(label_lists: Sequence[Sequence[str]]) -> str:
    """Map all label lists one annotator gave a summary to the answer label.

    Any ``Unwanted``/``Unwanted.Intrinsic``/``Unwanted.Extrinsic`` gives ``inadmissible``;
    Benign or Questionable flags only (or none) keep the answer ``admissible``.
    """
    flagged = any(UNWANTED.intersection(labels) for labels in label_lists)
    return INADMISSIBLE if flagged else ADMISSIBLE


# The header of FaithBench.csv, the dataset's summary table (one row per summary, the worst and
# best label of its annotators), which people upload in place of the batch files.
SUMMARY_CSV_HEADER = "source,summary,llm,"


def _load(stream: IO[bytes], filename: str) -> Any:
    """Parse the whole file as strict JSON, or return a RecordError naming the problem."""
    data = stream.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RecordError(filename, "(file)", f"not valid UTF-8 at byte {exc.start}")
    try:
        return loads_strict(text, filename)
    except RecordError as exc:
        return exc
    except RecursionError:
        return RecordError(filename, "(file)", "JSON nested too deeply")
    except json.JSONDecodeError as exc:
        if text.partition("\n")[0].strip().lower().startswith(SUMMARY_CSV_HEADER):
            return RecordError(
                filename,
                "(file)",
                "this is FaithBench.csv, the summary table (source, summary, LLM, worst-label, "
                "best-label: no annotations or spans); import the release files "
                "data_for_release/batch_N.json instead",
            )
        return RecordError(
            filename, "(file)", f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        )
    except ValueError as exc:
        return RecordError(filename, "(file)", f"invalid JSON: {exc}")


def _is_legacy_export(document: list[Any]) -> bool:
    """Whether a bare list looks like the older raw export (``annot/batch_N_annotation.json``)."""
    for sample in document[:5]:
        if not isinstance(sample, dict):
            return False
        if any(key.startswith("meta_") for key in sample):
            return True
        for annotation in sample.get("annotations") or []:
            if isinstance(annotation, dict) and "annotator" in annotation:
                return True
    return False


def _document_error(document: Any, filename: str) -> RecordError | None:
    if isinstance(document, RecordError):
        return document
    if isinstance(document, list):
        if _is_legacy_export(document):
            return RecordError(
                filename,
                "(file)",
                "this is the older FaithBench raw annotation export (a bare list with "
                "'annotator' and 'meta_*' keys and the label 'Unwanted.Instrinsic'), not a "
                "release file; import data_for_release/batch_N.json instead",
            )
        return RecordError(
            filename, "(file)", 'expected a JSON object {"samples": [...]}, got a list'
        )
    if not isinstance(document, dict):
        return RecordError(
            filename,
            "(file)",
            f'expected a JSON object {{"samples": [...]}}, got {type(document).__name__}',
        )
    if not isinstance(document.get("samples"), list):
        return RecordError(
            filename, "samples", 'missing or not a list: expected {"samples": [...]}'
        )
    return None


def _require(obj: dict[str, Any], key: str, kind: type, where: str, at: str) -> Any:
    """Return ``obj[key]`` if it has type ``kind`` (a JSON bool is not an int), else raise."""
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, kind):
        got = "missing" if key not in obj else type(value).__name__
        raise RecordError(where, f"{at}{key}", f"expected {kind.__name__}, got {got}")
    return value


def _text(obj: dict[str, Any], key: str, where: str, at: str) -> str:
    """Return ``obj[key]``, a string with more than whitespace, else raise naming the field."""
    value: str = _require(obj, key, str, where, at)
    if not value.strip():
        raise RecordError(
            where, f"{at}{key}", "empty or only whitespace: there is nothing to judge"
        )
    return value


def _identifier(obj: dict[str, Any], key: str, where: str, at: str) -> str:
    """Return ``obj[key]``, a string id not starting with a byte-order mark, else raise."""
    value: str = _require(obj, key, str, where, at)
    if value.startswith("\ufeff"):
        raise RecordError(
            where,
            f"{at}{key}",
            f"{echo(value)} starts with a byte-order mark (U+FEFF): a copy from a file read "
            "with the wrong encoding; remove it",
        )
    return value


class _Sample:
    """One validated sample of a batch file."""

    def __init__(self, raw: Any, position: int, filename: str) -> None:
        where = f"{filename} sample #{position}"
        if not isinstance(raw, dict):
            raise RecordError(where, "(sample)", f"expected an object, got {type(raw).__name__}")
        self.sample_id: int = _require(raw, "sample_id", int, where, "")
        self.where = f"{filename} sample {self.sample_id}"
        where = self.where
        self.source: str = _text(raw, "source", where, "")
        self.summary: str = _text(raw, "summary", where, "")
        annotations = _require(raw, "annotations", list, where, "")
        metadata = _require(raw, "metadata", dict, where, "")
        self.summarizer: str = _require(metadata, "summarizer", str, where, "metadata.")
        self.raw_sample_id: int = _require(metadata, "raw_sample_id", int, where, "metadata.")
        self.metadata = metadata
        self.annotations = [self._annotation(a, i) for i, a in enumerate(annotations)]
        # Read only to count notes that mention an annotator by name; names are never stored.
        self.names = {
            a["annotator_name"]
            for a in annotations
            if isinstance(a, dict) and isinstance(a.get("annotator_name"), str)
        }

    def _annotation(self, raw: Any, index: int) -> dict[str, Any]:
        at = f"annotations[{index}]."
        where = self.where
        if not isinstance(raw, dict):
            raise RecordError(where, at[:-1], f"expected an object, got {type(raw).__name__}")
        labels = _require(raw, "label", list, where, at)
        for k, label in enumerate(labels):
            if not isinstance(label, str) or label not in KNOWN_LABELS:
                raise RecordError(
                    where,
                    f"{at}label[{k}]",
                    f"unknown FaithBench label {echo(label)}; expected "
                    f"one of {sorted(KNOWN_LABELS)}",
                )
        note = raw.get("note")
        if note is not None and not isinstance(note, str):
            raise RecordError(where, f"{at}note", f"expected str, got {type(note).__name__}")
        source_fields = [raw.get(k) for k in ("source_start", "source_end", "source_span")]
        if all(v is None for v in source_fields):
            evidence = None
        else:
            evidence = (
                _require(raw, "source_start", int, where, at),
                _require(raw, "source_end", int, where, at),
                _require(raw, "source_span", str, where, at),
            )
        return {
            "annot_id": _require(raw, "annot_id", int, where, at),
            "annotator": _identifier(raw, "annotator_id", where, at),
            "labels": list(labels),
            "note": note or "",
            "start": _require(raw, "summary_start", int, where, at),
            "end": _require(raw, "summary_end", int, where, at),
            "quote": _require(raw, "summary_span", str, where, at),
            "evidence": evidence,
        }

    def evaluator_labels(self, counters: dict[str, Any]) -> list[dict[str, Any]]:
        """Map the detector outputs of ``metadata`` (see the module docstring)."""
        labels = []
        for name in BINARY_JUDGES + SCORE_DETECTORS:
            label: dict[str, Any] = {"evaluator": name, "version": EVALUATOR_VERSION}
            if name not in self.metadata:
                counters["evaluator_values_missing"] += 1
            value = self.metadata.get(name)
            if value is None:
                counters["evaluator_values_unavailable"] += 1
                labels.append({**label, "available": False, "raw": None})
                continue
            if name in BINARY_JUDGES:
                if isinstance(value, bool) or not isinstance(value, int) or value not in (0, 1):
                    raise RecordError(
                        self.where, f"metadata.{name}", f"expected 0, 1 or null, got {echo(value)}"
                    )
                labels.append({**label, "label": BINARY_VERDICT[value], "raw": value})
            else:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise RecordError(
                        self.where,
                        f"metadata.{name}",
                        f"expected a number or null, got {echo(value)}",
                    )
                labels.append({**label, "score": value, "raw": value})
        return labels


def _new_counters() -> dict[str, Any]:
    return {
        "samples": 0,
        "samples_without_annotations": 0,
        "implicit_nothing_flagged": 0,
        "annotator_samples_with_several_spans": 0,
        "contradictory_label_sets": 0,
        "empty_label_lists": 0,
        "subtype_without_parent": 0,
        "spans_outside_claims": 0,
        "spans_with_evidence": 0,
        "notes_naming_an_annotator": 0,
        "claims_with_mixed_span_labels": 0,
        "leading_whitespace_summaries": 0,
        "non_nfc_samples": 0,
        "sentence_gaps_filled": 0,
        "evaluator_values_missing": 0,
        "evaluator_values_unavailable": 0,
    }


def _prior_annotation(
    sample: _Sample,
    annotator_id: str,
    claims: list[tuple[int, int]],
    source_id: str,
    counters: dict[str, Any],
) -> dict[str, Any]:
    """Build one batch annotator's prior annotation of one summary."""
    own = [a for a in sample.annotations if a["annotator"] == annotator_id]
    if not own:
        counters["implicit_nothing_flagged"] += 1
    elif len(own) > 1:
        counters["annotator_samples_with_several_spans"] += 1
    spans = []
    for annotation in own:
        span: dict[str, Any] = {
            "start": annotation["start"],
            "end": annotation["end"],
            "quote": annotation["quote"],
            "labels": annotation["labels"],
            "note": annotation["note"],
        }
        if annotation["evidence"] is not None:
            start, end, quote = annotation["evidence"]
            span["evidence"] = {"source": source_id, "start": start, "end": end, "quote": quote}
        spans.append(span)
        if not any(overlaps((annotation["start"], annotation["end"]), c) for c in claims):
            counters["spans_outside_claims"] += 1
    claim_labels = []
    for index, claim in enumerate(claims):
        label_lists = [a["labels"] for a in own if overlaps((a["start"], a["end"]), claim)]
        if len({span_label(labels) for labels in label_lists}) > 1:
            counters["claims_with_mixed_span_labels"] += 1
        claim_labels.append(
            {"claim": index, "label": claim_label(label_lists), "raw_label": label_lists}
        )
    return {
        "annotator": pseudonym(annotator_id),
        "answer_label": answer_label([a["labels"] for a in own]),
        "claim_labels": claim_labels,
        "spans": spans,
        "raw": {"annot_ids": [a["annot_id"] for a in own]},
    }


def _candidate(
    sample: _Sample,
    batch: int,
    index: int,
    annotators: list[str],
    source_id: str,
    segmenter: pysbd.Segmenter,
    counters: dict[str, Any],
) -> dict[str, Any]:
    claims, filled = split_sentences(sample.summary, segmenter)
    counters["sentence_gaps_filled"] += filled
    return {
        "id": f"b{batch}-s{sample.sample_id}",
        "text": sample.summary,
        "generator": sample.summarizer,
        "sample_index": index,
        "metadata": {
            "batch": batch,
            "sample_id": sample.sample_id,
            "raw_sample_id": sample.raw_sample_id,
        },
        "claims": [
            {"text": sample.summary[s:e], "start": s, "end": e, "machine_split": True}
            for s, e in claims
        ],
        "evaluator_labels": sample.evaluator_labels(counters),
        "prior_annotations": [
            _prior_annotation(sample, annotator, claims, source_id, counters)
            for annotator in annotators
        ],
    }


def _count_sample(sample: _Sample, names: set[str], counters: dict[str, Any]) -> None:
    counters["samples"] += 1
    if not sample.annotations:
        counters["samples_without_annotations"] += 1
    if sample.summary[:1].isspace():
        counters["leading_whitespace_summaries"] += 1
    if not all(unicodedata.is_normalized("NFC", t) for t in (sample.summary, sample.source)):
        counters["non_nfc_samples"] += 1
    for annotation in sample.annotations:
        labels = annotation["labels"]
        if annotation["evidence"] is not None:
            counters["spans_with_evidence"] += 1
        if not labels:
            counters["empty_label_lists"] += 1
        if is_contradictory(labels):
            counters["contradictory_label_sets"] += 1
        if "Unwanted" not in labels and UNWANTED.intersection(labels):
            counters["subtype_without_parent"] += 1
        if any(re.search(rf"\b{re.escape(n)}\b", annotation["note"], re.I) for n in names):
            counters["notes_naming_an_annotator"] += 1


def read_batch(
    stream: IO[bytes], filename: str, counters: dict[str, Any]
) -> Iterator[SourcedRecord]:
    """Yield one native record per distinct source text of a FaithBench release batch file.

    ``stream`` is a JSON document ``{"samples": [...]}``; the batch number comes from the
    ``batch_N.json`` name; ``counters`` is filled with the quirks met and declared rules applied
    (see README). Locations read ``"batch_3.json source 2 (samples 10-19)"``. A file in the wrong
    shape (not JSON, the older raw export, no ``samples`` list, another name) yields one
    RecordError, else one per malformed sample (``"batch_3.json sample 5"``, field e.g.
    ``annotations[2].label``).
    """
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    document = _load(stream, name)
    error = _document_error(document, name)
    if error is not None:
        yield name, error
        return
    match = FILENAME.fullmatch(name)
    if match is None:
        yield (
            name,
            RecordError(
                name,
                "(file name)",
                "the batch number comes from the file name; expected batch_N.json",
            ),
        )
        return
    batch = int(match.group(1))
    samples: list[_Sample] = []
    failed = False
    seen: set[int] = set()
    for position, raw in enumerate(document["samples"]):
        try:
            sample = _Sample(raw, position, name)
        except RecordError as exc:
            failed = True
            yield exc.location, exc
            continue
        if sample.sample_id in seen:
            failed = True
            yield (
                sample.where,
                RecordError(
                    sample.where, "sample_id", f"sample_id {sample.sample_id} repeats in this batch"
                ),
            )
            continue
        seen.add(sample.sample_id)
        samples.append(sample)
    if failed:
        return
    annotators = list(dict.fromkeys(a["annotator"] for s in samples for a in s.annotations))
    names = {n for s in samples for n in s.names}
    groups: dict[str, list[_Sample]] = {}
    for sample in samples:
        groups.setdefault(sample.source, []).append(sample)
        _count_sample(sample, names, counters)
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    for number, (source, group) in enumerate(groups.items(), start=1):
        key = text_key(source)
        source_id = f"faithbench-source:{key}"
        ids = ",".join(str(s.sample_id) for s in group)
        location = f"{name} source {number} (samples {ids})"
        try:
            candidates = [
                _candidate(sample, batch, index, annotators, source_id, segmenter, counters)
                for index, sample in enumerate(group)
            ]
        except RecordError as exc:
            yield exc.location, exc
            continue
        yield (
            location,
            {
                "external_id": f"faithbench:{key}",
                "text": TASK,
                "group_key": key,
                "slices": {"task": "summarization"},
                "metadata": {"dataset": "faithbench", "batch": batch},
                "sources": [{"id": source_id, "text": source}],
                "candidates": candidates,
            },
        )


def open_batch(stream: IO[bytes], filename: str) -> RecordSource:
    """Open a FaithBench ``batch_N.json`` for import, read lazily (:func:`read_batch`)."""
    counters = _new_counters()
    return RecordSource(read_batch(stream, filename, counters), counters)


FORMAT = WorkloadFormat(
    "faithbench",
    "FaithBench release batch (data_for_release/batch_N.json): one question per source passage, "
    "its summaries as candidates, sentence claims, per-annotator span flags, 8 detector outputs",
    open_batch,
    "faithbench",
)
