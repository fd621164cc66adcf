"""Read a project's background jobs (managers only)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from labeling.exceptions import NotFound, PermissionDenied
from labeling.models import Job, Project
from labeling.permissions import MANAGERS, require_role


def job_list(*, project: Project, actor: Any) -> QuerySet[Job]:
    """Return the project's jobs, newest first.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project.
    """
    require_role(project=project, actor=actor, roles=MANAGERS, outsider=PermissionDenied)
    return Job.objects.filter(project=project).select_related("actor").order_by("-pk")


def job_get(*, project: Project, job_id: int, actor: Any) -> Job:
    """Return one job of the project.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project.
        NotFound: no job ``job_id`` in the project (names the field ``job_id``).
    """
    job = job_list(project=project, actor=actor).filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"job {job_id} not found in project {project.slug!r}", field="job_id")
    return job
