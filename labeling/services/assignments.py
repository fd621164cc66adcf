"""Assignments: configuring and starting labelling, claiming the next item, skipping, releasing.

**Exactly N.** An item goes to ``overlap`` (N) different annotators, counting imported prior
votes. The database holds it whatever the concurrency: ``assignment_unique_annotator`` (one
non-retired row per item and annotator; an expired lease is revived, never duplicated),
``assignment_unique_live_slot`` (a slot 1 .. N - prior votes has at most one live assignment) and
``item_assignments_within_overlap`` (``Item.assigned_count``, the live assignments, never exceeds
``overlap - prior_votes``). A claim takes a slot, a skip or a released lease gives it back, a
submit keeps it. Locks follow the order of ``labeling/locks.py``.

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
import random
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Count, F, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from labeling.bulk import custom_plans, update_rows
from labeling.exceptions import (
    Conflict,
    InvalidInput,
    InvalidTransition,
    NotFound,
    PermissionDenied,
)
from labeling.importers.schema import echo
from labeling.locks import (
    claimable_item_lock,
    item_lock,
    items_lock,
    membership_lock,
    project_label_writes_lock,
    project_lock,
    stale_leases_lock,
)
from labeling.models import (
    LIVE_ASSIGNMENT_STATUSES,
    Assignment,
    AssignmentStatus,
    Item,
    ItemStatus,
    LabelPolicy,
    Partition,
    PriorAnnotation,
    Project,
    ServingOrder,
    SkipReason,
)
from labeling.permissions import ANNOTATORS, MANAGERS, require_role
from labeling.rows import chunks, execute, insert, placeholders, raw_models, select_rows
from labeling.selectors.review import labelling_policy_get
from labeling.services.comparison import items_compare
from labeling.services.gold_serving import gold_claim, gold_turn
from labeling.services.labelling_start import labelling_start_write

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Bounds of the project settings. An overlap above 100 is certainly a typo; a lease longer than
# a week holds an item away from everyone else for too long.
MAX_OVERLAP = 100
MAX_LEASE_MINUTES = 7 * 24 * 60
MAX_SEED = 2**63 - 1  # the largest BigIntegerField value
MAX_SKIP_NOTE = 2000
# A claim that loses a race on a candidate (a database constraint refuses it) tries the next
# one. With row locks (PostgreSQL) or serialised writers (SQLite) a loss is rare; the bound only
# stops a pathological loop, which then reports a conflict instead of "no work".
MAX_CLAIM_ATTEMPTS = 8
# When SKIP LOCKED finds nothing but unlocked reading finds candidates, the rows are held for the
# few milliseconds of another claim or submit: wait 5, then 10, then 15 ms before saying "none".
MAX_LOCKED_WAITS = 3
LOCKED_WAIT_SECONDS = 0.005
# Lease release works through items in chunks, one transaction each, so the beat task never
# holds many rows at once.
RELEASE_CHUNK = 200
QUEUE_UPDATE_CHUNK = 1000

# Serving order ``partition``: calibration first (it gates the certificate), then the held-out
# test partition, then dev, then questions not yet partitioned.
PARTITION_SERVING_RANK: dict[str | None, int] = {
    Partition.CALIBRATION: 0,
    Partition.TEST: 1,
    Partition.DEV: 2,
    None: 3,
}

# The constraints a lost claim race trips; PostgreSQL names them, SQLite lists the columns.
_CLAIM_RACE_MARKERS = (
    "assignment_unique_live_slot",
    "assignment_unique_annotator",
    "item_assignments_within_overlap",
    "labeling_assignment.item_id",
)


# ---------------------------------------------------------------------------------------------
# Serving order
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueRow:
    """What the serving order needs of an item."""

    item_id: int
    partition: str | None
    question_id: int
    sample_index: int


def queue_order(rows: Iterable[QueueRow], *, serving_order: str, seed: int | None) -> list[int]:
    """Return item ids in the order "next item" serves them.

    ``partition`` (the default, deterministic): partition rank (calibration, test, dev, then
    unpartitioned), then question id (import order), then the candidate's ``sample_index``, then
    item id.

    ``seeded_random``: the item ids sorted ascending, then shuffled by
    ``random.Random(seed).shuffle`` (Python's Mersenne Twister), so the same items and seed give
    the same order.

    Raises:
        InvalidInput: unknown serving order, or ``seeded_random`` without a seed.
    """
    rows = list(rows)
    if serving_order == ServingOrder.PARTITION:
        rows.sort(
            key=lambda r: (
                PARTITION_SERVING_RANK.get(r.partition, len(PARTITION_SERVING_RANK)),
                r.question_id,
                r.sample_index,
                r.item_id,
            )
        )
        return [r.item_id for r in rows]
    if serving_order == ServingOrder.SEEDED_RANDOM:
        if seed is None:
            raise InvalidInput("the seeded_random serving order needs a seed", field="serving_seed")
        ids = sorted(r.item_id for r in rows)
        random.Random(seed).shuffle(ids)
        return ids
    raise InvalidInput(
        f"unknown {echo(serving_order)}; one of {ServingOrder.values}", field="serving_order"
    )


def _enqueue(
    *,
    project: Project,
    item_ids: Sequence[int] | None,
    first_position: int,
    progress: Callable[[int, int], object] | None = None,
) -> int:
    """Set overlap, prior votes and queue positions of items; return how many were queued.

    ``item_ids`` None means every item of the project. ``progress`` is called with (items
    queued, items) after each chunk. Caller holds the project lock.
    """
    items = Item.objects.filter(project=project)
    if item_ids is not None:
        items = items.filter(pk__in=item_ids)
    votes = (
        PriorAnnotation.objects.filter(candidate=OuterRef("candidate"), answer_label__isnull=False)
        .exclude(answer_label="")
        .order_by()
        .values("candidate")
        .annotate(n=Count("pk"))
        .values("n")
    )
    prior_votes: dict[int, int] = {}
    rows = []
    for pk, partition, question, index, n in items.values_list(
        "pk",
        "candidate__question__partition",
        "candidate__question_id",
        "candidate__sample_index",
        Coalesce(Subquery(votes, output_field=IntegerField()), 0),
    ):
        prior_votes[pk] = n
        rows.append(
            QueueRow(item_id=pk, partition=partition, question_id=question, sample_index=index)
        )
    ordered = queue_order(rows, serving_order=project.serving_order, seed=project.serving_seed)
    # Position, overlap and prior votes in one write per item (an item row written once).
    positioned = [
        (pk, first_position + n, project.overlap, prior_votes[pk]) for n, pk in enumerate(ordered)
    ]
    done = 0
    for chunk in chunks(positioned, QUEUE_UPDATE_CHUNK):
        done += update_rows(Item, ["queue_position", "overlap", "prior_votes"], chunk)
        if progress is not None:
            progress(done, len(positioned))
    return len(ordered)


def _compare_full_items(
    *,
    project: Project,
    item_ids: Sequence[int] | None,
    progress: Callable[[int, int], object] | None = None,
) -> list[int]:
    """Compare the items whose prior votes alone reach their overlap; return their ids.

    ``progress`` (optional) is called with (items compared, items to compare) per chunk.
    """
    items = Item.objects.filter(project=project, prior_votes__gte=F("overlap"))
    if item_ids is not None:
        items = items.filter(pk__in=item_ids)
    due = list(items.order_by("pk").values_list("pk", flat=True))
    if due:
        items_compare(project=project, item_ids=due, progress=progress)
    return due


# ---------------------------------------------------------------------------------------------
# Project settings and start
# ---------------------------------------------------------------------------------------------


def check_int(field: str, value: Any, low: int, high: int) -> int:
    """Return ``value`` if it is an int in [low, high]; else InvalidInput on ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"expected an integer, got {echo(value)}", field=field)
    if not low <= value <= high:
        raise InvalidInput(f"must be between {low} and {high}, got {value}", field=field)
    return value


