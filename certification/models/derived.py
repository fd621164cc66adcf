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
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=DerivedKind.choices)
    covered_generation = models.BigIntegerField(default=0)
    computed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["project", "kind"]
        constraints = [
            models.UniqueConstraint(fields=["project", "kind"], name="derived_state_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} state of project {self.project_id}"
