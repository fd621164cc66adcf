"""REST API of the coverage calculator: the spread of conformal coverage for entered sizes.

It reads no project data, so every signed-in user may use it (anonymous: 401).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
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
        n = serializers.IntegerField(
            min_value=1, max_value=MAX_SIZE, help_text="Calibration points n (>= 1)."
        )
        alpha = serializers.DecimalField(
            max_digits=20, decimal_places=18, help_text="Miscoverage level in (0, 1)."
        )
        n_test = serializers.IntegerField(
            min_value=1,
            max_value=MAX_SIZE,
            required=False,
            help_text="Test points: adds the test binomial term.",
        )
        group_size = serializers.IntegerField(
            min_value=1,
            max_value=MAX_GROUP_SIZE,
            required=False,
            help_text="Rows per group m, with icc.",
        )
        icc = serializers.FloatField(
            min_value=-1,
            max_value=1,
            required=False,
            help_text="Within-group correlation rho of the coverage indicator, with group_size.",
        )

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
        class InputsSerializer(serializers.Serializer):
            n = serializers.IntegerField()
            alpha = serializers.CharField(help_text="As typed.")
            alpha_exact = serializers.CharField(help_text="As an exact fraction.")
            n_test = serializers.IntegerField(allow_null=True)
            group_size = serializers.IntegerField(allow_null=True)
            icc = serializers.FloatField(allow_null=True)

            class Meta:
                ref_name = "CoverageCalculatorInputs"

        class BetaSerializer(serializers.Serializer):
            a = serializers.IntegerField(allow_null=True, help_text="n+1-l.")
            b = serializers.IntegerField(allow_null=True, help_text="l.")
            mean = serializers.FloatField(allow_null=True)
            variance = serializers.FloatField(allow_null=True)
            sd = serializers.FloatField(allow_null=True)
            reason = serializers.CharField(allow_null=True, help_text="Why values are null.")

            class Meta:
                ref_name = "CoverageCalculatorBeta"

        class RealisedSerializer(serializers.Serializer):
            mean = serializers.FloatField(allow_null=True)
            variance = serializers.FloatField(allow_null=True)
            sd = serializers.FloatField(allow_null=True)
            beta_variance = serializers.FloatField(allow_null=True)
            approximate_variance = serializers.FloatField(
                help_text="alpha(1-alpha)/(n+2) + alpha(1-alpha)/n_test."
            )
            reason = serializers.CharField(allow_null=True)

            class Meta:
                ref_name = "CoverageCalculatorRealised"

        class GroupingSerializer(serializers.Serializer):
            design_effect = serializers.FloatField(help_text="1 + (m-1) rho.")
            predicted_excess = serializers.FloatField(help_text="sqrt(design effect).")
            grouped_beta_sd = serializers.FloatField(allow_null=True)
            grouped_realised_sd = serializers.FloatField(allow_null=True)
            effective_n_calibration = serializers.FloatField()
            effective_n_test = serializers.FloatField(allow_null=True)

            class Meta:
                ref_name = "CoverageCalculatorGrouping"

        inputs = InputsSerializer()
        l = serializers.IntegerField(  # noqa: E741 - the symbol of Vovk (2012)
            help_text="floor((n+1) alpha); 0 means the threshold is infinite."
        )
        k = serializers.IntegerField(help_text="ceil((n+1)(1-alpha)) = n+1-l.")
        beta = BetaSerializer(help_text="Beta(n+1-l, l): the delivered coverage.")
        realised = RealisedSerializer(
            allow_null=True,
            help_text="With n_test: Beta-Binomial spread of the covered fraction (both terms).",
        )
        grouping = GroupingSerializer(
            allow_null=True,
            help_text="With group_size and icc: the design effect and the inflated spreads.",
        )
        assumptions = serializers.CharField()

        class Meta:
            ref_name = "CoverageCalculation"

    @extend_schema(
        operation_id="coverage_calculator",
        parameters=[InputSerializer],
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