@transaction.atomic
def project_labelling_configure(
    *,
    project: Project,
    actor: Any,
    overlap: int | None = None,
    lease_minutes: int | None = None,
    serving_order: str | None = None,
    serving_seed: int | None = None,
    allow_self_adjudication: bool | None = None,
) -> Project:
    """Change a project's labelling settings; None leaves a setting as it is.

    Overlap, serving order and serving seed are fixed once labelling starts (giving the current
    value again is allowed). Lease length and self-adjudication may change at any time; a new
    lease length applies to leases taken afterwards.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project.
        InvalidInput: a value out of range (the message names the field), an unknown serving
            order, or ``seeded_random`` without a seed.
        InvalidTransition: labelling has started and overlap, serving order or seed would change.

    Concurrency: opens its own transaction and locks the Project row.
    """
    require_role(project=project, actor=actor, roles=MANAGERS, outsider=PermissionDenied)
    given, project = project, project_lock(project.pk)
    wanted: dict[str, Any] = {}
    if overlap is not None:
        wanted["overlap"] = check_int("overlap", overlap, 1, MAX_OVERLAP)
    if lease_minutes is not None:
        wanted["lease_minutes"] = check_int("lease_minutes", lease_minutes, 1, MAX_LEASE_MINUTES)
    if serving_order is not None:
        if serving_order not in ServingOrder.values:
            raise InvalidInput(
                f"unknown {echo(serving_order)}; one of {ServingOrder.values}",
                field="serving_order",
            )
        wanted["serving_order"] = serving_order
    if serving_seed is not None:
        wanted["serving_seed"] = check_int("serving_seed", serving_seed, 0, MAX_SEED)
    if allow_self_adjudication is not None:
        if not isinstance(allow_self_adjudication, bool):
            raise InvalidInput(
                f"expected true or false, got {echo(allow_self_adjudication)}",
                field="allow_self_adjudication",
            )
        wanted["allow_self_adjudication"] = allow_self_adjudication
    changes = {f: v for f, v in wanted.items() if getattr(project, f) != v}
    if project.labelling_started_at is not None:
        fixed = [f for f in ("overlap", "serving_order", "serving_seed") if f in changes]
        if fixed:
            raise InvalidTransition(
                f"labelling started at {project.labelling_started_at:%Y-%m-%d %H:%M} UTC; "
                f"{', '.join(fixed)} can no longer change",
                data={"fields": fixed},
            )
    order = changes.get("serving_order", project.serving_order)
    seed = changes.get("serving_seed", project.serving_seed)
    if order == ServingOrder.SEEDED_RANDOM and seed is None:
        raise InvalidInput("the seeded_random serving order needs a seed", field="serving_seed")
    if changes:
        for field, value in changes.items():
            setattr(project, field, value)
        project.save(update_fields=list(changes))
        logger.info(
            "project.labelling_configured",
            extra={"project_id": project.pk, "actor_id": actor.pk, "changes": changes},
        )
    given.refresh_from_db()
    return given


