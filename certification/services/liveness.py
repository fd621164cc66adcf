"""Whether background work is alive: heartbeats written while it runs, and the lapse rule.

A running calibration run or release build writes ``heartbeat_at`` every
``CERTLABEL_HEARTBEAT_SECONDS`` from a small daemon thread (:class:`Heartbeat`), so even one long
step of the computation keeps it alive. One rule says when its worker is gone
(:func:`work_lapsed`): running with no heartbeat (nor start) for ``CERTLABEL_WORK_LAPSE_SECONDS``,
or pending that long after its task was sent. The recovery service
(``certification.services.recovery``) and the manual restarts ("Run now", Rebuild) read it.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Model
from django.utils import timezone

logger = logging.getLogger(__name__)

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


class Heartbeat:
    """Write ``heartbeat_at`` of one row every few seconds while a block runs.

    A daemon thread with its own database connection (closed when it stops) updates the row
    only while it is still ``running`` with the same ``attempts`` (a row recovery took back is
    left alone). A failed write is logged and retried at the next beat: a heartbeat never fails
    the work. Use as a context manager around the work::

        with Heartbeat(CalibrationRun, run.pk, attempts=run.attempts):
            compute()
    """

    def __init__(self, model: type[Model], pk: int, *, attempts: int) -> None:
        """Prepare the heartbeat of row ``pk`` of ``model`` claimed as attempt ``attempts``."""
        self.model, self.pk, self.attempts = model, pk, attempts
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"heartbeat-{model.__name__}-{pk}", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        """Start beating."""
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop beating and wait for the thread to close its connection."""
        self._stop.set()
        self._thread.join(timeout=max(5.0, heartbeat_interval()))

    def beat(self) -> bool:
        """Write one heartbeat now; return whether the row was still this attempt's."""
        rows = self.model._default_manager.filter(
            pk=self.pk, status=RUNNING, attempts=self.attempts
        ).update(heartbeat_at=timezone.now())
        return rows == 1

    def _beat(self) -> None:
        try:
            while not self._stop.wait(heartbeat_interval()):
                try:
                    if not self.beat():
                        return  # finished, failed, or taken back by recovery
                except DatabaseError:
                    logger.warning(
                        "heartbeat.failed", extra={"model": self.model.__name__, "pk": self.pk}
                    )
        finally:
            connection.close()  # this thread's own connection
