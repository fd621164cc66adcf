"""The agreement report: a project's current inter-annotator agreement statistics."""

from __future__ import annotations

from typing import cast

from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact

from labeling.models import Project


class AgreementReport(models.Model):
    """The current inter-annotator agreement statistics of one project (one row per project).

    Recomputed from the project's current votes by ``agreement_recompute`` after every
    resolution; ``input_sha256`` is the sha256 of the canonical JSON of those votes (and of the
    statistics' version), so a recomputation over unchanged votes changes nothing.

    ``answer`` and ``claim`` hold one level's results each, as JSON (see
    ``certification.services.agreement.level_to_json``): counts, the raters by id
    (``user:<id>`` for an account, ``prior:<pseudonym>`` for an imported annotator), alpha,
    Fleiss' kappa, percent agreement and Cohen's kappa per rater pair; an undefined statistic is
    ``{"value": null, "reason": "..."}``. Rater ids identify people: only managers see them.

    Votes made under different label policy versions are never pooled: ``versions`` holds each
    version's ``answer`` and ``claim`` apart (oldest first); the top-level ``answer`` and
    ``claim`` are those of ``policy_version``, the newest version with votes.
    """

    project = models.OneToOneField(
        Project, on_delete=models.CASCADE, related_name="agreement_report"
    )
    computed_at = models.DateTimeField()
    input_sha256 = models.CharField(max_length=64)
    answer = models.JSONField(default=dict)
    claim = models.JSONField(default=dict)
    policy_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The policy version of answer and claim (newest voted)."
    )
    versions = models.JSONField(
        default=list,
        blank=True,
        help_text="Each policy version's figures apart: [{policy_version, answer, claim}].",
    )

    class Meta:
        ordering = ["project"]
        constraints = [
            models.CheckConstraint(
                condition=cast(Q, Q(input_sha256="") | Exact(Length("input_sha256"), 64)),
                name="agreement_report_sha256_hex64",
            ),
        ]

    def __str__(self) -> str:
        return f"agreement of project {self.project_id}"
