"""Data model of certlabel's labelling side: what is imported and the default label schema.

Members and invitations are in :mod:`labeling.models.members`; evaluator labels and imported
prior annotations in :mod:`labeling.models.imported_labels`.

Invariants live in the database as constraints (unique keys, check constraints and, for pinned
source text, a trigger that refuses UPDATE; DELETE is refused by ``on_delete=PROTECT`` on every
reference), not only in Python. Offsets are Unicode code
points of the stored text, 0-based and end-exclusive (``text[start:end]`` in Python).
"""

from __future__ import annotations

import secrets
from fractions import Fraction

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact

from labeling import vocabulary

# ---------------------------------------------------------------------------------------------
# Projects, policies
# ---------------------------------------------------------------------------------------------


class Partition(models.TextChoices):
    """Where a question is used: development, calibration or held-out test (frozen early)."""

    DEV = "dev", "dev"
    CALIBRATION = "calibration", "calibration"
    TEST = "test", "test"


class LabelScale(models.TextChoices):
    """The level of measurement of a label set, which picks the agreement metric.

    Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", metric differences:
    nominal labels are names; ordinal labels are ranked in the set's declared order; interval
    and ratio labels are numbers (ratio: >= 0, with a true zero).
    """

    NOMINAL = "nominal", "nominal"
    ORDINAL = "ordinal", "ordinal (in the declared order)"
    INTERVAL = "interval", "interval (labels are numbers)"
    RATIO = "ratio", "ratio (labels are numbers >= 0)"


def scale_problem(scale: str, labels: list[str]) -> str | None:
    """Why ``labels`` cannot be read on ``scale`` (naming the first label), or None."""
    if scale not in (LabelScale.INTERVAL, LabelScale.RATIO):
        return None
    for label in labels:
        try:
            number = Fraction(str(label).strip())
        except (ValueError, ZeroDivisionError):
            return f"label {label!r} is not a number, as the {scale} scale needs"
        if scale == LabelScale.RATIO and number < 0:
            return f"label {label!r} is negative, which a ratio scale does not allow"
    return None


class EvidenceRelation(models.TextChoices):
    """What a label judges a claim against."""

    SOURCE_RELATIVE = "source_relative", "source-relative faithfulness"
    EXTERNAL_TRUTH = "external_truth", "external truth"


class Role(models.TextChoices):
    """A member's role in one project: annotator, adjudicator or manager."""

    ANNOTATOR = "annotator", "annotator"
    ADJUDICATOR = "adjudicator", "adjudicator"
    MANAGER = "manager", "manager"


class ServingOrder(models.TextChoices):
    """How "next item" orders the open items of a project (documented in the README).

    ``partition``: calibration questions first, then test, then dev, then unpartitioned; within a
    partition by question import order, then candidate sample index. ``seeded_random``: a seeded
    permutation of the items (``Project.serving_seed``), fixed when labelling starts.
    """

    PARTITION = "partition", "calibration first, then test, dev; by question"
    SEEDED_RANDOM = "seeded_random", "seeded random permutation"


def new_pseudonym_key() -> str:
    """Return a fresh random key (64 hex digits) for a project's release pseudonyms."""
    return secrets.token_hex(32)


