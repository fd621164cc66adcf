"""Managers' bulk actions on items: prioritise, and return to the queue.

Both act on the qualifying items of a list of ids and leave the others alone, saying which
changed. **Prioritise** moves open items to the front of the serving queue, in the order given.
**Return to the queue** sends ``resolved`` and ``disagreement`` items back to labelling for
``extra_votes`` more annotations from different annotators: the item becomes ``open``, its
overlap grows, its current resolution pointer is cleared and its open disagreement closed without
a resolution; it is queued last. Append-only: no vote, resolution or disagreement is deleted.
Calibration and audit results are marked stale; agreement statistics are not (no vote changed).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from labeling.bulk import update_rows
from labeling.derived import derived_mark_touched
from labeling.exceptions import InvalidInput, InvalidTransition
from labeling.locks import items_lock, project_label_writes_lock, project_lock
from labeling.models import DerivedKind, Disagreement, Item, ItemStatus, Project
from labeling.permissions import MANAGERS, require_role
from labeling.services.labelling_queue import MAX_OVERLAP, items_prioritise

logger = logging.getLogger(__name__)

#: At most this many item ids in one bulk action.
MAX_BULK_ITEMS = 1000
#: The statuses an item may be returned to the queue from.
RETURNABLE_STATUSES = (ItemStatus.RESOLVED, ItemStatus.DISAGREEMENT)


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did: the ids it changed and the ids it left alone (both sorted)."""

    changed: tuple[int, ...]
    skipped: tuple[int, ...]


def _ids(item_ids: Sequence[Any]) -> list[int]:
    """The distinct ids in the given order; refuses an empty, oversized or non-integer list."""
    if not item_ids:
        raise InvalidInput("choose at least one item", field="items")
    if len(item_ids) > MAX_BULK_ITEMS:
        raise InvalidInput(f"at most {MAX_BULK_ITEMS} items at once", field="items")
    if not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in item_ids):
        raise InvalidInput("item ids are positive integers", field="items")
    return list(dict.fromkeys(item_ids))


@transaction.atomic
def items_bulk_prioritise(*, project: Project, actor: Any, item_ids: Sequence[int]) -> BulkResult:
    """Move the given open items to the front of the serving queue (managers only).

    ``item_ids`` are served in the order given; ids of items not open or not of ``project`` are left
    alone (in ``skipped``). ``actor`` None is the command line.

    Raises:
        NotFound: ``actor`` is not a member of the project.
        PermissionDenied: ``actor`` is not a manager.
        InvalidInput: no ids, more than :data:`MAX_BULK_ITEMS`, or an id that is not a positive
            integer (``field`` "items").

    Concurrency: opens its own transaction; locks the Project row (``items_prioritise``).
    """
    require_role(project=project, actor=actor, roles=MANAGERS, action="prioritise items")
    ids = _ids(item_ids)
    eligible = set(
        Item.objects.filter(project=project, pk__in=ids, status=ItemStatus.OPEN).values_list(
            "pk", flat=True
        )
    )
    items_prioritise(project=project, item_ids=[pk for pk in ids if pk in eligible])
    logger.info("items.prioritised", extra={"project": project.slug, "items": len(eligible)})
    return BulkResult(changed=tuple(sorted(eligible)), skipped=tuple(sorted(set(ids) - eligible)))


@transaction.atomic
def items_return_to_queue(
    *, project: Project, actor: Any, item_ids: Sequence[int], extra_votes: int = 1
) -> BulkResult:
    """Send resolved and disagreement items back to labelling for more votes (managers only).

    The rules are in the module docstring.

    Open items and ids not of ``project`` are left alone. ``extra_votes`` is how many more
    annotations each item collects (1 .. the room left under the overlap bound of 100). ``actor``
    None is the command line.

    Returns:
        The returned items (``changed``) and those left alone (``skipped``).

    Raises:
        NotFound: ``actor`` is not a member of the project.
        PermissionDenied: ``actor`` is not a manager.
        InvalidTransition: labelling has not started.
        InvalidInput: bad ``item_ids`` (``field`` "items") or ``extra_votes`` (``field``
            "extra_votes"), including an item whose overlap would pass 100.

    Concurrency: opens its own transaction; takes the project's label-write lock (shared),
    then the Project row, then the items in ascending id order (``labeling/locks.py``), so a
    concurrent adjudication or submit of one of the items has finished or waits.
    """
    require_role(project=project, actor=actor, roles=MANAGERS, action="return items to the queue")
    ids = _ids(item_ids)
    if isinstance(extra_votes, bool) or not isinstance(extra_votes, int) or extra_votes < 1:
        raise InvalidInput("extra_votes must be a positive integer", field="extra_votes")
    project_label_writes_lock(project.pk)
    project = project_lock(project.pk)
    if project.labelling_started_at is None:
        raise InvalidTransition("labelling has not started")
    locked = [
        item
        for item in items_lock(ids)
        if item.project_id == project.pk and item.status in RETURNABLE_STATUSES
    ]
    too_many = [item.pk for item in locked if item.overlap + extra_votes > MAX_OVERLAP]
    if too_many:
        raise InvalidInput(
            f"items {too_many[:10]} would need more than {MAX_OVERLAP} votes",
            field="extra_votes",
        )
    returned = sorted(item.pk for item in locked)
    if returned:
        now = timezone.now()
        Disagreement.objects.filter(item_id__in=returned, closed_at__isnull=True).update(
            closed_at=now
        )
        last = (
            Item.objects.filter(project=project)
            .order_by("-queue_position")
            .values_list("queue_position", flat=True)
            .first()
        ) or 0
        Item.objects.filter(pk__in=returned).update(
            status=ItemStatus.OPEN,
            resolution=None,
            overlap=F("overlap") + extra_votes,
            version=F("version") + 1,
        )
        update_rows(
            Item,
            ["queue_position"],
            [(pk, last + n) for n, pk in enumerate(returned, start=1)],
        )
        # Their resolutions are withdrawn: stale are the results that read these items.
        derived_mark_touched(
            project_id=project.pk,
            kinds=[DerivedKind.CALIBRATION, DerivedKind.AUDIT, DerivedKind.RELIABILITY],
            item_ids=returned,
        )
        logger.info(
            "items.returned_to_queue",
            extra={"project": project.slug, "items": len(returned), "extra_votes": extra_votes},
        )
    return BulkResult(changed=tuple(returned), skipped=tuple(sorted(set(ids) - set(returned))))
