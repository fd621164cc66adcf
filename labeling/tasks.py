"""Celery tasks of the labelling side: thin wrappers around services."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings

from labeling import dispatch, engine
from labeling.models import Project
from labeling.services import assignments_release_expired, source_versions_verify
from labeling.services.jobs import JOB, job_execute
from labeling.services.sso import sso_enabled, sso_recheck_due

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
    """Queue :func:`source_versions_verify_task` for every project; returns the project ids.

    Acts once a day however many beats send it.
    """
    if not engine.periodic_due("source-versions-verify", 24 * 60 * 60.0):
        return []
    project_ids = list(Project.objects.order_by("pk").values_list("pk", flat=True))
    for project_id in project_ids:
        source_versions_verify_task.delay(project_id)
    return project_ids


# Scheduled every minute by beat (CELERY_BEAT_SCHEDULE) on the housekeeping queue, which no
# recomputation or build shares; ``expires`` (the period) drops a run only once the next is due.
@shared_task(soft_time_limit=50, time_limit=55)
def assignments_release_expired_task() -> int:
    """Release every lease that ran out (all projects); returns how many were released."""
    if not engine.periodic_due("assignments-release-expired", 60.0):
        return 0
    return assignments_release_expired()


# Scheduled every minute by beat (CELERY_BEAT_SCHEDULE); each identity is checked once per
# CERTLABEL_OIDC_RECHECK_SECONDS. Nothing to do while single sign-on is off.
@shared_task(soft_time_limit=50, time_limit=55)
def sso_recheck_task() -> dict[str, int]:
    """Recheck the single sign-on accounts that are due; returns the count per outcome."""
    if not sso_enabled() or not engine.periodic_due("sso-recheck", 60.0):
        return {}
    return sso_recheck_due()


# Long work (large imports, starting labelling on a large project) runs on the ``builds`` queue
# (CELERY_TASK_ROUTES); the job's lease (labeling.engine) makes a second delivery harmless.
@shared_task(
    bind=True,
    ignore_result=True,  # the outcome is in the Job row; no result backend round trip
    soft_time_limit=3600,
    time_limit=3660,
)
def job_run_task(self: Any, job_id: int) -> str | None:
    """Run a background job (``labeling.services.jobs.job_execute``); returns its status."""
    job = job_execute(job_id=job_id, task_id=self.request.id)
    return job.status if job is not None else None


# The task ``labeling.services.jobs.job_send`` sends, by its name (labeling.dispatch).
dispatch.task_register(JOB, job_run_task)


# Scheduled every CERTLABEL_WORK_RECOVER_SECONDS by beat (CELERY_BEAT_SCHEDULE), on the
# housekeeping queue; on the embedded default, by the web process's background thread.
@shared_task(soft_time_limit=50, time_limit=55, ignore_result=True)
def work_recover_task() -> dict[str, dict[str, list[int]]]:
    """One recovery pass of the background engine (``labeling.engine.recover``).

    Acts once per period however many beats send it.
    """
    if not engine.periodic_due("work-recover", float(settings.CERTLABEL_WORK_RECOVER_SECONDS)):
        return {"resent": {}, "failed": {}}
    return engine.recover().as_json()
