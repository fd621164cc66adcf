"""REST API of calibration specs, their label budget plans and runs: one ``APIView`` per operation.

Adjudicators and managers read; managers write specs and start runs; annotators get 403
(calibration summarises other people's labels); non-members and other projects' ids get 404.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from certification.api.common import READ_REVIEWERS_WRITE_MANAGERS, viewer
from certification.selectors import (
    calibration_run_get,
    calibration_run_list,
    calibration_run_report,
    calibration_spec_get,
    calibration_spec_json,
    calibration_spec_list,
    calibration_spec_plan,
    drift_watch_get,
)
from certification.services import (
    calibration_run_start,
    calibration_spec_create,
    calibration_spec_revise,
    calibration_spec_update,
)
from certification.stats.limits import MAX_ADDITIONAL
from labeling.api.common import ErrorSerializer, paginated, written
from labeling.api.fields import StrictCharField
from labeling.api.lease import LeasedWorkSerializer
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.exceptions import PermissionDenied
from labeling.permissions import can_manage

FORBIDDEN = OpenApiResponse(
    ErrorSerializer, description="An annotator, or (for writes) not a manager."
)
NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such project, spec or run.")
INVALID = OpenApiResponse(
    ErrorSerializer, description="A spec field is invalid; ``field`` names it."
)
FROZEN = OpenApiResponse(
    ErrorSerializer, description="The spec is used by a run or superseded: revise it."
)


#: The schema of a spec's ``loss``: a 0/1 loss's name or a bounded loss's object.
LOSS_SCHEMA = {
    "oneOf": [
        {
            "type": "string",
            "enum": ["answer_inadmissible", "any_error"],
            "description": "A 0/1 loss (exact binomial test).",
        },
        {
            "type": "object",
            "description": "A loss bounded in [0, 1] (Hoeffding–Bentkus test; selective risk "
            "only). field: acceptance_score, confidence, retrieval_score or metadata.<key>, "
            "for the candidate_field source only.",
            "properties": {
                "kind": {"type": "string", "enum": ["bounded"]},
                "source": {
                    "type": "string",
                    "enum": ["unsupported_claim_share", "candidate_field"],
                },
                "field": {"type": "string"},
            },
            "required": ["kind", "source"],
            "additionalProperties": False,
        },
    ]
}


@extend_schema_field(LOSS_SCHEMA)
class LossField(serializers.Field):
    """A spec's ``loss``: a string (0/1 loss) or a JSON object (bounded loss), passed through.

    Anything else is a 400 naming ``loss``; what the string or object must say is the
    service's rule (``spec_clean``), which names ``loss``, ``loss.source`` or ``loss.field``.
    """

    default_error_messages = {
        # (braces doubled: DRF formats the message)
        "invalid": 'Must be a loss name or an object {{"kind": "bounded", "source": ...}}.'
    }

    def to_internal_value(self, data: Any) -> Any:
        """Accept a ``str`` or a ``dict`` of strings; refuse anything else."""
        if isinstance(data, str):
            return data
        if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
            return dict(data)
        self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        """The contract's value as it is (a string or an object)."""
        return value


