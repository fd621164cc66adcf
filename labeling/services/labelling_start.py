"""Starting labelling as a handful of set-based statements: queue every item, compare prior votes.

Writes, by ``INSERT … SELECT`` and one ``UPDATE`` (PostgreSQL and SQLite), the rows that
``labelling_queue._enqueue`` and ``comparison.items_compare`` write item by item: every item's
``queue_position``, ``overlap`` and ``prior_votes``, and for every open item whose prior votes
reach the overlap the comparison's outcome (a consensus resolution with its claim labels and the
union of the votes' evidence, or an open disagreement), exactly as
:mod:`labeling.services.comparison` decides it. New rows are inserted in the per-item code's
order, so their ids follow the same order. Items with a live vote are left to ``items_compare``.
Temporary tables carry the work between statements; Python sees no row per item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection
from django.utils import timezone

from labeling.derived import derived_mark
from labeling.models import (
    AssignmentStatus,
    DerivedKind,
    Disagreement,
    ItemStatus,
    LabelPolicy,
    Project,
    Resolution,
    ResolutionStatus,
    ResolvedClaimLabel,
    ResolvedEvidence,
    ServingOrder,
)
from labeling.rows import execute, id_array, insert_select, select_rows
from labeling.services.comparison import items_compare
from labeling.signals import announce_resolutions
from labeling.vocabulary import CANNOT_DECIDE, EVIDENCE_UNAVAILABLE

logger = logging.getLogger(__name__)

#: The temporary tables, in creation order.
QUEUE, CLAIMS, COMPARED = (
    "labelling_start_queue",
    "labelling_start_claims",
    "labelling_start_compared",
)

# Their columns; types that read the same on both databases (SQLite takes any type name).
_TABLES = {
    # Every item; the answer-level comparison of its prior votes comes with their count.
    QUEUE: "item_id bigint PRIMARY KEY, candidate_id bigint NOT NULL, "
    "resolution_id bigint, position bigint NOT NULL, votes integer NOT NULL, "
    "due boolean NOT NULL, answer_agrees boolean, answer_label varchar(64), "
    "answer_reason varchar(64)",
    # Each claim of a due item.
    CLAIMS: 'item_id bigint NOT NULL, claim_id bigint NOT NULL, "index" integer NOT NULL, '
    "agrees boolean NOT NULL, label varchar(64), reason varchar(64), "
    "PRIMARY KEY (item_id, claim_id)",
    # Each due item, with its outcome.
    COMPARED: "item_id bigint PRIMARY KEY, candidate_id bigint NOT NULL, "
    "consensus boolean NOT NULL, answer_differs boolean NOT NULL, "
    "claims_differ boolean NOT NULL, answer_label varchar(64), answer_reason varchar(64), "
    '"number" integer NOT NULL, supersedes_id bigint',
}

#: PostgreSQL's memory per sort or hash while the start's statements run.
WORK_MEM = "64MB"

# A vote's prior annotation: one with an answer label (labeling.selectors.vote_reads._prior_votes).
_IS_VOTE = "p.answer_label IS NOT NULL AND p.answer_label <> ''"


def _key(label: str, reason: str) -> str:
    """SQL of the reason part of a vote's key: the reason of ``evidence_unavailable`` only.

    One text per key (``-`` for none, ``r`` + the reason otherwise), so that the keys of a
    group are equal exactly when their MIN and MAX are. Takes one parameter: EVIDENCE_UNAVAILABLE.
    """
    return f"COALESCE('r' || CASE WHEN {label} = %s THEN {reason} END, '-')"


@dataclass(frozen=True)
class StartResult:
    """What :func:`labelling_start_write` did: items queued, and the compared items' ids."""

    queued: int
    compared: tuple[int, ...]
    consensus: tuple[int, ...]
    disagreement: tuple[int, ...]


