r"""Adapter for ExpertQA JSONL files (chaitanyamalaviya/ExpertQA, ``data/lfqa/*.jsonl``).

One JSON object per line: an expert's question, one system's answer split into claims, and for
each claim the cited evidence and the same expert's judgements. This module maps each line to
one native record (``schema.py``):

- **question**: ``question`` exactly; ``external_id`` ``expertqa:`` + the first 16 hex digits of
  sha256(question); slices ``field``, ``specific_field``, ``question_type`` (null ones omitted).
- **sources**: every distinct evidence item with a passage, ``"[n] URL\n\n<passage>"``, becomes
  a source with id ``expertqa:`` + the first 16 hex digits of sha256(URL + ``"\n\n"`` +
  passage): different passages of one URL are different documents, not versions. ``uri`` is
  the URL, ``text`` everything after the first ``"\n\n"``, exactly. Rank = order of first
  appearance in the record (1-based).
- **candidate**: the single system under ``answers`` (id and generator = the system name),
  text ``answer_string``; claims = ``claim_string`` without offsets, so the importer locates
  them in the answer and stores the others as unanchored.
- **prior annotation**: the validating expert (pseudonym of ``answers.<sys>.annotator_id``),
  claim labels from ``support`` (:func:`claim_label`), answer label null; ``raw`` keeps the
  usefulness, the annotation time and the other per-claim judgements.

There are no evaluator labels in these files.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import IO, Any

from labeling.importers.base import RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.native import convert_jsonl
from labeling.importers.record_errors import RecordError, echo
from labeling.importers.record_rules import locate_claim
from labeling.vocabulary import EVIDENCE_UNAVAILABLE, NOT_SUPPORTED, SUPPORTED

# support value -> claim label. Partial and Incomplete are two form versions of one answer.
SUPPORT_LABELS: dict[str | None, str | None] = {
    "Complete": SUPPORTED,
    "Partial": NOT_SUPPORTED,
    "Incomplete": NOT_SUPPORTED,
    "Missing": NOT_SUPPORTED,
    "N/A": None,
    None: None,
}

SLICE_FIELDS = ("field", "specific_field", "question_type")
EVIDENCE = re.compile(r"\[(\d+)\] ")
ASTRAL = re.compile("[\U00010000-\U0010ffff]")

# Per-claim judgements kept in the prior annotation's raw record (support goes to raw_label).
CLAIM_JUDGEMENTS = (
    "informativeness",
    "worthiness",
    "correctness",
    "reliability",
    "reason_missing_support",
    "revised_claim",
    "revised_evidence",
    "source_reliability",
    "revised_claim_string",
)
VARIANT_KEYS = frozenset({"source_reliability", "revised_claim_string"})

# The dataset part of the guideline of this format's policy preset (Markdown; the rest,
# explaining every label, is written by labeling.policy_presets).
DATA_NOTES = """\
Each item is one system's answer to an expert's question; its claims are the sentences the
dataset gives. Judge each claim against the cited evidence passages only (pinned sources):
supported when the passages fully support it. The expert's "correctness" is an external-truth
judgement and is not used as a label.

How the imported expert labels were mapped (claim level, from "support"):

- Complete -> supported, citing each of the claim's evidence passages as a whole-passage span.
- Partial, Incomplete (two versions of the annotation form, one meaning) and Missing ->
  not_supported, citing the same passages.
- N/A or null -> no label (kept as the raw value).
- A claim whose evidence items all lack a passage (URL only) -> evidence_unavailable, reason
  not_found, whatever its support value: no text was pinned. So is a Complete claim without any
  evidence.
