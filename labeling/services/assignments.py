"""Assignments: claiming the next item (and the one ahead).

**Exactly N.** An item goes to ``overlap`` (N) different annotators, counting imported prior
votes. The database holds it whatever the concurrency: ``assignment_unique_annotator`` (one
non-retired row per item and annotator; an expired lease is revived, never duplicated),
``assignment_unique_live_slot`` (a slot 1 .. N - prior votes has at most one live assignment) and
``item_assignments_within_overlap`` (``Item.assigned_count``, the live assignments, never exceeds
``overlap - prior_votes``). A claim takes a slot, a skip (:mod:`labeling.services.skips`) or a
released lease (:mod:`labeling.services.leases`) gives it back, a submit keeps it. Locks follow
the order of ``labeling/locks.py``; configuring and starting labelling and the queue's order are
in :mod:`labeling.services.labelling_queue`.

**Leases.** A lease is valid while ``now < lease_expires_at``; past that it keeps its slot (and
may still be submitted) until released by ``assignments_release_expired_task`` or by a claim that
meets it. A released lease (``expired``) refuses a submit with ``LeaseExpired``. Asking again
while holding a valid lease returns the same assignment, without extending the lease.

**Abandoned items.** For one lease length after a holder's own lease runs out, the item is
withheld from them while another annotator of the project could still take it; after that, or
when nobody else could, their row is revived.

**Next item ahead.** :func:`item_claim_ahead` reserves at most one item besides the current one,
as an ordinary claim (order, slot, lease, expiry). "Next item" serves the oldest valid lease, so a
second tab gets the same reserve, never a third item.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import IntegrityError, transaction
from django.utils import timezone

from labeling.exceptions import Conflict, InvalidTransition, NotFound, PermissionDenied
from labeling.locks import claimable_item_lock, items_lock, membership_lock
from labeling.models import Assignment, AssignmentStatus, Item, ItemStatus, Project
from labeling.permissions import ANNOTATORS, require_role
from labeling.rows import execute, insert, placeholders, raw_models, select_rows
from labeling.selectors.review import labelling_policy_get
from labeling.services.gold_serving import gold_claim, gold_turn
from labeling.services.leases import (
    STALE_SQL,
    expire_stale_leases,
    release_project_stale,
    stale_params,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A claim that loses a race on a candidate (a database constraint refuses it) tries the next
# one. With row locks (PostgreSQL) or serialised writers (SQLite) a loss is rare; the bound only
# stops a pathological loop, which then reports a conflict instead of "no work".
MAX_CLAIM_ATTEMPTS = 8
# When SKIP LOCKED finds nothing but unlocked reading finds candidates, the rows are held for the
# few milliseconds of another claim or submit: wait 5, then 10, then 15 ms before saying "none".
MAX_LOCKED_WAITS = 3
LOCKED_WAIT_SECONDS = 0.005


# The constraints a lost claim race trips; PostgreSQL names them, SQLite lists the columns.
_CLAIM_RACE_MARKERS = (
    "assignment_unique_live_slot",
    "assignment_unique_annotator",
    "item_assignments_within_overlap",
    "labeling_assignment.item_id",
)


class _LostRace(Exception):
    """A compare-and-set of the claim found the row changed by a concurrent transaction."""


@dataclass(frozen=True)
class ClaimCandidates:
    """The open items an actor may take, in serving order: one ``SELECT`` and its parameters.

    ``sql`` selects ``labeling_item`` rows (``i.*``) with two more columns: ``own_row``, the
    actor's expired assignment of the item (to revive) or NULL, and ``stale_in_project``,
    whether a lease of an open item of the project ran out (the claim releases those first,
    then looks again). It ends with its ``ORDER BY``.
    """

    sql: str
    params: tuple[Any, ...]

    def exists(self) -> bool:
        """Return whether any item qualifies (one statement)."""
        return bool(select_rows(self.sql + " LIMIT 1", self.params))


def _claim_candidates(
    *, project: Project, actor: Any, now: datetime, tried: set[int], cooling: Collection[int]
) -> ClaimCandidates:
    """Open items the actor may take, in serving order, each annotated for the claim.

    An item qualifies if it has a free slot; a lease that ran out still holds its slot here
    (``stale_in_project`` tells the claim to release those first). The conditions are those of
    the partial index ``item_free_queue_idx``. Items of ``cooling`` are withheld from the actor
    while another annotator could take them. Retired rows (an earlier labelling round) neither
    hold the item away from the actor nor are revived.
    """
    expired, retired = AssignmentStatus.EXPIRED, AssignmentStatus.RETIRED
    # The f-strings of this function add only fixed fragments and placeholders.
    sql = (
        "SELECT i.*, (SELECT m.id FROM labeling_assignment m WHERE m.item_id = i.id "  # noqa: S608
        f"AND m.annotator_id = %s AND m.status <> %s LIMIT 1) AS own_row, ({STALE_SQL} LIMIT 1) "
        "AS stale_in_project FROM labeling_item i WHERE i.project_id = %s AND i.status = %s "
        "AND i.assigned_count < i.overlap - i.prior_votes "
        "AND NOT EXISTS (SELECT 1 FROM labeling_assignment m WHERE m.item_id = i.id "
        "AND m.annotator_id = %s AND m.status NOT IN (%s, %s))"
    )
    params: list[Any] = [actor.pk, retired, *stale_params(project, now)]
    params += [project.pk, ItemStatus.OPEN, actor.pk, retired, expired]
    if cooling:
        # Another annotator who could take the item: an active member in an annotator role
        # with no row of it, or only an expired or retired one. Most claims have no cooling
        # item and leave this subquery out.
        roles = sorted(ANNOTATORS)
        sql += (
            f" AND NOT (i.id IN ({placeholders(list(cooling))}) AND EXISTS ("  # noqa: S608
            "SELECT 1 FROM labeling_membership o WHERE o.project_id = %s "
            f"AND o.role IN ({placeholders(roles)}) AND o.is_active AND o.user_id <> %s "
            "AND NOT EXISTS (SELECT 1 FROM labeling_assignment x WHERE x.item_id = i.id "
            "AND x.annotator_id = o.user_id AND x.status NOT IN (%s, %s))))"
        )
        params += [*sorted(cooling), project.pk, *roles, actor.pk, expired, retired]
    if tried:
        sql += f" AND i.id NOT IN ({placeholders(list(tried))})"  # noqa: S608
        params += sorted(tried)
    return ClaimCandidates(sql + " ORDER BY i.queue_position, i.id", tuple(params))


def _claim_annotation(item: Item, name: str) -> Any:
    """Return the annotation ``name`` that :func:`_claim_candidates` put on ``item``."""
    return getattr(item, name)


def _take_slot(*, item: Item, actor: Any, now: datetime, lease: timedelta) -> Assignment | None:
    """Give ``actor`` the smallest free slot of the locked ``item``; None if it has none.

    ``item`` is a row of :func:`_claim_candidates`, as locked (its counts are current).

    Raises:
        _LostRace, IntegrityError: a concurrent claim took the slot; the caller rolls back to
            its savepoint and tries the next candidate.
    """
    count, overlap, prior = item.assigned_count, item.overlap, item.prior_votes
    if item.status != ItemStatus.OPEN or count + prior >= overlap:
        return None
    held = {
        slot
        for (slot,) in select_rows(
            "SELECT slot FROM labeling_assignment WHERE item_id = %s AND status IN (%s, %s)",
            [item.pk, AssignmentStatus.LEASED, AssignmentStatus.SUBMITTED],
        )
    }
    free = [s for s in range(1, overlap - prior + 1) if s not in held]
    if not free:
        return None
    # Compare-and-set on the count (the portable guard: on SQLite nothing is locked).
    if not execute(
        "UPDATE labeling_item SET assigned_count = %s, version = version + 1 "
        "WHERE id = %s AND assigned_count = %s AND status = %s",
        [count + 1, item.pk, count, ItemStatus.OPEN],
    ):
        return None
    lease_fields = {
        "slot": free[0],
        "status": AssignmentStatus.LEASED,
        "leased_at": now,
        "lease_expires_at": now + lease,
        "submitted_at": None,
        "ended_at": None,
        "skip_reason": "",
        "skip_note": "",
    }
    own_row = _claim_annotation(item, "own_row")
    if own_row is not None:
        # The actor's own lease of this item expired earlier: revive that row (one row per
        # (item, annotator)), only if it is still expired.
        if not Assignment.objects.filter(pk=own_row, status=AssignmentStatus.EXPIRED).update(
            **lease_fields
        ):
            raise _LostRace("the actor's expired assignment of the item changed meanwhile")
        return Assignment.objects.get(pk=own_row)
    [assignment] = insert([Assignment(item=item, annotator=actor, **lease_fields)])
    return assignment


@dataclass(frozen=True)
class _ClaimStart:
    """What a claim read under the actor's Membership lock: their leases and the lease length."""

    membership: Any
    own: list[Assignment]
    now: datetime
    lease: timedelta

    @property
    def valid(self) -> list[Assignment]:
        """The actor's valid leases in the project, oldest first."""
        return [
            a
            for a in self.own
            if a.status == AssignmentStatus.LEASED and a.lease_expires_at > self.now
        ]


