"""Writing the evaluator labels that workload records carry on their candidates.

An evaluator label is matched on (evaluator name and version, candidate, claim): the same label
again writes nothing, a different one is refused (a changed judge is a new evaluator version).
"""

from __future__ import annotations

from typing import Any

from labeling.bulk import insert_rows
from labeling.importers.record_errors import RecordError
from labeling.models import EvaluatorLabel
from labeling.services.imports.common import json_or_null, same_label
from labeling.services.imports.state import Chunk, ChunkKeys, ImportState

LabelKey = tuple[int, int, int | None]  # (evaluator id, candidate id, claim id or None)
LABEL_COLUMNS = (
    "evaluator_id",
    "candidate_id",
    "claim_id",
    "label",
    "score",
    "available",
    "raw",
    "import_batch_id",
)


def _stored_labels(existing_ids: set[int]) -> dict[LabelKey, tuple[Any, Any, Any]]:
    """Return ``{(evaluator, candidate, claim): (label, score, available)}`` of stored ones."""
    return {
        (e, c, k): (label, score, available)
        for e, c, k, label, score, available in EvaluatorLabel.objects.filter(
            candidate__question_id__in=existing_ids
        ).values_list("evaluator_id", "candidate_id", "claim_id", "label", "score", "available")
    }


def write_evaluator_labels(state: ImportState, chunk: Chunk, keys: ChunkKeys) -> None:
    """Create the chunk's new evaluator labels (and their evaluators).

    Raises:
        RecordError: an evaluator version already labelled the target differently.
    """
    stored = _stored_labels(keys.existing_ids)
    new: list[tuple[Any, ...]] = []
    for location, record in chunk:
        question_id = keys.questions[record.external_id]
        for c, candidate in enumerate(record.candidates):
            candidate_id = keys.candidates[(question_id, candidate.id)]
            for e, label in enumerate(candidate.evaluator_labels):
                evaluator_id = state.evaluator_id(label.evaluator, label.version)
                claim_id = None if label.claim is None else keys.claims[(candidate_id, label.claim)]
                key = (evaluator_id, candidate_id, claim_id)
                value = (label.label, label.score, label.available)
                if key in stored:
                    if same_label(stored[key], value):
                        continue
                    raise RecordError(
                        location,
                        f"candidates[{c}].evaluator_labels[{e}]",
                        f"evaluator {label.evaluator}@{label.version} already labelled this "
                        "target differently; a changed judge is a new evaluator version",
                    )
                stored[key] = value
                new.append(
                    (
                        evaluator_id,
                        candidate_id,
                        claim_id,
                        label.label,
                        None if label.score is None else float(label.score),
                        label.available,
                        json_or_null(label.raw),
                        state.batch.pk,
                    )
                )
    insert_rows(EvaluatorLabel, LABEL_COLUMNS, new)
    state.created["evaluator_labels"] += len(new)
