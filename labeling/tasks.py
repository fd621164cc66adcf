"""Celery tasks of the labelling side: thin wrappers around services."""

from __future__ import annotations

import logging

from celery import shared_task

from labeling.models import Project
from labeling.services import assignments_release_expired, source_versions_verify

logger = logging.getLogger(__name__)


# Its result is kept (the one task whose result is read: tests/labeling/test_celery_worker.py).
@shared_task(soft_time_limit=600, time_limit=660, ignore_result=False)
def source_versions_verify_task(project_id: int) -> dict[str, object]:
    """Verify the pins of a project's source versions; returns the report as JSON primitives.

    A mismatch (a text changed behind the application's back) is logged as an error by the
    service. Beat runs it for every project once a day, through
    :func:`source_versions_verify_all_task`.
    """
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        logger.warning("source_versions_verify.missing_project", extra={"project_id": project_id})
        return {"checked": 0, "mismatched": []}
    report = source_versions_verify(project=project)
    return {"checked": report.checked, "mismatched": report.mismatched}


# Scheduled daily by beat (CELERY_BEAT_SCHEDULE). One task per project, so each project's check
# has the whole time limit of its own and a large project does not delay the others.
@shared_task(soft_time_limit=50, time_limit=55)
def source_versions_verify_all_task() -> list[int]:
    """Queue :func:`source_versions_verify_task` for every project; returns the project ids."""
    project_ids = list(Project.objects.order_by("pk").values_list("pk", flat=True))
    for project_id in project_ids:
        source_versions_verify_task.delay(project_id)
    return project_ids


# Scheduled every minute by beat (CELERY_BEAT_SCHEDULE) on the housekeeping queue, which no
# recomputation or build shares; ``expires`` (the period) drops a run only once the next is due.
@shared_task(soft_time_limit=50, time_limit=55)
def assignments_release_expired_task() -> int:
    """Release every lease that ran out (all projects); returns how many were released."""
    return assignments_release_expired()