def _claim_start(*, project: Project, actor: Any, action: str) -> _ClaimStart:
    """Check the role, lock the actor's Membership row and read their leases (a claim's start).

    Raises:
        PermissionDenied: ``actor`` is not an annotator of the project.
        InvalidTransition: labelling has not started.
    """
    require_role(
        project=project,
        actor=actor,
        roles=ANNOTATORS,
        action=action,
        outsider=PermissionDenied,
    )
    # The membership row, locked, gives the project's current settings, and the role again as
    # of the lock (a role changed since the check above is seen here).
    membership = (
        membership_lock(project_id=project.pk, user_id=actor.pk)
        if getattr(actor, "is_authenticated", False)
        else None
    )
    if membership is None or membership.role not in ANNOTATORS:
        raise PermissionDenied("only an annotator of this project may take items")
    if membership.project.labelling_started_at is None:
        raise InvalidTransition("labelling has not started in this project")
    now = timezone.now()
    lease = timedelta(minutes=membership.project.lease_minutes)
    # The actor's leases, and in the same read the leases they let run out less than a lease
    # length ago (the items cooling for them, see _claim_candidates).
    # A plain statement (labeling/rows.py): every claim reads them.
    own = raw_models(
        Assignment,
        "SELECT a.* FROM labeling_assignment a JOIN labeling_item i ON i.id = a.item_id "
        "WHERE i.project_id = %s AND a.annotator_id = %s AND (a.status = %s "
        "OR (a.status = %s AND a.ended_at > %s)) ORDER BY a.leased_at, a.id",
        [
            project.pk,
            actor.pk,
            AssignmentStatus.LEASED,
            AssignmentStatus.EXPIRED,
            now - lease,
        ],
    )
    return _ClaimStart(membership=membership, own=list(own), now=now, lease=lease)


