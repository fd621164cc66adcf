"""Adapter for WiCE claim files (ryokamoi/wice, ``data/entailment_retrieval/claim/*.jsonl``).

One line becomes one native record; the mapping is in docs/adapters.md ("WiCE"). The evidence
sentences are joined by :data:`SEPARATOR` into one pinned source shared by a claim and its
sub-claims; ``group_key`` is the article title, so one article's claims stay in one partition.
The oracle-chunk inputs and model outputs of ``code_and_resources`` are refused with a message
naming the file to import instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import IO, Any

from labeling.importers.base import RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.claims import trim
from labeling.importers.native import convert_jsonl
from labeling.importers.record_errors import RecordError, echo
from labeling.vocabulary import ADMISSIBLE, INADMISSIBLE, NOT_SUPPORTED, SUPPORTED

TASK = "Is this Wikipedia sentence supported by the web page it cites?"
SEPARATOR = "\n"
ANNOTATOR = "wice-annotators"
GENERATOR = "wikipedia"
CANDIDATE = "claim"
FLAG = "non_supported"

# WiCE label -> (claim label, answer label). A partially supported claim states something the
# page does not back: not supported as a whole; its supporting set is still cited.
CLAIM_LABELS: dict[str, tuple[str, str]] = {
    "supported": (SUPPORTED, ADMISSIBLE),
    "partially_supported": (NOT_SUPPORTED, INADMISSIBLE),
    "not_supported": (NOT_SUPPORTED, INADMISSIBLE),
}
CITED = frozenset({"supported", "partially_supported"})

# The dataset part of the guideline of this format's policy preset (Markdown; the rest,
# explaining every label, is written by labeling.policy_presets).
DATA_NOTES = f"""\
Task shown as the question of every item: "{TASK}" The item is one Wikipedia sentence (or a
sub-claim of one); the pinned source is the web page it cites, split into sentences by WiCE and
joined one sentence per line. Judge the sentence against that page only.

How WiCE's aggregated labels became prior labels (one claim per item, the whole sentence):

- supported -> supported (answer admissible).
- partially_supported -> not_supported (answer inadmissible): part of the sentence is not backed
  by the page. The sentences that support the rest are still cited.
- not_supported -> not_supported (answer inadmissible), nothing cited.
- Evidence: the first non-empty set of WiCE's alternative supporting sets, each sentence cited
  as a span of the pinned page; all sets are kept as raw data.
- A sub-claim's tokens flagged as not supported are prior spans of the sentence
  (label non_supported), one per run of flagged tokens.
"""


def text_key(text: str) -> str:
    """Return the first 16 hex digits of the sha256 of ``text`` (UTF-8): the source key."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def sentence_spans(sentences: Sequence[str]) -> list[tuple[int, int]]:
    """Return each sentence's ``[start, end)`` in ``SEPARATOR.join(sentences)`` (empty: empty)."""
    spans = []
    start = 0
    for sentence in sentences:
        spans.append((start, start + len(sentence)))
        start += len(sentence) + len(SEPARATOR)
    return spans


def token_spans(text: str, tokens: Sequence[str]) -> list[tuple[int, int]] | int:
    """Align ``tokens`` to ``text`` in order, skipping whitespace between them.

    WiCE's tokens do not round-trip (``" ".join(tokens) != text``: no space before ``;`` or
    ``,``), so each is looked for after the previous one.

    Returns the ``[start, end)`` of each token, or the index of the first token that is not the
    next non-whitespace text.
    """
    spans = []
    position = 0
    for index, token in enumerate(tokens):
        start = text.find(token, position) if token else -1
        if start < 0 or text[position:start].strip():
            return index
        spans.append((start, start + len(token)))
        position = start + len(token)
    return spans


def flagged_runs(spans: Sequence[tuple[int, int]], flags: Sequence[bool]) -> list[tuple[int, int]]:
    """Return one ``[start, end)`` per run of consecutive flagged tokens (their outer bounds)."""
    runs: list[tuple[int, int]] = []
    previous = False
    for (start, end), flag in zip(spans, flags, strict=True):
        if flag and previous:
            runs[-1] = (runs[-1][0], end)
        elif flag:
            runs.append((start, end))
        previous = flag
    return runs