def labelling_start_write(
    *,
    project: Project,
    policy: LabelPolicy,
    partition_rank: Mapping[str | None, int],
    order: Callable[[list[tuple[int, str | None, int, int]]], list[int]],
    progress: Callable[[str, int, int], object] | None = None,
) -> StartResult:
    """Queue every item of ``project`` and compare those whose prior votes reach the overlap.

    The rows written are listed in the module's docstring. ``partition_rank`` is the rank of
    each partition in the ``partition`` serving order (other values after them all), computed
    here in SQL; for any other serving order ``order`` is given the items as
    ``(item id, partition, question id, sample index)`` and returns the item ids in serving
    order. ``progress`` (optional) is called with ``("queued", n, n)`` once the queue is
    computed, then, when some item is compared, with ``("compared", m, m)``.

    Not a public entry point: ``project_labelling_start`` holds the transaction, the project's
    lock and its label writes, and has frozen ``policy``. Consensus resolutions are announced
    after commit (:func:`labeling.signals.announce_resolutions`).
    """
    _drop_tables()  # none should be left; a stray one would make CREATE fail
    temporary = " ON COMMIT DROP" if connection.vendor == "postgresql" else ""
    for table, columns in _TABLES.items():
        execute(f"CREATE TEMPORARY TABLE {table} ({columns}){temporary}", [])
    # No cleanup on error: the caller's transaction (or savepoint) rolls the tables back.
    with _sort_memory():
        queued = _queue(project, partition_rank, order)
        if progress is not None:
            progress("queued", queued, queued)
        live = _live_due()
        _compare(project, policy)
        _items_update(project)
    outcomes = select_rows(f"SELECT item_id, consensus FROM {COMPARED} ORDER BY item_id", [])  # noqa: S608
    consensus = [pk for pk, agreed in outcomes if agreed]
    disagreement = [pk for pk, agreed in outcomes if not agreed]
    _drop_tables()
    announce_resolutions(
        project_id=project.pk, resolved=[(pk, ResolutionStatus.CONSENSUS.value) for pk in consensus]
    )
    # The start freezes the policy: imported votes that record no version count under it from
    # now on, so the agreement figures are stale (their fold counts every vote again if the
    # version changed).
    derived_mark(project_id=project.pk, kinds=[DerivedKind.AGREEMENT])
    if consensus or disagreement:
        logger.info(
            "comparison.done",
            extra={
                "project": project.slug,
                "consensus": len(consensus),
                "disagreement": len(disagreement),
            },
        )
    if live:  # votes of live annotations too: compared as a submit compares them
        result = items_compare(project=project, item_ids=live, policy=policy)
        consensus = sorted(consensus + list(result.consensus))
        disagreement = sorted(disagreement + list(result.disagreement))
    compared = sorted([pk for pk, _ in outcomes] + live)
    if compared and progress is not None:
        progress("compared", len(compared), len(compared))
    return StartResult(queued, tuple(compared), tuple(consensus), tuple(disagreement))


@contextmanager
def _sort_memory() -> Iterator[None]:
    """Give PostgreSQL's sorts and hashes of the block :data:`WORK_MEM` (then the previous value).

    The default 4 MB sends the sorts of 50,000 items' votes and spans to disk. Local to the
    transaction (``set_config(…, true)``), as :func:`labeling.bulk.custom_plans` is; nothing
    on SQLite.
    """
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('work_mem'), set_config('work_mem', %s, true)", [WORK_MEM]
        )
        previous = cursor.fetchone()[0]
    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('work_mem', %s, true)", [previous])


def _drop_tables() -> None:
    """Drop the temporary tables, if they exist (only the temporary ones: schema-qualified)."""
    schema = "pg_temp" if connection.vendor == "postgresql" else "temp"
    for table in (COMPARED, CLAIMS, QUEUE):
        execute(f"DROP TABLE IF EXISTS {schema}.{table}", [])


