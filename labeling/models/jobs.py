"""Background jobs: long work (a large import, starting labelling on a large project).

A job is created by the request (status ``pending``), run by a Celery worker on the ``builds``
queue (``running``, leased by that worker: ``labeling.engine``) and ends ``done`` (with ``result``)
or ``failed`` (with ``error``). Progress is ``progress_done`` of ``progress_total`` units (bytes
read for an import, items queued for a start).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from labeling.models.catalog import Project
from labeling.models.lease import LeasedWork


class JobKind(models.TextChoices):
    """What a job does."""

    WORKLOAD_IMPORT = "workload_import", "workload import"
    LABELLING_START = "labelling_start", "start labelling"


class JobStatus(models.TextChoices):
    """Where a job stands."""

    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


JOB_FINISHED_STATUSES = (JobStatus.DONE, JobStatus.FAILED)


class Job(LeasedWork):
    """One piece of background work of a project, its progress and its outcome."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=32, choices=JobKind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who asked for the job; null from the command line.",
    )
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.PENDING)
    payload = models.JSONField(default=dict, blank=True, help_text="The job's input.")
    progress_done = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(default=0)
    message = models.CharField(max_length=500, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(
        null=True, blank=True, help_text="detail, code, and field or errors when it failed."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="job_status_beat_idx")]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=JobStatus.values), name="job_status"),
            models.CheckConstraint(condition=Q(kind__in=JobKind.values), name="job_kind"),
            models.CheckConstraint(
                condition=Q(progress_done__gte=0) & Q(progress_total__gte=0),
                name="job_progress_non_negative",
            ),
            models.CheckConstraint(
                condition=~Q(status__in=JOB_FINISHED_STATUSES) | Q(finished_at__isnull=False),
                name="job_finished_has_time",
            ),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=True) | Q(finished_at__gte=F("created_at")),
                name="job_finish_after_create",
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} · {self.kind} · {self.status}"

    @property
    def finished(self) -> bool:
        """Whether the job is done or failed."""
        return self.status in JOB_FINISHED_STATUSES

    @property
    def percent(self) -> int:
        """Progress as a whole percentage: 100 once done, at most 99 before.

        An import has read its whole file before it has written the last chunk: the bar
        stays below 100 until the job is done.
        """
        if self.status == JobStatus.DONE:
            return 100
        if self.progress_total <= 0:
            return 0
        return min(99, self.progress_done * 100 // self.progress_total)
