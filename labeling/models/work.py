"""Labelling work: assignments, annotations (append-only revisions) and resolutions.

Every label is append-only: an annotation's revisions, their claim labels and evidence spans, and
resolutions are never updated (a database trigger refuses UPDATE, migration 0005); a change is a
new revision or a new resolution that supersedes the previous one. The mutable pointers are
``Annotation.current`` and ``Item.resolution``.

Evidence offsets are Unicode code points of the pinned source text, 0-based and end-exclusive,
and ``quote == source_version.text[start:end]`` (checked by the service; the quote length is
checked by the database).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact

from labeling import vocabulary
from labeling.models.catalog import Claim, Item, LabelPolicy, SourceVersion

# A vote that is not a label: the annotator cannot decide. It counts as a vote, never reaches
# consensus and always sends the item to the disagreement queue.
CANNOT_DECIDE = vocabulary.CANNOT_DECIDE


class AssignmentStatus(models.TextChoices):
    """State of one annotator's hold on one item."""

    LEASED = "leased", "leased"
    SUBMITTED = "submitted", "submitted"
    SKIPPED = "skipped", "skipped"
    EXPIRED = "expired", "lease expired"
    RETIRED = "retired", "retired (the item was returned for labelling under a new policy)"


LIVE_ASSIGNMENT_STATUSES = (AssignmentStatus.LEASED, AssignmentStatus.SUBMITTED)


class SkipReason(models.TextChoices):
    """Why an annotator skipped an item."""

    UNCLEAR_QUESTION = "unclear_question", "the question is unclear"
    SOURCE_UNREADABLE = "source_unreadable", "a source is unreadable or missing"
    CONFLICT_OF_INTEREST = "conflict_of_interest", "conflict of interest"
    OUT_OF_EXPERTISE = "out_of_expertise", "outside my expertise"
    OTHER = "other", "other"


class Assignment(models.Model):
    """An item given to one annotator, holding one of its ``overlap`` slots while live.

    A live assignment (leased or submitted) holds ``slot``; the partial unique constraint makes
    two live assignments of one slot impossible, and (item, annotator) is unique among the rows
    not retired, so no annotator labels an item twice under one policy version. An expired lease
    gives the slot back (status ``expired``); the same annotator may claim the item again later,
    which revives this row. A ``retired`` assignment belongs to an earlier labelling round of the
    item: publishing a new policy version returned the item for labelling
    (:mod:`labeling.services.policy_versions`); the row and its annotation are kept, hold no
    slot, and the annotator may label the item again in the new round.
    """

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="assignments"
    )
    slot = models.PositiveSmallIntegerField()
    status = models.CharField(
        max_length=10, choices=AssignmentStatus.choices, default=AssignmentStatus.LEASED
    )
    leased_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    skip_reason = models.CharField(max_length=32, choices=SkipReason.choices, blank=True)
    skip_note = models.TextField(blank=True)
    ended_at = models.DateTimeField(
        null=True, blank=True, help_text="When the lease expired or the item was skipped."
    )
    gold = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Gold work: never a vote, never shown to the annotator.",
    )

    class Meta:
        ordering = ["item", "slot"]
        indexes = [
            models.Index(fields=["status", "lease_expires_at"], name="assignment_lease_idx"),
            # Also in submit order: "Revise previous" (the actor's last submission) reads one row.
            models.Index(
                fields=["annotator", "status", "submitted_at", "id"],
                name="assignment_annotator_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["item", "annotator"],
                condition=~Q(status="retired"),
                name="assignment_unique_annotator",
            ),
            models.UniqueConstraint(
                fields=["item", "slot"],
                condition=Q(status__in=LIVE_ASSIGNMENT_STATUSES, gold=False),
                name="assignment_unique_live_slot",
            ),
            models.CheckConstraint(condition=Q(slot__gte=1), name="assignment_slot_positive"),
            models.CheckConstraint(
                condition=Q(status__in=AssignmentStatus.values), name="assignment_status"
            ),
            models.CheckConstraint(
                condition=Q(lease_expires_at__gt=F("leased_at")), name="assignment_lease_order"
            ),
            models.CheckConstraint(
                condition=~Q(status=AssignmentStatus.SUBMITTED) | Q(submitted_at__isnull=False),
                name="assignment_submitted_has_time",
            ),
            models.CheckConstraint(
                condition=~Q(status=AssignmentStatus.SKIPPED) | ~Q(skip_reason=""),
                name="assignment_skip_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} slot {self.slot} · {self.status}"


class Annotation(models.Model):
    """One annotator's independent judgement of an item: one per assignment.

    The content lives in append-only ``AnnotationRevision`` rows; ``current`` points at the
    newest. ``revision_count`` is the number of revisions. An annotator has one annotation of an
    item per labelling round: the assignment is unique per (item, annotator) among the rows not
    retired, and a round ends only when a new policy version returns the item for labelling.
    """

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="annotations")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="annotations"
    )
    assignment = models.OneToOneField(
        Assignment, on_delete=models.PROTECT, related_name="annotation"
    )
    current = models.OneToOneField(
        "labeling.AnnotationRevision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="current_of",
    )
    revision_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item", "pk"]

    def __str__(self) -> str:
        return f"annotation {self.pk} of item {self.item_id}"