class Project(models.Model):
    """One evaluation study: members, label policy, overlap, questions, items and imports."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    overlap = models.PositiveSmallIntegerField(
        default=2, help_text="Independent annotations per item (N)."
    )
    lease_minutes = models.PositiveIntegerField(default=30)
    partition_seed = models.BigIntegerField(null=True, blank=True)
    partition_proportions = models.JSONField(null=True, blank=True)
    partition_frozen_at = models.DateTimeField(null=True, blank=True)
    serving_order = models.CharField(
        max_length=20,
        choices=ServingOrder.choices,
        default=ServingOrder.PARTITION,
        help_text="Order in which 'next item' serves items (see ServingOrder).",
    )
    serving_seed = models.BigIntegerField(
        null=True, blank=True, help_text="Seed of the seeded_random serving order."
    )
    allow_self_adjudication = models.BooleanField(
        default=False, help_text="May an adjudicator resolve an item they annotated?"
    )
    labelling_started_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Set when labelling starts: policy, overlap and serving order are fixed then.",
    )
    pseudonym_key = models.CharField(
        max_length=64,
        default=new_pseudonym_key,
        editable=False,
        help_text="Secret key of the release pseudonyms of this project's members (HMAC-SHA256).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=Q(overlap__gte=1), name="project_overlap_positive"),
            models.CheckConstraint(
                condition=Q(lease_minutes__gte=1), name="project_lease_positive"
            ),
            models.CheckConstraint(
                condition=Q(partition_frozen_at__isnull=True)
                | Q(partition_seed__isnull=False, partition_proportions__isnull=False),
                name="project_frozen_partition_has_seed",
            ),
            models.CheckConstraint(
                condition=Q(serving_order__in=ServingOrder.values), name="project_serving_order"
            ),
            models.CheckConstraint(
                condition=~Q(serving_order=ServingOrder.SEEDED_RANDOM)
                | Q(serving_seed__isnull=False),
                name="project_random_order_has_seed",
            ),
        ]

    def __str__(self) -> str:
        return self.slug


# The largest primary key the databases store (a signed 64-bit integer). Ids from a request are
# checked against it before a query: SQLite raises OverflowError on a larger Python int.
MAX_ID = 2**63 - 1

# The default label schema. A project may version its own.
DEFAULT_ANSWER_LABELS = list(vocabulary.DEFAULT_ANSWER_LABELS)
DEFAULT_CLAIM_LABELS = list(vocabulary.DEFAULT_CLAIM_LABELS)
DEFAULT_UNAVAILABLE_REASONS = ["not_found", "blocked", "source_changed"]


def default_evidence_labels() -> list[str]:
    """Return the claim labels that cite evidence by default: supported and contradicted."""
    return sorted(vocabulary.EVIDENCE_REQUIRED)


class LabelPolicy(models.Model):
    """A versioned annotation guideline + label schema + evidence relation.

    Frozen (``frozen_at`` set) once labelling starts; a change is a new version with
    ``previous`` pointing at the old one, published frozen by a manager with a ``change_note``
    (:mod:`labeling.services.policy_versions`). Every label records the version it was made
    under.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="policies")
    version = models.PositiveIntegerField()
    previous = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="next_version"
    )
    guideline = models.TextField(blank=True)
    evidence_relation = models.CharField(
        max_length=20, choices=EvidenceRelation.choices, default=EvidenceRelation.SOURCE_RELATIVE
    )
    answer_labels = models.JSONField(default=list)
    claim_labels = models.JSONField(default=list)
    answer_scale = models.CharField(
        max_length=10,
        choices=LabelScale.choices,
        default=LabelScale.NOMINAL,
        help_text="Level of measurement of answer_labels (ordinal: in their listed order).",
    )
    claim_scale = models.CharField(
        max_length=10,
        choices=LabelScale.choices,
        default=LabelScale.NOMINAL,
        help_text="Level of measurement of claim_labels (ordinal: in their listed order).",
    )
    unavailable_reasons = models.JSONField(default=list)
    label_details = models.JSONField(
        default=dict,
        blank=True,
        help_text='Per level and label: {"answer"|"claim": {label: {"text", "description", '
        '"key"}}}; a missing entry takes the default (labeling.selectors.policies).',
    )
    evidence_labels = models.JSONField(
        default=default_evidence_labels,
        help_text="Claim labels that must cite at least one evidence span.",
    )
    reason_texts = models.JSONField(
        default=dict, blank=True, help_text="Display text per unavailable reason: {reason: text}."
    )
    gold_rate = models.FloatField(
        default=0.0,
        help_text="Probability in [0, 1] that 'next item' serves a gold item.",
    )
    qualification_required = models.BooleanField(
        default=False,
        help_text="Must an annotator qualify on gold items before regular work?",
    )
    qualification_items = models.PositiveSmallIntegerField(
        default=5, help_text="k: gold items an annotator labels to qualify."
    )
    qualification_threshold = models.FloatField(
        default=0.8,
        help_text="Share in [0, 1] of labels equal to the reference that qualifies.",
    )
    frozen_at = models.DateTimeField(null=True, blank=True)
    change_note = models.TextField(
        blank=True, help_text="What changed from the previous version and why (published versions)."
    )
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The manager who published this version after labelling started.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "version"]
        constraints = [
            models.UniqueConstraint(fields=["project", "version"], name="policy_unique_version"),
            models.CheckConstraint(condition=Q(version__gte=1), name="policy_version_positive"),
            models.CheckConstraint(
                condition=Q(evidence_relation__in=EvidenceRelation.values),
                name="policy_evidence_relation_valid",
            ),
            models.CheckConstraint(
                condition=Q(gold_rate__gte=0, gold_rate__lte=1), name="policy_gold_rate_range"
            ),
            models.CheckConstraint(
                condition=Q(qualification_items__gte=1), name="policy_qualification_items_positive"
            ),
            models.CheckConstraint(
                condition=Q(qualification_threshold__gte=0, qualification_threshold__lte=1),
                name="policy_qualification_threshold_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug} policy v{self.version}"

    def clean(self) -> None:
        """Refuse a numeric scale over labels that are not numbers, naming the label."""
        problems = {
            f"{level}_scale": problem
            for level, scale, labels in (
                ("answer", self.answer_scale, self.answer_labels),
                ("claim", self.claim_scale, self.claim_labels),
            )
            if (problem := scale_problem(scale, list(labels or [])))
        }
        if problems:
            raise ValidationError(problems)


class ImportBatch(models.Model):
    """One successful import of a workload file that created at least one row."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="import_batches")
    format = models.CharField(max_length=20)
    filename = models.CharField(max_length=500)
    file_sha256 = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    report = models.JSONField(default=dict)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["project", "file_sha256"], name="import_unique_file"),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug} import #{self.pk} ({self.filename})"


# ---------------------------------------------------------------------------------------------
# Pinned sources
# ---------------------------------------------------------------------------------------------


class SourceDocument(models.Model):
    """A retrieved document, identified within a project by ``key``; its texts are versions."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="source_documents")
    key = models.CharField(max_length=512)
    uri = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "key"], name="source_document_unique_key"),
        ]

    def __str__(self) -> str:
        return self.key


