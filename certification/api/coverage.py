"""REST API of the coverage calculator: the spread of conformal coverage for entered sizes.

It reads no project data, so every signed-in user may use it (anonymous: 401).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from certification.certificates.calculator import (
    MAX_GROUP_SIZE,
    MAX_SIZE,
    coverage_calculator_report,
    coverage_inputs_check,
)
from labeling.api.common import ErrorSerializer


class CoverageCalculatorApi(APIView):
    """The Beta, Beta-Binomial and design-effect spreads of conformal coverage."""

    class InputSerializer(serializers.Serializer):
        n = serializers.IntegerField(min_value=1, max_value=MAX_SIZE)
        alpha = serializers.DecimalField(max_digits=20, decimal_places=18)
        n_test = serializers.IntegerField(min_value=1, max_value=MAX_SIZE, required=False)
        group_size = serializers.IntegerField(min_value=1, max_value=MAX_GROUP_SIZE, required=False)
        icc = serializers.FloatField(min_value=-1, max_value=1, required=False)

        def validate_alpha(self, value: Decimal) -> Decimal:
            if not 0 < value < 1:
                raise serializers.ValidationError("alpha must lie strictly between 0 and 1")
            return value

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            errors = coverage_inputs_check(attrs)
            if errors:
                raise serializers.ValidationError(errors)
            return attrs

    class OutputSerializer(serializers.Serializer):
        inputs = serializers.DictField(help_text="The inputs as read (alpha as typed and exact).")
        l = serializers.IntegerField(  # noqa: E741 - the symbol of Vovk (2012)
            help_text="floor((n+1) alpha); 0 means the threshold is infinite."
        )
        k = serializers.IntegerField(help_text="ceil((n+1)(1-alpha)) = n+1-l.")
        beta = serializers.DictField(
            help_text="Beta(n+1-l, l) of the delivered coverage: a, b, mean, variance, sd, reason."
        )
        realised = serializers.DictField(
            allow_null=True,
            help_text="With n_test: Beta-Binomial spread of the covered fraction (both terms).",
        )
        grouping = serializers.DictField(
            allow_null=True,
            help_text="With group_size and icc: design effect, sqrt(deff), inflated sds, "
            "effective sizes.",
        )
        assumptions = serializers.CharField()

        class Meta:
            ref_name = "CoverageCalculation"

    @extend_schema(
        operation_id="coverage_calculator",
        parameters=[
            OpenApiParameter("n", int, required=True, description="Calibration points (>= 1)."),
            OpenApiParameter("alpha", float, required=True, description="Miscoverage in (0, 1)."),
            OpenApiParameter("n_test", int, required=False, description="Test points (>= 1)."),
            OpenApiParameter("group_size", int, required=False, description="Rows per group m."),
            OpenApiParameter(
                "icc", float, required=False, description="Within-group correlation in [-1, 1]."
            ),
        ],
        responses={
            200: OutputSerializer,
            400: OpenApiResponse(ErrorSerializer, description="An input is invalid; named."),
        },
    )
    def get(self, request: Request) -> Response:
        """Evaluate the spreads for the query's sizes."""
        data = self.InputSerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        args = data.validated_data
        report = coverage_calculator_report(
            n_calibration=args["n"],
            alpha=args["alpha"],
            n_test=args.get("n_test"),
            group_size=args.get("group_size"),
            icc=args.get("icc"),
        )
        return Response(self.OutputSerializer(report).data)
