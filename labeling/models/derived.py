"""Staleness marks of derived results: an insert-only change log (an outbox).

Every write that changes an input of a result computed in the background (the agreement
statistics, the calibration runs, the evaluator audits, the per-person reliability) inserts one
:class:`DerivedChange` row per affected kind, in its own transaction. A row is never updated;
the recomputation that covered it deletes it. So a result is current exactly when no row of its
(project, kind) is left, and nothing depends on a message reaching the broker. Inserts take no
lock on a shared row: many label writers never wait for each other here.
"""

from __future__ import annotations

from django.db import models

from labeling.models.catalog import Project


class DerivedKind(models.TextChoices):
    """The kinds of derived results, recomputed each as one unit per project."""

    AGREEMENT = "agreement", "agreement statistics"
    CALIBRATION = "calibration", "calibration runs"
    AUDIT = "audit", "evaluator audits"
    RELIABILITY = "reliability", "per-person reliability"


class DerivedChange(models.Model):
    """One change of an input of a project's derived result of one kind (insert-only).

    The id orders the changes: the generation of a (project, kind) is the largest id written
    for it, and a recomputation records the largest id it covered.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=DerivedKind.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["project", "kind", "id"], name="derived_change_pk_idx")]

    def __str__(self) -> str:
        return f"{self.kind} change {self.pk} of project {self.project_id}"
