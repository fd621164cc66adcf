"""Evaluator audits: an evaluator version against the resolved human answer labels.

An audit sample is a seeded stratified draw of the evaluator's items, labelled blind.
"""

from __future__ import annotations

from typing import cast

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact

from labeling.models import Project


class FlagWhen(models.TextChoices):
    """For a score-only evaluator: the evaluator flags (says "positive") iff ``score <op> t``."""

    LT = "<", "score < threshold"
    LE = "<=", "score <= threshold"
    GT = ">", "score > threshold"
    GE = ">=", "score >= threshold"


class AuditReport(models.Model):
    """The audit of one evaluator version against the resolved human answer labels.

    The row holds the declaration (which labels are positive on each side, and for a score-only
    evaluator the threshold that turns a score into a flag) and the latest result. The result
    is recomputed by ``audit_report_recompute`` after every resolution; ``input_sha256`` is the
    sha256 of the canonical JSON of the declaration, the inputs and the statistics' version, so
    a recomputation over unchanged inputs changes nothing.

    ``result`` (JSON, see ``certification.services.audit``): confusion matrix with the
    unavailable row and unresolved column, accuracy, kappa, sensitivity, specificity, PPV, NPV
    with exact intervals, McNemar, per-slice metrics, the three error-rate estimates and the
    disagreement list. Evaluator labels are in it: annotators never see it.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="audit_reports")
    evaluator = models.OneToOneField(
        "labeling.Evaluator", on_delete=models.CASCADE, related_name="audit_report"
    )
    evaluator_positive = models.JSONField(
        default=list, help_text="Evaluator labels counted positive (error / not supported)."
    )
    human_positive = models.JSONField(
        default=list, help_text="Resolved human answer labels counted positive."
    )
    score_threshold = models.FloatField(
        null=True,
        blank=True,
        help_text="Set for a score-only evaluator: its score becomes a flag at this threshold.",
    )
    flag_when = models.CharField(max_length=2, choices=FlagWhen.choices, default=FlagWhen.LT)
    confidence = models.DecimalField(max_digits=10, decimal_places=8, default="0.95")
    anytime_target = models.DecimalField(
        max_digits=10,
        decimal_places=8,
        null=True,
        blank=True,
        help_text="A manager's target for the workload error rate, in (0, 1): the anytime-valid "
        "upper bound below it says labelling may stop.",
    )
    configured_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    configured_at = models.DateTimeField(auto_now=True)
    computed_at = models.DateTimeField(null=True, blank=True)
    input_sha256 = models.CharField(max_length=64, blank=True)
    result = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["project", "evaluator"]
        constraints = [
            models.CheckConstraint(
                condition=cast(Q, Q(input_sha256="") | Exact(Length("input_sha256"), 64)),
                name="audit_report_sha256_hex64",
            ),
            models.CheckConstraint(
                condition=Q(confidence__gt=0) & Q(confidence__lt=1),
                name="audit_report_confidence_open_unit",
            ),
            models.CheckConstraint(
                condition=Q(anytime_target__isnull=True)
                | (Q(anytime_target__gt=0) & Q(anytime_target__lt=1)),
                name="audit_report_anytime_target_open_unit",
            ),
        ]

    def __str__(self) -> str:
        return f"audit of evaluator {self.evaluator_id}"

    @property
    def uses_score(self) -> bool:
        """Whether the evaluator's verdict is its score against the declared threshold."""
        return self.score_threshold is not None


class SampleKind(models.TextChoices):
    """How an audit sample was drawn."""

    STRATIFIED = "stratified", "stratified random (judge verdict x slice)"
    ACTIVE = "active", "active (probability grows with the judge's uncertainty)"


class AuditSample(models.Model):
    """A seeded random sample of an evaluator's labelled items, for blind labelling.

    A ``stratified`` sample (the default ``kind``): strata are evaluator verdict (positive /
    negative / unavailable under the audit's declared polarity) × the value of one slice dimension.
    ``design`` records, per stratum, its population N_h, sampled n_h and inclusion probability n_h /
    N_h; ``population`` maps every evaluator-labelled item id (as a string) to its stratum, so that
    the error-rate estimates can weight the audited items by the design that drew them.

    An ``active`` sample: each item is drawn independently with its own probability pi_i, which
    grows with the evaluator's uncertainty and sums to the budget; ``design`` records the budget,
    floor and uncertainty rule, ``population`` maps every item id (as a string) to its pi_i and
    the evaluator's predicted error probability, both recorded at the draw, and ``size`` is the
    number of items drawn.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="audit_samples")
    kind = models.CharField(
        max_length=16, choices=SampleKind.choices, default=SampleKind.STRATIFIED
    )
    evaluator = models.ForeignKey(
        "labeling.Evaluator", on_delete=models.CASCADE, related_name="audit_samples"
    )
    size = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    slice_dimension = models.CharField(max_length=32, blank=True)
    declaration = models.JSONField(default=dict)
    design = models.JSONField(default=dict)
    population = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"audit sample {self.pk} of evaluator {self.evaluator_id} (n={self.size})"


class AuditSampleMember(models.Model):
    """One sampled item with its stratum (``active`` in an active sample) and probability."""

    sample = models.ForeignKey(AuditSample, on_delete=models.CASCADE, related_name="members")
    item = models.ForeignKey("labeling.Item", on_delete=models.CASCADE, related_name="+")
    stratum = models.CharField(max_length=300)
    inclusion_probability = models.FloatField()

    class Meta:
        ordering = ["sample", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["sample", "item"], name="audit_sample_unique_item"),
            models.CheckConstraint(
                condition=Q(inclusion_probability__gt=0) & Q(inclusion_probability__lte=1),
                name="audit_sample_probability_unit",
            ),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} in {self.sample_id} (pi={self.inclusion_probability:.4g})"