Answer level: no label (the expert's usefulness is kept as raw data, not mapped).
Claims that are not substrings of the answer are stored unanchored (flag boundary_error).
"""


def pseudonym(annotator_id: str) -> str:
    """Return ``"eq-"`` + the first 12 hex digits of sha256(``"expertqa:" + annotator_id``)."""
    return "eq-" + hashlib.sha256(f"expertqa:{annotator_id}".encode()).hexdigest()[:12]


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def parse_evidence(item: str) -> tuple[str, str | None] | None:
    r"""Split one evidence item ``"[n] URL"`` or ``"[n] URL\n\n<passage>"``.

    Returns ``(url, passage)`` with the passage exactly as after the first ``"\n\n"``, or
    ``(url, None)`` for a URL-only item (also when the passage is blank); None when the item does
    not start with an ``"[n] "`` marker.
    """
    match = EVIDENCE.match(item)
    if match is None:
        return None
    url, separator, passage = item[match.end() :].partition("\n\n")
    if not separator or not passage.strip():
        return url, None
    return url, passage


def claim_label(support: str | None, passages: int, url_only: int) -> tuple[str | None, str | None]:
    """Map a claim's ``support`` and the shape of its evidence to ``(label, reason)``.

    ``support`` must be a key of :data:`SUPPORT_LABELS`; ``passages`` and ``url_only`` count the
    claim's evidence items with a passage and with a URL only. Returns
    ``("evidence_unavailable", "not_found")`` when the claim has evidence and all of it is URL
    only, or when ``support`` is Complete but nothing can be cited; else the
    :data:`SUPPORT_LABELS` mapping with reason None.
    """
    if url_only and not passages:
        return EVIDENCE_UNAVAILABLE, "not_found"
    label = SUPPORT_LABELS[support]
    if label == SUPPORTED and not passages:
        return EVIDENCE_UNAVAILABLE, "not_found"
    return label, None


def _new_counters() -> dict[str, Any]:
    return {
        "records": 0,
        "claims": 0,
        "unanchored_claims": 0,
        "claims_with_url_only_evidence": 0,
        "claims_with_no_evidence": 0,
        "claims_with_mixed_evidence": 0,
        "complete_without_evidence": 0,
        "url_only_evidence_items": 0,
        "schema_variant_claims": 0,
        "records_with_astral_characters": 0,
        "validator_is_question_author": 0,
        "support_values": {},
    }


def _str(obj: dict[str, Any], key: str, where: str, at: str, nullable: bool = False) -> Any:
    value = obj.get(key)
    if isinstance(value, str) or (nullable and value is None):
        return value
    got = "missing" if key not in obj else type(value).__name__
    raise RecordError(
        where, f"{at}{key}", f"expected {'str or null' if nullable else 'str'}, got {got}"
    )


def _record(obj: dict[str, Any], where: str, counters: dict[str, Any]) -> dict[str, Any]:
    """Map one parsed line; raises RecordError naming the field in the wrong shape."""
    question = _str(obj, "question", where, "")
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise RecordError(where, "metadata", f"expected an object, got {type(metadata).__name__}")
    slices = {k: _str(metadata, k, where, "metadata.", True) for k in SLICE_FIELDS if k in metadata}
    answers = obj.get("answers")
    if not isinstance(answers, dict) or len(answers) != 1:
        got = f"{len(answers)} keys" if isinstance(answers, dict) else type(answers).__name__
        raise RecordError(
            where, "answers", f"expected an object with exactly one system key, got {got}"
        )
    [(system, answer)] = answers.items()
    at = f"answers.{system}."
    if not isinstance(answer, dict):
        raise RecordError(where, at[:-1], f"expected an object, got {type(answer).__name__}")
    text = _str(answer, "answer_string", where, at)
    expert = _str(answer, "annotator_id", where, at)
    claims = answer.get("claims")
    if not isinstance(claims, list):
        raise RecordError(where, f"{at}claims", f"expected a list, got {type(claims).__name__}")

    sources: dict[str, dict[str, Any]] = {}
    native_claims: list[dict[str, Any]] = []
    claim_labels: list[dict[str, Any]] = []
    judgements: list[dict[str, Any]] = []
    after = 0
    for index, claim in enumerate(claims):
        cat = f"{at}claims[{index}]."
        if not isinstance(claim, dict):
            raise RecordError(where, cat[:-1], f"expected an object, got {type(claim).__name__}")
        claim_text = _str(claim, "claim_string", where, cat)
        if not claim_text:
            raise RecordError(where, f"{cat}claim_string", "empty claim")
        support = claim.get("support")
        if not isinstance(support, str | None) or support not in SUPPORT_LABELS:
            raise RecordError(
                where,
                f"{cat}support",
                f"unknown support value {echo(support)}; expected one of "
                f"{sorted(k for k in SUPPORT_LABELS if k)} or null",
            )
        evidence = claim.get("evidence")
        if not isinstance(evidence, list):
            raise RecordError(
                where, f"{cat}evidence", f"expected a list, got {type(evidence).__name__}"
            )
        cited: list[str] = []
        url_only = 0
        for e, item in enumerate(evidence):
            parsed = parse_evidence(item) if isinstance(item, str) else None
            if parsed is None:
                raise RecordError(
                    where,
                    f"{cat}evidence[{e}]",
                    'expected a string "[n] URL" or "[n] URL\\n\\npassage"',
                )
            url, passage = parsed
            if passage is None:
                url_only += 1
                continue
            source_id = f"expertqa:{_key(url + chr(10) * 2 + passage)}"
            if source_id not in sources:
                sources[source_id] = {
                    "id": source_id,
                    "text": passage,
                    "uri": url,
                    "rank": len(sources) + 1,
                }
            if source_id not in cited:
                cited.append(source_id)
        label, reason = claim_label(support, len(cited), url_only)
        label_in: dict[str, Any] = {"claim": index, "label": label, "raw_label": support}
        if reason is not None:
            label_in["reason"] = reason
        if label in (SUPPORTED, NOT_SUPPORTED):
            label_in["evidence"] = [
                {
                    "source": s,
                    "start": 0,
                    "end": len(sources[s]["text"]),
                    "quote": sources[s]["text"],
                }
                for s in cited
            ]
        claim_labels.append(label_in)
        native_claims.append({"text": claim_text})
        judgements.append({k: claim[k] for k in CLAIM_JUDGEMENTS if k in claim})

        counters["claims"] += 1
        values = counters["support_values"]
        values[str(support)] = values.get(str(support), 0) + 1
        counters["url_only_evidence_items"] += url_only
        if not evidence:
            counters["claims_with_no_evidence"] += 1
            if support == "Complete":
                counters["complete_without_evidence"] += 1
        elif url_only and not cited:
            counters["claims_with_url_only_evidence"] += 1
        elif url_only:
            counters["claims_with_mixed_evidence"] += 1
        if VARIANT_KEYS & claim.keys():
            counters["schema_variant_claims"] += 1
        start = locate_claim(text, claim_text, after)
        if start is None:
            counters["unanchored_claims"] += 1
        else:
            after = start + len(claim_text)

    counters["records"] += 1
    if obj.get("annotator_id") == expert:
        counters["validator_is_question_author"] += 1
    texts = [question, text, *(c["text"] for c in native_claims)]
    texts += [s["text"] for s in sources.values()]
    if any(ASTRAL.search(t) for t in texts):
        counters["records_with_astral_characters"] += 1
    attribution = answer.get("attribution")
    return {
        "external_id": f"expertqa:{_key(question)}",
        "text": question,
        "slices": {k: v for k, v in slices.items() if v is not None},
        "metadata": {"dataset": "expertqa"},
        "sources": list(sources.values()),
        "candidates": [
            {
                "id": system,
                "text": text,
                "generator": system,
                "metadata": {"attribution": attribution} if attribution is not None else {},
                "claims": native_claims,
                "prior_annotations": [
                    {
                        "annotator": pseudonym(expert),
                        "answer_label": None,
                        "claim_labels": claim_labels,
                        "raw": {
                            "usefulness": answer.get("usefulness"),
                            "annotation_time": answer.get("annotation_time"),
                            "revised_answer_string": answer.get("revised_answer_string"),
                            "claims": judgements,
                        },
                    }
                ],
            }
        ],
    }


def read_expertqa(stream: IO[bytes], counters: dict[str, Any]) -> Iterator[SourcedRecord]:
    """Yield ``("line N", native record or RecordError)`` for each line of an ExpertQA JSONL file.

    ``counters`` is filled with the quirks met and rules applied (see README).
    A line in the wrong shape (not JSON, ``answers`` without exactly one system, an unknown
    ``support`` value, an evidence item without its ``[n]`` marker, ...) yields a RecordError
    naming the field, e.g. ``answers.gpt4.claims[3].support``.
    """
    yield from convert_jsonl(stream, lambda obj, location: _record(obj, location, counters))


def open_expertqa(stream: IO[bytes], filename: str) -> RecordSource:
    """Open an ExpertQA JSONL file for :func:`labeling.services.workload_import` (lazily)."""
    counters = _new_counters()
    return RecordSource(read_expertqa(stream, counters), counters)


FORMAT = WorkloadFormat(
    "expertqa",
    "ExpertQA JSONL (data/lfqa/*.jsonl): one question per line, one system answer with claims, "
    "evidence passages as pinned sources, the expert's support judgement per claim",
    open_expertqa,
    "expertqa",
)
