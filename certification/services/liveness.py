"""Whether background work is alive: heartbeats written while it runs, and the lapse rule.

A running calibration run or release build writes ``heartbeat_at`` every
``CERTLABEL_HEARTBEAT_SECONDS`` from a small daemon thread (:class:`Heartbeat`, a
:class:`labeling.heartbeat.PeriodicWrite`), so even one long step of the computation keeps it
alive. One rule says when its worker is gone
(:func:`work_lapsed`): running with no heartbeat (nor start) for ``CERTLABEL_WORK_LAPSE_SECONDS``,
or pending that long after its task was sent. The recovery service
(``certification.services.recovery``) and the manual restarts ("Run now", Rebuild) read it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Model
from django.utils import timezone

from labeling.heartbeat import PeriodicWrite

PENDING, RUNNING = "pending", "running"


def lapse() -> timedelta:
    """How long running work may go without a heartbeat, or pending work without a worker."""
    return timedelta(seconds=float(settings.CERTLABEL_WORK_LAPSE_SECONDS))


def heartbeat_interval() -> float:
    """Seconds between two heartbeats of running work."""
    return float(settings.CERTLABEL_HEARTBEAT_SECONDS)


def max_attempts() -> int:
    """How many times a worker may start a run or build before it is failed closed."""
    return int(settings.CERTLABEL_WORK_MAX_ATTEMPTS)


def last_sign_of_life(work: Any) -> datetime | None:
    """When ``work`` (a run or build) last showed it was alive, by its status."""
    if work.status == RUNNING:
        return work.heartbeat_at or work.started_at
    if work.status == PENDING:
        return work.enqueued_at or work.created_at
    return None


def work_lapsed(work: Any, *, now: datetime | None = None) -> bool:
    """Whether a pending or running run or build lost its worker (or its task message).

    Running: no heartbeat (or, before the first one, no start) for :func:`lapse`. Pending: its
    task was sent longer than :func:`lapse` ago and no worker started it. Done and failed work
    never lapses.
    """
    seen = last_sign_of_life(work)
    if seen is None:
        return False
    return seen < (now or timezone.now()) - lapse()


class Heartbeat(PeriodicWrite):
    """Write ``heartbeat_at`` of one row every few seconds while a block runs.

    A :class:`labeling.heartbeat.PeriodicWrite` (a daemon thread with its own connection) that
    updates the row only while it is still ``running`` with the same ``attempts`` (a row
    recovery took back is left alone, and the beating stops). Use as a context manager around
    the work::

        with Heartbeat(CalibrationRun, run.pk, attempts=run.attempts):
            compute()
    """

    def __init__(self, model: type[Model], pk: int, *, attempts: int) -> None:
        """Prepare the heartbeat of row ``pk`` of ``model`` claimed as attempt ``attempts``."""
        self.model, self.pk, self.attempts = model, pk, attempts
        super().__init__(self.beat, interval=heartbeat_interval(), name=f"{model.__name__}-{pk}")

    def beat(self) -> bool:
        """Write one heartbeat now; return whether the row was still this attempt's."""
        rows = self.model._default_manager.filter(
            pk=self.pk, status=RUNNING, attempts=self.attempts
        ).update(heartbeat_at=timezone.now())
        return rows == 1
