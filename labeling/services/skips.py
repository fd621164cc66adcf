"""Skipping an assignment, and undoing a skip.

A skip gives the slot back (the item goes to ``overlap`` different annotators, counting imported
prior votes); undoing it takes the slot again if the item still has one. Locks follow the order
of ``labeling/locks.py``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from labeling.exceptions import (
    Conflict,
    InvalidInput,
    InvalidTransition,
    NotFound,
    PermissionDenied,
)
from labeling.importers.record_errors import echo
from labeling.locks import item_lock
from labeling.models import (
    LIVE_ASSIGNMENT_STATUSES,
    Assignment,
    AssignmentStatus,
    Item,
    ItemStatus,
    Project,
    SkipReason,
)
from labeling.permissions import ANNOTATORS, require_role

logger = logging.getLogger(__name__)


MAX_SKIP_NOTE = 2000


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
