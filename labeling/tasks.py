"""Celery tasks of the labelling side: thin wrappers around services (STYLE.md C8)."""

from __future__ import annotations

import logging

from celery import shared_task

from labeling.models import Project
from labeling.services import assignments_release_expired, source_versions_verify

logger = logging.getLogger(__name__)


@shared_task(soft_time_limit=600, time_limit=660)
def source_versions_verify_task(project_id: int) -> dict[str, object]:
    """Verify the pins of a project's source versions; returns the report as JSON primitives."""
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        logger.warning("source_versions_verify.missing_project", extra={"project_id": project_id})
        return {"checked": 0, "mismatched": []}
    report = source_versions_verify(project=project)
    return {"checked": report.checked, "mismatched": report.mismatched}


# Scheduled every minute by beat (CELERY_BEAT_SCHEDULE); ``expires`` there drops runs that
# queued up while no worker was free, so a backlog does not run the release many times over.
@shared_task(soft_time_limit=50, time_limit=55)
def assignments_release_expired_task() -> int:
    """Release every lease that ran out (all projects); returns how many were released."""
    return assignments_release_expired()