@transaction.atomic
def item_claim_next(*, project: Project, actor: Any) -> Assignment | None:
    """Give ``actor`` the next item to label, or return None when there is no work for them.

    A valid lease the actor already holds in the project (another tab, or the reserve of
    :func:`item_claim_ahead`) is returned unchanged, oldest first. Otherwise the first open item
    in serving order with a free slot that the actor has not claimed, submitted or skipped is
    leased to them in the smallest free slot; leases that ran out are released on the way.

    Raises:
        PermissionDenied: ``actor`` is not an annotator of the project.
        InvalidTransition: labelling has not started.
        Conflict: every one of ``MAX_CLAIM_ATTEMPTS`` candidates was lost to a concurrent claim
            (practically impossible; retry).

    Concurrency: opens its own transaction. Locks the actor's Membership row (one claim per
    annotator and project at a time), then candidate Item rows with SKIP LOCKED (PostgreSQL); on
    SQLite a compare-and-set on ``Item.assigned_count`` guards the slot. The database constraints
    are the final guard: a refused claim rolls back to a savepoint and tries the next candidate.
    """
    start = _claim_start(project=project, actor=actor, action="take items")
    valid = start.valid
    if valid:
        return valid[0]
    return _claim_new(project=project, actor=actor, start=start, ahead=False)


