"""The only ``select_for_update`` querysets of the labelling side.

Services and selectors take row locks only through this module (``certification/locks.py``
holds the certification side's), so the order below can be checked in one place.

Lock order across both apps. A transaction takes locks only in this order::

    Project  →  Membership  →  Item (ascending id when several)  →  Assignment rows of that item
      →  the release cutoff tables, SHARE mode (certification/locks.py; a release freeze)
      →  one kind of certification row: AgreementReport | CalibrationSpec | ReleaseBuild

A labelling transaction takes no certification lock; the certification row locks are taken by
transactions that hold no labelling lock (see ``certification/locks.py``).

An assignment row is locked or written only by a transaction that holds its item's lock: submits
and skips lock the item (:func:`item_lock`, waiting) and then flip their assignment with a
compare-and-set; claims and lease releases take candidate items and their stale leases with
SKIP LOCKED, never waiting for them (a claim waits only for the items of the actor's own run-out
leases, before it holds any other item). So no two transactions can wait in a cycle.

Every function here must be called inside ``transaction.atomic`` and evaluates its queryset at
once (a lazy ``select_for_update`` queryset locks nothing). On SQLite ``select_for_update`` is a
no-op; there IMMEDIATE transactions serialise writers, and the services' compare-and-set updates
plus the database constraints are the guard.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from labeling.models import Assignment, AssignmentStatus, Item, Membership, Project


def project_lock(project_id: int, *, no_key: bool = False) -> Project:
    """Lock and return a project row; the caller must be inside ``transaction.atomic``.

    ``no_key`` takes PostgreSQL's ``FOR NO KEY UPDATE``, which still serialises the lockers of
    the row but lets other transactions insert rows that point at the project (their foreign
    key checks take ``FOR KEY SHARE``, which ``FOR UPDATE`` would block). On SQLite
    ``select_for_update`` is a no-op, but SQLite serialises writers anyway.
    """
    return Project.objects.select_for_update(no_key=no_key).get(pk=project_id)


def membership_lock(*, project_id: int, user_id: Any) -> Membership | None:
    """Lock and return ``user``'s membership of a project (None if not a member).

    Serialises one annotator's claims in one project (two browser tabs asking for "next" at the
    same moment get the same item instead of two leases). ``membership.project`` is loaded with
    it, fresh, but not locked.
    """
    return (
        Membership.objects.select_for_update(of=("self",))
        .select_related("project")
        .filter(project_id=project_id, user_id=user_id)
        .first()
    )


def item_lock(item_id: int) -> Item:
    """Lock and return an item row, waiting for a concurrent holder.

    Take it before writing any of the item's assignments (submit, skip, adjudicate).

    Raises:
        Item.DoesNotExist: no such item.
    """
    return Item.objects.select_for_update(of=("self",)).get(pk=item_id)


def items_lock(item_ids: Iterable[int], *, skip_locked: bool = False) -> list[Item]:
    """Lock and return items in ascending id order (the deadlock-free order for several rows).

    Args:
        item_ids: the items to lock; missing ids are ignored.
        skip_locked: leave out rows another transaction holds instead of waiting for them
            (the lease release does, so it never queues behind a claim).
    """
    ids = sorted(set(item_ids))
    return list(
        Item.objects.select_for_update(skip_locked=skip_locked, of=("self",))
        .filter(pk__in=ids)
        .order_by("pk")
    )


def claimable_item_lock(candidates: QuerySet[Item]) -> Item | None:
    """Lock and return the first of ``candidates`` no other transaction holds, or None.

    ``candidates`` carries the claim's filter and serving order; rows locked by a concurrent
    claim, submit or release are skipped, not waited for (PostgreSQL ``SKIP LOCKED``), so
    concurrent claimers spread over the queue instead of queueing on its head.
    """
    return candidates.select_for_update(skip_locked=True, of=("self",)).first()


def stale_leases_lock(*, item_id: int, now: datetime) -> list[Assignment]:
    """Lock and return the item's leases that ran out by ``now``, skipping rows held elsewhere.

    A held row is a submit or skip in flight; it decides that assignment's fate itself. The
    caller holds the item's lock.
    """
    return list(
        Assignment.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(item_id=item_id, status=AssignmentStatus.LEASED, lease_expires_at__lte=now)
        .order_by("pk")
    )
