"""The columns every piece of background work shares: its lease and its attempts.

Background jobs, calibration runs, release builds and the recomputation slot of each derived
result are leased by one worker at a time (``labeling.engine``): ``lease_owner`` names the
holder, ``heartbeat_at`` is refreshed every few seconds while it works, and a lease whose
heartbeat lapsed is taken over by the next claim or the recovery pass.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


def lapse() -> timedelta:
    """How long a lease may go without a heartbeat, or a sent task without a claim."""
    return timedelta(seconds=float(settings.CERTLABEL_WORK_LAPSE_SECONDS))


class LeasedWork(models.Model):
    """Abstract: the lease, heartbeat and attempt count of one piece of background work.

    ``enqueued_at`` is when its task was last sent (a pending piece not started within the lapse
    lost its message); ``started_at`` when its first attempt began (kept across attempts);
    ``attempts`` how many times a worker claimed it.
    """

    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Refreshed while a worker holds the lease."
    )
    lease_owner = models.CharField(
        max_length=200, blank=True, default="", help_text="host:pid:task of the lease holder."
    )
    attempts = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True

    @property
    def worker_lost(self) -> bool:
        """Whether a worker holds the lease but its heartbeat lapsed (it is being resumed)."""
        if not self.lease_owner:
            return False
        return self.heartbeat_at is None or self.heartbeat_at < timezone.now() - lapse()


class PeriodicRun(models.Model):
    """When a periodic task last acted: one row per task name.

    Every beat may send a periodic task; the task acts only when it wins a compare-and-set on
    ``last_at`` (older than most of a period), so two beats running at once act once per period.
    """

    name = models.CharField(max_length=100, primary_key=True)
    last_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.last_at:%Y-%m-%d %H:%M:%S}"
