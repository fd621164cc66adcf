"""REST API of background jobs: a project's jobs, one job's progress and outcome (managers)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling import permissions
from labeling.api.common import ErrorSerializer, paginated, project_and_role, request_actor
from labeling.api.lease import LeasedWorkSerializer
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.models import Job
from labeling.selectors.jobs import job_get, job_list


class JobSerializer(LeasedWorkSerializer):
    """A background job: what it does, where it stands, and its result or error."""

    id = serializers.IntegerField(source="pk")
    url = serializers.SerializerMethodField()
    kind = serializers.CharField()
    status = serializers.CharField(help_text="pending, running, done or failed.")
    progress_done = serializers.IntegerField()
    progress_total = serializers.IntegerField(
        help_text="Units expected: bytes of an import, items of a labelling start (0: unknown)."
    )
    percent = serializers.IntegerField()
    message = serializers.CharField()
    result = serializers.JSONField(
        allow_null=True,
        help_text="When done: an import's batch, already_imported, records, created, notes; "
        "a start's labelling_started_at and items.",
    )
    error = serializers.JSONField(
        allow_null=True,
        help_text="When failed: detail, code, and field or errors (location, field, reason).",
    )
    actor = serializers.CharField(source="actor.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "Job"

    def get_url(self, job: Job) -> str:
        """The job's API resource."""
        return job_url(job)


def job_url(job: Job) -> str:
    """Return the path of a job's API resource."""
    return reverse("api-job-detail", kwargs={"slug": job.project.slug, "job_id": job.pk})


def job_accepted(job: Job) -> Response:
    """Answer 202 Accepted with the job (fresh from the database) and its URL in Location."""
    job.refresh_from_db()
    url = job_url(job)
    return Response(
        JobSerializer(job).data, status=status.HTTP_202_ACCEPTED, headers={"Location": url}
    )


class JobListApi(APIView):
    """The project's background jobs, newest first (managers)."""

    project_roles = {"GET": permissions.MANAGERS}
    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="job_list",
        responses={200: JobSerializer(many=True), 403: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the jobs."""
        project, _ = project_and_role(request, slug)
        return paginated(
            request, job_list(project=project, actor=request_actor(request)), JobSerializer
        )


class JobDetailApi(APIView):
    """One background job: poll it until ``status`` is done or failed (managers)."""

    project_roles = {"GET": permissions.MANAGERS}

    @extend_schema(
        operation_id="job_detail",
        responses={
            200: JobSerializer,
            403: ErrorSerializer,
            404: OpenApiResponse(ErrorSerializer, description="No such job in the project."),
        },
    )
    def get(self, request: Request, slug: str, job_id: int) -> Response:
        """Return the job."""
        project, _ = project_and_role(request, slug)
        job: Any = job_get(project=project, job_id=job_id, actor=request_actor(request))
        return Response(JobSerializer(job).data)
