"""Recovery of background work whose worker died or whose task message was lost.

:func:`stalled_work_recover` (the body of the beat task ``stalled_work_recover_task``, every
``CERTLABEL_RECOVERY_SECONDS`` on the ``housekeeping`` queue) applies one rule
(:func:`~certification.services.liveness.work_lapsed`) to calibration runs and release builds:

- running with no heartbeat for ``CERTLABEL_WORK_LAPSE_SECONDS`` (its worker was killed, or
  its pool child): set back to pending and its task sent again, so it is computed again from
  scratch on the same inputs; after ``CERTLABEL_WORK_MAX_ATTEMPTS`` starts it is failed closed;
- pending that long after its task was sent (the message was lost, e.g. Redis restarted): its
  task is sent again.

It also removes the working directories that killed builds left behind
(:func:`~certification.services.releases.build.build_workdirs_clean`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Model, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from certification.models import CalibrationRun, ReleaseBuild, RunStatus
from certification.services.calibration import _enqueue_execute
from certification.services.liveness import lapse, max_attempts
from certification.services.releases.build import build_workdirs_clean
from certification.services.releases.freeze import _enqueue_build

logger = logging.getLogger(__name__)


@dataclass
class RecoveryReport:
    """What one recovery pass did, by id."""

    runs_requeued: list[int] = field(default_factory=list)
    runs_failed: list[int] = field(default_factory=list)
    builds_requeued: list[int] = field(default_factory=list)
    builds_failed: list[int] = field(default_factory=list)
    workdirs_removed: list[int] = field(default_factory=list)

    def as_json(self) -> dict[str, list[int]]:
        """The report as plain data (the task's result)."""
        return {
            "runs_requeued": self.runs_requeued,
            "runs_failed": self.runs_failed,
            "builds_requeued": self.builds_requeued,
            "builds_failed": self.builds_failed,
            "workdirs_removed": self.workdirs_removed,
        }


def _lapsed(model: type[Model], before: datetime) -> QuerySet[Any]:
    """Pending and running rows of ``model`` with no sign of life since ``before``."""
    rows: QuerySet[Any] = model._default_manager.annotate(
        alive_at=Coalesce("heartbeat_at", "started_at"),
        sent_at=Coalesce("enqueued_at", "created_at"),
    ).filter(
        Q(status=RunStatus.RUNNING, alive_at__lt=before)
        | Q(status=RunStatus.PENDING, sent_at__lt=before)
    )
    return rows.order_by("pk")


def _recover(
    model: type[Model], *, now: datetime, enqueue: Any, kind: str
) -> tuple[list[int], list[int]]:
    """Re-enqueue or fail the lapsed rows of ``model``; return (requeued ids, failed ids)."""
    requeued: list[int] = []
    failed: list[int] = []
    cap = max_attempts()
    manager = model._default_manager
    for row in _lapsed(model, now - lapse()):
        # Each change is a compare-and-set on the status and attempt seen, so a worker that
        # wrote a heartbeat or finished meanwhile wins, and two recoveries act once.
        same = manager.filter(pk=row.pk, status=row.status, attempts=row.attempts)
        if row.status == RunStatus.RUNNING and row.attempts >= cap:
            error = (
                f"failed: its worker stopped {row.attempts} times (no heartbeat within "
                f"{lapse().total_seconds():g} s); not started again"
            )
            if same.update(status=RunStatus.FAILED, error=error, finished_at=now):
                failed.append(row.pk)
                logger.error(f"{kind}.gave_up", extra={"id": row.pk, "attempts": row.attempts})
            continue
        with transaction.atomic():
            if same.update(status=RunStatus.PENDING, enqueued_at=now, heartbeat_at=None):
                enqueue(row.pk)
                requeued.append(row.pk)
                logger.warning(
                    f"{kind}.requeued",
                    extra={"id": row.pk, "was": row.status, "attempts": row.attempts},
                )
    return requeued, failed


def stalled_work_recover(*, now: datetime | None = None) -> RecoveryReport:
    """Re-run the calibration runs and release builds whose worker died or task was lost.

    Args:
        now: the time to judge lapses by (default: now).

    Returns:
        What was re-enqueued, failed closed and cleaned up.

    Concurrency: not atomic as a whole; each row is changed with its own compare-and-set
    (status and attempts as read) and its task sent after that change commits. Running this
    twice at once re-enqueues each row once. Re-enqueued work is idempotent: a run or build
    starts from scratch from its stored inputs, and a build that is running refuses a second
    builder (``Conflict``).
    """
    now = now or timezone.now()
    report = RecoveryReport()
    report.runs_requeued, report.runs_failed = _recover(
        CalibrationRun, now=now, enqueue=_enqueue_execute, kind="calibration_run"
    )
    report.builds_requeued, report.builds_failed = _recover(
        ReleaseBuild, now=now, enqueue=_enqueue_build, kind="release_build"
    )
    # Last: the folders of the builds just set back to pending belong to no live attempt now.
    report.workdirs_removed = build_workdirs_clean()
    return report