def _queue(
    project: Project,
    partition_rank: Mapping[str | None, int],
    order: Callable[[list[tuple[int, str | None, int, int]]], list[int]],
) -> int:
    """Fill the queue table: each item's position, prior votes, and whether it is compared.

    Returns the number of items. An item is due for comparison when it is open and its prior
    votes reach the project's overlap.
    """
    by_partition = project.serving_order == ServingOrder.PARTITION
    if by_partition:
        named = [(name, rank) for name, rank in partition_rank.items() if name is not None]
        rank = (
            "CASE WHEN q.partition IS NULL THEN %s "
            + "".join("WHEN q.partition = %s THEN %s " for _ in named)
            + "ELSE %s END"
        )
        rank_params = [
            partition_rank.get(None, len(partition_rank)),
            *(value for pair in named for value in pair),
            len(partition_rank),
        ]
        position = f"ROW_NUMBER() OVER (ORDER BY {rank}, q.id, c.sample_index, i.id)"
        joins = (
            "JOIN labeling_candidateanswer c ON c.id = i.candidate_id "
            "JOIN labeling_question q ON q.id = c.question_id "
        )
        groups = ", c.id, q.id"
    else:
        position, rank_params, joins, groups = "0", [], "", ""
    # One pass over the project's items and their prior votes: the number of votes and
    # whether their answer keys agree (the same label and key, none cannot_decide). The
    # position is numbered over the grouped rows (a window runs after GROUP BY).
    queued = execute(
        f"INSERT INTO {QUEUE} (item_id, candidate_id, resolution_id, position, votes, due, "  # noqa: S608
        "answer_agrees, answer_label, answer_reason) "
        f"SELECT i.id, i.candidate_id, i.resolution_id, {position}, COUNT(p.id), "
        "CASE WHEN i.status = %s AND COUNT(p.id) >= %s THEN TRUE ELSE FALSE END, "
        "CASE WHEN MIN(p.answer_label) = MAX(p.answer_label) AND MIN(p.answer_label) <> %s "
        f"AND MIN({_key('p.answer_label', 'p.answer_reason')}) "
        f"= MAX({_key('p.answer_label', 'p.answer_reason')}) THEN TRUE ELSE FALSE END, "
        "MIN(p.answer_label), MIN(CASE WHEN p.answer_label = %s THEN p.answer_reason END) "
        f"FROM labeling_item i {joins}"
        "LEFT JOIN labeling_priorannotation p ON p.candidate_id = i.candidate_id "
        f"AND {_IS_VOTE} WHERE i.project_id = %s GROUP BY i.id{groups}",
        [
            *rank_params,
            ItemStatus.OPEN,
            project.overlap,
            CANNOT_DECIDE,
            EVIDENCE_UNAVAILABLE,
            EVIDENCE_UNAVAILABLE,
            EVIDENCE_UNAVAILABLE,
            project.pk,
        ],
    )
    if not by_partition and queued:
        rows = select_rows(
            "SELECT i.id, q.partition, q.id, c.sample_index FROM labeling_item i "
            "JOIN labeling_candidateanswer c ON c.id = i.candidate_id "
            "JOIN labeling_question q ON q.id = c.question_id WHERE i.project_id = %s",
            [project.pk],
        )
        _positions_set(order(list(rows)))
    return queued


def _positions_set(ordered: Sequence[int]) -> None:
    """Store ``ordered`` (item ids in serving order) as the queue table's positions 1, 2, ..."""
    if connection.vendor == "postgresql":
        execute(
            f"UPDATE {QUEUE} SET position = o.n FROM unnest(%s::bigint[]) "  # noqa: S608
            "WITH ORDINALITY AS o(id, n) WHERE item_id = o.id",
            [id_array(ordered)],
        )
        return
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {QUEUE} SET position = %s WHERE item_id = %s",  # noqa: S608
            [(n, pk) for n, pk in enumerate(ordered, start=1)],
        )


def _live_due() -> list[int]:
    """The due items with a live vote, taken out of the set-based comparison (their ids).

    A live vote is a submitted assignment's annotation: none exist before labelling starts.
    """
    live = [
        pk
        for (pk,) in select_rows(
            f"SELECT s.item_id FROM {QUEUE} s WHERE s.due AND EXISTS ("  # noqa: S608
            "SELECT 1 FROM labeling_assignment a WHERE a.item_id = s.item_id AND a.status = %s) "
            "ORDER BY s.item_id",
            [AssignmentStatus.SUBMITTED],
        )
    ]
    if live:
        execute(
            f"UPDATE {QUEUE} SET due = FALSE WHERE due AND EXISTS ("  # noqa: S608
            f"SELECT 1 FROM labeling_assignment a WHERE a.item_id = {QUEUE}.item_id "
            "AND a.status = %s)",
            [AssignmentStatus.SUBMITTED],
        )
    return live


