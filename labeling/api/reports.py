"""REST API of work reports: per-annotator figures and per-item times over a period.

``GET /api/projects/<slug>/reports/work/?from=&to=`` (the figures) and
``GET .../reports/work/items/?from=&to=&annotator=`` (the time per item, paged). Managers read
everyone's; an annotator reads their own only (asking for another annotator is 403); other roles
are refused. The definitions are those of ``labeling.selectors.work_reports``.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.common import ErrorSerializer, paginated, project_and_role, request_actor
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.models import MAX_ID
from labeling.selectors.work_reports import (
    WORK_REPORT_ROLES,
    Period,
    work_item_times,
    work_report,
)

PERIOD_PARAMETERS = [
    OpenApiParameter(
        "from",
        OpenApiTypes.DATE,
        description="First day of the period (YYYY-MM-DD, included); default: 29 days before `to`.",
    ),
    OpenApiParameter(
        "to",
        OpenApiTypes.DATE,
        description="Last day of the period (YYYY-MM-DD, included); default: today.",
    ),
]
ANNOTATOR_PARAMETER = OpenApiParameter(
    "annotator",
    {"type": "integer", "minimum": 1, "maximum": MAX_ID},
    description="One annotator's user id (managers; an annotator may give only their own).",
)


_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _date(request: Request, name: str) -> date | None:
    value = request.query_params.get(name)
    if value is None:
        return None
    try:
        if not _DATE.fullmatch(value):
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise ValidationError({name: ["must be a date, YYYY-MM-DD"]}) from None


def request_period(request: Request) -> Period:
    """Return the period of the ``from`` and ``to`` query parameters.

    Raises:
        ValidationError: a malformed date (HTTP 400 naming it).
        InvalidInput: ``from`` after ``to`` or a period too long (HTTP 400).
    """
    return Period.parse(_date(request, "from"), _date(request, "to"))


class PeriodSerializer(serializers.Serializer):
    """The days a report covers, both included."""

    class Meta:
        ref_name = "WorkPeriod"

    def get_fields(self) -> dict[str, serializers.Field]:
        """``from`` and ``to`` (reserved words, so not class attributes)."""
        return {
            "from": serializers.DateField(source="start"),
            "to": serializers.DateField(source="end"),
        }


class AnnotatorFiguresSerializer(serializers.Serializer):
    """One annotator's figures over the period (seconds; rates between 0 and 1)."""

    annotator_id = serializers.IntegerField()
    username = serializers.CharField()
    items_labelled = serializers.IntegerField(help_text="Items first labelled in the period.")
    timed_items = serializers.IntegerField(help_text="Of those, the items with a recorded time.")
    active_seconds = serializers.FloatField(help_text="Sum of the times per item.")
    median_seconds = serializers.FloatField(allow_null=True)
    p90_seconds = serializers.FloatField(allow_null=True, help_text="90th percentile.")
    items_per_hour = serializers.FloatField(
        allow_null=True, help_text="timed_items per hour of active time."
    )
    skipped = serializers.IntegerField()
    skip_rate = serializers.FloatField(allow_null=True, help_text="skipped / (labelled + skipped)")
    revised = serializers.IntegerField(help_text="Items labelled that were revised in the period.")
    revision_rate = serializers.FloatField(allow_null=True, help_text="revised / items_labelled")

    class Meta:
        ref_name = "AnnotatorWorkFigures"


class WorkReportSerializer(serializers.Serializer):
    """The work report of a period."""

    period = PeriodSerializer()
    own = serializers.BooleanField(help_text="True: the reader's own figures only (an annotator).")
    rows = AnnotatorFiguresSerializer(many=True)

    class Meta:
        ref_name = "WorkReport"


class ItemTimeSerializer(serializers.Serializer):
    """The time one annotator spent on one item first labelled in the period."""

    annotator_id = serializers.IntegerField()
    username = serializers.CharField()
    item_id = serializers.IntegerField()
    question = serializers.CharField(help_text="The question's external id.")
    first_submitted_at = serializers.DateTimeField()
    revisions = serializers.IntegerField(help_text="Revisions submitted in the period.")
    seconds = serializers.FloatField(allow_null=True, help_text="null: no time recorded.")

    class Meta:
        ref_name = "WorkItemTime"


class WorkReportApi(APIView):
    """Per-annotator work figures over a period (managers: everyone; annotators: their own)."""

    project_roles = {"GET": WORK_REPORT_ROLES}

    @extend_schema(
        operation_id="work_report",
        parameters=PERIOD_PARAMETERS,
        responses={200: WorkReportSerializer, 400: ErrorSerializer, 403: ErrorSerializer},
    )
    def get(self, request: Request, slug: str) -> Response:
        """Return the figures of the period."""
        project, _ = project_and_role(request, slug)
        period = request_period(request)
        report = work_report(project=project, actor=request_actor(request), period=period)
        return Response(WorkReportSerializer(report).data)


class WorkItemTimesApi(APIView):
    """The time per item over a period, oldest first (managers: everyone's; annotators: own)."""

    project_roles = {"GET": WORK_REPORT_ROLES}
    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="work_report_items",
        parameters=[*PERIOD_PARAMETERS, ANNOTATOR_PARAMETER],
        responses={
            200: ItemTimeSerializer(many=True),
            400: ErrorSerializer,
            403: ErrorSerializer,
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the items' times."""
        project, _ = project_and_role(request, slug)
        period = request_period(request)
        annotator: Any = request.query_params.get("annotator")
        rows = work_item_times(
            project=project,
            actor=request_actor(request),
            period=period,
            annotator_id=None if annotator is None else int(annotator),
        )
        return paginated(request, rows, ItemTimeSerializer)