@transaction.atomic
def item_claim_ahead(*, project: Project, actor: Any, assignment_id: int) -> Assignment | None:
    """Reserve the item ``actor`` labels after ``assignment_id`` (the page prefetches it).

    ``assignment_id`` must be the actor's valid lease in the project. If the actor holds another
    valid lease, that one is the reserve and is returned unchanged; otherwise the next item is
    claimed exactly as :func:`item_claim_next` claims it. Nothing is reserved while the actor's
    qualification is pending.

    Returns:
        The reserved assignment, or None when no item needs the actor.

    Raises:
        PermissionDenied: ``actor`` is not an annotator of the project.
        NotFound: ``assignment_id`` is not an assignment of the actor in the project.
        InvalidTransition: labelling has not started, or ``assignment_id`` is not the actor's
            valid lease.
        Conflict: as :func:`item_claim_next`.

    Concurrency: as :func:`item_claim_next`; the Membership lock makes two tabs asking at once get
    one reserve.
    """
    start = _claim_start(project=project, actor=actor, action="take items")
    valid = start.valid
    if not any(a.pk == assignment_id for a in valid):
        if not Assignment.objects.filter(
            pk=assignment_id, annotator_id=actor.pk, item__project=project
        ).exists():
            raise NotFound(f"assignment {assignment_id} not found")
        raise InvalidTransition(
            "this item is no longer yours to label (submitted, skipped or its lease ran out): "
            "nothing is reserved ahead of it"
        )
    others = [a for a in valid if a.pk != assignment_id]
    if others:
        return others[0]
    return _claim_new(project=project, actor=actor, start=start, ahead=True)


def _claim_new(
    *, project: Project, actor: Any, start: _ClaimStart, ahead: bool
) -> Assignment | None:
    """Lease the next item to the actor (the claim's second half, under the Membership lock).

    ``ahead``: a reserve (:func:`item_claim_ahead`): nothing while only gold work is allowed.
    """
    membership, own, now, lease = start.membership, start.own, start.now, start.lease
    # The actor's leases that ran out (a valid one, the current item of a reserve, stays).
    held = [a for a in own if a.status == AssignmentStatus.LEASED and a.lease_expires_at <= now]
    for held_item in items_lock(a.item_id for a in held):
        expire_stale_leases(item=held_item, now=now)
    # A lease released just now (above) cools its item too.
    cooling = {a.item_id for a in own if a.status == AssignmentStatus.EXPIRED} | {
        a.item_id for a in held
    }

    # Gold work (labeling.services.gold): qualification first, then gold at the policy's rate,
    # served only while regular work is left (a gold item alone would stand out).
    turn = gold_turn(
        membership=membership,
        actor=actor,
        policy=labelling_policy_get(project=membership.project),
        now=now,
    )
    if not turn.regular:
        if ahead or not turn.gold:
            return None
        return gold_claim(project=project, actor=actor, now=now, lease=lease)
    if (
        turn.gold
        and _claim_candidates(
            project=project, actor=actor, now=now, tried=set(), cooling=cooling
        ).exists()
    ):
        gold = gold_claim(project=project, actor=actor, now=now, lease=lease)
        if gold is not None:
            return gold

    tried: set[int] = set()
    waits = 0
    swept = False
    for _ in range(MAX_CLAIM_ATTEMPTS):
        candidates = _claim_candidates(
            project=project, actor=actor, now=now, tried=tried, cooling=cooling
        )
        item = claimable_item_lock(candidates.sql, candidates.params)
        if not swept and (item is None or _claim_annotation(item, "stale_in_project")):
            # Leases that ran out hold slots until they are released: release the project's
            # (once per claim), then look again, so an item whose place they held is served in
            # its turn. Without any (the usual case) the look above stands.
            swept = True
            if release_project_stale(project=project, now=now):
                continue
        if item is None:
            # Every candidate may be held for a moment by another claim or submit (SKIP LOCKED
            # left them out). Look again briefly before answering "no work": once they commit,
            # a slot may still be free for this actor.
            if waits < MAX_LOCKED_WAITS and candidates.exists():
                waits += 1
                time.sleep(LOCKED_WAIT_SECONDS * waits)
                continue
            return None
        tried.add(item.pk)
        try:
            with transaction.atomic():
                assignment = _take_slot(item=item, actor=actor, now=now, lease=lease)
        except (IntegrityError, _LostRace) as exc:
            if isinstance(exc, IntegrityError) and not any(
                marker in str(exc) for marker in _CLAIM_RACE_MARKERS
            ):
                raise
            logger.warning(
                "assignment.claim_race_lost",
                extra={"item_id": item.pk, "annotator_id": actor.pk, "error": str(exc)},
            )
            continue
        if assignment is not None:
            logger.info(
                "assignment.claimed",
                extra={
                    "assignment_id": assignment.pk,
                    "item_id": item.pk,
                    "project_id": project.pk,
                    "annotator_id": actor.pk,
                    "slot": assignment.slot,
                    "ahead": ahead,
                },
            )
            return assignment
    raise Conflict("could not claim an item: every candidate was taken concurrently; try again")
