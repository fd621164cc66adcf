"""What every part of the workload import shares: limits, the result, fingerprints, row values."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from labeling.fingerprints import fingerprint, text_sha256
from labeling.importers.schema import PolicyVocabulary
from labeling.importers.validation import MAX_ERRORS
from labeling.models import ImportBatch, LabelPolicy

__all__ = [
    "BULK_BATCH",
    "CHUNK_SIZE",
    "GC_EVERY_CHUNKS",
    "MAX_ERRORS",
    "ImportResult",
    "differing_field",
    "fingerprint",
    "json_or_null",
    "json_value",
    "policy_vocabulary",
    "same_label",
    "text_sha256",
]

CHUNK_SIZE = 1000
GC_EVERY_CHUNKS = 10
BULK_BATCH = 2000
_EMPTY_JSON: dict[type, str] = {dict: "{}", list: "[]"}


@dataclass
class ImportResult:
    """What an import did: the batch (None when nothing new was written) and row counts."""

    batch: ImportBatch | None
    records: int
    created: dict[str, int]
    already_imported: bool = False
    notes: dict[str, Any] = field(default_factory=dict)


def policy_vocabulary(policy: LabelPolicy) -> PolicyVocabulary:
    """Return the label values ``policy`` allows."""
    return PolicyVocabulary(
        answer_labels=frozenset(policy.answer_labels),
        claim_labels=frozenset(policy.claim_labels),
        reasons=frozenset(policy.unavailable_reasons),
    )


def json_value(value: Any) -> str:
    """Serialise a JSONField value for :func:`labeling.bulk.insert_rows`, as Django does."""
    # Most records give no metadata, slices or settings: their JSON needs no encoder.
    if not value and type(value) in _EMPTY_JSON:
        return _EMPTY_JSON[type(value)]
    return json.dumps(value)


def json_or_null(value: Any) -> str | None:
    """Serialise a nullable JSONField value as Django does: None is SQL NULL, not JSON null."""
    return None if value is None else json.dumps(value)


def differing_field(stored: dict[str, Any], given: dict[str, Any]) -> str:
    """Return the first field of ``given`` whose value differs from ``stored``'s."""
    for name in given:
        if stored.get(name) != given[name]:
            return name
    return "(content)"


def same_label(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any]) -> bool:
    """Whether two evaluator labels ``(label, score, available)`` are the same.

    Scores go through the database as floats: an int 1 and a float 1.0 are the same score.
    """
    same_score = a[1] == b[1] or (
        a[1] is not None and b[1] is not None and float(a[1]) == float(b[1])
    )
    return a[0] == b[0] and a[2] == b[2] and same_score
