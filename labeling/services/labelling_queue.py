"""Configuring and starting labelling, and the queue: its serving order, enqueueing, prioritising.

**Exactly N.** An item goes to ``overlap`` (N) different annotators, counting imported prior
votes (see :mod:`labeling.services.assignments` for how a claim keeps it). Locks follow the order
of ``labeling/locks.py``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count, F, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from labeling.bulk import custom_plans, update_rows
from labeling.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from labeling.importers.record_errors import echo
from labeling.locks import project_label_writes_lock, project_lock
from labeling.models import (
    Item,
    ItemStatus,
    LabelPolicy,
    Partition,
    PriorAnnotation,
    Project,
    ServingOrder,
)
from labeling.permissions import MANAGERS, require_role
from labeling.rows import chunks
from labeling.services.comparison import items_compare
from labeling.services.labelling_start import labelling_start_write

logger = logging.getLogger(__name__)


# Bounds of the project settings. An overlap above 100 is certainly a typo; a lease longer than
# a week holds an item away from everyone else for too long.
MAX_OVERLAP = 100
MAX_LEASE_MINUTES = 7 * 24 * 60
MAX_SEED = 2**63 - 1  # the largest BigIntegerField value
QUEUE_UPDATE_CHUNK = 1000


# Serving order ``partition``: calibration first (it gates the certificate), then the held-out
# test partition, then dev, then questions not yet partitioned.
PARTITION_SERVING_RANK: dict[str | None, int] = {
    Partition.CALIBRATION: 0,
    Partition.TEST: 1,
    Partition.DEV: 2,
    None: 3,
}


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
