"""Series of the managers' dashboard plots: labelling progress over time and work per annotator.

Each selector runs one or two aggregate queries (grouped by day or by annotator in the
database), whatever the number of items or votes. Days are UTC calendar days.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django.db.models import Count, Q
from django.db.models.functions import TruncDate

from labeling.models import Assignment, AssignmentStatus, Item, ItemStatus, Project

#: The progress series cover at most this many days, ending on the last day with activity;
#: earlier resolutions still count in the cumulative series.
MAX_PROGRESS_DAYS = 180


@dataclass(frozen=True)
class DailyProgress:
    """Labelling progress per UTC day, from the first to the last day with activity.

    ``days`` are consecutive, oldest first (empty before any activity); ``submitted`` counts
    annotations per day; ``resolved_cumulative`` counts items resolved by each day's end, on the
    day of their current resolution (an unresolved outcome counts: the item left the queue;
    items later returned to the queue no longer count).
    """

    days: tuple[date, ...]
    submitted: tuple[int, ...]
    resolved_cumulative: tuple[int, ...]


@dataclass(frozen=True)
class AnnotatorWork:
    """One annotator's assignments in a project, by state (a count of items each)."""

    annotator: str
    submitted: int
    skipped: int
    leased: int


def _per_day(rows: Iterable[Mapping[str, Any]]) -> dict[date, int]:
    return {row["day"]: row["n"] for row in rows}


def progress_daily(*, project: Project) -> DailyProgress:
    """Return the annotations submitted per day and the cumulative resolved items. Two queries.

    Only managers see these (they summarise everyone's work); the caller checks the role.
    """
    submitted = _per_day(
        Assignment.objects.filter(
            item__project=project,
            status=AssignmentStatus.SUBMITTED,
            submitted_at__isnull=False,
        )
        .annotate(day=TruncDate("submitted_at"))
        .values("day")
        .annotate(n=Count("pk"))
        .order_by("day")
    )
    resolved = _per_day(
        Item.objects.filter(project=project, status=ItemStatus.RESOLVED, resolution__isnull=False)
        .annotate(day=TruncDate("resolution__created_at"))
        .values("day")
        .annotate(n=Count("pk"))
        .order_by("day")
    )
    return _daily(submitted, resolved)


def _daily(submitted: Mapping[date, int], resolved: Mapping[date, int]) -> DailyProgress:
    active = sorted({*submitted, *resolved})
    if not active:
        return DailyProgress(days=(), submitted=(), resolved_cumulative=())
    last = active[-1]
    first = max(active[0], last - timedelta(days=MAX_PROGRESS_DAYS - 1))
    days = tuple(first + timedelta(days=n) for n in range((last - first).days + 1))
    running = sum(n for day, n in resolved.items() if day < first)
    cumulative = []
    for day in days:
        running += resolved.get(day, 0)
        cumulative.append(running)
    return DailyProgress(
        days=days,
        submitted=tuple(submitted.get(day, 0) for day in days),
        resolved_cumulative=tuple(cumulative),
    )


def annotator_work(*, project: Project) -> list[AnnotatorWork]:
    """Return each annotator's submitted, skipped and leased items, most submitted first.

    Expired leases are not counted (the item went back to the queue). Imported prior votes
    are not anyone's work here. One query. Managers only (the caller checks the role).
    """
    rows = (
        Assignment.objects.filter(item__project=project)
        .values("annotator__username")
        .annotate(
            submitted=Count("pk", filter=Q(status=AssignmentStatus.SUBMITTED)),
            skipped=Count("pk", filter=Q(status=AssignmentStatus.SKIPPED)),
            leased=Count("pk", filter=Q(status=AssignmentStatus.LEASED)),
        )
        .order_by()
    )
    work = [
        AnnotatorWork(
            annotator=row["annotator__username"],
            submitted=row["submitted"],
            skipped=row["skipped"],
            leased=row["leased"],
        )
        for row in rows
    ]
    work = [w for w in work if w.submitted or w.skipped or w.leased]
    return sorted(work, key=lambda w: (-w.submitted, w.annotator))
