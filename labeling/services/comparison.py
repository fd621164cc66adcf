"""Comparison of an item's votes once it has enough of them.

Votes are the current revisions of the item's submitted annotations plus the imported prior
annotations with an answer label (:func:`labeling.selectors.vote_reads.item_votes`). When every vote
carries the same answer label (and the same reason for ``evidence_unavailable``) and the same
label (and reason) for every claim, and none is ``cannot_decide``, the item is resolved as
``consensus``: the resolution keeps the union of every vote's evidence spans, deduplicated.
Otherwise the item enters the disagreement queue with an open :class:`Disagreement` saying at
which levels the votes differ. ``evidence_unavailable`` and ``cannot_decide`` are votes like any
other: never dropped, and ``cannot_decide`` never agrees.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from django.utils import timezone

from labeling.models import (
    Disagreement,
    ItemStatus,
    LabelPolicy,
    Project,
    Resolution,
    ResolutionStatus,
    ResolvedClaimLabel,
)
from labeling.rows import execute, in_ids, insert_like, select_rows
from labeling.selectors.review import labelling_policy_get
from labeling.selectors.vote_reads import Vote, item_votes, votes_compare
from labeling.services.claim_labels import EvidenceValues, claim_labels_write
from labeling.signals import announce_resolutions

logger = logging.getLogger(__name__)

# Items compared per round of queries (keeps IN lists and memory bounded at project start).
CHUNK = 2000


@dataclass(frozen=True)
class CompareResult:
    """What :func:`items_compare` did, by item id (each tuple sorted).

    ``consensus``: resolved as consensus. ``disagreement``: put in the disagreement queue.
    ``waiting``: fewer votes than the item's overlap, or already compared; left unchanged.
    """

    consensus: tuple[int, ...] = ()
    disagreement: tuple[int, ...] = ()
    waiting: tuple[int, ...] = ()


def _union(votes: Sequence[Vote], claim_id: int) -> list[EvidenceValues]:
    """The claim's spans cited by any vote, once each: (source version, start, end, quote)."""
    quotes: dict[tuple[int, int, int], str] = {}
    for vote in votes:
        claim = vote.claims.get(claim_id)
        for span in claim.evidence if claim else ():
            quotes.setdefault((span.source_version_id, span.start, span.end), span.quote)
    return [(*key, quotes[key]) for key in sorted(quotes)]


def items_compare(
    *,
    project: Project,
    item_ids: Iterable[int],
    policy: LabelPolicy | None = None,
    progress: Callable[[int, int], object] | None = None,
) -> CompareResult:
    """Compare the votes of each given item of ``project`` that has enough of them.

    An item in status ``open`` with at least ``overlap`` votes is resolved as consensus (a
    :class:`Resolution` with the agreed labels and the union of the evidence) or put in the
    disagreement queue (a new :class:`Disagreement`). Its ``version`` is bumped. Consensus
    resolutions are announced after commit (:func:`labeling.signals.announce_resolutions`).
    Other items (too few votes, already compared, or of another project) are left alone: votes
    are compared once, because annotations can no longer be revised after that.

    Not a public entry point: the caller holds the transaction and, for items that may be
    submitted concurrently, the item's lock (``annotation_submit`` bumps the item's version
    first; ``project_labelling_start`` runs before anyone can claim).

    ``policy`` is the labelling policy (:func:`labelling_policy_get`) when the caller has read
    it in this transaction; it is read here otherwise. ``progress`` (optional) is called with
    (items compared, items) after each chunk of :data:`CHUNK` items.

    Raises:
        InvalidTransition: labelling has not started in ``project`` (no frozen policy).
    """
    if policy is None:
        policy = labelling_policy_get(project=project)
    ids = sorted(set(item_ids))
    consensus: list[int] = []
    disagreement: list[int] = []
    waiting: list[int] = []
    for at in range(0, len(ids), CHUNK):
        c, d, w = _compare_chunk(project, policy, ids[at : at + CHUNK])
        consensus += c
        disagreement += d
        waiting += w
        if progress is not None:
            progress(min(at + CHUNK, len(ids)), len(ids))
    announce_resolutions(
        project_id=project.pk, resolved=[(pk, ResolutionStatus.CONSENSUS.value) for pk in consensus]
    )
    if consensus or disagreement:
        logger.info(
            "comparison.done",
            extra={
                "project": project.slug,
                "consensus": len(consensus),
                "disagreement": len(disagreement),
            },
        )
    return CompareResult(tuple(consensus), tuple(disagreement), tuple(waiting))


class _ItemRow(NamedTuple):
    """What the comparison reads of an item, in the columns' order of its statement.

    A tuple, not a model instance: a start reads every item of the project.
    """

    pk: int
    project_id: int
    status: str
    overlap: int
    prior_votes: int
    candidate_id: int
    resolution_id: int | None