class AnnotationRevision(models.Model):
    """One immutable version of an annotation (who, when, under which policy, what).

    ``previous`` is the revision it replaced (the "old" of the history), ``content_sha256`` the
    hash of the canonical JSON of its labels, so a repeated identical submit writes nothing.
    """

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    previous = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="next_revision"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    policy = models.ForeignKey(LabelPolicy, on_delete=models.PROTECT, related_name="+")
    answer_label = models.CharField(max_length=64)
    answer_reason = models.CharField(max_length=64, null=True, blank=True)
    comment = models.TextField(blank=True)
    time_spent_seconds = models.FloatField(null=True, blank=True)
    content_sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["annotation", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["annotation", "number"], name="annotation_revision_unique_number"
            ),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="annotation_revision_number_positive"
            ),
            models.CheckConstraint(
                condition=Q(time_spent_seconds__isnull=True) | Q(time_spent_seconds__gte=0),
                name="annotation_revision_time_nonnegative",
            ),
        ]

    def __str__(self) -> str:
        return f"annotation {self.annotation_id} r{self.number}: {self.answer_label}"


class ClaimLabelBase(models.Model):
    """A vote's label of one claim; each concrete kind adds its parent (the vote) and Meta."""

    claim = models.ForeignKey(Claim, on_delete=models.PROTECT, related_name="+")
    label = models.CharField(max_length=64)
    reason = models.CharField(max_length=64, null=True, blank=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"claim {self.claim_id}: {self.label}"

    @staticmethod
    def unique(parent: str, prefix: str) -> models.UniqueConstraint:
        """One label per (vote, claim): the constraint named ``<prefix>_unique``."""
        return models.UniqueConstraint(fields=[parent, "claim"], name=f"{prefix}_unique")


class EvidenceBase(models.Model):
    """Evidence cited for a claim label: ``source_version.text[start:end] == quote``.

    Each concrete kind adds ``claim_label`` (its label table, ``related_name="evidence"``).
    """

    source_version = models.ForeignKey(SourceVersion, on_delete=models.PROTECT, related_name="+")
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    quote = models.TextField()

    ORDERING = ["claim_label", "source_version", "start", "end"]

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.source_version_id}[{self.start}:{self.end}]"

    @staticmethod
    def checks(prefix: str, *, unique: bool = True, empty: bool = False) -> list[Any]:
        """The constraints of an evidence table, named ``<prefix>_unique``, ``_order``, ...

        ``unique``: each (label, source version, start, end) once; ``empty``: a span may be
        empty (``end == start``) rather than hold at least one code point.
        """
        order = Q(end__gte=F("start")) if empty else Q(end__gt=F("start"))
        fields = ["claim_label", "source_version", "start", "end"]
        return [
            *([models.UniqueConstraint(fields=fields, name=f"{prefix}_unique")] if unique else []),
            models.CheckConstraint(condition=order, name=f"{prefix}_order"),
            models.CheckConstraint(
                condition=Exact(Length("quote"), F("end") - F("start")),
                name=f"{prefix}_quote_length",
            ),
        ]


class ClaimLabel(ClaimLabelBase):
    """A revision's label of one claim; ``boundary_error`` flags a wrong claim boundary."""

    revision = models.ForeignKey(
        AnnotationRevision, on_delete=models.CASCADE, related_name="claim_labels"
    )
    boundary_error = models.BooleanField(default=False)

    class Meta:
        ordering = ["revision", "claim"]
        constraints = [ClaimLabelBase.unique("revision", "claim_label")]


class EvidenceSpan(EvidenceBase):
    """Evidence cited for an annotation's claim label."""

    claim_label = models.ForeignKey(ClaimLabel, on_delete=models.CASCADE, related_name="evidence")

    class Meta:
        ordering = EvidenceBase.ORDERING
        constraints = EvidenceBase.checks("evidence_span", unique=False)


# ---------------------------------------------------------------------------------------------
# Comparison, disagreement, adjudication
# ---------------------------------------------------------------------------------------------


class ResolutionStatus(models.TextChoices):
    """The status of a resolved label: consensus (unanimous), adjudicated or unresolved."""

    CONSENSUS = vocabulary.CONSENSUS, vocabulary.CONSENSUS
    ADJUDICATED = vocabulary.ADJUDICATED, vocabulary.ADJUDICATED
    UNRESOLVED = vocabulary.UNRESOLVED, vocabulary.UNRESOLVED