def _new_counters() -> dict[str, Any]:
    return {
        "records": 0,
        "sub_claims": 0,
        "labels": {},
        "claims_with_alternative_supporting_sets": 0,
        "most_supporting_sets": 0,
        "not_supported_with_a_supporting_set": 0,
        "evidence_sentences": 0,
        "most_evidence_sentences": 0,
        "empty_evidence_sentences": 0,
        "empty_contexts": 0,
        "records_with_non_ascii": 0,
        "non_supported_spans": 0,
    }


def _field(obj: dict[str, Any], key: str, kind: type, where: str, at: str = "") -> Any:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, kind):
        got = "missing" if key not in obj else type(value).__name__
        raise RecordError(where, f"{at}{key}", f"expected {kind.__name__}, got {got}")
    return value


def _refuse_other_files(obj: dict[str, Any], where: str) -> None:
    """Refuse the rows of WiCE's other files, which are not claims against a whole page."""
    if {"prompt", "response"} <= obj.keys():
        raise RecordError(
            where,
            "(record)",
            "a model output row (prompt and response, no claim id); import the claim file "
            "data/entailment_retrieval/claim/<split>.jsonl, and evaluator scores as evaluator "
            "labels",
        )
    meta = obj.get("meta")
    if isinstance(meta, dict) and "chunk_idx" in meta:
        raise RecordError(
            where,
            "meta.chunk_idx",
            "an oracle-chunk row: its evidence is a chunk of the page with distractor "
            "sentences, not the cited page; import data/entailment_retrieval/claim/<split>.jsonl",
        )


def _supporting_sets(obj: dict[str, Any], size: int, where: str) -> list[list[int]]:
    sets = _field(obj, "supporting_sentences", list, where)
    for s, chosen in enumerate(sets):
        if not isinstance(chosen, list):
            raise RecordError(
                where,
                f"supporting_sentences[{s}]",
                f"expected a list of sentence indices, got {type(chosen).__name__}",
            )
        for k, index in enumerate(chosen):
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < size:
                raise RecordError(
                    where,
                    f"supporting_sentences[{s}][{k}]",
                    f"expected the index of an evidence sentence (0 to {size - 1}), got "
                    f"{echo(index)}",
                )
    return sets


def _prior_spans(
    obj: dict[str, Any], claim: str, where: str, counters: dict[str, Any]
) -> list[dict[str, Any]]:
    """The flagged tokens of a sub-claim as prior spans of ``claim`` (none for a claim)."""
    if "claim_tokens" not in obj and "non_supported_spans" not in obj:
        return []
    tokens = _field(obj, "claim_tokens", list, where)
    flags = _field(obj, "non_supported_spans", list, where)
    for k, token in enumerate(tokens):
        if not isinstance(token, str):
            raise RecordError(where, f"claim_tokens[{k}]", f"expected str, got {echo(token)}")
    for k, flag in enumerate(flags):
        if not isinstance(flag, bool):
            raise RecordError(
                where, f"non_supported_spans[{k}]", f"expected true or false, got {echo(flag)}"
            )
    if len(flags) != len(tokens):
        raise RecordError(
            where,
            "non_supported_spans",
            f"{len(flags)} flags for {len(tokens)} claim_tokens; expected one flag per token",
        )
    spans = token_spans(claim, tokens)
    if isinstance(spans, int):
        raise RecordError(
            where,
            f"claim_tokens[{spans}]",
            f"token {echo(tokens[spans])} is not the next text of the claim; its flag cannot be "
            "placed on the claim",
        )
    counters["sub_claims"] += 1
    runs = flagged_runs(spans, flags)
    counters["non_supported_spans"] += len(runs)
    return [{"start": s, "end": e, "quote": claim[s:e], "labels": [FLAG]} for s, e in runs]


