"""Leases that ran out, released by the beat task or a claim that meets them; a leaving member's.

A lease is valid while ``now < lease_expires_at``; past that it keeps its slot (and may still be
submitted) until released by ``assignments_release_expired_task`` or by a claim that meets it. A
released lease (``expired``) gives its slot back and refuses a submit with ``LeaseExpired``. Locks
follow the order of ``labeling/locks.py``.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from labeling.locks import items_lock, stale_leases_lock
from labeling.models import Assignment, AssignmentStatus, Item, ItemStatus, Project
from labeling.rows import chunks, select_rows

logger = logging.getLogger(__name__)


# Lease release works through items in chunks, one transaction each, so the beat task never
# holds many rows at once.
RELEASE_CHUNK = 200


def expire_stale_leases(*, item: Item, now: datetime) -> int:
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
                released += expire_stale_leases(item=item, now=now)
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


# The items of a project with a lease that ran out (not yet released), by the index of leases
# (status, lease_expires_at): few rows, since the beat task releases them every minute. Its
# parameters: stale_params().
STALE_SQL = (
    "SELECT s.item_id FROM labeling_assignment s JOIN labeling_item si ON si.id = s.item_id "
    "WHERE s.status = %s AND s.lease_expires_at <= %s AND si.project_id = %s AND si.status = %s"
)


def stale_params(project: Project, now: datetime) -> list[Any]:
    """Return the parameters of :data:`STALE_SQL` for ``project`` at ``now``."""
    return [AssignmentStatus.LEASED, now, project.pk, ItemStatus.OPEN]


def release_project_stale(*, project: Project, now: datetime) -> int:
    """Release the project's leases that ran out by ``now``, as the beat task would.

    At most ``RELEASE_CHUNK`` items; an item another transaction holds is left (SKIP LOCKED:
    a submit or claim in flight decides it, or the next run). Returns how many were released.
    Caller: a claim, under the actor's Membership lock (items come after it in the lock order).
    """
    item_ids = [
        item_id
        for (item_id,) in select_rows(
            f"{STALE_SQL} ORDER BY s.item_id LIMIT %s",  # noqa: S608 - a fixed fragment
            [*stale_params(project, now), RELEASE_CHUNK],
        )
    ]
    released = 0
    for item in items_lock(item_ids, skip_locked=True):
        released += expire_stale_leases(item=item, now=now)
    return released
