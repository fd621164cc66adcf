"""The recomputation state of a project's derived result of one kind."""

from __future__ import annotations

from django.db import models

from labeling.models import DerivedKind, LeasedWork, Project


class DerivedResultState(LeasedWork):
    """Where the background recomputation of one (project, kind) stands: one row each.

    The row is changed only by compare-and-set updates (no row lock is held across a
    computation): ``enqueued_at`` is set by the one enqueue that found it empty and cleared by
    the task that claims the lease, so however many changes arrive at most one task waits; the
    lease (``labeling.engine``) is held by the one computation that runs.
    ``covered_generation`` is the largest :class:`~labeling.models.DerivedChange` id the last
    computation covered (0 before the first), ``computed_at`` when it committed. The inputs
    changed since are the change rows still present for the (project, kind).
    ``duration_seconds`` is how long that computation took (the spacing of the next one grows
    with it, ``certification.services.derived``). While a task waits to start,
    ``enqueued_at`` is the time it is due (sent with a countdown: the time of sending plus the
    countdown), so a message held for the spacing is never judged lost before it is due.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=DerivedKind.choices)
    covered_generation = models.BigIntegerField(default=0)
    computed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    duration_seconds = models.FloatField(
        null=True, blank=True, help_text="How long the last computation took (seconds)."
    )

    class Meta:
        ordering = ["project", "kind"]
        constraints = [
            models.UniqueConstraint(fields=["project", "kind"], name="derived_state_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} state of project {self.project_id}"