def _compare(project: Project, policy: LabelPolicy) -> None:
    """Compare the due items' prior votes; write resolutions and disagreements."""
    # Claim level: for each claim of a due item's candidate, every vote's label of it.
    execute(
        f'INSERT INTO {CLAIMS} (item_id, claim_id, "index", agrees, label, reason) '  # noqa: S608
        'SELECT s.item_id, c.id, c."index", CASE WHEN '
        "SUM(CASE WHEN l.label IS NOT NULL AND l.label <> %s THEN 1 ELSE 0 END) = s.votes "
        f"AND MIN(l.label) = MAX(l.label) AND MIN({_key('l.label', 'l.reason')}) "
        f"= MAX({_key('l.label', 'l.reason')}) THEN TRUE ELSE FALSE END, "
        "MIN(l.label), MIN(CASE WHEN l.label = %s THEN l.reason END) "
        f"FROM {QUEUE} s JOIN labeling_claim c ON c.candidate_id = s.candidate_id "
        "JOIN labeling_priorannotation p ON p.candidate_id = s.candidate_id "
        "LEFT JOIN labeling_priorclaimlabel l ON l.prior_annotation_id = p.id "
        f"AND l.claim_id = c.id WHERE s.due AND {_IS_VOTE} "
        'GROUP BY s.item_id, s.votes, c.id, c."index"',
        [CANNOT_DECIDE, EVIDENCE_UNAVAILABLE, EVIDENCE_UNAVAILABLE, EVIDENCE_UNAVAILABLE],
    )
    # The outcome: consensus when both levels agree (the answer level is in the queue table).
    compared = execute(
        f"INSERT INTO {COMPARED} (item_id, candidate_id, consensus, answer_differs, "  # noqa: S608
        'claims_differ, answer_label, answer_reason, "number", supersedes_id) '
        "SELECT a.item_id, a.candidate_id, "
        "CASE WHEN a.answer_agrees AND NOT a.claims_differ THEN TRUE ELSE FALSE END, "
        "CASE WHEN a.answer_agrees THEN FALSE ELSE TRUE END, a.claims_differ, "
        "a.answer_label, a.answer_reason, "
        "COALESCE((SELECT MAX(r.number) FROM labeling_resolution r "
        "WHERE r.item_id = a.item_id), 0) + 1, a.resolution_id FROM ("
        "SELECT s.item_id, s.candidate_id, s.resolution_id, s.answer_agrees, s.answer_label, "
        "s.answer_reason, "
        f"CASE WHEN EXISTS (SELECT 1 FROM {CLAIMS} x WHERE x.item_id = s.item_id "
        "AND NOT x.agrees) THEN TRUE ELSE FALSE END AS claims_differ "
        f"FROM {QUEUE} s WHERE s.due) a",
        [],
    )
    if not compared:
        return
    resolution = "r.item_id = s.item_id AND r.number = s.number"
    insert_select(
        Resolution(status=ResolutionStatus.CONSENSUS, policy=policy, number=1),
        {
            "item_id": "s.item_id",
            "number": "s.number",
            "supersedes_id": "s.supersedes_id",
            "answer_label": "s.answer_label",
            "answer_reason": "s.answer_reason",
        },
        f"FROM {COMPARED} s WHERE s.consensus ORDER BY s.item_id",  # noqa: S608
        [],
    )
    insert_select(
        ResolvedClaimLabel(),
        {
            "resolution_id": "r.id",
            "claim_id": "x.claim_id",
            "label": "x.label",
            "reason": "x.reason",
        },
        f"FROM {COMPARED} s JOIN labeling_resolution r ON {resolution} "  # noqa: S608
        f'JOIN {CLAIMS} x ON x.item_id = s.item_id WHERE s.consensus ORDER BY r.id, x."index"',
        [],
    )
    # The union of the votes' spans of each agreed claim: each (source version, start, end)
    # once, with the quote of the first vote (prior annotations in import order) citing it.
    # SQLite (without statistics) scanned every project's prior evidence first; CROSS JOIN
    # keeps its joins in the order written, from the compared items (PostgreSQL plans them).
    join = "CROSS JOIN" if connection.vendor == "sqlite" else "JOIN"
    insert_select(
        ResolvedEvidence(),
        {
            "claim_label_id": "u.claim_label_id",
            "source_version_id": "u.source_version_id",
            "start": 'u."start"',
            "end": 'u."end"',
            "quote": "u.quote",
        },
        "FROM (SELECT rl.id AS claim_label_id, e.source_version_id, "  # noqa: S608
        'e."start", e."end", e.quote, ROW_NUMBER() OVER (PARTITION BY rl.id, '
        'e.source_version_id, e."start", e."end" ORDER BY p.id, e.id) AS nth '
        f"FROM {COMPARED} s {join} labeling_resolution r ON {resolution} "
        f"{join} labeling_resolvedclaimlabel rl ON rl.resolution_id = r.id "
        f"{join} labeling_priorannotation p ON p.candidate_id = s.candidate_id "
        f"{join} labeling_priorclaimlabel l ON l.prior_annotation_id = p.id "
        "AND l.claim_id = rl.claim_id "
        f'{join} labeling_priorevidence e ON e.claim_label_id = l.id AND e."end" > e."start" '
        f"WHERE s.consensus AND {_IS_VOTE}) u WHERE u.nth = 1 "
        'ORDER BY u.claim_label_id, u.source_version_id, u."start", u."end"',
        [],
    )
    insert_select(
        Disagreement(opened_at=timezone.now(), answer_differs=False, claims_differ=False),
        {
            "item_id": "s.item_id",
            "answer_differs": "s.answer_differs",
            "claims_differ": "s.claims_differ",
        },
        f"FROM {COMPARED} s WHERE NOT s.consensus ORDER BY s.item_id",  # noqa: S608
        [],
    )


