"""REST API of the per-person reliability report (managers only, read only).

The figures name people and judge them: adjudicators and annotators get 403. See
``certification.services.reliability`` for every field.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from certification.api.derived import FreshnessSerializer, freshness_json
from certification.selectors import derived_freshness, reliability_report_get
from labeling import permissions
from labeling.api.common import ErrorSerializer, project_and_role
from labeling.models import DerivedKind


class RateSerializer(serializers.Serializer):
    """numerator / denominator with the exact two-sided Clopper–Pearson interval."""

    numerator = serializers.IntegerField()
    denominator = serializers.IntegerField()
    estimate = serializers.FloatField(allow_null=True, help_text="Null when denominator is 0.")
    lower = serializers.FloatField(allow_null=True)
    upper = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "ReliabilityRate"


class KappaSerializer(serializers.Serializer):
    """Cohen's kappa against the references, with its Wald interval."""

    value = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(allow_null=True, help_text="Why it is undefined.")
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    interval_reason = serializers.CharField(
        allow_null=True,
        default=None,
        help_text="Why the interval, though given, is not meaningful (too few units for the "
        "large-sample formula, or a standard error of 0); null when it is.",
    )

    class Meta:
        ref_name = "ReliabilityKappa"


class AccuracySerializer(serializers.Serializer):
    """A person's labels against references (resolutions, or gold references)."""

    accuracy = RateSerializer()
    labels = serializers.ListField(child=serializers.CharField(), help_text="Matrix axis.")
    confusion = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="Rows: reference label; columns: the person's label (labels order).",
    )
    per_label = serializers.DictField(
        child=RateSerializer(), help_text="Per reference label: the share given that label."
    )
    kappa = KappaSerializer()

    class Meta:
        ref_name = "ReliabilityAccuracy"


class SilenceSerializer(serializers.Serializer):
    """The person's flag rate against the others' on the same units."""

    default_label = serializers.CharField(allow_null=True)
    flags = RateSerializer(help_text="Labels other than the default / labels.")
    others_rate = serializers.FloatField(allow_null=True)
    near_silent = serializers.BooleanField()

    class Meta:
        ref_name = "ReliabilitySilence"


class LevelFiguresSerializer(serializers.Serializer):
    """One person's figures at one label level."""

    n_labels = serializers.IntegerField()
    resolutions = AccuracySerializer(
        allow_null=True, help_text="Against current consensus or adjudicated resolutions."
    )
    gold = AccuracySerializer(allow_null=True, help_text="On gold items, against references.")
    disputed = RateSerializer(help_text="Labels on units whose labels differed.")
    sided_with = RateSerializer(help_text="On adjudicated disputes: equal to the decision.")
    silence = SilenceSerializer(allow_null=True)

    class Meta:
        ref_name = "ReliabilityLevelFigures"


class FlagsSerializer(serializers.Serializer):
    """The levels at which each flag holds (empty: not flagged)."""

    below_threshold = serializers.ListField(child=serializers.CharField())
    near_silent = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "ReliabilityFlags"


class PersonSerializer(serializers.Serializer):
    """One person's reliability figures."""

    rater = serializers.CharField(help_text="user:<id> or prior:<pseudonym>.")
    name = serializers.CharField(help_text="Username, or pseudonym + (imported).")
    queued = RateSerializer(help_text="Their items that entered the disagreement queue.")
    flags = FlagsSerializer()
    levels = serializers.DictField(
        child=LevelFiguresSerializer(allow_null=True), help_text="answer and claim."
    )

    class Meta:
        ref_name = "ReliabilityPerson"


class AlphaStatisticSerializer(serializers.Serializer):
    """Krippendorff's alpha, or why it is undefined."""

    value = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(allow_null=True)

    class Meta:
        ref_name = "ReliabilityAlphaStatistic"