@transaction.atomic
def project_labelling_start(
    *, project: Project, actor: Any, progress: Callable[[str, int, int], object] | None = None
) -> Project:
    """Start labelling: freeze the policy, fix overlap and serving order, queue every item.

    Items whose prior votes already reach the overlap are compared at once. ``progress``
    (optional) gets ``("queued", queued, items)``, then ``("compared", compared, full items)``.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project.
        InvalidTransition: labelling has already started, or the project has no label policy.

    Concurrency: opens its own transaction and locks the Project row. Items cannot be claimed
    until it commits (``labelling_started_at`` is set in the same transaction).
    """
    require_role(project=project, actor=actor, roles=MANAGERS, outsider=PermissionDenied)
    project_label_writes_lock(project.pk)  # comparing prior votes writes resolutions
    given, project = project, project_lock(project.pk)
    if project.labelling_started_at is not None:
        raise InvalidTransition(
            f"labelling of {project.slug!r} already started at "
            f"{project.labelling_started_at:%Y-%m-%d %H:%M} UTC"
        )
    policy = project.policies.order_by("-version").first()
    if policy is None:
        raise InvalidTransition(f"project {project.slug!r} has no label policy to freeze")
    now = timezone.now()
    if policy.frozen_at is None:
        LabelPolicy.objects.filter(pk=policy.pk).update(frozen_at=now)
    project.labelling_started_at = now
    project.save(update_fields=["labelling_started_at"])
    # Set-based (labeling/services/labelling_start.py): a handful of INSERT … SELECT and one
    # UPDATE whatever the number of items, the rows _enqueue and items_compare would write.
    with custom_plans():  # the live-vote fallback's chunked statements, if any
        started = labelling_start_write(
            project=project,
            policy=policy,
            partition_rank=PARTITION_SERVING_RANK,
            order=lambda rows: queue_order(
                [QueueRow(*row) for row in rows],
                serving_order=project.serving_order,
                seed=project.serving_seed,
            ),
            progress=progress,
        )
    queued, compared = started.queued, started.compared
    logger.info(
        "project.labelling_started",
        extra={
            "project_id": project.pk,
            "actor_id": actor.pk,
            "policy_version": policy.version,
            "items": queued,
            "compared_from_prior_votes": len(compared),
        },
    )
    given.refresh_from_db()
    return given


