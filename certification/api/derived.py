"""REST API of the derived results' freshness, and a manager's request to recompute one.

``GET .../derived/`` says, per kind (agreement, calibration, audit, reliability), what the stored
result rests on (the covered generation, when it was computed) and how many newer changes wait.
``POST .../agreement/recompute/``, ``.../calibration/recompute/``, ``.../audits/recompute/`` and
``.../reliability/recompute/`` ask for a recomputation (managers; 202 with the kind's
freshness). The request is recorded in the database and coalesced with every other change, so
it holds across a broker outage.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from certification.selectors import derived_freshness
from certification.services import derived_recompute_request
from labeling import permissions
from labeling.api.common import ErrorSerializer, project_and_role, written


class FreshnessSerializer(serializers.Serializer):
    """What a derived result rests on and whether newer changes wait."""

    kind = serializers.CharField(help_text="agreement, calibration, audit or reliability.")
    current = serializers.BooleanField(
        help_text="True when no change waits and no recomputation runs."
    )
    covered_generation = serializers.IntegerField(
        help_text="The largest change id the stored result covers (0: never computed)."
    )
    generation = serializers.IntegerField(help_text="The largest change id known.")
    newer_changes = serializers.IntegerField(
        help_text="Changes (votes, resolutions, imports, declarations) not yet covered."
    )
    computed_at = serializers.DateTimeField(allow_null=True)
    queued = serializers.BooleanField(help_text="A recomputation is waiting for a worker.")
    running = serializers.BooleanField(help_text="A recomputation is running.")
    worker_lost = serializers.BooleanField(
        help_text="The worker of the running recomputation stopped beating: it is being resumed."
    )
    last_error = serializers.CharField(allow_null=True, help_text="The last failure, if any.")

    class Meta:
        ref_name = "DerivedFreshness"


def freshness_json(freshness: Any) -> dict[str, Any]:
    """Return one kind's freshness as the API shows it."""
    return dict(FreshnessSerializer(freshness.as_json()).data)


class DerivedFreshnessApi(APIView):
    """The freshness of every derived result of the project (adjudicators and managers)."""

    project_roles = {"GET": permissions.REVIEWERS}

    @extend_schema(
        operation_id="derived_freshness",
        responses={
            200: FreshnessSerializer(many=True),
            403: OpenApiResponse(ErrorSerializer, description="Not an adjudicator or manager."),
            404: OpenApiResponse(ErrorSerializer, description="No such project (or not a member)."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """Return the freshness of the agreement, calibration, audit and reliability results."""
        project, _ = project_and_role(request, slug)
        return Response([freshness_json(f) for f in derived_freshness(project=project).values()])


class DerivedRecomputeApi(APIView):
    """Ask for a recomputation of one kind of derived result (managers); answers 202.

    One subclass per kind, so that each route has its own operation in the schema.
    """

    project_roles = {"POST": permissions.MANAGERS}
    kind: str = ""

    @extend_schema(
        request=None,
        responses={
            202: FreshnessSerializer,
            403: OpenApiResponse(ErrorSerializer, description="Not a manager."),
            404: OpenApiResponse(ErrorSerializer, description="No such project (or not a member)."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Record the request and schedule the recomputation after commit."""
        project, _ = project_and_role(request, slug)
        kind = self.kind
        body = written(
            lambda: derived_recompute_request(project=project, kind=kind, actor=request.user),
            lambda _: freshness_json(derived_freshness(project=project)[kind]),
        )
        return Response(body, status=status.HTTP_202_ACCEPTED)


@extend_schema_view(post=extend_schema(operation_id="agreement_recompute"))
class AgreementRecomputeApi(DerivedRecomputeApi):
    """Ask for a recomputation of the agreement figures (managers); answers 202."""

    kind = "agreement"


@extend_schema_view(post=extend_schema(operation_id="calibration_recompute"))
class CalibrationRecomputeApi(DerivedRecomputeApi):
    """Ask for a refresh of the calibration runs (managers); answers 202."""

    kind = "calibration"


@extend_schema_view(post=extend_schema(operation_id="audits_recompute"))
class AuditRecomputeApi(DerivedRecomputeApi):
    """Ask for a recomputation of the evaluator audits (managers); answers 202."""

    kind = "audit"


@extend_schema_view(post=extend_schema(operation_id="reliability_recompute"))
class ReliabilityRecomputeApi(DerivedRecomputeApi):
    """Ask for a recomputation of the per-person reliability figures (managers); answers 202."""

    kind = "reliability"
