"""Writing the resolutions that records carry (a certified release's) and resolving their items.

A candidate's ``resolution`` becomes resolution number 1 of its item, with the import's batch and
``resolved_at`` as its time, and the item is resolved. A candidate already resolved must give the
same resolution (then nothing is written). A new resolution is written only for an item created
by this import or before labelling starts: an item under way is resolved by its annotators.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from labeling.bulk import insert_rows, reserve_ids, update_rows
from labeling.importers.record_errors import RecordError
from labeling.importers.schema import ResolutionIn, ResolvedClaimLabelIn
from labeling.models import Item, ItemStatus, Resolution, ResolvedClaimLabel, ResolvedEvidence
from labeling.rows import db_datetime
from labeling.services.claim_labels import claim_labels_write
from labeling.services.imports.state import Chunk, ChunkKeys, ImportState

RESOLUTION_COLUMNS = (
    "item_id",
    "number",
    "status",
    "policy_id",
    "answer_label",
    "answer_reason",
    "rationale",
    "unresolved_reason",
    "adjudicator_pseudonym",
    "import_batch_id",
    "created_at",
)
RESOLVED_LABEL_COLUMNS = ("resolution_id", "claim_id", "label", "reason", "evidence_waived")
# {claim index: (label, reason, {(version id, start, end, quote)})}
ClaimKeys = dict[int, tuple[str, str | None, frozenset[tuple[int, int, int, str]]]]


@dataclass(frozen=True)
class _Given:
    """A resolution a record gives: where, for which candidate, and its sources' version ids."""

    location: str
    field: str
    candidate_id: int
    new: bool  # the candidate was created by this import
    resolution: ResolutionIn
    sources: dict[str, int]


def resolution_key(
    status: str,
    answer_label: str | None,
    answer_reason: str | None,
    unresolved_reason: str | None,
    rationale: str,
    adjudicator: Any,
    policy_id: int,
    claims: ClaimKeys,
) -> tuple[Any, ...]:
    """What two resolutions must share to be the same: every field and label, evidence as a set."""
    return (
        status,
        answer_label,
        answer_reason,
        unresolved_reason,
        rationale,
        adjudicator,
        policy_id,
        tuple(sorted(claims.items())),
    )


def _given(chunk: Chunk, keys: ChunkKeys) -> list[_Given]:
    """Return the resolutions the chunk's candidates give, in order."""
    given: list[_Given] = []
    for location, record in chunk:
        if all(candidate.resolution is None for candidate in record.candidates):
            continue
        question_id = keys.questions[record.external_id]
        sources = keys.sources(record)
        for c, candidate in enumerate(record.candidates):
            if candidate.resolution is not None:
                given.append(
                    _Given(
                        location,
                        f"candidates[{c}].resolution",
                        keys.candidates[(question_id, candidate.id)],
                        # A question's candidates are created with it.
                        question_id not in keys.existing_ids,
                        candidate.resolution,
                        sources,
                    )
                )
    return given


def _given_key(given: _Given, policy_id: int) -> tuple[Any, ...]:
    resolution = given.resolution
    claims: ClaimKeys = {
        cl.claim: (
            cl.label,
            cl.reason,
            frozenset((given.sources[e.source], e.start, e.end, e.quote) for e in cl.evidence),
        )
        for cl in resolution.claim_labels
    }
    return resolution_key(
        resolution.status,
        resolution.answer_label,
        resolution.answer_reason,
        resolution.unresolved_reason,
        resolution.rationale,
        resolution.adjudicator,
        policy_id,
        claims,
    )


def _resolution_row(
    state: ImportState, item_id: int, policy_id: int, resolution: ResolutionIn, now: Any
) -> tuple[Any, ...]:
    """Return the ``RESOLUTION_COLUMNS`` row of an imported resolution.

    ``now`` is the time of one without ``resolved_at``, already adapted (:func:`db_datetime`).
    """
    return (
        item_id,
        1,
        resolution.status,
        policy_id,
        resolution.answer_label,
        resolution.answer_reason,
        resolution.rationale,
        resolution.unresolved_reason,
        resolution.adjudicator,
        state.batch.pk,
        now if resolution.resolved_at is None else db_datetime(resolution.resolved_at),
    )


@dataclass
class PendingResolutions:
    """The resolutions of one chunk, checked and given ids, to write after the chunk's items.

    ``rows`` are ``RESOLUTION_COLUMNS`` rows, each after its reserved id; ``labels`` hold
    ``(resolution row index, candidate id, claim label, {source id: version id})``;
    ``stored_items`` the ``(item id, status, resolution id, version)`` of stored items they
    resolve (new items are written resolved: ``ChunkKeys.item_resolutions``).
    """

    rows: list[tuple[Any, ...]]
    labels: list[tuple[int, int, ResolvedClaimLabelIn, dict[str, int]]]
    stored_items: list[tuple[int, str, int, int]]


