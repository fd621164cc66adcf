"""Imported labels: evaluators and their labels; prior annotations, their claim labels and spans.

Invariants live in the database as constraints, not only in Python. Offsets are Unicode code
points of the stored text, 0-based and end-exclusive (``text[start:end]`` in Python).
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact

from labeling.models.catalog import (
    CandidateAnswer,
    Claim,
    ImportBatch,
    LabelPolicy,
    Project,
    SourceVersion,
)
from labeling.models.work import ClaimLabelBase, EvidenceBase


class Evaluator(models.Model):
    """An automated judge at one version; a changed prompt or model is a new version."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="evaluators")
    name = models.CharField(max_length=255)
    version = models.CharField(max_length=255)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["project", "name", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "name", "version"], name="evaluator_unique_version"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"


class EvaluatorLabel(models.Model):
    """An evaluator's verdict on a candidate (``claim`` null) or on one of its claims.

    ``available`` False means the evaluator produced nothing (never a verdict): label and score
    are then both null. Available labels carry a label, a score, or both.
    """

    evaluator = models.ForeignKey(Evaluator, on_delete=models.CASCADE, related_name="labels")
    candidate = models.ForeignKey(
        CandidateAnswer, on_delete=models.CASCADE, related_name="evaluator_labels"
    )
    claim = models.ForeignKey(
        Claim, null=True, blank=True, on_delete=models.CASCADE, related_name="evaluator_labels"
    )
    label = models.CharField(max_length=64, null=True, blank=True)
    score = models.FloatField(null=True, blank=True)
    available = models.BooleanField(default=True)
    raw = models.JSONField(null=True, blank=True, help_text="The value as the source gave it.")
    import_batch = models.ForeignKey(ImportBatch, null=True, on_delete=models.PROTECT)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["evaluator", "candidate"],
                condition=Q(claim__isnull=True),
                name="evaluator_label_unique_candidate",
            ),
            models.UniqueConstraint(
                fields=["evaluator", "claim"],
                condition=Q(claim__isnull=False),
                name="evaluator_label_unique_claim",
            ),
            models.CheckConstraint(
                condition=Q(available=False, label__isnull=True, score__isnull=True)
                | Q(available=True, label__isnull=False)
                | Q(available=True, score__isnull=False),
                name="evaluator_label_unavailable_is_empty",
            ),
        ]

    def __str__(self) -> str:
        verdict = self.label if self.available else "unavailable"
        return f"{self.evaluator_id} on {self.candidate_id}: {verdict}"


class AnnotationOrigin(models.TextChoices):
    """Who made an imported prior label."""

    HUMAN = "human", "human"
    AUTOMATIC = "automatic", "automatic (e.g. exact match against a reference)"


class PriorAnnotation(models.Model):
    """A label a dataset already carried, by a pseudonymous annotator (never a real name)."""

    candidate = models.ForeignKey(
        CandidateAnswer, on_delete=models.CASCADE, related_name="prior_annotations"
    )
    annotator = models.CharField(max_length=64)
    origin = models.CharField(
        max_length=12, choices=AnnotationOrigin.choices, default=AnnotationOrigin.HUMAN
    )
    answer_label = models.CharField(max_length=64, null=True, blank=True)
    answer_reason = models.CharField(max_length=64, null=True, blank=True)
    note = models.TextField(blank=True)
    raw = models.JSONField(null=True, blank=True)
    labelled_at = models.DateTimeField(
        null=True, blank=True, help_text="When the label was made (label creation time), if known."
    )
    policy = models.ForeignKey(
        LabelPolicy,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The policy version the label was made under, if known.",
    )
    time_spent_seconds = models.FloatField(null=True, blank=True)
    fingerprint = models.CharField(max_length=64)
    import_batch = models.ForeignKey(ImportBatch, null=True, on_delete=models.PROTECT)

    class Meta:
        ordering = ["candidate", "annotator"]
        constraints = [
            # One prior annotation per (candidate, annotator) and policy version: a release
            # of an item labelled again under a new version holds both of a person's votes.
            models.UniqueConstraint(
                fields=["candidate", "annotator"],
                condition=Q(policy__isnull=True),
                name="prior_annotation_unique_annotator",
            ),
            models.UniqueConstraint(
                fields=["candidate", "annotator", "policy"],
                condition=Q(policy__isnull=False),
                name="prior_annotation_unique_annotator_policy",
            ),
            models.CheckConstraint(
                condition=Q(origin__in=AnnotationOrigin.values), name="prior_annotation_origin"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.annotator} on {self.candidate_id}"


class PriorClaimLabel(ClaimLabelBase):
    """A prior annotation's label of one claim (``raw_label`` keeps the dataset's own value)."""

    prior_annotation = models.ForeignKey(
        PriorAnnotation, on_delete=models.CASCADE, related_name="claim_labels"
    )
    claim = models.ForeignKey(Claim, on_delete=models.CASCADE, related_name="prior_labels")
    # A dataset's claim label may be missing (the claim then counts no vote).
    label = models.CharField(max_length=64, null=True, blank=True)  # type: ignore[assignment]
    boundary_error = models.BooleanField(default=False)
    raw_label = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [ClaimLabelBase.unique("prior_annotation", "prior_claim_label")]


class PriorEvidence(EvidenceBase):
    """Evidence cited by a prior claim label (a dataset's span may be empty)."""

    claim_label = models.ForeignKey(
        PriorClaimLabel, on_delete=models.CASCADE, related_name="evidence"
    )
    source_version = models.ForeignKey(SourceVersion, on_delete=models.PROTECT)

    class Meta:
        constraints = EvidenceBase.checks("prior_evidence", unique=False, empty=True)


class PriorSpan(models.Model):
    """A span of the answer flagged by a prior annotator, with the dataset's own labels and note.

    The optional evidence span points into a pinned source version, same code-point convention.
    """

    prior_annotation = models.ForeignKey(
        PriorAnnotation, on_delete=models.CASCADE, related_name="spans"
    )
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    quote = models.TextField()
    labels = models.JSONField(default=list)
    note = models.TextField(blank=True)
    evidence_source_version = models.ForeignKey(
        SourceVersion, null=True, blank=True, on_delete=models.PROTECT
    )
    evidence_start = models.PositiveIntegerField(null=True, blank=True)
    evidence_end = models.PositiveIntegerField(null=True, blank=True)
    evidence_quote = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["prior_annotation", "start", "pk"]
        constraints = [
            models.CheckConstraint(condition=Q(end__gte=F("start")), name="prior_span_order"),
            models.CheckConstraint(
                condition=Exact(Length("quote"), F("end") - F("start")),
                name="prior_span_quote_length",
            ),
            models.CheckConstraint(
                condition=Q(
                    evidence_source_version__isnull=True,
                    evidence_start__isnull=True,
                    evidence_end__isnull=True,
                    evidence_quote__isnull=True,
                )
                | Q(
                    evidence_source_version__isnull=False,
                    evidence_start__isnull=False,
                    evidence_end__gte=F("evidence_start"),
                    evidence_quote__isnull=False,
                ),
                name="prior_span_evidence_complete",
            ),
        ]

    def __str__(self) -> str:
        return f"[{self.start}:{self.end}] {self.labels}"
