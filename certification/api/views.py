"""REST API of the certification side: one ``APIView`` per operation (STYLE.md C5).

Agreement (issue 3); calibration specs and runs (issue 4): adjudicators and managers read,
managers write; annotators get 403 (certification summarises other people's labels).

The agreement report lives here, not in ``labeling/api``: ``labeling`` never imports
``certification`` (STYLE.md C1), while ``certification`` may read ``labeling.selectors``.
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

from certification.models import FlagWhen
from certification.selectors import (
    agreement_report_get,
    audit_report_get,
    audit_sample_list,
    calibration_run_get,
    calibration_run_list,
    calibration_run_report,
    calibration_spec_get,
    calibration_spec_json,
    calibration_spec_list,
    evaluator_get,
)
from certification.services import (
    audit_report_configure,
    audit_sample_draw,
    calibration_run_start,
    calibration_spec_create,
    calibration_spec_revise,
    calibration_spec_update,
)
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.api.common import ErrorSerializer
from labeling.exceptions import PermissionDenied
from labeling.permissions import can_manage, require_manager
from labeling.selectors import project_get_for_user
from labeling.selectors.review import require_adjudicator


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
    alpha = StatisticSerializer(help_text="Krippendorff's alpha (nominal).")
    fleiss_kappa = StatisticSerializer()
    percent_agreement = StatisticSerializer()
    confidence = serializers.FloatField(help_text="Confidence level of the pair intervals.")
    pairs = PairSerializer(many=True)

    class Meta:
        ref_name = "AgreementLevel"

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_label_counts(self, level: Any) -> dict[str, int]:
        return dict(level.label_counts)


class AgreementReportApi(APIView):
    """The project's inter-annotator agreement, per label level (adjudicators and managers).

    Annotators get 403: the figures summarise other people's votes. Rater names are usernames
    for managers and "Rater k" for adjudicators. Before the first computation every field is
    empty (``computed_at`` null, no levels).
    """

    class OutputSerializer(serializers.Serializer):
        computed_at = serializers.DateTimeField(allow_null=True)
        input_sha256 = serializers.CharField(allow_null=True)
        identities_shown = serializers.BooleanField()
        levels = LevelSerializer(many=True)

        class Meta:
            ref_name = "AgreementReport"

    @extend_schema(
        operation_id="agreement_retrieve",
        responses={
            200: OutputSerializer,
            403: OpenApiResponse(ErrorSerializer, description="Not an adjudicator or manager."),
            404: OpenApiResponse(ErrorSerializer, description="No such project (or not a member)."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """Return the stored agreement report."""
        project = project_get_for_user(slug=slug, user=request.user)
        require_adjudicator(project=project, actor=request.user)
        report = agreement_report_get(project=project, actor=request.user)
        empty = {"computed_at": None, "input_sha256": None, "identities_shown": False, "levels": []}
        return Response(self.OutputSerializer(report or empty).data)


# ---------------------------------------------------------------------------------------------
# Calibration specs and runs (issue 4)
# ---------------------------------------------------------------------------------------------

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


def _paginated(request: Request, queryset: Any, serializer: Any) -> Response:
    paginator = CappedLimitOffsetPagination()
    page = paginator.paginate_queryset(queryset, request)
    return paginator.get_paginated_response(serializer(page, many=True).data)


class SpecInputSerializer(serializers.Serializer):
    """The contract; every field optional here (defaults, and the rules, are the service's)."""

    description = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    method = serializers.CharField(required=False)
    loss = serializers.CharField(required=False)
    denominator = serializers.CharField(required=False)
    alpha = serializers.CharField(required=False, help_text='A decimal in (0, 1), e.g. "0.1".')
    delta = serializers.CharField(required=False)
    thresholds = serializers.ListField(
        child=serializers.FloatField(), required=False, help_text="The family, in testing order."
    )
    acceptance = serializers.CharField(required=False, help_text=">=, >, <= or <")
    score_field = serializers.CharField(required=False, allow_blank=True)
    selector = serializers.CharField(required=False)
    utility = serializers.CharField(required=False)
    multiplicity = serializers.CharField(required=False)
    canonicaliser = serializers.CharField(required=False)
    tie_rule = serializers.CharField(required=False)
    answer_field = serializers.CharField(required=False)
    stopping_delta = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    partition = serializers.CharField(required=False)
    unresolved_as = serializers.CharField(required=False)
    evidence_unavailable_as = serializers.CharField(required=False)
    abstained_as = serializers.CharField(required=False)
    pending_as = serializers.CharField(required=False)
    report_confidence = serializers.CharField(required=False)
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

    name = serializers.CharField(max_length=200)

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
    loss = serializers.CharField()
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


class RunSummarySerializer(serializers.Serializer):
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
    """The full report of a run (``calibration_run_report``): run, spec, result."""

    run = serializers.DictField()
    spec = serializers.DictField()
    result = serializers.JSONField(
        allow_null=True, help_text="Null until done. Infinite values are the string 'inf'."
    )
    inputs = serializers.JSONField(
        required=False, help_text="Only with ?include=inputs, for managers."
    )

    class Meta:
        ref_name = "CalibrationRunReport"


def _viewer(request: Request, slug: str) -> tuple[Any, str]:
    project = project_get_for_user(slug=slug, user=request.user)
    role = require_adjudicator(project=project, actor=request.user)
    return project, role


class CalibrationSpecListApi(APIView):
    """The project's calibration specs (every version; adjudicators and managers); create one
    (managers).
    """

    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="calibration_specs_list",
        responses={200: SpecOutputSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the specs, by name then newest version first."""
        project, _ = _viewer(request, slug)
        return _paginated(request, calibration_spec_list(project=project), SpecOutputSerializer)

    @extend_schema(
        operation_id="calibration_specs_create",
        request=SpecCreateInputSerializer,
        responses={201: SpecOutputSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Write a new spec (version 1 of a new name)."""
        project, _ = _viewer(request, slug)
        given = SpecCreateInputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        name = fields.pop("name")
        spec = calibration_spec_create(project=project, actor=request.user, name=name, **fields)
        return Response(SpecOutputSerializer(spec).data, status=status.HTTP_201_CREATED)


class CalibrationSpecDetailApi(APIView):
    """One spec; PATCH changes it in place only while no run has used it (else 409: revise)."""

    @extend_schema(
        operation_id="calibration_specs_retrieve",
        responses={200: SpecOutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, spec_id: int) -> Response:
        """Return the spec."""
        project, _ = _viewer(request, slug)
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
        project, role = _viewer(request, slug)
        require_manager(role)  # the role is refused before the object is looked up
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        given = SpecInputSerializer(data=request.data, partial=True)
        given.is_valid(raise_exception=True)
        spec = calibration_spec_update(spec=spec, actor=request.user, **given.validated_data)
        return Response(SpecOutputSerializer(spec).data)


class CalibrationSpecReviseApi(APIView):
    """Make a new version of a spec (managers); the old version stays as it was."""

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
        project, role = _viewer(request, slug)
        require_manager(role)  # the role is refused before the object is looked up
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        given = SpecInputSerializer(data=request.data, partial=True)
        given.is_valid(raise_exception=True)
        new = calibration_spec_revise(spec=spec, actor=request.user, **given.validated_data)
        return Response(SpecOutputSerializer(new).data, status=status.HTTP_201_CREATED)


class CalibrationRunListApi(APIView):
    """The runs of a spec (newest first); POST starts one (managers), computed in the background."""

    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="calibration_runs_list",
        responses={200: RunSummarySerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, spec_id: int) -> Response:
        """List the spec's runs."""
        project, _ = _viewer(request, slug)
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        runs = calibration_run_list(project=project, filters={"spec": spec})
        return _paginated(request, runs, RunSummarySerializer)

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
        project, role = _viewer(request, slug)
        require_manager(role)  # the role is refused before the object is looked up
        spec = calibration_spec_get(project=project, spec_id=spec_id)
        run = calibration_run_start(spec=spec, actor=request.user)
        run.refresh_from_db()
        return Response(RunSummarySerializer(run).data, status=status.HTTP_202_ACCEPTED)


class CalibrationRunDetailApi(APIView):
    """A run's full report: certificate, conformal threshold, held-out report, ledger.

    ``?include=inputs`` adds the per-item inputs snapshot, for managers only (it holds
    evaluator scores per candidate).
    """

    @extend_schema(
        operation_id="calibration_runs_retrieve",
        parameters=[
            OpenApiParameter("include", str, enum=["inputs"], required=False),
        ],
        responses={200: RunReportSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, run_id: int) -> Response:
        """Return the run's report (``result`` is null until it is done)."""
        project, role = _viewer(request, slug)
        run = calibration_run_get(project=project, run_id=run_id)
        include = request.query_params.get("include") == "inputs"
        if include and not can_manage(role):
            raise PermissionDenied("only a manager may read a run's inputs snapshot")
        return Response(calibration_run_report(run=run, include_inputs=include))


# ---------------------------------------------------------------------------------------------
# Evaluator audits (issue 5)
# ---------------------------------------------------------------------------------------------


class AuditReportOutputSerializer(serializers.Serializer):
    """An evaluator's audit: declaration and the stored result (see services.audit)."""

    evaluator = serializers.CharField(source="evaluator.__str__")
    evaluator_id = serializers.IntegerField()
    human_positive = serializers.ListField(child=serializers.CharField())
    evaluator_positive = serializers.ListField(child=serializers.CharField())
    score_threshold = serializers.FloatField(allow_null=True)
    flag_when = serializers.CharField()
    confidence = serializers.DecimalField(max_digits=10, decimal_places=8)
    computed_at = serializers.DateTimeField(allow_null=True)
    input_sha256 = serializers.CharField()
    result = serializers.JSONField()

    class Meta:
        ref_name = "AuditReport"


class AuditReportApi(APIView):
    """An evaluator version's audit (GET: adjudicators and managers); declare it (POST: managers).

    Annotators get 403: evaluator labels never reach them. GET before any declaration is 404
    (``audit_not_configured``).
    """

    class InputSerializer(serializers.Serializer):
        human_positive = serializers.ListField(
            child=serializers.CharField(), required=False, allow_empty=False
        )
        evaluator_positive = serializers.ListField(
            child=serializers.CharField(), required=False, allow_empty=False
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
        project, _ = _viewer(request, slug)
        evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
        report = audit_report_get(project=project, evaluator=evaluator)
        return Response(AuditReportOutputSerializer(report).data)

    @extend_schema(
        operation_id="audit_declare",
        request=InputSerializer,
        responses={200: AuditReportOutputSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str, evaluator_id: int) -> Response:
        """Declare (or re-declare) the audit and return the recomputed report."""
        project, role = _viewer(request, slug)
        require_manager(role)
        evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        report = audit_report_configure(
            project=project, evaluator=evaluator, actor=request.user, **serializer.validated_data
        )
        return Response(AuditReportOutputSerializer(report).data)


class AuditSampleOutputSerializer(serializers.Serializer):
    """An audit sample: seed, design per stratum and its members."""

    id = serializers.IntegerField()
    size = serializers.IntegerField()
    seed = serializers.IntegerField()
    slice_dimension = serializers.CharField()
    declaration = serializers.JSONField()
    design = serializers.JSONField()
    created_at = serializers.DateTimeField()
    members = serializers.SerializerMethodField()

    class Meta:
        ref_name = "AuditSample"

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_members(self, sample: Any) -> list[dict[str, Any]]:
        return [
            {
                "item": m.item_id,
                "stratum": m.stratum,
                "inclusion_probability": m.inclusion_probability,
            }
            for m in sample.members.all()
        ]


class AuditSampleListApi(APIView):
    """An evaluator's audit samples (GET: adjudicators and managers); draw one (POST: managers)."""

    pagination_class = CappedLimitOffsetPagination

    class InputSerializer(serializers.Serializer):
        size = serializers.IntegerField(min_value=1)
        seed = serializers.IntegerField(min_value=0)
        slice_dimension = serializers.ChoiceField(
            choices=["", "domain", "question_type", "generator"], required=False, default=""
        )

        class Meta:
            ref_name = "AuditSampleInput"

    @extend_schema(
        operation_id="audit_samples_list",
        responses={200: AuditSampleOutputSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, evaluator_id: int) -> Response:
        """List the evaluator's samples, newest first."""
        project, _ = _viewer(request, slug)
        evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
        samples = audit_sample_list(project=project, evaluator=evaluator)
        return _paginated(request, samples, AuditSampleOutputSerializer)

    @extend_schema(
        operation_id="audit_samples_create",
        request=InputSerializer,
        responses={201: AuditSampleOutputSerializer, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str, evaluator_id: int) -> Response:
        """Draw a seeded stratified sample; its open items are served first."""
        project, role = _viewer(request, slug)
        require_manager(role)
        evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        sample = audit_sample_draw(
            project=project, evaluator=evaluator, actor=request.user, **serializer.validated_data
        )
        data = AuditSampleOutputSerializer(sample).data
        return Response(data, status=status.HTTP_201_CREATED)