def _record(obj: dict[str, Any], where: str, counters: dict[str, Any]) -> dict[str, Any]:
    """Map one parsed line; raises RecordError naming the field in the wrong shape."""
    _refuse_other_files(obj, where)
    raw_label = obj.get("label")
    if not isinstance(raw_label, str) or raw_label not in CLAIM_LABELS:
        raise RecordError(
            where,
            "label",
            f"unknown WiCE label {echo(raw_label)}; expected one of {sorted(CLAIM_LABELS)}",
        )
    claim = _field(obj, "claim", str, where)
    anchored = trim(claim, 0, len(claim))
    if anchored is None:
        raise RecordError(where, "claim", "empty claim")
    evidence = _field(obj, "evidence", list, where)
    for k, sentence in enumerate(evidence):
        if not isinstance(sentence, str):
            raise RecordError(where, f"evidence[{k}]", f"expected str, got {echo(sentence)}")
        if SEPARATOR in sentence:
            raise RecordError(
                where, f"evidence[{k}]", "a sentence holds a line break, the sentence separator"
            )
    sets = _supporting_sets(obj, len(evidence), where)
    meta = _field(obj, "meta", dict, where)
    claim_id = _field(meta, "id", str, where, "meta.")
    title = _field(meta, "claim_title", str, where, "meta.")
    section = _field(meta, "claim_section", str, where, "meta.")
    context = meta.get("claim_context")
    if context is not None and not isinstance(context, str):
        raise RecordError(where, "meta.claim_context", f"expected str, got {echo(context)}")
    spans = _prior_spans(obj, claim, where, counters)

    text = SEPARATOR.join(evidence)
    source_id = f"wice-source:{text_key(text)}"
    offsets = sentence_spans(evidence)
    claim_label, answer_label = CLAIM_LABELS[raw_label]
    cited = next((chosen for chosen in sets if chosen), [])
    if raw_label == "supported" and not cited:
        raise RecordError(where, "supporting_sentences", "a supported claim with no supporting set")
    label: dict[str, Any] = {"claim": 0, "label": claim_label, "raw_label": raw_label}
    if raw_label in CITED:
        label["evidence"] = [
            {
                "source": source_id,
                "start": offsets[i][0],
                "end": offsets[i][1],
                "quote": evidence[i],
            }
            for i in cited
        ]

    counters["records"] += 1
    counters["labels"][raw_label] = counters["labels"].get(raw_label, 0) + 1
    counters["claims_with_alternative_supporting_sets"] += len(sets) > 1
    counters["most_supporting_sets"] = max(counters["most_supporting_sets"], len(sets))
    counters["not_supported_with_a_supporting_set"] += raw_label == "not_supported" and bool(cited)
    counters["evidence_sentences"] += len(evidence)
    counters["most_evidence_sentences"] = max(counters["most_evidence_sentences"], len(evidence))
    counters["empty_evidence_sentences"] += sum(not s for s in evidence)
    counters["empty_contexts"] += context == ""
    counters["records_with_non_ascii"] += not (claim + text).isascii()
    start, end = anchored
    metadata = {"dataset": "wice", "claim_title": title, "claim_section": section}
    if context is not None:
        metadata["claim_context"] = context
    return {
        "external_id": f"wice:{claim_id}",
        "text": TASK,
        "group_key": title,
        "slices": {"claim_section": section},
        "metadata": {**metadata, "sentence_spans": [list(span) for span in offsets]},
        "sources": [{"id": source_id, "text": text}],
        "candidates": [
            {
                "id": CANDIDATE,
                "text": claim,
                "generator": GENERATOR,
                "claims": [{"text": claim[start:end], "start": start, "end": end}],
                "prior_annotations": [
                    {
                        "annotator": ANNOTATOR,
                        "answer_label": answer_label,
                        "claim_labels": [label],
                        "spans": spans,
                        "raw": {"supporting_sentences": sets},
                    }
                ],
            }
        ],
    }


def read_wice(stream: IO[bytes], counters: dict[str, Any]) -> Iterator[SourcedRecord]:
    """Yield ``("line N", native record or RecordError)`` for each line of a WiCE claim file.

    The file holds claims, or sub-claims with their token flags; ``counters`` is filled with the
    quirks met and rules applied (see the module docstring).

    A line in the wrong shape (an unknown ``label``, a supporting sentence index outside
    ``evidence``, a token that is not in the claim, a row of WiCE's oracle-chunk or model output
    files, ...) yields a RecordError naming the field, e.g. ``supporting_sentences[2][0]``.
    """
    yield from convert_jsonl(stream, lambda obj, location: _record(obj, location, counters))


def open_wice(stream: IO[bytes], filename: str) -> RecordSource:
    """Open a WiCE claim JSONL file for :func:`labeling.services.workload_import` (lazily)."""
    counters = _new_counters()
    return RecordSource(read_wice(stream, counters), counters)


FORMAT = WorkloadFormat(
    "wice",
    "WiCE claims (data/entailment_retrieval/claim/*.jsonl, data/non_supported_tokens/*.jsonl): "
    "one Wikipedia sentence per line against the cited page as a pinned source, the supporting "
    "sentences as evidence, sub-claims' unsupported tokens as spans",
    open_wice,
    "wice",
)