class UnresolvedReason(models.TextChoices):
    """Why an adjudicator left an item unresolved."""

    AMBIGUOUS_GUIDELINE = "ambiguous_guideline", "ambiguous guideline"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence", "insufficient evidence"
    SOURCE_PROBLEM = "source_problem", "source problem"
    OTHER = "other", "other"


class Disagreement(models.Model):
    """An item whose votes differ, waiting in (or closed out of) the disagreement queue.

    At most one open disagreement per item (partial unique constraint). ``answer_differs`` and
    ``claims_differ`` are the label levels at which the votes differ (queue filter).
    """

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="disagreements")
    opened_at = models.DateTimeField()
    answer_differs = models.BooleanField()
    claims_differ = models.BooleanField()
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.OneToOneField(
        "labeling.Resolution",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="closed_disagreement",
    )

    class Meta:
        ordering = ["opened_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["item"],
                condition=Q(closed_at__isnull=True),
                name="disagreement_one_open_per_item",
            ),
            models.CheckConstraint(
                condition=Q(closed_at__isnull=True, closed_by__isnull=True)
                | Q(closed_at__isnull=False),
                name="disagreement_closed_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"disagreement on item {self.item_id}"


class Resolution(models.Model):
    """The resolved (gold) label of an item: consensus, adjudicated or unresolved.

    Append-only: a correction is a new row with ``number`` + 1 and ``supersedes`` the old one;
    ``Item.resolution`` points at the current row. ``adjudicator`` is None for consensus; an
    adjudication imported from a release names its adjudicator by ``adjudicator_pseudonym``
    instead (exactly one of the two is set) and records its ``import_batch``.
    An unresolved resolution carries a reason and no labels.
    """

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="resolutions")
    number = models.PositiveIntegerField()
    supersedes = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="superseded_by"
    )
    status = models.CharField(max_length=12, choices=ResolutionStatus.choices)
    policy = models.ForeignKey(LabelPolicy, on_delete=models.PROTECT, related_name="+")
    answer_label = models.CharField(max_length=64, null=True, blank=True)
    answer_reason = models.CharField(max_length=64, null=True, blank=True)
    rationale = models.TextField(blank=True)
    unresolved_reason = models.CharField(
        max_length=32, choices=UnresolvedReason.choices, null=True, blank=True
    )
    adjudicator = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="resolutions",
    )
    adjudicator_pseudonym = models.CharField(
        max_length=64,
        null=True,
        blank=True,
        help_text="The adjudicator of an imported adjudication (a release's pseudonym).",
    )
    import_batch = models.ForeignKey(
        "labeling.ImportBatch", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item", "number"]
        constraints = [
            models.UniqueConstraint(fields=["item", "number"], name="resolution_unique_number"),
            models.CheckConstraint(
                condition=Q(status__in=ResolutionStatus.values), name="resolution_status"
            ),
            models.CheckConstraint(
                condition=Q(
                    status=ResolutionStatus.UNRESOLVED,
                    unresolved_reason__isnull=False,
                    answer_label__isnull=True,
                )
                | (
                    Q(status__in=[ResolutionStatus.CONSENSUS, ResolutionStatus.ADJUDICATED])
                    & Q(unresolved_reason__isnull=True, answer_label__isnull=False)
                ),
                name="resolution_status_fields",
            ),
            models.CheckConstraint(
                condition=~Q(status=ResolutionStatus.CONSENSUS)
                | Q(adjudicator__isnull=True, adjudicator_pseudonym__isnull=True),
                name="resolution_consensus_has_no_adjudicator",
            ),
            models.CheckConstraint(
                condition=Q(status=ResolutionStatus.CONSENSUS)
                | Q(adjudicator__isnull=False, adjudicator_pseudonym__isnull=True)
                | Q(adjudicator__isnull=True, adjudicator_pseudonym__isnull=False),
                name="resolution_adjudication_has_adjudicator",
            ),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} #{self.number}: {self.status}"


class ResolvedClaimLabel(ClaimLabelBase):
    """A resolution's label of one claim.

    ``evidence_waived``: the label needs evidence (supported, contradicted) but has none,
    accepted because it adopts the label of imported votes that carried no evidence span
    (:func:`labeling.selectors.vote_reads.imported_evidence_waivers`).
    """

    resolution = models.ForeignKey(
        Resolution, on_delete=models.CASCADE, related_name="claim_labels"
    )
    evidence_waived = models.BooleanField(
        default=False,
        help_text="Accepted without evidence: adopts imported votes that cited no span.",
    )

    class Meta:
        ordering = ["resolution", "claim"]
        constraints = [ClaimLabelBase.unique("resolution", "resolved_claim_label")]


class ResolvedEvidence(EvidenceBase):
    """Evidence of a resolved claim label (both annotators' spans are kept under consensus)."""

    claim_label = models.ForeignKey(
        ResolvedClaimLabel, on_delete=models.CASCADE, related_name="evidence"
    )

    class Meta:
        ordering = EvidenceBase.ORDERING
        constraints = EvidenceBase.checks("resolved_evidence")
