"""Work reports: how much each annotator labelled, how fast, how often they skipped or revised.

Definitions (over a period of whole days, ``start`` to ``end`` inclusive, in ``TIME_ZONE``):

- **items labelled**: the annotator's annotations whose first revision was submitted in the
  period (an item labelled earlier and revised in the period is not counted again);
- **time per item**: the sum of ``time_spent_seconds`` (the time the labelling form was open,
  measured by the page or sent by an API client) over that annotation's revisions submitted in
  the period; an item whose revisions carry no time is left out of the time figures
  (``timed_items`` counts those that have one);
- **median and p90 time per item**: percentiles of those times, by linear interpolation between
  order statistics (numpy's default, "type 7");
- **active time**: the sum of the times per item; time between items (the queue, breaks) is
  not counted. **Items per hour** = ``timed_items`` / active hours;
- **skip rate** = skips in the period (assignments skipped, by ``ended_at``) / (items labelled +
  skips); **revision rate** = items labelled that were revised in the period / items labelled.

Managers see every annotator of the project (every member whose role is annotator, and anyone
else with work in the period); an annotator sees their own figures only, whoever they ask for.
Other roles are refused. The figures are computed from one grouped query per kind (revisions per
annotation, skips per annotator); the percentiles in Python.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, Min, OuterRef, Q, QuerySet, Sum
from django.utils import timezone

from labeling import permissions
from labeling.exceptions import InvalidInput, PermissionDenied
from labeling.models import (
    AnnotationRevision,
    Assignment,
    AssignmentStatus,
    Membership,
    Project,
    Role,
)

#: Who may read work reports: managers (everyone's) and annotators (their own).
WORK_REPORT_ROLES: frozenset[str] = permissions.MANAGERS | permissions.ANNOTATORS
#: The default period: the last 30 days, today included.
DEFAULT_PERIOD_DAYS = 30
#: The longest period a report covers, in days.
MAX_PERIOD_DAYS = 3660


@dataclass(frozen=True)
class Period:
    """Whole days ``start`` to ``end``, both included, in the site's time zone."""

    start: date
    end: date

    @classmethod
    def parse(cls, start: date | None, end: date | None, *, today: date | None = None) -> Period:
        """Return the period; a missing ``end`` is today, a missing ``start`` 29 days before.

        Raises:
            InvalidInput: ``start`` after ``end`` (``field`` "from"), a period longer than
                ``MAX_PERIOD_DAYS``, or an ``end`` on the last day of the calendar (``to``).
        """
        end = end or today or timezone.localdate()
        if end >= date.max:
            raise InvalidInput("the period must end before 9999-12-31", field="to")
        if start is None:
            first = date.min + timedelta(days=DEFAULT_PERIOD_DAYS - 1)
            start = end - timedelta(days=DEFAULT_PERIOD_DAYS - 1) if end >= first else date.min
        if start > end:
            raise InvalidInput("the period starts after it ends", field="from")
        if (end - start).days >= MAX_PERIOD_DAYS:
            raise InvalidInput(f"a period is at most {MAX_PERIOD_DAYS} days", field="from")
        return cls(start=start, end=end)

    def bounds(self) -> tuple[datetime, datetime]:
        """Return ``[first instant, first instant after the last day)`` as aware datetimes."""
        zone = timezone.get_current_timezone()
        first = datetime.combine(self.start, time.min, tzinfo=zone)
        return first, datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=zone)


@dataclass(frozen=True)
class AnnotatorFigures:
    """One annotator's figures over a period (times in seconds; rates in [0, 1])."""

    annotator_id: int
    username: str
    items_labelled: int
    timed_items: int
    active_seconds: float
    median_seconds: float | None
    p90_seconds: float | None
    items_per_hour: float | None
    skipped: int
    skip_rate: float | None
    revised: int
    revision_rate: float | None


@dataclass(frozen=True)
class ItemTime:
    """The time one annotator spent on one item they first labelled in the period."""

    annotator_id: int
    username: str
    item_id: int
    question: str
    first_submitted_at: datetime
    revisions: int
    seconds: float | None


@dataclass(frozen=True)
class WorkReport:
    """The figures of a period: one row per annotator (username order); ``own``: the actor's."""

    period: Period
    rows: list[AnnotatorFigures]
    own: bool


def percentile(values: Sequence[float], q: float) -> float | None:
    """Return the ``q``-th percentile (0-100) of ``values`` by linear interpolation, or None.

    The same as ``numpy.percentile(values, q)`` (method "linear"): the sorted values'
    position ``(n - 1) * q / 100``, interpolated between its two neighbours.
    """
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _scope(*, project: Project, actor: Any, annotator_id: int | None) -> tuple[int | None, bool]:
    """Return the annotator the actor may see (None: everyone) and whether it is their own.

    An annotator reads their own figures only; the role is checked here.

    Raises:
        NotFound: the actor is not a member.
        PermissionDenied: a role without work reports, or an annotator asking for another.
    """
    role = permissions.require_role(
        project=project, actor=actor, roles=WORK_REPORT_ROLES, action="read work reports"
    )
    if role in permissions.MANAGERS or actor is None:
        return annotator_id, False
    if annotator_id is not None and annotator_id != actor.pk:
        raise PermissionDenied("an annotator sees their own figures only")
    return int(actor.pk), True


