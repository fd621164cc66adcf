"""REST API of the agreement report: a project's inter-annotator agreement (read only).

Adjudicators and managers read it; annotators get 403 (it summarises other people's votes). The
report lives here, not in ``labeling/api``: ``labeling`` never imports ``certification``, while
``certification`` may read ``labeling.selectors``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from certification.api.derived import FreshnessSerializer, freshness_json
from certification.selectors import (
    agreement_report_get,
    derived_freshness,
)
from labeling import permissions
from labeling.api.common import ErrorSerializer, project_and_role


class StatisticSerializer(serializers.Serializer):
    """A statistic that may be undefined: ``value`` or ``reason``."""

    value = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(allow_null=True, help_text="Why it is undefined.")

    class Meta:
        ref_name = "AgreementStatistic"


class PairSerializer(serializers.Serializer):
    """Cohen's kappa of one rater pair."""

    rater_a = serializers.CharField()
    rater_b = serializers.CharField()
    n = serializers.IntegerField(help_text="Units both raters labelled.")
    kappa = serializers.FloatField(allow_null=True)
    se = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    observed_agreement = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(allow_null=True)
    interval_reason = serializers.CharField(
        allow_null=True,
        help_text="Why se, the interval and the z test, though given, are not meaningful (one "
        "rater used a single label, no label in common, too few shared units for the "
        "large-sample formulas, or every unit agreed); null when they are.",
    )
    se0 = serializers.FloatField(
        allow_null=True, help_text="Standard error of kappa under kappa = 0 (Fleiss et al. 1969)."
    )
    z = serializers.FloatField(allow_null=True, help_text="kappa / se0: the test of kappa = 0.")
    p_value = serializers.FloatField(allow_null=True, help_text="Two-sided p-value of z.")

    class Meta:
        ref_name = "AgreementPair"


class LevelSerializer(serializers.Serializer):
    """One label level's agreement figures."""

    level = serializers.CharField(help_text="answer or claim.")
    title = serializers.CharField()
    n_units = serializers.IntegerField()
    n_pairable_units = serializers.IntegerField()
    n_votes = serializers.IntegerField()
    n_raters = serializers.IntegerField()
    label_counts = serializers.SerializerMethodField()
    scale = serializers.CharField(
        help_text="The labels' declared level of measurement (nominal, ordinal, interval, "
        "ratio): alpha uses its metric (Krippendorff 2011, metric differences)."
    )
    alpha = StatisticSerializer(help_text="Krippendorff's alpha with the metric of scale.")
    fleiss_kappa = StatisticSerializer()
    percent_agreement = StatisticSerializer()
    confidence = serializers.FloatField(help_text="Confidence level of the pair intervals.")
    pairs = PairSerializer(many=True)
    pairs_reason = serializers.CharField(
        allow_null=True, help_text="Why there is no pair (fewer than 2 raters, no shared unit)."
    )

    class Meta:
        ref_name = "AgreementLevel"

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_label_counts(self, level: Any) -> dict[str, int]:
        return dict(level.label_counts)


class AgreementReportApi(APIView):
    """The project's inter-annotator agreement, per label level (adjudicators and managers).

    Annotators get 403: the figures summarise other people's votes. Rater names are usernames
    for managers and "Rater k" for adjudicators. Before the first computation every field is
    empty (``computed_at`` null, no levels). ``levels`` are the figures of the newest label
    policy version with votes (``policy_version``); ``versions`` lists every version apart.
    ``freshness`` says which changes the figures cover and how many newer ones wait
    (``current`` false: the figures are being recomputed).
    """

    project_roles = {"GET": permissions.REVIEWERS}

    class OutputSerializer(serializers.Serializer):
        class VersionSerializer(serializers.Serializer):
            policy_version = serializers.IntegerField()
            levels = LevelSerializer(many=True)

            class Meta:
                ref_name = "AgreementPolicyVersion"

        computed_at = serializers.DateTimeField(allow_null=True)
        input_sha256 = serializers.CharField(allow_null=True)
        identities_shown = serializers.BooleanField()
        policy_version = serializers.IntegerField(
            allow_null=True, help_text="The label policy version of levels (the newest voted)."
        )
        levels = LevelSerializer(many=True)
        versions = VersionSerializer(
            many=True,
            help_text="Each label policy version's figures apart, oldest first: votes made "
            "under different versions are never pooled.",
        )

        class Meta:
            ref_name = "AgreementReportFigures"

    class ResponseSerializer(OutputSerializer):
        freshness = FreshnessSerializer(
            help_text="What the figures rest on, and whether newer changes wait."
        )

        class Meta:
            ref_name = "AgreementReport"

    @extend_schema(
        operation_id="agreement_retrieve",
        responses={
            200: ResponseSerializer,
            403: OpenApiResponse(ErrorSerializer, description="Not an adjudicator or manager."),
            404: OpenApiResponse(ErrorSerializer, description="No such project (or not a member)."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """Return the stored agreement report."""
        project, _ = project_and_role(request, slug)
        report = agreement_report_get(project=project, actor=request.user)
        empty: dict[str, Any] = {
            "computed_at": None,
            "input_sha256": None,
            "identities_shown": False,
            "policy_version": None,
            "levels": [],
            "versions": [],
        }
        data = dict(self.OutputSerializer(report or empty).data)
        data["freshness"] = freshness_json(derived_freshness(project=project)["agreement"])
        return Response(data)
