"""REST API: apply a done calibration run's frozen certificate to new questions.

Adjudicators and managers (who read the run) may apply it; annotators get 403, non-members and
other projects' runs 404. The same body always gets the same decisions; the scores they saw
(never texts or answers) are recorded for the run's drift watch, which the response's ``drift``
field shows.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from certification.api.common import viewer
from certification.certificates.apply import MAX_ANSWER, MAX_CANDIDATES, METHODS, printable
from certification.selectors import calibration_run_get
from certification.services import calibration_run_apply
from certification.services.calibration_apply import MAX_QUESTIONS
from labeling import permissions
from labeling.api.common import ErrorSerializer

ID_HELP = "A string (1-200 characters) or an integer; echoed back."


class CandidateDocSerializer(serializers.Serializer):
    """One candidate answer of a question, in sample order (documentation of the body)."""

    id = serializers.JSONField(required=False, help_text=ID_HELP)
    answer = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=MAX_ANSWER,
        help_text="The spec's answer field (canonical form or text); null = no answer. "
        "Required when the spec ranks answers (conformal sets, or the mode selector).",
    )
    score = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="The spec's score field (spec.score_field), a finite number; absent or null "
        "= missing: never accepted.",
    )
    selected = serializers.BooleanField(
        required=False, help_text="The is_selected flag (default false)."
    )

    class Meta:
        ref_name = "CertificateApplyCandidate"


class QuestionDocSerializer(serializers.Serializer):
    """One question of new traffic: an id and its candidates (no labels)."""

    id = serializers.JSONField(help_text=ID_HELP + " Distinct within a request.")
    candidates = serializers.ListField(
        child=CandidateDocSerializer(), min_length=1, max_length=MAX_CANDIDATES
    )

    class Meta:
        ref_name = "CertificateApplyQuestion"


METHOD_HELP = (
    "Optional: apply one method of a spec with method both alone, selective_risk (accept / "
    "abstain) or conformal_set (prediction sets); absent = every method of the spec. A run "
    "whose other method certifies nothing is applied this way; the method that certifies "
    "nothing is refused (409)."
)


class ApplyInputDocSerializer(serializers.Serializer):
    """The request: the questions to decide, and optionally the method to apply."""

    questions = serializers.ListField(
        child=QuestionDocSerializer(), min_length=1, max_length=MAX_QUESTIONS
    )
    method = serializers.ChoiceField(choices=METHODS, required=False, help_text=METHOD_HELP)

    class Meta:
        ref_name = "CertificateApplyInput"


class ApplyInputSerializer(serializers.Serializer):
    """The body's outer shape; each question is validated by the service, naming its field."""

    # No child field: DRF's JSONField refuses a number beyond the float range (1e400 reads as
    # infinity) as "not valid JSON" naming only the question; the service names its field.
    questions = serializers.ListField(allow_empty=False, max_length=MAX_QUESTIONS)
    method = serializers.ChoiceField(choices=METHODS, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Refuse a key other than ``questions`` and ``method`` (a misspelt one would pass)."""
        data = self.initial_data
        unknown = sorted(printable(str(key)) for key in data if key not in ("questions", "method"))
        if unknown:
            raise serializers.ValidationError(
                {unknown[0]: "unknown field (allowed: method, questions)"}
            )
        return attrs


class DecisionDocSerializer(serializers.Serializer):
    """Accept or abstain for one emitted answer."""

    candidate_index = serializers.IntegerField(
        allow_null=True, help_text="Position in the question's candidates; null: no answer."
    )
    candidate_id = serializers.JSONField(allow_null=True)
    answer = serializers.CharField(allow_null=True)
    score = serializers.FloatField(allow_null=True)
    decision = serializers.ChoiceField(choices=["accept", "abstain"])
    reason = serializers.CharField(
        allow_null=True,
        help_text="Why it abstains: score_fails_threshold, missing_score, no_answer; null when "
        "accepted.",
    )

    class Meta:
        ref_name = "CertificateDecision"


class SelectiveDocSerializer(serializers.Serializer):
    """The selective-risk decisions of one question."""

    rule = serializers.CharField()
    threshold = serializers.FloatField()
    selector = serializers.CharField()
    decisions = DecisionDocSerializer(
        many=True, help_text="One per emitted unit: one, or one per candidate (each_candidate)."
    )

    class Meta:
        ref_name = "CertificateSelectiveDecisions"


class PredictionSetDocSerializer(serializers.Serializer):
    """The prediction set of one question: its top M* canonical answer classes."""

    m_star = serializers.JSONField(help_text='M*, an integer or "inf".')
    whole_answer_space = serializers.BooleanField(
        help_text="True when M* is infinite: the set is every answer, sampled or not."
    )
    classes = serializers.ListField(child=serializers.CharField(), help_text="Ranked.")
    size = serializers.IntegerField()
    samples_used = serializers.IntegerField()
    samples_available = serializers.IntegerField()
    note = serializers.CharField(allow_null=True)

    class Meta:
        ref_name = "CertificatePredictionSet"


class ReferenceDocSerializer(serializers.Serializer):
    """The certificate a decision was made under."""

    run = serializers.IntegerField()
    spec_sha256 = serializers.CharField()
    input_sha256 = serializers.CharField()
    ledger_sha256 = serializers.CharField(
        help_text="sha256 of the canonical JSON of the run's guarantee ledger."
    )

    class Meta:
        ref_name = "CertificateReference"


class QuestionDecisionDocSerializer(serializers.Serializer):
    """The decisions of one question."""

    question = serializers.JSONField()
    certificate = ReferenceDocSerializer()
    selective_risk = SelectiveDocSerializer(required=False, help_text="With selective risk.")
    prediction_set = PredictionSetDocSerializer(required=False, help_text="With conformal sets.")

    class Meta:
        ref_name = "CertificateQuestionDecision"


class CertificateDocSerializer(ReferenceDocSerializer):
    """The certificate of the response: its reference, t and M*."""

    method = serializers.CharField(
        help_text="The method(s) applied: the spec's, or the one the request named."
    )
    threshold = serializers.FloatField(allow_null=True)
    m_star = serializers.JSONField(allow_null=True, help_text='An integer, "inf" or null.')

    class Meta:
        ref_name = "CertificateApplied"


class DriftDocSerializer(serializers.Serializer):
    """The run's drift watch as of its last fold (``certification.selectors.drift_json``)."""

    status = serializers.ChoiceField(
        choices=["no_traffic", "starting", "watching", "alarm", "unavailable"],
        help_text="alarm: the traffic no longer looks like the calibration data, so the "
        "certificate's guarantee may not hold.",
    )
    delta = serializers.FloatField(help_text="False-alarm probability (CERTLABEL_DRIFT_DELTA).")
    threshold = serializers.FloatField(help_text="1/delta: the alarm fires at this value.")
    martingale = serializers.JSONField(help_text='The martingale\'s value, or "inf".')
    decisions_recorded = serializers.IntegerField()
    decisions_folded = serializers.IntegerField(
        help_text="Decisions the watch has read; the others wait for the background fold."
    )
    observations = serializers.IntegerField(help_text="Folded decisions with a score.")
    calibration_observations = serializers.IntegerField(allow_null=True)
    crossed_at = serializers.DateTimeField(allow_null=True)
    crossed_at_decision = serializers.IntegerField(allow_null=True)
    folded_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_null=True)
    meaning = serializers.CharField()

    class Meta:
        ref_name = "CertificateDrift"


