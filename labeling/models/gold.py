"""Gold items: reference labels set by a manager, and annotators' qualification.

A gold item is an :class:`labeling.models.Item` with status ``gold``. Its reference labels are
append-only revisions (:class:`GoldReference`, ``number`` 1, 2, ...; the highest number is the
current reference), each with one label per claim (:class:`GoldClaimLabel`) and, for labels
that cite evidence, the reference's evidence spans (:class:`GoldEvidence`). The reference is a
secret of managers: it is never shown to an annotator, and nothing an annotator can read says
that an item is gold.

Annotators' labels of gold items are ordinary annotations (append-only revisions) of
assignments flagged ``Assignment.gold``; they never count as votes.

:class:`Qualification` records the outcome of an annotator's qualification in a project: their
first ``k`` gold labels compared with the references (numerator ``agreed`` over denominator
``compared`` labels), and a manager's decision when they fell short.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from labeling.models.catalog import ImportBatch, Item, LabelPolicy, Project
from labeling.models.work import ClaimLabelBase, EvidenceBase


class GoldReference(models.Model):
    """One immutable version of a gold item's reference labels (answer level).

    ``supersedes`` is the revision it replaced; ``content_sha256`` the hash of the canonical
    JSON of its labels, so setting the same reference again writes nothing (an import re-run is
    idempotent). ``policy`` is the label policy the reference was checked against.
    """

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="gold_references")
    number = models.PositiveIntegerField()
    supersedes = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="superseded_by"
    )
    policy = models.ForeignKey(LabelPolicy, on_delete=models.PROTECT, related_name="+")
    answer_label = models.CharField(max_length=64)
    answer_reason = models.CharField(max_length=64, null=True, blank=True)
    rationale = models.TextField(blank=True, help_text="Why this is the reference (managers).")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The manager who set it (None: an import run from the command line).",
    )
    import_batch = models.ForeignKey(
        ImportBatch, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    content_sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item", "number"]
        constraints = [
            models.UniqueConstraint(fields=["item", "number"], name="gold_reference_unique_number"),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="gold_reference_number_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"gold reference {self.number} of item {self.item_id}: {self.answer_label}"


class GoldClaimLabel(ClaimLabelBase):
    """A reference's label of one claim (every claim of the item has one)."""

    reference = models.ForeignKey(
        GoldReference, on_delete=models.CASCADE, related_name="claim_labels"
    )

    class Meta:
        ordering = ["reference", "claim"]
        constraints = [ClaimLabelBase.unique("reference", "gold_claim_label")]


class GoldEvidence(EvidenceBase):
    """Evidence of a reference claim label."""

    claim_label = models.ForeignKey(
        GoldClaimLabel, on_delete=models.CASCADE, related_name="evidence"
    )

    class Meta:
        ordering = EvidenceBase.ORDERING
        constraints = EvidenceBase.checks("gold_evidence")


class QualificationStatus(models.TextChoices):
    """Outcome of an annotator's qualification in a project.

    ``passed``: their first ``k`` gold labels reached the threshold; ``failed``: they did not
    (or too few gold items were left), and a manager is asked to decide; ``admitted`` and
    ``refused``: the manager's decision. Regular work is served after ``passed`` or ``admitted``.
    """

    PASSED = "passed", "passed"
    FAILED = "failed", "below the threshold: awaiting a manager's decision"
    ADMITTED = "admitted", "admitted by a manager"
    REFUSED = "refused", "not admitted by a manager"


QUALIFIED_STATUSES = (QualificationStatus.PASSED, QualificationStatus.ADMITTED)


class Qualification(models.Model):
    """An annotator's qualification in one project: one row per (project, annotator).

    Written when the annotator's ``k``-th gold label is in (by the next claim, under their
    membership lock), then changed only by a manager's decision. ``agreed`` of ``compared``
    labels (answer label of each gold item plus each of its claims) equal the reference's;
    ``policy`` is the version whose rule (``qualification_items``, ``qualification_threshold``)
    was applied, ``items`` how many gold items were compared.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="qualifications")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="qualifications"
    )
    status = models.CharField(max_length=10, choices=QualificationStatus.choices)
    policy = models.ForeignKey(LabelPolicy, on_delete=models.PROTECT, related_name="+")
    items = models.PositiveIntegerField()
    agreed = models.PositiveIntegerField()
    compared = models.PositiveIntegerField()
    evaluated_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)

    class Meta:
        ordering = ["project", "annotator"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "annotator"], name="qualification_unique_annotator"
            ),
            models.CheckConstraint(
                condition=Q(status__in=QualificationStatus.values), name="qualification_status"
            ),
            models.CheckConstraint(
                condition=Q(agreed__lte=F("compared")), name="qualification_agreed_le_compared"
            ),
            models.CheckConstraint(
                condition=Q(
                    status__in=[QualificationStatus.ADMITTED, QualificationStatus.REFUSED],
                    decided_at__isnull=False,
                    decided_by__isnull=False,
                )
                | Q(status__in=[QualificationStatus.PASSED, QualificationStatus.FAILED]),
                name="qualification_decision_has_manager",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.annotator_id} in {self.project_id}: {self.status}"
