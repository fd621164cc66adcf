"""Writing the gold references that records carry: a candidate's ``gold`` makes its item gold.

Each is written through :func:`labeling.services.gold.gold_reference_set`, so an imported
reference obeys the rules of one set on the page: labels checked against the labelling policy
(the newest draft before labelling starts) and the pinned sources, only for an item nobody has
labelled; the same reference again writes nothing (a re-import is a no-op), a different one is a
new revision. A refusal names the record and the field (``candidates[0].gold.claim_labels[1]
.label``).
"""

from __future__ import annotations

import re

from labeling import offsets
from labeling.exceptions import InvalidInput, InvalidTransition
from labeling.importers.record_errors import RecordError
from labeling.importers.schema import GoldIn
from labeling.models import Item
from labeling.services.gold import GoldReferenceInput, gold_reference_set
from labeling.services.imports.state import Chunk, ChunkKeys, ImportState
from labeling.services.label_checks import ClaimInput, EvidenceInput

# The service names a reference's claims ``claims[i]`` in the order given; the record names them
# ``claim_labels[i]`` (the same order).
_CLAIMS_FIELD = re.compile(r"^claims(?=\[|$)")


def _reference(gold: GoldIn, claim_ids: list[int], sources: dict[str, int]) -> GoldReferenceInput:
    return GoldReferenceInput(
        answer_label=gold.answer_label,
        answer_reason=gold.answer_reason,
        rationale=gold.rationale,
        claims=tuple(
            ClaimInput(
                claim_id=claim_ids[c.claim],
                label=c.label,
                reason=c.reason,
                evidence=tuple(
                    EvidenceInput(
                        source_version_id=sources[e.source],
                        start=e.start,
                        end=e.end,
                        quote=e.quote,
                        unit=offsets.UNIT_CODEPOINT,
                    )
                    for e in c.evidence
                ),
            )
            for c in gold.claim_labels
        ),
    )


def write_gold(state: ImportState, chunk: Chunk, keys: ChunkKeys) -> None:
    """Write the gold references of the chunk's candidates.

    Raises:
        RecordError: a reference's label, reason or evidence is refused by the policy or the
            sources, or its item already has votes.
    """
    for location, record in chunk:
        if all(candidate.gold is None for candidate in record.candidates):
            continue
        question_id = keys.questions[record.external_id]
        sources = keys.sources(record)
        for c, candidate in enumerate(record.candidates):
            if candidate.gold is None:
                continue
            field = f"candidates[{c}].gold"
            candidate_id = keys.candidates[(question_id, candidate.id)]
            claim_ids = [keys.claims[(candidate_id, k)] for k in range(len(candidate.claims))]
            item_id = Item.objects.values_list("pk", flat=True).get(candidate_id=candidate_id)
            try:
                reference = gold_reference_set(
                    project=state.project,
                    item_id=item_id,
                    actor=None,
                    data=_reference(candidate.gold, claim_ids, sources),
                    import_batch=state.batch,
                )
            except InvalidInput as exc:
                inner = _CLAIMS_FIELD.sub("claim_labels", exc.field or "")
                raise RecordError(
                    location, f"{field}.{inner}" if inner else field, exc.reason
                ) from exc
            except InvalidTransition as exc:
                raise RecordError(location, field, exc.reason) from exc
            if reference.import_batch_id == state.batch.pk:
                state.created["gold_references"] += 1