class ApplyOutputDocSerializer(serializers.Serializer):
    """The response: the certificate, one record per question in request order, the watch."""

    certificate = CertificateDocSerializer()
    decisions = QuestionDecisionDocSerializer(many=True)
    drift = DriftDocSerializer()

    class Meta:
        ref_name = "CertificateApplyOutput"


class CalibrationRunApplyApi(APIView):
    """Apply a done run's certificate: accept/abstain at t and the top-M* prediction sets."""

    project_roles = {"POST": permissions.REVIEWERS}

    @extend_schema(
        operation_id="calibration_runs_apply",
        request=ApplyInputDocSerializer,
        responses={
            200: ApplyOutputDocSerializer,
            400: OpenApiResponse(
                ErrorSerializer,
                description="A question or field is invalid; `field` names it, e.g. "
                "`questions[3].candidates[0].score`.",
            ),
            403: OpenApiResponse(ErrorSerializer, description="An annotator."),
            404: OpenApiResponse(ErrorSerializer, description="No such project or run."),
            409: OpenApiResponse(
                ErrorSerializer,
                description="The run is not done, was computed by another statistics version, "
                "or a method applied certifies nothing, e.g. no certified operating point "
                "(code `run_not_applicable`; the detail names a method that may be applied "
                "alone).",
            ),
        },
        examples=[
            OpenApiExample(
                "Two questions",
                request_only=True,
                value={
                    "questions": [
                        {
                            "id": "q-1",
                            "candidates": [
                                {"answer": "1932", "score": 0.93, "selected": True},
                                {"answer": "1931", "score": 0.41},
                            ],
                        },
                        {"id": "q-2", "candidates": [{"answer": "Paris", "score": 0.2}]},
                    ]
                },
            )
        ],
    )
    def post(self, request: Request, slug: str, run_id: int) -> Response:
        """Decide each question under the run's certificate; record the scores it saw."""
        project, _ = viewer(request, slug)
        run = calibration_run_get(project=project, run_id=run_id)
        given = ApplyInputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        body = calibration_run_apply(
            run=run,
            actor=request.user,
            questions=given.validated_data["questions"],
            method=given.validated_data.get("method"),
        )
        return Response(body)