def _items_update(project: Project) -> None:
    """Write each item once: queue position, overlap, prior votes; a compared item's outcome.

    A compared item takes status ``resolved`` with the resolution just written (consensus) or
    ``disagreement``, and its version goes up by one; the other items keep both.
    """
    status = "CASE WHEN s.item_id IS NULL THEN {item}.status WHEN s.consensus THEN %s ELSE %s END"
    version = "{item}.version + CASE WHEN s.item_id IS NULL THEN 0 ELSE 1 END"
    resolution = "COALESCE(r.id, {item}.resolution_id)"
    joins = (
        f"{QUEUE} q LEFT JOIN {COMPARED} s ON s.item_id = q.item_id "
        "LEFT JOIN labeling_resolution r ON s.consensus AND r.item_id = s.item_id "
        "AND r.number = s.number"
    )
    params = [project.overlap, ItemStatus.RESOLVED, ItemStatus.DISAGREEMENT]
    item = "labeling_item"
    if connection.vendor == "postgresql":
        execute(
            f"UPDATE {item} SET queue_position = q.position, overlap = %s, "  # noqa: S608
            f"prior_votes = q.votes, status = {status.format(item=item)}, "
            f"version = {version.format(item=item)}, "
            f"resolution_id = {resolution.format(item=item)} "
            f"FROM {joins} WHERE {item}.id = q.item_id",
            params,
        )
        return
    # SQLite: a row value from a correlated subquery (UPDATE … FROM needs SQLite 3.33).
    execute(
        f"UPDATE {item} SET (queue_position, overlap, prior_votes, status, version, "  # noqa: S608
        f"resolution_id) = (SELECT q.position, %s, q.votes, {status.format(item=item)}, "
        f"{version.format(item=item)}, {resolution.format(item=item)} FROM {joins} "
        f"WHERE q.item_id = {item}.id) WHERE {item}.id IN (SELECT item_id FROM {QUEUE})",
        params,
    )
