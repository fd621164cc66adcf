"""REST API of a project's RCCS report (read only, computed on request).

Adjudicators and managers read it; annotators get 403 (it summarises other people's labels);
non-members get 404, and so does a project without retrieval and confidence scores.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from certification.api.common import READ_REVIEWERS_WRITE_MANAGERS, viewer
from certification.selectors import RCCS_PARTITIONS, rccs_report_get
from labeling.api.common import ErrorSerializer


class RCCSReportApi(APIView):
    """RCCS of the project's candidate answers against their current resolved labels."""

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    class InputSerializer(serializers.Serializer):
        partition = serializers.ChoiceField(
            choices=RCCS_PARTITIONS,
            required=False,
            help_text="Only this partition's candidates (default: every candidate).",
        )

    class OutputSerializer(serializers.Serializer):
        class CountsSerializer(serializers.Serializer):
            candidates = serializers.IntegerField()
            with_retrieval = serializers.IntegerField()
            with_confidence = serializers.IntegerField()
            with_both = serializers.IntegerField()
            outcomes = serializers.DictField(
                child=serializers.IntegerField(), help_text="Candidates per current outcome."
            )
            with_correctness = serializers.IntegerField(
                help_text="Resolved admissible or inadmissible: the rows RCCS may use."
            )

            class Meta:
                ref_name = "RCCSCounts"

        class StatisticSerializer(serializers.Serializer):
            rccs_correlation = serializers.FloatField(
                required=False, allow_null=True, help_text="Pearson(R*C, A), or null."
            )
            correlation_reason = serializers.CharField(required=False, allow_null=True)
            confidence_calibration_error = serializers.FloatField(
                required=False, help_text="mean |R*C - A|."
            )
            mean_rc = serializers.FloatField(required=False)
            n = serializers.IntegerField(help_text="Complete rows used.")
            n_dropped = serializers.IntegerField(help_text="Rows dropped for a missing R or C.")
            reason = serializers.CharField(
                allow_null=True, help_text="Why the statistic is undefined (then only n)."
            )

            class Meta:
                ref_name = "RCCSStatistic"

        partition = serializers.CharField(allow_null=True)
        counts = CountsSerializer()
        rccs = StatisticSerializer()
        correctness = serializers.CharField(help_text="How A is read from the resolved label.")

        class Meta:
            ref_name = "RCCSReport"

    @extend_schema(
        operation_id="rccs_retrieve",
        parameters=[InputSerializer],
        responses={
            200: OutputSerializer,
            400: OpenApiResponse(ErrorSerializer, description="An unknown partition."),
            403: OpenApiResponse(ErrorSerializer, description="Not an adjudicator or manager."),
            404: OpenApiResponse(
                ErrorSerializer,
                description="No such project (or not a member), or no candidate with both a "
                "retrieval score and a confidence (code rccs_not_available).",
            ),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """Return RCCS computed now from the current resolved labels."""
        project, _ = viewer(request, slug)
        data = self.InputSerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        report = rccs_report_get(project=project, partition=data.validated_data.get("partition"))
        return Response(self.OutputSerializer(report).data)