def _item_rows(project: Project, period: Period, annotator_id: int | None) -> QuerySet[Any]:
    """Revisions in the period grouped per annotation first labelled in the period."""
    first, after = period.bounds()
    in_period = Q(created_at__gte=first, created_at__lt=after)
    first_in_period = AnnotationRevision.objects.filter(
        in_period, annotation=OuterRef("annotation"), number=1
    )
    revisions = AnnotationRevision.objects.filter(
        in_period, Exists(first_in_period), annotation__item__project=project
    )
    if annotator_id is not None:
        revisions = revisions.filter(annotation__annotator_id=annotator_id)
    return (
        revisions.values("annotation_id")
        .annotate(
            annotator_id=F("annotation__annotator_id"),
            username=F("annotation__annotator__username"),
            item_id=F("annotation__item_id"),
            question=F("annotation__item__candidate__question__external_id"),
            first_submitted_at=Min("created_at"),
            revisions=Count("pk"),
            seconds=Sum("time_spent_seconds"),
        )
        .order_by("first_submitted_at", "annotation_id")
    )


def work_item_times(
    *, project: Project, actor: Any, period: Period, annotator_id: int | None = None
) -> QuerySet[Any]:
    """Return the time per item of the period, oldest first, as a lazy grouped query.

    Each row is a dict with the keys of :class:`ItemTime` (``seconds`` None: no time recorded).
    Annotators get their own rows only.

    Raises:
        NotFound: the actor is not a member.
        PermissionDenied: not a manager or an annotator, or an annotator asking for another.
    """
    scope, _ = _scope(project=project, actor=actor, annotator_id=annotator_id)
    return _item_rows(project, period, scope)


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _figures(
    annotator_id: int, username: str, items: Iterable[dict[str, Any]], skipped: int
) -> AnnotatorFigures:
    items = list(items)
    times = [float(row["seconds"]) for row in items if row["seconds"] is not None]
    active = sum(times)
    labelled = len(items)
    revised = sum(1 for row in items if row["revisions"] > 1)
    return AnnotatorFigures(
        annotator_id=annotator_id,
        username=username,
        items_labelled=labelled,
        timed_items=len(times),
        active_seconds=active,
        median_seconds=percentile(times, 50),
        p90_seconds=percentile(times, 90),
        items_per_hour=len(times) * 3600 / active if active > 0 else None,
        skipped=skipped,
        skip_rate=_rate(skipped, labelled + skipped),
        revised=revised,
        revision_rate=_rate(revised, labelled),
    )


def work_report(
    *, project: Project, actor: Any, period: Period, annotator_id: int | None = None
) -> WorkReport:
    """Return the per-annotator figures of ``period`` (see the module for the definitions).

    ``actor`` None (the command line) sees everyone; ``annotator_id`` narrows to one annotator
    (managers); an annotator always gets their own row.

    Raises:
        NotFound: the actor is not a member.
        PermissionDenied: not a manager or an annotator, or an annotator asking for another.
    """
    scope, own = _scope(project=project, actor=actor, annotator_id=annotator_id)
    first, after = period.bounds()
    per_annotator: dict[int, list[dict[str, Any]]] = defaultdict(list)
    names: dict[int, str] = {}
    for row in _item_rows(project, period, scope):
        per_annotator[row["annotator_id"]].append(row)
        names[row["annotator_id"]] = row["username"]
    skips = Assignment.objects.filter(
        item__project=project,
        status=AssignmentStatus.SKIPPED,
        ended_at__gte=first,
        ended_at__lt=after,
    )
    members = Membership.objects.filter(project=project, role=Role.ANNOTATOR)
    if scope is not None:
        skips = skips.filter(annotator_id=scope)
        members = members.filter(user_id=scope)
    skipped = {
        row["annotator_id"]: row["n"]
        for row in skips.values("annotator_id").annotate(n=Count("pk")).order_by()
    }
    people = set(per_annotator) | set(skipped) | set(members.values_list("user_id", flat=True))
    if scope is not None:
        people.add(scope)
    missing = people - set(names)
    if missing:
        users = get_user_model().objects.filter(pk__in=missing)
        names.update(dict(users.values_list("pk", "username")))
    rows = [
        _figures(pk, names.get(pk, str(pk)), per_annotator.get(pk, []), skipped.get(pk, 0))
        for pk in people
    ]
    rows.sort(key=lambda figures: (figures.username, figures.annotator_id))
    return WorkReport(period=period, rows=rows, own=own)


def work_report_projects(*, user: Any) -> QuerySet[Membership]:
    """Return ``user``'s memberships with a work report to read (annotators: their own work)."""
    return (
        Membership.objects.filter(user=user, role__in=WORK_REPORT_ROLES)
        .select_related("project")
        .order_by("project__name", "project__slug")
    )


#: Lower bounds (seconds) of the bins of :func:`work_time_histogram`; the last bin is open.
TIME_BIN_STARTS: tuple[float, ...] = (0, 30, 60, 120, 300, 600)


def work_time_histogram(
    *, project: Project, actor: Any, period: Period
) -> list[tuple[float, float | None, int]]:
    """Return how many items took each bin of time: ``[(low, high or None, count), ...]``.

    A bin holds the times ``low <= seconds < high`` (the last one has no upper bound); items
    without a recorded time are left out. Annotators count their own items only.

    Raises:
        NotFound: the actor is not a member.
        PermissionDenied: not a manager or an annotator.
    """
    times = [
        row["seconds"]
        for row in work_item_times(project=project, actor=actor, period=period)
        if row["seconds"] is not None
    ]
    edges: list[float | None] = [*TIME_BIN_STARTS[1:], None]
    return [
        (low, high, sum(1 for t in times if t >= low and (high is None or t < high)))
        for low, high in zip(TIME_BIN_STARTS, edges, strict=True)
    ]
