"""Celery tasks of certification: thin wrappers around services."""

from __future__ import annotations

import logging
from typing import Any, TypedDict

from celery import shared_task
from django.db import OperationalError

from certification.exceptions import RunNotFound
from certification.services.audit import audit_reports_refresh
from certification.services.calibration import (
    CALIBRATION_RUN,
    calibration_run_execute,
    calibration_run_fail,
    calibration_runs_refresh,
)
from certification.services.derived import DERIVED, derived_recompute
from certification.services.drift import DRIFT_WATCH
from certification.services.releases import release_build_execute, release_build_fail
from certification.services.releases.build import RELEASE_BUILD
from certification.services.releases.freeze import BUILD_TIME_LIMIT
from labeling import dispatch, engine
from labeling.exceptions import Conflict, NotFound
from labeling.models import DerivedKind

logger = logging.getLogger(__name__)


class RetryOptions(TypedDict):
    """The retry options of ``shared_task``, typed so that ``**`` keeps them checked."""

    autoretry_for: tuple[type[BaseException], ...]
    retry_backoff: bool
    retry_backoff_max: int
    retry_jitter: bool


# Every task retries a transient database error only (a lock timeout, a dropped connection,
# SQLite's "database is locked"), with exponential backoff and a cap; the services are
# idempotent. No jitter: the retries come 1, 2, 4, 8, 16 s apart, so five of them span a database
# restart of up to 31 s (with Celery's full jitter each wait is drawn from 0 to that, and five
# retries spent less than 5 s about one time in fifty, leaving the work to the engine's recovery
# pass, a lapse later).
RETRY_ON_DB_ERROR: RetryOptions = {
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "retry_jitter": False,
}


@shared_task(bind=True, soft_time_limit=600, time_limit=660, max_retries=5, **RETRY_ON_DB_ERROR)
def calibration_run_execute_task(self: Any, run_id: int) -> dict[str, object] | None:
    """Compute a calibration run; returns its id, status and outcome, or None when it is gone.

    The task boundary: a transient database error is retried (the service is idempotent);
    any other unexpected error is logged and fails the run closed, so that no run stays
    "running" for ever and no error reaches the code that resolved the labels.
    """
    try:
        run = calibration_run_execute(run_id=run_id, task_id=self.request.id)
    except RunNotFound:
        logger.warning("calibration_run_execute.missing_run", extra={"run_id": run_id})
        return None
    except OperationalError:
        raise
    except Exception as exc:  # the task boundary: record the failure on the run
        logger.exception("calibration_run_execute.crashed", extra={"run_id": run_id})
        run = calibration_run_fail(
            run_id=run_id,
            error=f"{type(exc).__name__}: {exc}",
            lease_owner=engine.owner(self.request.id),
        )
    return {"run_id": run.pk, "status": run.status, "outcome": run.outcome}


@shared_task(
    bind=True,
    soft_time_limit=BUILD_TIME_LIMIT - 60,
    time_limit=BUILD_TIME_LIMIT,
    max_retries=3,
    **RETRY_ON_DB_ERROR,
)
def release_build_task(self: Any, build_id: int) -> dict[str, object] | None:
    """Build the files of a release (or rebuild and compare); returns the manifest's sha256.

    A build that raises is marked failed with the error's text, and the error re-raised.
    """
    try:
        build = release_build_execute(build_id=build_id, task_id=self.request.id)
    except NotFound:
        logger.warning("release_build.missing", extra={"build_id": build_id})
        return None
    except Conflict:
        # Another worker (a redelivered task, or export_release) holds its lease right now.
        logger.info("release_build.already_running", extra={"build_id": build_id})
        return None
    except OperationalError:
        raise
    except Exception as exc:
        release_build_fail(
            build_id=build_id,
            error=f"{type(exc).__name__}: {exc}",
            lease_owner=engine.owner(self.request.id),
        )
        raise
    return {
        "build_id": build.pk,
        "manifest_sha256": build.manifest_sha256,
        "matches": build.matches,
    }


# A web process imports this module to send a task: the services that import the statistics
# (NumPy, SciPy) at their top are imported where the worker runs them.
def _compute_agreement(project_id: int) -> object:
    from certification.services.agreement import agreement_recompute

    return agreement_recompute(project_id=project_id)


def _compute_calibration(project_id: int) -> object:
    return calibration_runs_refresh(project_id=project_id)


def _compute_audit(project_id: int) -> object:
    return audit_reports_refresh(project_id=project_id)


def _compute_reliability(project_id: int) -> object:
    from certification.services.reliability import reliability_recompute

    return reliability_recompute(project_id=project_id)


# The service recomputing each kind of derived result (looked up at call time).
DERIVED_COMPUTE = {
    DerivedKind.AGREEMENT: _compute_agreement,
    DerivedKind.CALIBRATION: _compute_calibration,
    DerivedKind.AUDIT: _compute_audit,
    DerivedKind.RELIABILITY: _compute_reliability,
}


@shared_task(bind=True, soft_time_limit=300, time_limit=360, max_retries=5, **RETRY_ON_DB_ERROR)
def derived_recompute_task(self: Any, project_id: int, kind: str) -> str:
    """Run one coalesced recomputation of a project's derived result of one kind.

    See :mod:`certification.services.derived`. Returns the outcome (``done``, ``failed``,
    ``busy``: another one of the same (project, kind) was running and schedules the next,
    ``missing``: the project is gone).
    """
    compute = DERIVED_COMPUTE[DerivedKind(kind)]
    return derived_recompute(
        project_id=project_id, kind=kind, compute=compute, task_id=self.request.id
    )


@shared_task(bind=True, soft_time_limit=300, time_limit=360, max_retries=5, **RETRY_ON_DB_ERROR)
def drift_watch_fold_task(self: Any, watch_id: int) -> str:
    """Fold a run's recorded scores into its drift watch (``certification.services.drift_fold``).

    Returns the outcome (``folded``, ``current``, ``busy``, ``unavailable``, ``missing``).
    """
    from certification.services.drift_fold import drift_watch_fold  # loads NumPy: worker only

    return drift_watch_fold(watch_id=watch_id, task_id=self.request.id)


# The tasks the services send, by the names the services define (labeling.dispatch);
# ``CertificationConfig.ready`` imports this module, so every process has them.
dispatch.task_register(CALIBRATION_RUN, calibration_run_execute_task)
dispatch.task_register(RELEASE_BUILD, release_build_task)
dispatch.task_register(DRIFT_WATCH, drift_watch_fold_task)
dispatch.task_register(DERIVED, derived_recompute_task)