@transaction.atomic
def items_enqueue(*, project: Project, item_ids: Sequence[int]) -> int:
    """Queue items imported after labelling started; return how many were queued.

    They get the project's overlap and their prior votes, and are served after every item
    already queued, in the project's serving order among themselves. Items whose prior votes
    reach the overlap are compared at once. Does nothing before labelling starts (the start
    queues every item).

    Concurrency: opens its own transaction (or joins the caller's) and locks the Project row.
    """
    project_label_writes_lock(project.pk)  # comparing prior votes writes resolutions
    project = project_lock(project.pk)
    if project.labelling_started_at is None or not item_ids:
        return 0
    last = (
        Item.objects.filter(project=project)
        .exclude(pk__in=item_ids)
        .order_by("-queue_position")
        .values_list("queue_position", flat=True)
        .first()
    )
    with custom_plans():  # the chunks' statements, planned for the tables as they grow
        queued = _enqueue(project=project, item_ids=item_ids, first_position=(last or 0) + 1)
        _compare_full_items(project=project, item_ids=item_ids)
    return queued


@transaction.atomic
def items_prioritise(*, project: Project, item_ids: Sequence[int]) -> int:
    """Move the given open items to the front of the serving queue; return how many moved.

    They keep the order of ``item_ids`` among themselves and are served before every other
    item (e.g. an audit sample that must be labelled first). Items of another project, items
    not open and unknown ids are left alone; nothing else about the items changes, so the
    labelling stays blind and N-way as for any item.

    Concurrency: opens its own transaction (or joins the caller's) and locks the Project row.
    """
    project = project_lock(project.pk)
    open_ids = set(
        Item.objects.filter(
            project=project, pk__in=list(item_ids), status=ItemStatus.OPEN
        ).values_list("pk", flat=True)
    )
    ordered = [pk for pk in dict.fromkeys(item_ids) if pk in open_ids]
    if not ordered:
        return 0
    first = (
        Item.objects.filter(project=project)
        .order_by("queue_position")
        .values_list("queue_position", flat=True)
        .first()
    )
    start = (first or 0) - len(ordered)
    update_rows(Item, ["queue_position"], [(pk, start + n) for n, pk in enumerate(ordered)])
    return len(ordered)


# ---------------------------------------------------------------------------------------------
# Claim, skip, release
# ---------------------------------------------------------------------------------------------


class _LostRace(Exception):
    """A compare-and-set of the claim found the row changed by a concurrent transaction."""


def _expire_stale_leases(*, item: Item, now: datetime) -> int:
    """Release the item's leases that ran out by ``now``; return how many were released.

    Each released assignment becomes ``expired`` (its slot is free again) and is logged as
    ``assignment.lease_expired``. Caller holds the item's lock; leases whose row another
    transaction holds (a submit or skip in flight) are left to it.
    """
    stale = stale_leases_lock(item_id=item.pk, now=now)
    released = slots = 0
    for lease in stale:
        # Compare-and-set: only a lease still leased and still past its time is released.
        if Assignment.objects.filter(
            pk=lease.pk, status=AssignmentStatus.LEASED, lease_expires_at__lte=now
        ).update(status=AssignmentStatus.EXPIRED, ended_at=now):
            released += 1
            slots += not lease.gold  # gold work holds no slot
            logger.info(
                "assignment.lease_expired",
                extra={
                    "assignment_id": lease.pk,
                    "item_id": item.pk,
                    "project_id": item.project_id,
                    "annotator_id": lease.annotator_id,
                    "slot": lease.slot,
                    "lease_expires_at": lease.lease_expires_at.isoformat(),
                },
            )
    if released:
        Item.objects.filter(pk=item.pk).update(
            assigned_count=F("assigned_count") - slots, version=F("version") + 1
        )
    return released


