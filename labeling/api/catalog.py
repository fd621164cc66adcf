"""REST API of the labelling catalogue: projects, imports, evaluator labels, the split.

One ``APIView`` per operation; items are in ``labeling.api.items``, labelling work (assignments,
annotations) in ``labeling.api.work``, the pieces they share in ``labeling.api.common``.

Authentication is token or session (settings); every endpoint needs an authenticated user. A
project is resolved for the user by ``project_get_for_user``, so a non-member gets 404; role
checks live in ``labeling.permissions``; domain errors become HTTP in ``labeling.api_errors``.
"""

from __future__ import annotations

from typing import Any, cast

from django.core.validators import RegexValidator
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling import permissions
from labeling.api.common import ErrorSerializer, paginated, project_and_role, request_actor, written
from labeling.api.fields import StrictCharField
from labeling.api.jobs import JobSerializer, job_accepted
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.api.parsers import StrictMultiPartParser
from labeling.exceptions import PermissionDenied
from labeling.forms import DEFAULT_PROPORTIONS, format_choices
from labeling.importers import claims_choice_error, evaluator_version_error
from labeling.importers.claims import CLAIM_MODES
from labeling.models import Project, Role
from labeling.policy_presets import DEFAULT_PRESET, presets
from labeling.selectors import PARTITION_KEYS, project_list_for_user, project_overview
from labeling.services import evaluator_labels_import_file, partition_freeze, workload_import_file
from labeling.services.jobs import workload_import_in_background, workload_import_job_start
from labeling.services.labelling_queue import MAX_LEASE_MINUTES, MAX_OVERLAP
from labeling.services.projects import (
    MAX_NAME_LENGTH,
    MAX_PROJECT_DESCRIPTION_LENGTH,
    SLUG,
    project_create,
)


class RecordErrorSerializer(serializers.Serializer):
    """One refused record: where, which field, and why (never the record itself)."""

    location = serializers.CharField(
        required=False, help_text='e.g. "line 12"; absent when the upload itself is refused'
    )
    field = serializers.CharField(
        allow_null=True, help_text='a dotted path, e.g. "candidates[0].claims[1].end"'
    )
    reason = serializers.CharField()

    class Meta:
        ref_name = "RecordError"


class ImportErrorSerializer(ErrorSerializer):
    """A refused import (``code`` is ``import_failed``); nothing was written."""

    errors = RecordErrorSerializer(many=True)  # type: ignore[assignment]

    class Meta:
        ref_name = "ImportError"


NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such project (or not a member).")
FORBIDDEN = OpenApiResponse(ErrorSerializer, description="Not authenticated, or not a manager.")


# ---------------------------------------------------------------------------------------------
# Projects
# ---------------------------------------------------------------------------------------------


