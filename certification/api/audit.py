"""REST API of evaluator audits: the audit of an evaluator version, and its audit samples.

Adjudicators and managers read; managers declare audits and draw samples; annotators get 403
(evaluator labels never reach them); non-members and other projects' ids get 404.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from certification.api.common import READ_REVIEWERS_WRITE_MANAGERS, viewer
from certification.models import FlagWhen, SampleKind
from certification.selectors import (
    audit_report_get,
    audit_result_for_viewer,
    audit_sample_list,
    audit_sample_view,
    evaluator_get,
)
from certification.services import (
    audit_report_configure,
    audit_sample_draw,
)
from certification.services.audit import audit_target_set
from labeling.api.common import ErrorSerializer, paginated, written
from labeling.api.fields import StrictCharField
from labeling.api.pagination import CappedLimitOffsetPagination

FORBIDDEN = OpenApiResponse(
    ErrorSerializer, description="An annotator, or (for writes) not a manager."
)
NOT_FOUND = OpenApiResponse(
    ErrorSerializer,
    description="No such project or evaluator, or (reading a report) no audit declared yet.",
)
INVALID = OpenApiResponse(
    ErrorSerializer, description="A declaration field is invalid; ``field`` names it."
)


class AuditReportOutputSerializer(serializers.Serializer):
    """An evaluator's audit: declaration and the stored result (see services.audit)."""

    evaluator = serializers.CharField(source="evaluator.__str__")
    evaluator_id = serializers.IntegerField()
    human_positive = serializers.ListField(child=serializers.CharField())
    evaluator_positive = serializers.ListField(child=serializers.CharField())
    score_threshold = serializers.FloatField(allow_null=True)
    flag_when = serializers.CharField()
    confidence = serializers.DecimalField(max_digits=10, decimal_places=8)
    anytime_target = serializers.DecimalField(
        max_digits=10,
        decimal_places=8,
        allow_null=True,
        help_text="The manager's target error rate; ``result.anytime.stop`` says whether "
        "labelling may stop.",
    )
    computed_at = serializers.DateTimeField(allow_null=True)
    input_sha256 = serializers.CharField()
    result = serializers.SerializerMethodField(
        help_text=(
            "The stored result. For an adjudicator, ``disagreements`` lists only the items no "
            "person may label or adjudicate any more (resolved by consensus); "
            "``disagreements_withheld`` counts the rows left out. ``error_rate`` holds the "
            "fixed-n figures, ``anytime`` the anytime-valid ones (each with its ``kind``)."
        )
    )

    class Meta:
        ref_name = "AuditReport"

    @extend_schema_field(serializers.DictField())
    def get_result(self, report: Any) -> dict[str, Any]:
        view = audit_result_for_viewer(report=report, role=self.context.get("role"))
        return {**view.result, "disagreements_withheld": view.withheld}