def assignments_release_expired(*, now: datetime | None = None) -> int:
    """Release every lease (in all projects) that ran out by ``now``; return how many.

    ``now`` (aware) defaults to ``timezone.now()``. Each lease becomes ``expired`` and gives its
    slot back, logged as ``assignment.lease_expired``. Idempotent; items another transaction holds
    are left for the next run.

    Concurrency: one transaction per chunk of items, not one for the run; each chunk locks its
    items with SKIP LOCKED in ascending id order.
    """
    now = now or timezone.now()
    item_ids = list(
        Assignment.objects.filter(status=AssignmentStatus.LEASED, lease_expires_at__lte=now)
        .order_by("item_id")
        .values_list("item_id", flat=True)
        .distinct()
    )
    released = 0
    for chunk in chunks(item_ids, RELEASE_CHUNK):
        with transaction.atomic():
            for item in items_lock(chunk, skip_locked=True):
                released += _expire_stale_leases(item=item, now=now)
    if released:
        logger.info("assignments.released_expired", extra={"released": released})
    return released


def assignments_release_member(*, project: Project, user_id: int) -> int:
    """Give back every lease ``user_id`` holds in ``project`` (live or run out); return how many.

    Used when a member is deactivated or removed: they keep nothing active. Each lease becomes
    ``expired`` with ``ended_at = now`` and frees its slot (``item.assigned_count - 1``), logged
    as ``assignment.lease_released``. Submitted and skipped assignments are untouched (their
    labels stay, attributed to the member).

    Concurrency: the caller's transaction; locks the items in ascending id order (waiting for a
    submit in flight, which then finds its lease gone), then flips each lease with a
    compare-and-set on its status.
    """
    now = timezone.now()
    leases = Assignment.objects.filter(
        item__project=project, annotator_id=user_id, status=AssignmentStatus.LEASED
    )
    released = 0
    for item in items_lock(leases.values_list("item_id", flat=True)):
        for lease in leases.filter(item=item):
            if not Assignment.objects.filter(pk=lease.pk, status=AssignmentStatus.LEASED).update(
                status=AssignmentStatus.EXPIRED, ended_at=now
            ):
                continue
            Item.objects.filter(pk=item.pk).update(
                assigned_count=F("assigned_count") - (0 if lease.gold else 1),
                version=F("version") + 1,
            )
            released += 1
            logger.info(
                "assignment.lease_released",
                extra={
                    "assignment_id": lease.pk,
                    "item_id": item.pk,
                    "project_id": project.pk,
                    "annotator_id": user_id,
                    "slot": lease.slot,
                },
            )
    return released


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
        f"AND m.annotator_id = %s AND m.status <> %s LIMIT 1) AS own_row, ({_STALE_SQL} LIMIT 1) "
        "AS stale_in_project FROM labeling_item i WHERE i.project_id = %s AND i.status = %s "
        "AND i.assigned_count < i.overlap - i.prior_votes "
        "AND NOT EXISTS (SELECT 1 FROM labeling_assignment m WHERE m.item_id = i.id "
        "AND m.annotator_id = %s AND m.status NOT IN (%s, %s))"
    )
    params: list[Any] = [actor.pk, retired, *_stale_params(project, now)]
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


# The items of a project with a lease that ran out (not yet released), by the index of leases
# (status, lease_expires_at): few rows, since the beat task releases them every minute. Its
# parameters: _stale_params().
_STALE_SQL = (
    "SELECT s.item_id FROM labeling_assignment s JOIN labeling_item si ON si.id = s.item_id "
    "WHERE s.status = %s AND s.lease_expires_at <= %s AND si.project_id = %s AND si.status = %s"
)


def _stale_params(project: Project, now: datetime) -> list[Any]:
    return [AssignmentStatus.LEASED, now, project.pk, ItemStatus.OPEN]