class SpecInputSerializer(serializers.Serializer):
    """The contract; every field optional here (defaults, and the rules, are the service's)."""

    description = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)
    method = StrictCharField(required=False)
    loss = LossField(required=False)
    denominator = StrictCharField(required=False)
    alpha = StrictCharField(required=False, help_text='A decimal in (0, 1), e.g. "0.1".')
    delta = StrictCharField(required=False)
    thresholds = serializers.ListField(
        child=serializers.FloatField(), required=False, help_text="The family, in testing order."
    )
    acceptance = StrictCharField(required=False, help_text=">=, >, <= or <")
    score_field = StrictCharField(required=False, allow_blank=True)
    selector = StrictCharField(required=False)
    utility = StrictCharField(required=False)
    multiplicity = StrictCharField(required=False)
    canonicaliser = StrictCharField(required=False)
    tie_rule = StrictCharField(required=False)
    answer_field = StrictCharField(required=False)
    stopping_delta = StrictCharField(required=False, allow_null=True, allow_blank=True)
    partition = StrictCharField(required=False)
    unresolved_as = StrictCharField(required=False)
    evidence_unavailable_as = StrictCharField(required=False)
    abstained_as = StrictCharField(required=False)
    pending_as = StrictCharField(required=False)
    report_confidence = StrictCharField(required=False)
    seed = serializers.IntegerField(required=False, min_value=0)

    class Meta:
        ref_name = "CalibrationSpecInput"

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Refuse unknown fields: a misspelt contract field must not silently become a default."""
        unknown = sorted(set(getattr(self, "initial_data", {}) or {}) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {name: ["unknown field of a calibration spec"] for name in unknown}
            )
        return attrs


class SpecCreateInputSerializer(SpecInputSerializer):
    """A new spec: a name and the contract."""

    name = StrictCharField(max_length=200)

    class Meta:
        ref_name = "CalibrationSpecCreateInput"


class SpecOutputSerializer(serializers.Serializer):
    """A spec: identity, version chain, content hash and contract."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    previous = serializers.IntegerField(allow_null=True)
    next_version = serializers.IntegerField(allow_null=True)
    content_sha256 = serializers.CharField()
    loss_unit = serializers.CharField()
    created_at = serializers.CharField(allow_null=True)
    created_by = serializers.CharField(allow_null=True)
    description = serializers.CharField()
    method = serializers.CharField()
    loss = LossField()
    denominator = serializers.CharField()
    alpha = serializers.CharField()
    delta = serializers.CharField()
    thresholds = serializers.ListField(child=serializers.FloatField())
    acceptance = serializers.CharField()
    score_field = serializers.CharField()
    selector = serializers.CharField()
    utility = serializers.CharField()
    multiplicity = serializers.CharField()
    canonicaliser = serializers.CharField()
    tie_rule = serializers.CharField()
    answer_field = serializers.CharField()
    stopping_delta = serializers.CharField(allow_null=True)
    partition = serializers.CharField()
    unresolved_as = serializers.CharField()
    evidence_unavailable_as = serializers.CharField()
    abstained_as = serializers.CharField()
    pending_as = serializers.CharField()
    report_confidence = serializers.CharField()
    seed = serializers.IntegerField()

    class Meta:
        ref_name = "CalibrationSpec"

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = calibration_spec_json(instance)
        next_version = getattr(instance, "next_version", None)
        data["next_version"] = next_version.pk if next_version is not None else None
        return data


class RunSummarySerializer(LeasedWorkSerializer):
    """A run without its result."""

    id = serializers.IntegerField()
    spec = serializers.IntegerField(source="spec_id")
    status = serializers.CharField()
    trigger = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    input_sha256 = serializers.CharField()
    outcome = serializers.CharField()
    error = serializers.CharField()

    class Meta:
        ref_name = "CalibrationRunSummary"


class RunReportSerializer(serializers.Serializer):
    """The full report of a run (``calibration_run_report``): run, spec, result; drift watch."""

    run = serializers.DictField()
    spec = serializers.DictField()
    result = serializers.JSONField(
        allow_null=True, help_text="Null until done. Infinite values are the string 'inf'."
    )
    inputs = serializers.JSONField(
        required=False, help_text="Only with ?include=inputs, for managers."
    )
    drift = serializers.JSONField(
        help_text="The drift watch of the run's applied certificate (as in the apply response)."
    )

    class Meta:
        ref_name = "CalibrationRunReport"