class AuditReportApi(APIView):
    """An evaluator version's audit (GET: adjudicators and managers); declare it (POST: managers).

    Annotators get 403: evaluator labels never reach them. GET before any declaration is 404
    (``audit_not_configured``).
    """

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    class InputSerializer(serializers.Serializer):
        human_positive = serializers.ListField(
            child=StrictCharField(), required=False, allow_empty=False
        )
        evaluator_positive = serializers.ListField(
            child=StrictCharField(), required=False, allow_empty=False
        )
        score_threshold = serializers.FloatField(required=False, allow_null=True)
        flag_when = serializers.ChoiceField(choices=FlagWhen.choices, required=False)
        confidence = serializers.DecimalField(max_digits=10, decimal_places=8, required=False)

        class Meta:
            ref_name = "AuditDeclarationInput"

    @extend_schema(
        operation_id="audit_retrieve",
        responses={200: AuditReportOutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, evaluator_id: int) -> Response:
        """Return the stored audit report."""
        project, role = viewer(request, slug)
        evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
        report = audit_report_get(project=project, evaluator=evaluator)
        return Response(AuditReportOutputSerializer(report, context={"role": role}).data)

    @extend_schema(
        operation_id="audit_declare",
        request=InputSerializer,
        responses={200: AuditReportOutputSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str, evaluator_id: int) -> Response:
        """Declare (or re-declare) the audit and return the recomputed report."""
        project, role = viewer(request, slug)
        evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        body = written(
            lambda: audit_report_configure(
                project=project,
                evaluator=evaluator,
                actor=request.user,
                **serializer.validated_data,
            ),
            lambda report: AuditReportOutputSerializer(report, context={"role": role}).data,
        )
        return Response(body)


class AuditSampleOutputSerializer(serializers.Serializer):
    """An audit sample: kind, seed, design (per stratum, or the active budget) and its members.

    For an adjudicator, a member's ``stratum`` (the evaluator's verdict) and
    ``inclusion_probability`` are null wherever a person may still label or adjudicate the item,
    and ``design`` is null while any member is (``certification.selectors.audit_sample_view``).
    """

    id = serializers.IntegerField()
    kind = serializers.CharField()
    size = serializers.IntegerField()
    seed = serializers.IntegerField()
    slice_dimension = serializers.CharField()
    declaration = serializers.JSONField()
    design = serializers.JSONField(allow_null=True)
    created_at = serializers.DateTimeField()
    members = serializers.ListField(child=serializers.DictField())

    class Meta:
        ref_name = "AuditSample"

    def to_representation(self, instance: Any) -> Any:
        """Serialize the sample as the viewer (``context["role"]``) may see it."""
        view = audit_sample_view(sample=instance, role=self.context.get("role"))
        return super().to_representation(view)


class AuditSampleListApi(APIView):
    """An evaluator's audit samples (GET: adjudicators and managers); draw one (POST: managers)."""

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    pagination_class = CappedLimitOffsetPagination

    class InputSerializer(serializers.Serializer):
        size = serializers.IntegerField(min_value=1)
        seed = serializers.IntegerField(min_value=0)
        slice_dimension = serializers.ChoiceField(
            choices=["", "domain", "question_type", "generator"], required=False, default=""
        )
        kind = serializers.ChoiceField(
            choices=SampleKind.choices, required=False, default=SampleKind.STRATIFIED
        )
        floor = serializers.FloatField(
            required=False,
            help_text="Active samples: each item's probability is at least floor x the uniform "
            "rate (default 0.2).",
        )

        class Meta:
            ref_name = "AuditSampleInput"

    @extend_schema(
        operation_id="audit_samples_list",
        responses={200: AuditSampleOutputSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, evaluator_id: int) -> Response:
        """List the evaluator's samples, newest first."""
        project, role = viewer(request, slug)
        evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
        samples = audit_sample_list(project=project, evaluator=evaluator)
        return paginated(request, samples, AuditSampleOutputSerializer, context={"role": role})

    @extend_schema(
        operation_id="audit_samples_create",
        request=InputSerializer,
        responses={201: AuditSampleOutputSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str, evaluator_id: int) -> Response:
        """Draw a seeded stratified or active sample; its open items are served first."""
        project, role = viewer(request, slug)
        evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        body = written(
            lambda: audit_sample_draw(
                project=project,
                evaluator=evaluator,
                actor=request.user,
                **serializer.validated_data,
            ),
            lambda sample: AuditSampleOutputSerializer(sample, context={"role": role}).data,
        )
        return Response(body, status=status.HTTP_201_CREATED)


class AuditTargetApi(APIView):
    """Set or clear (null) the audit's target error rate (POST: managers); returns the report."""

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    class InputSerializer(serializers.Serializer):
        target = serializers.DecimalField(max_digits=10, decimal_places=8, allow_null=True)

        class Meta:
            ref_name = "AuditTargetInput"

    @extend_schema(
        operation_id="audit_target_set",
        request=InputSerializer,
        responses={200: AuditReportOutputSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str, evaluator_id: int) -> Response:
        """Set the target and return the recomputed report with its stop message."""
        project, role = viewer(request, slug)
        evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        body = written(
            lambda: audit_target_set(
                project=project,
                evaluator=evaluator,
                actor=request.user,
                target=serializer.validated_data["target"],
            ),
            lambda report: AuditReportOutputSerializer(report, context={"role": role}).data,
        )
        return Response(body)
