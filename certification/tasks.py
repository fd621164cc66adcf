"""Celery tasks of certification: thin wrappers around services (STYLE.md C8)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import OperationalError

from certification.services import agreement_recompute
from labeling.exceptions import NotFound

logger = logging.getLogger(__name__)


# Retries only a transient database error (a lock timeout, a dropped connection, SQLite's
# "database is locked"), with exponential backoff and a cap; the service is idempotent.
@shared_task(
    soft_time_limit=300,
    time_limit=360,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    retry_backoff_max=300,
    max_retries=5,
)
def agreement_recompute_task(project_id: int) -> dict[str, object] | None:
    """Recompute a project's agreement report; returns its id and input hash, or None.

    A project deleted before the task ran is logged and skipped.
    """
    try:
        report = agreement_recompute(project_id=project_id)
    except NotFound:
        logger.warning("agreement_recompute.missing_project", extra={"project_id": project_id})
        return None
    return {"report_id": report.pk, "input_sha256": report.input_sha256}