def _release_project_stale(*, project: Project, now: datetime) -> int:
    """Release the project's leases that ran out by ``now``, as the beat task would.

    At most ``RELEASE_CHUNK`` items; an item another transaction holds is left (SKIP LOCKED:
    a submit or claim in flight decides it, or the next run). Returns how many were released.
    Caller: a claim, under the actor's Membership lock (items come after it in the lock order).
    """
    item_ids = [
        item_id
        for (item_id,) in select_rows(
            f"{_STALE_SQL} ORDER BY s.item_id LIMIT %s",  # noqa: S608 - a fixed fragment
            [*_stale_params(project, now), RELEASE_CHUNK],
        )
    ]
    released = 0
    for item in items_lock(item_ids, skip_locked=True):
        released += _expire_stale_leases(item=item, now=now)
    return released


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
        _expire_stale_leases(item=held_item, now=now)
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
            if _release_project_stale(project=project, now=now):
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


@transaction.atomic
def assignment_skip(
    *, project: Project, assignment_id: int, actor: Any, reason: str, note: str = ""
) -> Assignment:
    """Skip an item: give its slot back; the actor is never served that item again.

    A leased assignment (even past its lease time) gives its slot back. An expired one only
    records the skip (its slot was already given back), so the item is not served to the actor
    again. Skipping an already skipped assignment returns it unchanged.

    Raises:
        PermissionDenied: ``actor`` is not an annotator of the project.
        NotFound: no such assignment of the actor in the project.
        InvalidInput: unknown ``reason``, or ``note`` too long (names the field).
        InvalidTransition: the assignment was submitted (revise the annotation instead).

    Concurrency: opens its own transaction; locks the Item row (as a submit does), then flips
    the assignment with a compare-and-set on its status.
    """
    require_role(
        project=project,
        actor=actor,
        roles=ANNOTATORS,
        action="skip items",
        outsider=PermissionDenied,
    )
    if reason not in SkipReason.values:
        raise InvalidInput(f"unknown {echo(reason)}; one of {SkipReason.values}", field="reason")
    if len(note) > MAX_SKIP_NOTE:
        raise InvalidInput(f"at most {MAX_SKIP_NOTE} characters, got {len(note)}", field="note")
    assignment = Assignment.objects.filter(
        pk=assignment_id, annotator=actor, item__project=project
    ).first()
    if assignment is None:
        raise NotFound(f"assignment {assignment_id} not found")
    item_id = assignment.item_id
    item_lock(item_id)  # the lock order of labeling/locks.py: the item, then its assignment
    assignment.refresh_from_db()
    now = timezone.now()
    # Compare-and-set on the status (the portable guard; on SQLite nothing is locked). A lease
    # released meanwhile is skipped as expired.
    for _ in range(2):
        was = assignment.status
        if was == AssignmentStatus.SKIPPED:
            return assignment
        if was == AssignmentStatus.RETIRED:
            raise InvalidTransition(
                "a new label policy version returned this item for labelling; this assignment "
                "is closed (take the next item instead)"
            )
        if was == AssignmentStatus.SUBMITTED:
            raise InvalidTransition(
                "you already submitted this item; revise your annotation instead of skipping"
            )
        fields: dict[str, Any] = {
            "status": AssignmentStatus.SKIPPED,
            "skip_reason": reason,
            "skip_note": note,
        }
        if was == AssignmentStatus.LEASED:
            fields["ended_at"] = now
        if Assignment.objects.filter(pk=assignment_id, status=was).update(**fields):
            break
        assignment.refresh_from_db()
    else:
        raise Conflict("the assignment changed meanwhile; reload and try again")
    if was == AssignmentStatus.LEASED:
        Item.objects.filter(pk=item_id).update(
            assigned_count=F("assigned_count") - (0 if assignment.gold else 1),
            version=F("version") + 1,
        )
    logger.info(
        "assignment.skipped",
        extra={
            "assignment_id": assignment_id,
            "item_id": item_id,
            "project_id": project.pk,
            "annotator_id": actor.pk,
            "reason": reason,
            "slot_released": was == AssignmentStatus.LEASED,
        },
    )
    assignment.refresh_from_db()
    return assignment