class SourceVersion(models.Model):
    """An immutable text of a source document, pinned by its sha256.

    ``sha256`` is the hex digest of the UTF-8 encoding of ``text``; ``length`` is its length in
    code points. A changed text is a new version, never an edit: a database trigger refuses any
    UPDATE of text, sha256 or length (migration 0002), and every reference PROTECTs it.
    """

    document = models.ForeignKey(SourceDocument, on_delete=models.PROTECT, related_name="versions")
    text = models.TextField()
    sha256 = models.CharField(max_length=64)
    length = models.PositiveIntegerField()
    uri = models.TextField(blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    import_batch = models.ForeignKey(ImportBatch, null=True, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["document", "sha256"], name="source_version_unique_text"
            ),
            models.CheckConstraint(
                condition=Exact(Length("sha256"), 64), name="source_version_sha256_hex64"
            ),
            models.CheckConstraint(
                condition=Exact(Length("text"), F("length")), name="source_version_length_matches"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.document.key}@{self.sha256[:12]}"


# ---------------------------------------------------------------------------------------------
# Questions, candidates, claims, items
# ---------------------------------------------------------------------------------------------


class Question(models.Model):
    """An eligible query with slice attributes; ``partition`` is set when the split is frozen."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="questions")
    external_id = models.CharField(max_length=255)
    text = models.TextField()
    group_key = models.CharField(max_length=255, blank=True)
    partition = models.CharField(max_length=12, choices=Partition.choices, null=True, blank=True)
    slices = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of the imported fields.")
    import_batch = models.ForeignKey(ImportBatch, null=True, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "external_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="question_unique_external_id"
            ),
            models.CheckConstraint(
                condition=Q(partition__isnull=True) | Q(partition__in=Partition.values),
                name="question_partition_valid",
            ),
        ]
        indexes = [models.Index(fields=["project", "partition"])]

    def __str__(self) -> str:
        return self.external_id


class RetrievalLink(models.Model):
    """A question's retrieved source version, with the retriever's rank and score."""

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="retrievals")
    source_version = models.ForeignKey(
        SourceVersion, on_delete=models.PROTECT, related_name="retrievals"
    )
    rank = models.PositiveIntegerField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["question", "rank", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["question", "source_version"], name="retrieval_unique_source"
            ),
        ]

    def __str__(self) -> str:
        return f"question {self.question_id} → version {self.source_version_id}"


class CandidateAnswer(models.Model):
    """One answer for a question, with the scores the user brings.

    ``retrieval_score`` (R) and ``confidence`` (C) are in [0, 1] (RCCS multiplies them);
    ``frequency_rank`` is 1 for the most frequent canonical form among the question's K samples.
    """

    # No index of its own: the unique (question, key) index leads with question_id.
    question = models.ForeignKey(
        Question, on_delete=models.CASCADE, related_name="candidates", db_index=False
    )
    key = models.CharField(max_length=255)
    text = models.TextField()
    generator = models.CharField(max_length=255, blank=True)
    generator_settings = models.JSONField(default=dict, blank=True)
    sample_index = models.PositiveIntegerField()
    canonical_form = models.TextField(null=True, blank=True)
    retrieval_score = models.FloatField(null=True, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    acceptance_score = models.FloatField(null=True, blank=True)
    frequency_rank = models.PositiveIntegerField(null=True, blank=True)
    is_selected = models.BooleanField(default=False)
    metadata = models.JSONField(default=dict, blank=True)
    # No import_batch of its own: a question's candidates are all imported with the question.
    fingerprint = models.CharField(max_length=64, help_text="sha256 of the imported fields.")

    class Meta:
        ordering = ["question", "sample_index"]
        constraints = [
            models.UniqueConstraint(fields=["question", "key"], name="candidate_unique_key"),
            models.UniqueConstraint(
                fields=["question", "sample_index"], name="candidate_unique_sample_index"
            ),
            models.CheckConstraint(
                condition=Q(retrieval_score__isnull=True)
                | Q(retrieval_score__gte=0, retrieval_score__lte=1),
                name="candidate_retrieval_score_unit",
            ),
            models.CheckConstraint(
                condition=Q(confidence__isnull=True) | Q(confidence__gte=0, confidence__lte=1),
                name="candidate_confidence_unit",
            ),
            models.CheckConstraint(
                condition=Q(frequency_rank__isnull=True) | Q(frequency_rank__gte=1),
                name="candidate_frequency_rank_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.question.external_id}/{self.key}"


class Claim(models.Model):
    """An atomic claim of a candidate answer.

    Anchored claims carry their code-point span in the answer (``answer[start:end] == text``);
    a claim whose text is not a substring of the answer is kept with ``unanchored`` set and no span.
    """

    # No index of its own: the unique (candidate, index) index leads with candidate_id.
    candidate = models.ForeignKey(
        CandidateAnswer, on_delete=models.CASCADE, related_name="claims", db_index=False
    )
    index = models.PositiveIntegerField()
    text = models.TextField()
    start = models.PositiveIntegerField(null=True, blank=True)
    end = models.PositiveIntegerField(null=True, blank=True)
    unanchored = models.BooleanField(default=False)
    machine_split = models.BooleanField(default=False)

    class Meta:
        ordering = ["candidate", "index"]
        constraints = [
            models.UniqueConstraint(fields=["candidate", "index"], name="claim_unique_index"),
            models.CheckConstraint(
                condition=Q(unanchored=True, start__isnull=True, end__isnull=True)
                | Q(unanchored=False, start__isnull=False, end__gte=F("start")),
                name="claim_span_or_unanchored",
            ),
        ]

    def __str__(self) -> str:
        return f"claim {self.index} of {self.candidate_id}"


class ItemStatus(models.TextChoices):
    """Where an item is in the flow: collecting annotations, in disagreement, or resolved."""

    OPEN = "open", "open (collecting annotations)"
    DISAGREEMENT = "disagreement", "in the disagreement queue"
    RESOLVED = "resolved", "resolved"
    GOLD = "gold", "gold item (reference labels; served to check annotators, never a vote)"


class Item(models.Model):
    """The unit of labelling: one candidate answer with its claims.

    Work state lives on the row so that claiming is one indexed, lockable read:
    ``assigned_count`` counts live-or-submitted assignments and, with ``prior_votes`` (imported
    human labels counted as votes), may never exceed ``overlap`` — a database check, so no item
    can get an (N+1)-th annotation under any concurrency. ``version`` increases with every state
    change and guards adjudication (optimistic locking).

    A ``gold`` item carries reference labels (:class:`labeling.models.GoldReference`) and is
    outside the voting flow: each annotator may be served it once (``Assignment.gold``), its
    labels are never compared, resolved, released or certified, and ``assigned_count`` stays 0.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="items")
    candidate = models.OneToOneField(CandidateAnswer, on_delete=models.CASCADE, related_name="item")
    status = models.CharField(max_length=12, choices=ItemStatus.choices, db_default=ItemStatus.OPEN)
    overlap = models.PositiveSmallIntegerField(
        db_default=2, help_text="N for this item, copied from the project when labelling starts."
    )
    assigned_count = models.PositiveSmallIntegerField(db_default=0)
    prior_votes = models.PositiveSmallIntegerField(db_default=0)
    queue_position = models.BigIntegerField(db_default=0)
    version = models.PositiveIntegerField(db_default=0)
    resolution = models.OneToOneField(
        "labeling.Resolution",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="current_for",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        indexes = [
            models.Index(
                fields=["project", "status", "queue_position", "id"], name="item_queue_idx"
            ),
            # The open items with a free slot, in serving order: "next item" walks only these
            # (not the full items ahead of them), and the workbench counts them with a cap.
            models.Index(
                fields=["project", "queue_position", "id"],
                condition=Q(status="open", assigned_count__lt=F("overlap") - F("prior_votes")),
                name="item_free_queue_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ItemStatus.values), name="item_status"),
            models.CheckConstraint(condition=Q(overlap__gte=1), name="item_overlap_positive"),
            models.CheckConstraint(
                condition=Q(assigned_count=0)
                | Q(assigned_count__lte=F("overlap") - F("prior_votes")),
                name="item_assignments_within_overlap",
            ),
            models.CheckConstraint(
                condition=~Q(status=ItemStatus.RESOLVED) | Q(resolution__isnull=False),
                name="item_resolved_has_resolution",
            ),
        ]

    def __str__(self) -> str:
        return f"item {self.pk}"