class CalibrationSpecListApi(APIView):
    """The project's calibration specs, every version (adjudicators and managers).

    POST creates one (managers).
    """

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="calibration_specs_list",
        responses={200: SpecOutputSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the specs, by name then newest version first."""
        project, _ = viewer(request, slug)
        return paginated(request, calibration_spec_list(project=project), SpecOutputSerializer)

    @extend_schema(
        operation_id="calibration_specs_create",
        request=SpecCreateInputSerializer,
        responses={201: SpecOutputSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Write a new spec (version 1 of a new name)."""
        project, _ = viewer(request, slug)
        given = SpecCreateInputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        name = fields.pop("name")
        body = written(
            lambda: calibration_spec_create(
                project=project, actor=request.user, name=name, **fields
            ),
            lambda spec: SpecOutputSerializer(spec).data,
        )
        return Response(body, status=status.HTTP_201_CREATED)


class CalibrationSpecDetailApi(APIView):
    """One spec; PATCH changes it in place only while no run has used it (else 409: revise)."""

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    @extend_schema(
        operation_id="calibration_specs_retrieve",
        responses={200: SpecOutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, spec_id: int) -> Response:
        """Return the spec."""
        project, _ = viewer(request, slug)
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        return Response(SpecOutputSerializer(spec).data)

    @extend_schema(
        operation_id="calibration_specs_partial_update",
        request=SpecInputSerializer,
        responses={
            200: SpecOutputSerializer,
            400: INVALID,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: FROZEN,
        },
    )
    def patch(self, request: Request, slug: str, spec_id: int) -> Response:
        """Change an unused spec in place."""
        project, _ = viewer(request, slug)
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        given = SpecInputSerializer(data=request.data, partial=True)
        given.is_valid(raise_exception=True)
        body = written(
            lambda: calibration_spec_update(spec=spec, actor=request.user, **given.validated_data),
            lambda changed: SpecOutputSerializer(changed).data,
        )
        return Response(body)


class CalibrationSpecReviseApi(APIView):
    """Make a new version of a spec (managers); the old version stays as it was."""

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    @extend_schema(
        operation_id="calibration_specs_revise",
        request=SpecInputSerializer,
        responses={
            201: SpecOutputSerializer,
            400: INVALID,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: FROZEN,
        },
    )
    def post(self, request: Request, slug: str, spec_id: int) -> Response:
        """Revise the spec; fields not given keep their values."""
        project, _ = viewer(request, slug)
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        given = SpecInputSerializer(data=request.data, partial=True)
        given.is_valid(raise_exception=True)
        body = written(
            lambda: calibration_spec_revise(spec=spec, actor=request.user, **given.validated_data),
            lambda new: SpecOutputSerializer(new).data,
        )
        return Response(body, status=status.HTTP_201_CREATED)


class CalibrationRunListApi(APIView):
    """The runs of a spec (newest first); POST starts one (managers), computed in the background."""

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="calibration_runs_list",
        responses={200: RunSummarySerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, spec_id: int) -> Response:
        """List the spec's runs."""
        project, _ = viewer(request, slug)
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        runs = calibration_run_list(project=project, filters={"spec": spec})
        return paginated(request, runs, RunSummarySerializer)

    @extend_schema(
        operation_id="calibration_runs_start",
        request=None,
        responses={
            202: OpenApiResponse(
                RunSummarySerializer,
                description="The run on the current inputs: new (pending), or the existing one.",
            ),
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
    )
    def post(self, request: Request, slug: str, spec_id: int) -> Response:
        """Start a run (idempotent: unchanged inputs return the existing run)."""
        project, _ = viewer(request, slug)
        spec = calibration_spec_get(project=project, spec_id=spec_id)

        def render(run: Any) -> Any:
            run.refresh_from_db()
            return RunSummarySerializer(run).data

        body = written(lambda: calibration_run_start(spec=spec, actor=request.user), render)
        return Response(body, status=status.HTTP_202_ACCEPTED)


class CalibrationRunDetailApi(APIView):
    """A run's full report: certificate, conformal threshold, held-out report, ledger, drift.

    ``?include=inputs`` adds the per-item inputs snapshot, for managers only (it holds
    evaluator scores per candidate).
    """

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    @extend_schema(
        operation_id="calibration_runs_retrieve",
        parameters=[
            OpenApiParameter("include", str, enum=["inputs"], required=False),
        ],
        responses={200: RunReportSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, run_id: int) -> Response:
        """Return the run's report (``result`` is null until it is done)."""
        project, role = viewer(request, slug)
        run = calibration_run_get(project=project, run_id=run_id)
        include = request.query_params.get("include") == "inputs"
        if include and not can_manage(role):
            raise PermissionDenied("only a manager may read a run's inputs snapshot")
        report = calibration_run_report(run=run, include_inputs=include)
        return Response({**report, "drift": drift_watch_get(run=run)})


class PlanRowSerializer(serializers.Serializer):
    """One threshold's plan (``additional`` is null when it cannot be planned: ``reason``)."""

    index = serializers.IntegerField()
    threshold = serializers.FloatField()
    denominator = serializers.IntegerField(help_text="The certificate's denominator now.")
    errors = serializers.IntegerField()  # type: ignore[assignment]
    rate = serializers.FloatField(allow_null=True, help_text="errors / denominator.")
    p_value = serializers.FloatField()
    certified_now = serializers.BooleanField()
    additional = serializers.IntegerField(
        allow_null=True,
        help_text="The fewest additional calibration units that certify it if the observed "
        "rates held.",
    )
    planned_denominator = serializers.IntegerField(allow_null=True)
    planned_errors = serializers.IntegerField(allow_null=True)
    probability_at_plan = serializers.FloatField(allow_null=True)
    probability_at_n_more = serializers.FloatField(allow_null=True)
    never = serializers.BooleanField(
        help_text="No number of labels certifies it at the observed rates."
    )
    reason = serializers.CharField(allow_null=True)

    class Meta:
        ref_name = "CalibrationPlanRow"


class PlanChanceSerializer(serializers.Serializer):
    """The additional units at which a threshold certifies with at least a given chance."""

    target = serializers.FloatField(help_text="The chance asked for, in (0, 1).")
    additional = serializers.IntegerField(
        allow_null=True, help_text="Null when not reached within the budget."
    )
    probability = serializers.FloatField(allow_null=True, help_text="The chance there.")

    class Meta:
        ref_name = "CalibrationPlanChance"


class SelectivePlanSerializer(serializers.Serializer):
    """The selective-risk plan, one row per threshold in family order."""

    alpha = serializers.CharField()
    delta = serializers.CharField()
    multiplicity = serializers.CharField()
    denominator = serializers.CharField()
    unit = serializers.CharField(help_text="question, or candidate (each_candidate selector).")
    n = serializers.IntegerField()
    n_thresholds = serializers.IntegerField()
    test_level = serializers.FloatField()
    zero_error_minimum = serializers.IntegerField()
    zero_error_text = serializers.CharField()
    probability_is_bound = serializers.BooleanField(
        help_text="Fixed sequence: the probabilities are upper bounds."
    )
    certified_now = serializers.IntegerField(help_text="Thresholds certified on the labels now.")
    fewest_index = serializers.IntegerField(
        allow_null=True, help_text="The threshold needing the fewest additional units."
    )
    fewest_threshold = serializers.FloatField(
        allow_null=True, help_text="That threshold's value (in the score field's units)."
    )
    fewest_additional = serializers.IntegerField(allow_null=True)
    fewest_probability = serializers.FloatField(
        allow_null=True,
        help_text="The chance that it certifies with fewest_additional more units (often only "
        "50-70 %).",
    )
    fewest_for_chance = PlanChanceSerializer(
        many=True, help_text="The additional units it needs for an 80 % and a 95 % chance."
    )
    rows = PlanRowSerializer(many=True)

    class Meta:
        ref_name = "CalibrationSelectivePlan"


class ConformalPlanSerializer(serializers.Serializer):
    """The conformal plan: when M* becomes finite, and the reliability level to expect."""

    alpha = serializers.CharField()
    n = serializers.IntegerField()
    n_finite = serializers.IntegerField()
    n_mode_admissible = serializers.IntegerField()
    k = serializers.IntegerField()
    finite_now = serializers.BooleanField()
    minimum_n = serializers.IntegerField()
    additional = serializers.IntegerField(allow_null=True)
    planned_n = serializers.IntegerField(allow_null=True)
    probability_at_plan = serializers.FloatField(allow_null=True)
    probability_at_n_more = serializers.FloatField(allow_null=True)
    reliability_now = serializers.CharField(allow_null=True, help_text="c/(n+1), unreduced.")
    reliability_now_value = serializers.FloatField(allow_null=True)
    expected_reliability_at_plan = serializers.FloatField(allow_null=True)
    expected_reliability_at_n_more = serializers.FloatField(allow_null=True)
    never = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True)

    class Meta:
        ref_name = "CalibrationConformalPlan"


class PlanSpecSerializer(serializers.Serializer):
    """The planned spec."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    content_sha256 = serializers.CharField()

    class Meta:
        ref_name = "CalibrationPlanSpec"


class PlanSerializer(serializers.Serializer):
    """A label budget plan (``calibration_spec_plan``); not a certificate."""

    spec = PlanSpecSerializer()
    notice = serializers.CharField()
    is_certificate = serializers.BooleanField(help_text="Always false.")
    n_more = serializers.IntegerField(allow_null=True)
    budget = serializers.IntegerField(help_text="The most additional units a plan searches.")
    pending = serializers.IntegerField(help_text="Calibration candidates not resolved yet.")
    questions = serializers.IntegerField(help_text="Questions of the calibration partition.")
    candidates_per_question = serializers.FloatField(
        allow_null=True, help_text="Their mean number of candidates (each an item to label)."
    )
    selective_risk = SelectivePlanSerializer(allow_null=True)
    conformal = ConformalPlanSerializer(allow_null=True)

    class Meta:
        ref_name = "CalibrationPlan"


class CalibrationSpecPlanApi(APIView):
    """How many more calibration labels the spec needs, if the observed rates held.

    Computed now from the labels resolved so far (nothing is stored); adjudicators and
    managers read it, like the spec. A plan is not a certificate.
    """

    project_roles = READ_REVIEWERS_WRITE_MANAGERS

    class QuerySerializer(serializers.Serializer):
        n_more = serializers.IntegerField(
            required=False,
            min_value=0,
            max_value=MAX_ADDITIONAL,
            help_text="Additional calibration units to give the chance of certifying for.",
        )

        class Meta:
            ref_name = "CalibrationPlanQuery"

    @extend_schema(
        operation_id="calibration_specs_plan",
        parameters=[QuerySerializer],
        responses={
            200: PlanSerializer,
            400: INVALID,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(
                ErrorSerializer, description="A statistic cannot be computed on the inputs."
            ),
        },
    )
    def get(self, request: Request, slug: str, spec_id: int) -> Response:
        """Return the spec's label budget plan."""
        project, _ = viewer(request, slug)
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        plan = calibration_spec_plan(spec=spec, n_more=query.validated_data.get("n_more"))
        return Response(PlanSerializer(plan).data)
