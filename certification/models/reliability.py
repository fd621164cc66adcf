"""The reliability report: a project's per-annotator reliability figures and model estimates."""

from __future__ import annotations

from typing import cast

from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact

from labeling.models import Project


class ReliabilityReport(models.Model):
    """The current per-person reliability figures of one project (one row per project).

    Recomputed in the background by ``reliability_recompute`` from the project's votes, its
    current resolutions and its gold references; ``input_sha256`` is the sha256 of the
    canonical JSON of those inputs (and of the statistics' version), so a recomputation over
    unchanged inputs writes nothing. ``result`` holds the figures as JSON (see
    ``certification.services.reliability``): per person and label level, accuracy against
    resolutions and on gold items (apart), confusion matrices, kappa, dispute and
    adjudication rates, near-silence, flags; Krippendorff's alpha with and without the flagged
    people; the Dawid–Skene estimates. Rater ids identify people: only managers see them.
    """

    project = models.OneToOneField(
        Project, on_delete=models.CASCADE, related_name="reliability_report"
    )
    computed_at = models.DateTimeField()
    input_sha256 = models.CharField(max_length=64)
    policy_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The policy version whose votes were used (newest voted)."
    )
    result = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project"]
        constraints = [
            models.CheckConstraint(
                condition=cast(Q, Q(input_sha256="") | Exact(Length("input_sha256"), 64)),
                name="reliability_report_sha256_hex64",
            ),
        ]

    def __str__(self) -> str:
        return f"reliability of project {self.project_id}"