def _gold_skip_undo(
    *, item: Item, assignment: Assignment, project: Project, actor: Any
) -> Assignment:
    """Undo the skip of gold work: it holds no slot, so only the item's status is checked."""
    if item.status != ItemStatus.GOLD:  # pragma: no cover - a gold item stays gold
        raise InvalidTransition("this item is closed: the skip cannot be undone")
    if not Assignment.objects.filter(pk=assignment.pk, status=AssignmentStatus.SKIPPED).update(
        status=AssignmentStatus.LEASED, skip_reason="", skip_note="", ended_at=None
    ):
        raise Conflict("the assignment changed meanwhile; reload and try again")
    Item.objects.filter(pk=item.pk).update(version=F("version") + 1)
    logger.info(
        "assignment.skip_undone",
        extra={
            "assignment_id": assignment.pk,
            "item_id": item.pk,
            "project_id": project.pk,
            "annotator_id": actor.pk,
        },
    )
    assignment.refresh_from_db()
    return assignment


@transaction.atomic
def assignment_skip_undo(*, project: Project, assignment_id: int, actor: Any) -> Assignment:
    """Take back a skip: the skipped item is the actor's again, under the lease it had.

    Rules: only the actor's own skipped assignment; only while the lease it was skipped under
    still runs (``lease_expires_at`` in the future: the item is still theirs to finish); only
    while the item is open and its slot is free (nobody took the freed place meanwhile). The
    assignment becomes ``leased`` again in its slot with its lease end unchanged, the skip
    reason and note are cleared and the item's ``assigned_count`` goes up by one. A lease the
    actor took after the skip (the next item) is kept; the claim serves the older lease first.

    Raises:
        PermissionDenied: ``actor`` is not an annotator of the project.
        NotFound: no such assignment of the actor in the project.
        InvalidTransition: the assignment is not skipped, its lease ran out, the item is no
            longer open, or its slot was taken meanwhile.

    Concurrency: locks the Item row (as a claim, skip and submit do), then compare-and-sets the
    assignment's status and the item's ``assigned_count``.
    """
    require_role(
        project=project,
        actor=actor,
        roles=ANNOTATORS,
        action="undo a skip",
        outsider=PermissionDenied,
    )
    assignment = Assignment.objects.filter(
        pk=assignment_id, annotator=actor, item__project=project
    ).first()
    if assignment is None:
        raise NotFound(f"assignment {assignment_id} not found")
    item = item_lock(assignment.item_id)
    assignment.refresh_from_db()
    now = timezone.now()
    if assignment.status != AssignmentStatus.SKIPPED:
        raise InvalidTransition(
            f"assignment {assignment_id} is not skipped (it is {assignment.status})"
        )
    if assignment.lease_expires_at <= now:
        raise InvalidTransition("the lease of this item ran out: it is no longer yours to undo")
    if assignment.gold:
        return _gold_skip_undo(item=item, assignment=assignment, project=project, actor=actor)
    if item.status != ItemStatus.OPEN:
        raise InvalidTransition("this item is closed: the skip cannot be undone")
    slot_taken = (
        Assignment.objects.filter(
            item_id=item.pk, slot=assignment.slot, status__in=LIVE_ASSIGNMENT_STATUSES
        )
        .exclude(pk=assignment.pk)
        .exists()
    )
    count = item.assigned_count
    if slot_taken or count + item.prior_votes >= item.overlap:
        raise InvalidTransition("another annotator took this item meanwhile: the skip stays")
    if not Item.objects.filter(pk=item.pk, assigned_count=count, status=ItemStatus.OPEN).update(
        assigned_count=count + 1, version=F("version") + 1
    ):
        raise Conflict("the item changed meanwhile; reload and try again")
    if not Assignment.objects.filter(pk=assignment.pk, status=AssignmentStatus.SKIPPED).update(
        status=AssignmentStatus.LEASED, skip_reason="", skip_note="", ended_at=None
    ):
        raise Conflict("the assignment changed meanwhile; reload and try again")
    logger.info(
        "assignment.skip_undone",
        extra={
            "assignment_id": assignment.pk,
            "item_id": item.pk,
            "project_id": project.pk,
            "annotator_id": actor.pk,
        },
    )
    assignment.refresh_from_db()
    return assignment