class AlphaSerializer(serializers.Serializer):
    """Alpha of all votes and without the flagged people, side by side (no label changed)."""

    all = AlphaStatisticSerializer()
    without_flagged = AlphaStatisticSerializer()
    left_out = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "ReliabilityAlpha"


class DawidSkeneSerializer(serializers.Serializer):
    """A Dawid–Skene model estimate of one level (not a label), or why there is none."""

    reason = serializers.CharField(
        allow_null=True,
        help_text="Why there is no estimate (no label; no item labelled by two annotators, "
        "where the model is not identified); null when there is one, and only it then.",
    )
    labels = serializers.ListField(child=serializers.CharField(), required=False)
    priors = serializers.ListField(child=serializers.FloatField(), required=False)
    iterations = serializers.IntegerField(required=False, help_text="EM iterations run.")
    change = serializers.FloatField(
        required=False, help_text="Largest change of a posterior in the last EM iteration."
    )
    tol = serializers.FloatField(required=False, help_text="EM stops when change < tol.")
    max_iter = serializers.IntegerField(required=False, help_text="The EM iteration cap.")
    converged = serializers.BooleanField(
        required=False, help_text="False: EM stopped at max_iter with change >= tol."
    )
    confusion = serializers.DictField(
        required=False,
        child=serializers.ListField(child=serializers.ListField(child=serializers.FloatField())),
        help_text="Per rater: P(answer | true label), rows = true label.",
    )
    posteriors = serializers.DictField(
        required=False,
        child=serializers.ListField(child=serializers.FloatField()),
        help_text="Per unit id: P(true label), aligned with labels.",
    )

    class Meta:
        ref_name = "ReliabilityDawidSkene"


class ReliabilityReportApi(APIView):
    """The project's per-person reliability figures (managers only).

    Before the first computation ``computed_at`` is null and ``people`` empty. ``freshness``
    says which changes the figures cover and how many newer ones wait.
    """

    project_roles = {"GET": permissions.MANAGERS}

    class OutputSerializer(serializers.Serializer):
        computed_at = serializers.DateTimeField(allow_null=True)
        input_sha256 = serializers.CharField(allow_null=True)
        policy_version = serializers.IntegerField(allow_null=True)
        confidence = serializers.FloatField(allow_null=True)
        threshold = serializers.FloatField(
            allow_null=True, help_text="Accuracy asked for (the policy's qualification threshold)."
        )
        people = PersonSerializer(many=True)
        alpha = serializers.DictField(child=AlphaSerializer())
        dawid_skene = serializers.DictField(child=DawidSkeneSerializer(allow_null=True))
        assumptions = serializers.ListField(child=serializers.CharField())
        freshness = FreshnessSerializer()

        class Meta:
            ref_name = "ReliabilityReport"

    @extend_schema(
        operation_id="reliability_retrieve",
        responses={
            200: OutputSerializer,
            403: OpenApiResponse(ErrorSerializer, description="Not a manager."),
            404: OpenApiResponse(ErrorSerializer, description="No such project (or not a member)."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """Return the stored reliability report."""
        project, _ = project_and_role(request, slug)
        view = reliability_report_get(project=project)
        result: dict[str, Any] = dict(view.result) if view else {}
        people = [
            {**p, "name": view.names.get(p["rater"], p["rater"])} if view else p
            for p in result.get("people", [])
        ]
        data = {
            "computed_at": view.computed_at if view else None,
            "input_sha256": view.input_sha256 if view else None,
            "policy_version": view.policy_version if view else None,
            "confidence": result.get("confidence"),
            "threshold": result.get("threshold"),
            "people": people,
            "alpha": result.get("alpha", {}),
            "dawid_skene": result.get("dawid_skene", {}),
            "assumptions": result.get("assumptions", []),
            "freshness": freshness_json(
                derived_freshness(project=project)[DerivedKind.RELIABILITY]
            ),
        }
        return Response(self.OutputSerializer(data).data)
