"""The only row locks of the labelling side (querysets and plain statements), and its advisory lock.

Services and selectors take row locks only through this module (``certification/locks.py``
holds the certification side's), so the order below can be checked in one place.

Lock order across both apps. A transaction takes locks only in this order::

    the project's label-write lock (:func:`project_label_writes_lock`, shared;
        a release freeze takes it exclusive: certification/locks.py)
      →  Project  →  Membership  →  Item (ascending id when several)
      →  Assignment rows of that item
      →  one kind of certification row: AgreementReport | CalibrationSpec | ReleaseBuild

A project's VoteTally row is locked only by the fold (``labeling.services.vote_tally``), in a
transaction that holds no other lock.

A labelling transaction takes no certification lock; the certification row locks are taken by
transactions that hold no labelling lock (see ``certification/locks.py``).

The label-write lock is per project and comes first: every transaction that inserts rows a
release pins (revisions, resolutions, candidates, prior and evaluator labels, source versions,
label policies) takes it in shared mode before any row lock, and a release freeze takes it
exclusive as its first lock. So a freeze waits only for its own project's writers already in
flight, that project's new writers wait only for the freeze's short transaction, and other
projects are not involved at all. A freeze holds nothing while it waits, and no writer of the
project holds the lock while the freeze does, so the lock adds no cycle.

An assignment row is locked or written only by a transaction that holds its item's lock: submits
and skips lock the item (:func:`item_lock`, waiting) and then flip their assignment with a
compare-and-set; claims and lease releases take candidate items and their stale leases with
SKIP LOCKED, never waiting for them (a claim waits only for the items of the actor's own run-out
leases, before it holds any other item). So no two transactions can wait in a cycle.

Every function here must be called inside ``transaction.atomic`` and evaluates its queryset at
once (a lazy ``select_for_update`` queryset locks nothing). On SQLite ``select_for_update`` is a
no-op and the advisory lock is skipped; there IMMEDIATE transactions serialise writers, and the
services' compare-and-set updates plus the database constraints are the guard.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from labeling.models import (
    Assignment,
    AssignmentStatus,
    Invitation,
    Item,
    Membership,
    Project,
    SsoIdentity,
    VoteTally,
)
from labeling.rows import raw_first

# The first key of the label-write advisory locks (PostgreSQL's two-key form; the second key is
# the project id), so they share no key with any other advisory lock: "labl".
LABEL_WRITES_NAMESPACE = 0x6C61626C


def project_label_writes_lock(project_id: int, *, exclusive: bool = False) -> None:
    """Declare that this transaction writes label rows of a project (PostgreSQL; else nothing).

    Takes ``pg_advisory_xact_lock_shared(LABEL_WRITES_NAMESPACE, project_id)``, held until the
    transaction ends: writers of one project do not wait for each other, only for a release
    freeze of that project, which takes the same key exclusive
    (``certification.locks.release_freeze_lock``) and so waits for the writers in flight. Take
    it before any row lock and before the first row a release pins is inserted (its id comes
    from a sequence: taken later, an id smaller than a frozen cutoff could still commit).
    Taking it again in the same transaction returns at once. On SQLite writers are serialised
    anyway. ``exclusive`` takes the key exclusive instead, as a release freeze does: for a
    transaction that must see the project's labels still (a full recount of its votes).

    Raises:
        ValueError: ``project_id`` does not fit PostgreSQL's 32-bit advisory key.
    """
    if connection.vendor != "postgresql":
        return
    if not 0 < project_id < 2**31:
        raise ValueError(f"project id {project_id} does not fit a 32-bit advisory lock key")
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, %s)", [LABEL_WRITES_NAMESPACE, project_id])


def vote_tally_lock(project_id: int) -> VoteTally | None:
    """Lock and return a project's :class:`~labeling.models.VoteTally` row, None if it is gone.

    Taken only by the fold, in a transaction that holds no other lock.
    """
    return VoteTally.objects.select_for_update().filter(project_id=project_id).first()


def project_lock(project_id: int, *, no_key: bool = False) -> Project:
    """Lock and return a project row; the caller must be inside ``transaction.atomic``.

    ``no_key`` takes PostgreSQL's ``FOR NO KEY UPDATE``, which still serialises the lockers of
    the row but lets other transactions insert rows that point at the project (their foreign
    key checks take ``FOR KEY SHARE``, which ``FOR UPDATE`` would block). On SQLite
    ``select_for_update`` is a no-op, but SQLite serialises writers anyway.
    """
    return Project.objects.select_for_update(no_key=no_key).get(pk=project_id)


def invitation_lock(queryset: QuerySet[Invitation], invitation_id: int) -> Invitation | None:
    """Lock and return the invitation ``invitation_id`` of ``queryset`` (None if absent).

    ``queryset`` scopes the lookup (a project's invitations, or an account's own). Callers
    lock the project first when they will write a membership (the project, then the
    invitation, in this module's order).
    """
    return queryset.select_for_update().select_related("project").filter(pk=invitation_id).first()


def _for_update(sql: str) -> str:
    """``sql`` (a plain ``SELECT`` of one table) locking its rows where the database locks rows."""
    return sql + " FOR UPDATE" if connection.features.has_select_for_update else sql


def membership_lock(*, project_id: int, user_id: Any) -> Membership | None:
    """Lock and return ``user``'s active membership of a project (None if not an active member).

    Serialises one annotator's claims in one project (two browser tabs asking for "next" at the
    same moment get the same item instead of two leases). ``membership.project`` is loaded with
    it, fresh, but not locked.

    Every claim runs it: two plain statements (``labeling/rows.py``), cheaper in CPU than the
    queryset with ``select_related``.
    """
    membership = raw_first(
        Membership,
        _for_update(
            "SELECT * FROM labeling_membership WHERE project_id = %s AND user_id = %s AND is_active"
        ),
        [project_id, user_id],
    )
    if membership is not None:
        project = raw_first(Project, "SELECT * FROM labeling_project WHERE id = %s", [project_id])
        if project is None:  # pragma: no cover - the membership's foreign key holds it
            return None
        membership.project = project
    return membership


def item_lock(item_id: int) -> Item:
    """Lock and return an item row, waiting for a concurrent holder.

    Take it before writing any of the item's assignments (submit, skip, adjudicate).

    Raises:
        Item.DoesNotExist: no such item.
    """
    # Every submit takes it: one plain statement (labeling/rows.py).
    item = raw_first(Item, _for_update("SELECT * FROM labeling_item WHERE id = %s"), [item_id])
    if item is None:
        raise Item.DoesNotExist(f"no item {item_id}")
    return item


def items_lock(item_ids: Iterable[int], *, skip_locked: bool = False) -> list[Item]:
    """Lock and return items in ascending id order (the deadlock-free order for several rows).

    Args:
        item_ids: the items to lock; missing ids are ignored.
        skip_locked: leave out rows another transaction holds instead of waiting for them
            (the lease release does, so it never queues behind a claim).
    """
    ids = sorted(set(item_ids))
    if not ids:
        return []
    return list(
        Item.objects.select_for_update(skip_locked=skip_locked, of=("self",))
        .filter(pk__in=ids)
        .order_by("pk")
    )


def claimable_item_lock(sql: str, params: Sequence[Any]) -> Item | None:
    """Lock and return the first item ``sql`` selects that no other transaction holds, or None.

    ``sql`` is the claim's ``SELECT`` of item rows (``labeling_item`` only in its ``FROM``), in
    serving order (``labeling.services.assignments.ClaimCandidates``); its extra columns
    become attributes of the item. Rows locked by a concurrent claim, submit or release are
    skipped, not waited for (PostgreSQL ``SKIP LOCKED``), so concurrent claimers spread over
    the queue instead of queueing on its head. SQLite locks no row (its writers are serialised).
    """
    lock = (
        " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    )
    return raw_first(Item, sql + " LIMIT 1" + lock, params)


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


def sso_identity_lock(issuer: str, subject: str) -> SsoIdentity | None:
    """Lock and return the single sign-on identity of (``issuer``, ``subject``), None if none.

    Two sign-ins of one person at once then update it one after the other.
    """
    return (
        SsoIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