def _compare_chunk(
    project: Project, policy: LabelPolicy, ids: list[int]
) -> tuple[list[int], list[int], list[int]]:
    # Plain statements (labeling/rows.py): the submit that completes an item runs them. The
    # f-strings add only placeholders. The items are read by id alone, project and status
    # checked here: with them in the statement, a prepared statement's generic plan walks the
    # project's queue index testing every entry against the id list (a minute for 50,000
    # items on PostgreSQL).
    where, params = in_ids("id", ids)
    items = {
        item.pk: item
        for item in map(
            _ItemRow._make,
            select_rows(
                "SELECT id, project_id, status, overlap, prior_votes, candidate_id, "  # noqa: S608
                f"resolution_id FROM labeling_item WHERE {where}",
                params,
            ),
        )
        if item.project_id == project.pk and item.status == ItemStatus.OPEN
    }
    waiting = [pk for pk in ids if pk not in items]
    votes = item_votes(
        item_ids=items, prior_item_ids=[pk for pk, item in items.items() if item.prior_votes]
    )
    claims: dict[int, list[int]] = {}
    numbers: dict[int, int] = {}
    if items:
        where, params = in_ids("candidate_id", [i.candidate_id for i in items.values()])
        for candidate_id, pk in select_rows(
            f"SELECT candidate_id, id FROM labeling_claim WHERE {where} "  # noqa: S608
            'ORDER BY candidate_id, "index"',
            params,
        ):
            claims.setdefault(candidate_id, []).append(pk)
        where, params = in_ids("item_id", list(items))
        numbers = dict(
            select_rows(
                "SELECT item_id, MAX(number) FROM labeling_resolution "  # noqa: S608
                f"WHERE {where} GROUP BY item_id",
                params,
            )
        )
    # The rows are written from plain values (claim_labels.claim_labels_write): a
    # start compares every item, and a model instance per row was half its time.
    agreed: list[tuple[_ItemRow, list[Vote]]] = []
    differing: list[tuple[int, bool, bool]] = []
    for pk in sorted(items):
        item, item_votes_ = items[pk], votes[pk]
        if len(item_votes_) < item.overlap:
            waiting.append(pk)
            continue
        diff = votes_compare(item_votes_, claims.get(item.candidate_id, []))
        if diff.consensus:
            agreed.append((item, item_votes_))
        else:
            differing.append((pk, diff.answer_differs, diff.claims_differ))
    if differing:
        opened = Disagreement(opened_at=timezone.now(), answer_differs=False, claims_differ=False)
        insert_like(opened, ["item_id", "answer_differs", "claims_differ"], differing)
        where, params = in_ids("id", [pk for pk, _, _ in differing])
        execute(
            f"UPDATE labeling_item SET status = %s, version = version + 1 WHERE {where}",  # noqa: S608
            [ItemStatus.DISAGREEMENT, *params],
        )
    consensus = Resolution(status=ResolutionStatus.CONSENSUS, policy=policy, number=1)
    resolution_ids = insert_like(
        consensus,
        ["item_id", "number", "supersedes_id", "answer_label", "answer_reason"],
        [
            (
                item.pk,
                numbers.get(item.pk, 0) + 1,
                item.resolution_id,
                votes_[0].answer_key[0],
                votes_[0].answer_key[1],
            )
            for item, votes_ in agreed
        ],
    )
    claim_rows: list[tuple[tuple[int, int, str, str | None], list[EvidenceValues]]] = []
    for resolution_id, (item, votes_) in zip(resolution_ids, agreed, strict=True):
        for claim_id in claims.get(item.candidate_id, []):
            label, reason = votes_[0].claims[claim_id].key
            assert label is not None  # votes_compare finds no consensus on an unlabelled claim
            claim_rows.append(((resolution_id, claim_id, label, reason), _union(votes_, claim_id)))
    claim_labels_write(
        ResolvedClaimLabel, ("resolution_id", "claim_id", "label", "reason"), claim_rows
    )
    if agreed:
        # One statement for the chunk: each item takes its newest resolution, the one just
        # written (numbered after every earlier one).
        where, params = in_ids("id", [item.pk for item, _ in agreed])
        execute(
            "UPDATE labeling_item SET status = %s, version = version + 1, resolution_id = ("  # noqa: S608
            "SELECT r.id FROM labeling_resolution r WHERE r.item_id = labeling_item.id "
            f"ORDER BY r.number DESC LIMIT 1) WHERE {where}",
            [ItemStatus.RESOLVED, *params],
        )
    return [item.pk for item, _ in agreed], [pk for pk, _, _ in differing], waiting