class ProjectListApi(APIView):
    """The projects the user is a member of (all projects for staff), with role and counts."""

    # Read by drf-spectacular to document the paginated envelope; paginated does the paging.
    pagination_class = CappedLimitOffsetPagination

    class OutputSerializer(serializers.Serializer):
        slug = serializers.SlugField()
        name = serializers.CharField()
        description = serializers.CharField()
        role = serializers.SerializerMethodField()
        question_count = serializers.IntegerField()
        item_count = serializers.IntegerField()
        partition_frozen_at = serializers.DateTimeField(allow_null=True)

        class Meta:
            ref_name = "ProjectListItem"

        def get_role(self, project: Any) -> str | None:
            return permissions.project_role(user=self.context["user"], project=project)

    class InputSerializer(serializers.Serializer):
        slug = StrictCharField(
            max_length=64,
            validators=[RegexValidator(f"^{SLUG.pattern}$")],
            help_text="URL name, unique: ASCII letters, digits, '-' and '_'.",
        )
        name = StrictCharField(max_length=MAX_NAME_LENGTH)
        description = StrictCharField(
            max_length=MAX_PROJECT_DESCRIPTION_LENGTH,
            required=False,
            allow_blank=True,
            default="",
        )
        preset = serializers.ChoiceField(
            choices=[],
            default=DEFAULT_PRESET,
            help_text="The label policy v1 starts as this preset (see docs/projects.md).",
        )
        overlap = serializers.IntegerField(min_value=1, max_value=MAX_OVERLAP, default=2)
        lease_minutes = serializers.IntegerField(
            min_value=1, max_value=MAX_LEASE_MINUTES, default=30
        )

        class Meta:
            ref_name = "ProjectCreateInput"

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            cast(serializers.ChoiceField, self.fields["preset"]).choices = list(presets())

    class CreatedSerializer(serializers.Serializer):
        slug = serializers.SlugField()
        name = serializers.CharField()
        description = serializers.CharField()
        overlap = serializers.IntegerField()
        lease_minutes = serializers.IntegerField()
        role = serializers.CharField(help_text="Always manager: the creator manages it.")
        policy_version = serializers.IntegerField()

        class Meta:
            ref_name = "ProjectCreated"

    @extend_schema(operation_id="projects_list", responses={200: OutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        """List the user's projects."""
        projects = project_list_for_user(user=request.user)
        return paginated(request, projects, self.OutputSerializer, {"user": request.user})

    @extend_schema(
        operation_id="projects_create",
        request=InputSerializer,
        responses={
            201: CreatedSerializer,
            400: OpenApiResponse(
                ErrorSerializer, description="Invalid input, e.g. the slug is taken (field slug)."
            ),
            403: OpenApiResponse(ErrorSerializer, description="Not allowed to create projects."),
        },
    )
    def post(self, request: Request) -> Response:
        """Create a project; the creator becomes its manager.

        Allowed to staff, to holders of the ``labeling.add_project`` permission and, with
        ``CERTLABEL_ANYONE_CREATES_PROJECTS``, to every user (checked before the body).
        """
        actor = request_actor(request)
        if not permissions.can_create_projects(actor):
            raise PermissionDenied("you may not create projects")
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)

        def render(project: Project) -> Any:
            created = {**vars(project), "role": Role.MANAGER, "policy_version": 1}
            return self.CreatedSerializer(created).data

        body = written(lambda: project_create(actor=actor, **given.validated_data), render)
        return Response(body, status=status.HTTP_201_CREATED)


class PartitionCountsSerializer(serializers.Serializer):
    """Counts of one partition (see ``labeling.selectors.PartitionCounts``)."""

    partition = serializers.ChoiceField(choices=[*PARTITION_KEYS, "all"])
    questions = serializers.IntegerField()
    candidates = serializers.IntegerField()
    items = serializers.IntegerField()
    claims = serializers.IntegerField()
    unanchored_claims = serializers.IntegerField()
    source_versions = serializers.IntegerField()

    class Meta:
        ref_name = "PartitionCounts"


class ProjectDetailApi(APIView):
    """A project's overview: counts per partition, import batches, policy and split state."""

    class OutputSerializer(serializers.Serializer):
        class BatchSerializer(serializers.Serializer):
            id = serializers.IntegerField()
            format = serializers.CharField()
            filename = serializers.CharField()
            file_sha256 = serializers.CharField()
            created_at = serializers.DateTimeField()
            created_by = serializers.CharField(allow_null=True)
            records = serializers.IntegerField(allow_null=True)
            created = serializers.DictField(child=serializers.IntegerField())
            notes = serializers.DictField()

            class Meta:
                ref_name = "ImportBatchSummary"

        slug = serializers.SlugField()
        name = serializers.CharField()
        role = serializers.SerializerMethodField()
        partitions = PartitionCountsSerializer(many=True)
        totals = PartitionCountsSerializer()
        unanchored_claims = serializers.IntegerField()
        batches = BatchSerializer(many=True)
        policy_version = serializers.IntegerField(allow_null=True)
        evidence_relation = serializers.CharField(allow_null=True)
        policy_frozen_at = serializers.DateTimeField(allow_null=True)
        partition_frozen_at = serializers.DateTimeField(allow_null=True)
        partition_seed = serializers.IntegerField(allow_null=True)
        partition_proportions = serializers.DictField(
            child=serializers.FloatField(), allow_null=True
        )

        class Meta:
            ref_name = "ProjectOverview"

        def get_role(self, overview: Any) -> str | None:
            return self.context["role"]

    @extend_schema(responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, slug: str) -> Response:
        """Return the project's overview."""
        project, role = project_and_role(request, slug)
        overview = project_overview(project=project, include_batches=permissions.can_manage(role))
        return Response(self.OutputSerializer(overview, context={"role": role}).data)


# ---------------------------------------------------------------------------------------------
# Imports and partition (managers)
# ---------------------------------------------------------------------------------------------


class ImportCreateApi(APIView):
    """Import a workload file synchronously, atomically and idempotently (managers only)."""

    parser_classes = [StrictMultiPartParser]
    project_roles = {"POST": permissions.MANAGERS}

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField()
        format = serializers.ChoiceField(choices=[], default="native")
        claims = serializers.ChoiceField(
            choices=list(CLAIM_MODES.items()),
            required=False,
            help_text="Claim splitting for a format whose answers come without claims (default "
            "sentences); refused for a format that gives its own claims.",
        )
        evaluator_version = serializers.CharField(
            required=False,
            min_length=1,
            max_length=255,
            help_text="The version of the evaluator whose scores the file carries (ragas: its "
            "score columns), e.g. ragas-0.2.6; refused for a format without evaluator scores.",
        )

        class Meta:
            ref_name = "ImportInput"

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Read at request time: adapters register in labeling.importers.formats().
            cast(serializers.ChoiceField, self.fields["format"]).choices = format_choices()

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            refused = claims_choice_error(attrs["format"], attrs.get("claims"))
            if refused is not None:
                raise serializers.ValidationError({"claims": refused})
            version = evaluator_version_error(attrs["format"], attrs.get("evaluator_version"))
            if version is not None:
                raise serializers.ValidationError({"evaluator_version": version})
            return attrs

    class OutputSerializer(serializers.Serializer):
        batch = serializers.IntegerField(
            source="batch.pk", allow_null=True, help_text="Null when nothing new was written."
        )
        already_imported = serializers.BooleanField()
        records = serializers.IntegerField(help_text="Records read (0 when already imported).")
        created = serializers.DictField(child=serializers.IntegerField())
        notes = serializers.DictField()

        class Meta:
            ref_name = "ImportResult"

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={
            201: OpenApiResponse(OutputSerializer, description="A batch was created."),
            200: OpenApiResponse(
                OutputSerializer,
                description="The file was already imported, or it held nothing new.",
            ),
            202: OpenApiResponse(
                JobSerializer,
                description="A file larger than CERTLABEL_JOB_IMPORT_BYTES: imported by a "
                "background job; poll the job at its url (also in Location).",
            ),
            400: OpenApiResponse(
                ImportErrorSerializer, description="Refused; nothing was written."
            ),
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Import the uploaded file into the project."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        upload = given.validated_data["file"]
        source = {
            "project": project,
            "stream": upload.file,
            "format_name": given.validated_data["format"],
            "filename": upload.name or "upload",
            "actor": request_actor(request),
            "claims": given.validated_data.get("claims"),
            "evaluator_version": given.validated_data.get("evaluator_version"),
        }
        if workload_import_in_background(upload.size):
            # A large file: stored and imported by a background job (202 and the job's URL).
            return job_accepted(workload_import_job_start(**source))
        result = workload_import_file(**source)
        created = result.batch is not None and not result.already_imported
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(self.OutputSerializer(result).data, status=code)


class EvaluatorLabelImportApi(APIView):
    """Import an evaluator-label JSONL file (judges run after the workload; managers only)."""

    parser_classes = [StrictMultiPartParser]
    project_roles = {"POST": permissions.MANAGERS}

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField()

        class Meta:
            ref_name = "EvaluatorLabelImportInput"

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={
            201: OpenApiResponse(
                ImportCreateApi.OutputSerializer, description="A batch was created."
            ),
            200: OpenApiResponse(
                ImportCreateApi.OutputSerializer,
                description="The file was already imported, or it held nothing new.",
            ),
            400: OpenApiResponse(
                ImportErrorSerializer, description="Refused; nothing was written."
            ),
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Import the uploaded evaluator labels into the project."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        upload = given.validated_data["file"]
        result = evaluator_labels_import_file(
            project=project,
            stream=upload.file,
            filename=upload.name or "upload",
            actor=request_actor(request),
        )
        created = result.batch is not None and not result.already_imported
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(ImportCreateApi.OutputSerializer(result).data, status=code)


class PartitionFreezeApi(APIView):
    """Freeze the grouped dev/calibration/test split with a seed (managers only; once)."""

    project_roles = {"POST": permissions.MANAGERS}

    class InputSerializer(serializers.Serializer):
        seed = serializers.IntegerField(min_value=0, max_value=2**63 - 1)
        proportions = serializers.DictField(
            child=serializers.FloatField(min_value=0, max_value=1),
            default=lambda: dict(DEFAULT_PROPORTIONS),
            help_text="Keys dev, calibration, test; values sum to 1. Default 0.2/0.4/0.4.",
        )

        class Meta:
            ref_name = "PartitionInput"

    class OutputSerializer(serializers.Serializer):
        seed = serializers.IntegerField()
        proportions = serializers.DictField(child=serializers.FloatField())
        questions = serializers.DictField(child=serializers.IntegerField())
        components = serializers.DictField(child=serializers.IntegerField())

        class Meta:
            ref_name = "PartitionResult"

    @extend_schema(
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            400: ErrorSerializer,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(ErrorSerializer, description="The partition is already frozen."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Freeze the partition."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        body = written(
            lambda: partition_freeze(
                project=project, actor=request_actor(request), **given.validated_data
            ),
            lambda result: self.OutputSerializer(result).data,
        )
        return Response(body)