def prepare_resolutions(state: ImportState, chunk: Chunk, keys: ChunkKeys) -> PendingResolutions:
    """Check the records' resolutions and reserve their ids; resolve the chunk's new items.

    Fills ``keys.item_resolutions`` for the new items resolved (written by ``write_items``);
    :func:`write_resolutions` writes the rest.

    Raises:
        RecordError: a different resolution is stored, or labelling is under way.
    """
    pending = PendingResolutions([], [], [])
    given = _given(chunk, keys)
    if not given:
        return pending
    items = _items(keys, given)
    stored = _stored_resolutions([r for _, r, _ in items.values() if r is not None])
    rows: list[tuple[Any, ...]] = []
    # (item id, its new version) of the items resolved
    updates: list[tuple[int, int]] = []
    now = db_datetime(timezone.now())
    for g in given:
        item_id, resolution_id, version = items[g.candidate_id]
        resolution = g.resolution
        policy_id = (
            state.newest_policy_id
            if resolution.policy_version is None
            else state.policy_ids[resolution.policy_version]
        )
        key = _given_key(g, policy_id)
        if resolution_id is not None:
            stored_key, stored_at = stored[resolution_id]
            same_time = resolution.resolved_at is None or resolution.resolved_at == stored_at
            if stored_key == key and same_time:
                continue
            raise RecordError(
                g.location,
                g.field,
                "the candidate already has a different resolution in this project; a "
                "resolution is imported once (correct it by adjudication)",
            )
        if state.project.labelling_started_at is not None and not g.new:
            raise RecordError(
                g.location,
                g.field,
                "labelling has started: the item is resolved by its annotators, a "
                "resolution cannot be imported for it now",
            )
        rows.append(_resolution_row(state, item_id, policy_id, resolution, now))
        for claim_label in resolution.claim_labels:
            pending.labels.append((len(rows) - 1, g.candidate_id, claim_label, g.sources))
        updates.append((item_id, version + 1))
        state.resolved.append((item_id, resolution.status))
    ids = reserve_ids(Resolution._meta.db_table, len(rows))
    pending.rows = [(pk, *row) for pk, row in zip(ids, rows, strict=True)]
    new_items = set(keys.items.values())
    resolved = ItemStatus.RESOLVED.value
    for (item_id, version), pk in zip(updates, ids, strict=True):
        if item_id in new_items:
            keys.item_resolutions[item_id] = (resolved, pk, version)
        else:
            pending.stored_items.append((item_id, resolved, pk, version))
    return pending


def _items(keys: ChunkKeys, given: list[_Given]) -> dict[int, tuple[int, int | None, int]]:
    """Return ``{candidate id: (item id, resolution id, version)}`` of the given candidates.

    An item created with the chunk is unresolved at version 0; the others are read.
    """
    items: dict[int, tuple[int, int | None, int]] = {}
    stored: list[int] = []
    for g in given:
        item_id = keys.items.get(g.candidate_id)
        if item_id is None:
            stored.append(g.candidate_id)
        else:
            items[g.candidate_id] = (item_id, None, 0)
    if stored:
        for pk, candidate_id, resolution_id, version in Item.objects.filter(
            candidate_id__in=stored
        ).values_list("pk", "candidate_id", "resolution_id", "version"):
            items[candidate_id] = (pk, resolution_id, version)
    return items


def write_resolutions(state: ImportState, keys: ChunkKeys, pending: PendingResolutions) -> None:
    """Insert the resolutions, their claim labels and evidence; point stored items at them.

    Runs after ``write_items``: the statement trigger that takes a resolution's project lock
    finds the project through the resolution's item.
    """
    if not pending.rows:
        return
    insert_rows(Resolution, ("id", *RESOLUTION_COLUMNS), pending.rows)
    claims = keys.claims
    labels, evidence = claim_labels_write(
        ResolvedClaimLabel,
        RESOLVED_LABEL_COLUMNS,
        [
            (
                (
                    pending.rows[row][0],
                    claims[(candidate_id, label.claim)],
                    label.label,
                    label.reason,
                    False,
                ),
                [(sources[e.source], e.start, e.end, e.quote) for e in label.evidence],
            )
            for row, candidate_id, label, sources in pending.labels
        ],
        copy=True,
    )
    update_rows(Item, ["status", "resolution_id", "version"], pending.stored_items)
    state.created["resolutions"] += len(pending.rows)
    state.created["resolved_claim_labels"] += len(labels)
    state.created["resolved_evidence"] += len(evidence)


def _stored_resolutions(ids: list[int]) -> dict[int, tuple[tuple[Any, ...], Any]]:
    """Return {resolution id: (its :func:`resolution_key`, its time)} of stored ones."""
    if not ids:
        return {}
    evidence: dict[int, set[tuple[int, int, int, str]]] = defaultdict(set)
    for label_id, version_id, start, end, quote in ResolvedEvidence.objects.filter(
        claim_label__resolution_id__in=ids
    ).values_list("claim_label_id", "source_version_id", "start", "end", "quote"):
        evidence[label_id].add((version_id, start, end, quote))
    claims: dict[int, ClaimKeys] = defaultdict(dict)
    for pk, resolution_id, index, label, reason in ResolvedClaimLabel.objects.filter(
        resolution_id__in=ids
    ).values_list("pk", "resolution_id", "claim__index", "label", "reason"):
        claims[resolution_id][index] = (label, reason, frozenset(evidence[pk]))
    out = {}
    for row in Resolution.objects.filter(pk__in=ids).values(
        "pk",
        "status",
        "answer_label",
        "answer_reason",
        "unresolved_reason",
        "rationale",
        "adjudicator_id",
        "adjudicator_pseudonym",
        "policy_id",
        "created_at",
    ):
        # An adjudication made here names an account, never equal to an imported pseudonym.
        adjudicator = (
            ("user", row["adjudicator_id"])
            if row["adjudicator_id"] is not None
            else row["adjudicator_pseudonym"]
        )
        key = resolution_key(
            row["status"],
            row["answer_label"],
            row["answer_reason"],
            row["unresolved_reason"],
            row["rationale"],
            adjudicator,
            row["policy_id"],
            claims[row["pk"]],
        )
        out[row["pk"]] = (key, row["created_at"])
    return out
