"""REST API of a project's labelling: its progress, its settings, starting it.

Scoping and errors as in :mod:`labeling.api.work`: the project comes from
``project_get_for_user`` (a non-member gets 404); a view's ``project_roles`` checks the role
before a body is validated (403 before 400).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling import permissions
from labeling.api.common import ErrorSerializer, project_and_role, written
from labeling.api.fields import StrictBooleanField
from labeling.api.jobs import JobSerializer, job_accepted
from labeling.api.serializers import LabellingSettingsSerializer
from labeling.api.work import BAD_INPUT, FORBIDDEN, NOT_FOUND
from labeling.models import ServingOrder
from labeling.selectors import project_get_for_user, project_progress
from labeling.services import project_labelling_configure, project_labelling_start
from labeling.services.jobs import labelling_start_in_background, labelling_start_job_start
from labeling.services.labelling_queue import MAX_LEASE_MINUTES, MAX_OVERLAP, MAX_SEED


class ProjectProgressApi(APIView):
    """Items by where they are in the flow (adjudicators and managers).

    The counts summarise other people's votes, so annotators never get them.
    """

    project_roles = {"GET": permissions.REVIEWERS}

    class OutputSerializer(serializers.Serializer):
        total = serializers.IntegerField()
        open_untouched = serializers.IntegerField()
        in_progress = serializers.IntegerField()
        awaiting_adjudication = serializers.IntegerField()
        resolved_consensus = serializers.IntegerField()
        resolved_adjudicated = serializers.IntegerField()
        unresolved = serializers.IntegerField()

        class Meta:
            ref_name = "ProgressCounts"

    @extend_schema(
        operation_id="progress_retrieve",
        responses={200: OutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """Return the progress counts."""
        project, _ = project_and_role(request, slug)
        return Response(self.OutputSerializer(project_progress(project=project)).data)


class ProjectSettingsApi(APIView):
    """Read (GET) or change (PATCH) the labelling settings (managers).

    Overlap, serving order and seed are fixed once labelling starts (409); lease length and
    self-adjudication may change at any time.
    """

    project_roles = {"GET": permissions.MANAGERS, "PATCH": permissions.MANAGERS}

    class InputSerializer(serializers.Serializer):
        overlap = serializers.IntegerField(
            required=False,
            min_value=1,
            max_value=MAX_OVERLAP,
            help_text="Independent annotations per item; fixed once labelling starts.",
        )
        lease_minutes = serializers.IntegerField(
            required=False, min_value=1, max_value=MAX_LEASE_MINUTES
        )
        serving_order = serializers.ChoiceField(choices=ServingOrder.choices, required=False)
        serving_seed = serializers.IntegerField(
            required=False,
            min_value=0,
            max_value=MAX_SEED,
            help_text="Required when serving_order is seeded_random (unless already set).",
        )
        allow_self_adjudication = StrictBooleanField(required=False)

        class Meta:
            ref_name = "LabellingSettingsInput"

    @extend_schema(
        operation_id="settings_retrieve",
        responses={200: LabellingSettingsSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """Return the settings."""
        project, _ = project_and_role(request, slug)
        return Response(LabellingSettingsSerializer(project).data)

    @extend_schema(
        operation_id="settings_update",
        request=InputSerializer,
        responses={
            200: LabellingSettingsSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(ErrorSerializer, description="Fixed since labelling started."),
        },
    )
    def patch(self, request: Request, slug: str) -> Response:
        """Change the given settings; omitted ones stay as they are."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        body = written(
            lambda: project_labelling_configure(
                project=project, actor=request.user, **given.validated_data
            ),
            lambda changed: LabellingSettingsSerializer(changed).data,
        )
        return Response(body)


class LabellingStartApi(APIView):
    """Start labelling (managers, once): freeze the policy, fix overlap and serving order."""

    @extend_schema(
        operation_id="labelling_start",
        request=None,
        responses={
            200: LabellingSettingsSerializer,
            202: OpenApiResponse(
                JobSerializer,
                description="More than CERTLABEL_JOB_START_ITEMS items: started by a "
                "background job; poll the job at its url (also in Location).",
            ),
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(ErrorSerializer, description="Labelling already started."),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Start labelling."""
        project = project_get_for_user(slug=slug, user=request.user)
        if labelling_start_in_background(project):
            return job_accepted(labelling_start_job_start(project=project, actor=request.user))
        body = written(
            lambda: project_labelling_start(project=project, actor=request.user),
            lambda started: LabellingSettingsSerializer(started).data,
        )
        return Response(body)
