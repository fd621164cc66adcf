"""Calibration: specs (the frozen evaluation contract) and runs (one computation of a spec).

The choices classes name every option a spec can take; the database checks the ranges.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact

from labeling.models import LeasedWork, Project


class CalibrationMethod(models.TextChoices):
    """What a spec certifies: a selective-risk bound (Learn then Test), conformal sets, or both."""

    SELECTIVE_RISK = "selective_risk", "selective risk (Learn then Test)"
    CONFORMAL_SET = "conformal_set", "conformal prediction sets"
    BOTH = "both", "both"


class Loss(models.TextChoices):
    """The loss of one emitted answer (the unit of the selective-risk certificate).

    The first two are 0/1 losses (exact binomial test); the others are bounded in [0, 1]
    (Hoeffding–Bentkus test) and appear in the contract as ``{"kind": "bounded", "source": ...}``
    (``certification.contract.loss_content``).
    """

    ANSWER_INADMISSIBLE = "answer_inadmissible", "1 if the resolved answer label is not admissible"
    ANY_ERROR = (
        "any_error",
        "1 if the answer is not admissible or any of its claims is not supported",
    )
    UNSUPPORTED_CLAIM_SHARE = (
        "unsupported_claim_share",
        "bounded: the share of the answer's assessed claims that are not supported",
    )
    CANDIDATE_FIELD = "candidate_field", "bounded: a numeric candidate field in [0, 1]"


class Denominator(models.TextChoices):
    """What the selective-risk error count is divided by."""

    ACCEPTED_ANSWERS = "accepted_answers", "accepted answers (selective risk)"
    ELIGIBLE_UNITS = "eligible_units", "all eligible units (unconditional failure rate)"


class Acceptance(models.TextChoices):
    """The acceptance inequality: an answer is accepted iff ``score <op> threshold``."""

    GE = ">=", "score >= threshold"
    GT = ">", "score > threshold"
    LE = "<=", "score <= threshold"
    LT = "<", "score < threshold"


class Selector(models.TextChoices):
    """The rule that turns a question's candidates into the emitted answer(s)."""

    EACH_CANDIDATE = "each_candidate", "every candidate is an emitted answer (unit = candidate)"
    IS_SELECTED = "is_selected", "the candidate flagged is_selected (unit = question)"
    MODE = "mode", "the most frequent canonical answer, first sample of it (unit = question)"
    FIRST_SAMPLE = "first_sample", "the candidate with the lowest sample index (unit = question)"


class Utility(models.TextChoices):
    """How an operating point is chosen among certified thresholds (stats.selective_risk)."""

    ANSWER_RATE = "answer_rate", "largest answer rate"
    LOWEST_UPPER_BOUND = "lowest_upper_bound", "lowest upper bound on the risk"


class TieRule(models.TextChoices):
    """How classes with equal sample counts are ranked (stats.conformal.TIE_RULES)."""

    CANONICAL_ASCENDING = "canonical_ascending", "canonical string, ascending"
    FIRST_SEEN = "first_seen", "the class sampled first"


class AnswerField(models.TextChoices):
    """Which candidate field is a sampled answer for frequency ranking."""

    CANONICAL_FORM = "canonical_form", "the imported canonical form (none = no answer)"
    TEXT = "text", "the answer text"


class Multiplicity(models.TextChoices):
    """Family-wise error control over the threshold family."""

    BONFERRONI = "bonferroni", "Bonferroni (delta / M)"
    FIXED_SEQUENCE = "fixed_sequence", "fixed-sequence testing in the listed order"


class CalibrationPartition(models.TextChoices):
    """The partition a spec calibrates on; the test partition is always held out."""

    CALIBRATION = "calibration", "calibration"
    DEV = "dev", "dev"


class CountAs(models.TextChoices):
    """How an outcome without an admissible/inadmissible label counts."""

    ERROR = "error", "as an error"
    EXCLUDE = "exclude", "excluded (reported with its count)"


class CalibrationSpec(models.Model):
    """The frozen evaluation contract: what a calibration certifies, fixed before it runs.

    Written before calibration and immutable once a run uses it: the services refuse edits
    then, and a revision is a new row (``version`` + 1) linked to its predecessor by
    ``previous``. ``content_sha256`` is the sha256 of the canonical JSON of the contract
    (``certification.contract.spec_content``): two specs with the same hash state
    the same contract. The name, version and authorship are not part of the contract.

    Numbers: ``alpha`` (target risk or miscoverage), ``delta`` (failure probability),
    ``report_confidence`` (two-sided level of the held-out intervals) and ``stopping_delta``
    are exact decimals in (0, 1). ``thresholds`` is the explicit, ordered threshold family (the
    order is the testing order of fixed-sequence testing).
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="calibration_specs")
    name = models.CharField(max_length=200)
    version = models.PositiveIntegerField(default=1)
    previous = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.RESTRICT, related_name="next_version"
    )
    description = models.TextField(
        blank=True, help_text="Population, source snapshot and generation policy, in words."
    )
    method = models.CharField(max_length=20, choices=CalibrationMethod.choices)
    loss = models.CharField(max_length=32, choices=Loss.choices, default=Loss.ANSWER_INADMISSIBLE)
    loss_field = models.CharField(
        max_length=300,
        blank=True,
        help_text="The candidate field of a candidate_field loss (empty for the others).",
    )
    denominator = models.CharField(
        max_length=20, choices=Denominator.choices, default=Denominator.ACCEPTED_ANSWERS
    )
    alpha = models.DecimalField(max_digits=10, decimal_places=8)
    delta = models.DecimalField(max_digits=10, decimal_places=8)
    thresholds = models.JSONField(default=list, blank=True)
    acceptance = models.CharField(max_length=2, choices=Acceptance.choices, default=Acceptance.GE)
    score_field = models.CharField(max_length=300, blank=True)
    selector = models.CharField(max_length=20, choices=Selector.choices)
    utility = models.CharField(max_length=20, choices=Utility.choices, default=Utility.ANSWER_RATE)
    canonicaliser = models.CharField(max_length=64, default="exact")
    tie_rule = models.CharField(
        max_length=24, choices=TieRule.choices, default=TieRule.CANONICAL_ASCENDING
    )
    answer_field = models.CharField(
        max_length=20, choices=AnswerField.choices, default=AnswerField.CANONICAL_FORM
    )
    stopping_delta = models.DecimalField(max_digits=10, decimal_places=8, null=True, blank=True)
    multiplicity = models.CharField(
        max_length=20, choices=Multiplicity.choices, default=Multiplicity.BONFERRONI
    )
    partition = models.CharField(
        max_length=12,
        choices=CalibrationPartition.choices,
        default=CalibrationPartition.CALIBRATION,
    )
    unresolved_as = models.CharField(max_length=8, choices=CountAs.choices, default=CountAs.ERROR)
    evidence_unavailable_as = models.CharField(
        max_length=8, choices=CountAs.choices, default=CountAs.ERROR
    )
    abstained_as = models.CharField(max_length=8, choices=CountAs.choices, default=CountAs.ERROR)
    pending_as = models.CharField(max_length=8, choices=CountAs.choices, default=CountAs.EXCLUDE)
    report_confidence = models.DecimalField(max_digits=10, decimal_places=8, default="0.95")
    seed = models.BigIntegerField(default=0, help_text="Seed of the split simulations.")
    content_sha256 = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "name", "version"], name="calibration_spec_unique_version"
            ),
            models.CheckConstraint(
                condition=Q(alpha__gt=0, alpha__lt=1, delta__gt=0, delta__lt=1),
                name="calibration_spec_levels_open_unit",
            ),
            models.CheckConstraint(
                condition=Q(report_confidence__gt=0, report_confidence__lt=1),
                name="calibration_spec_confidence_open_unit",
            ),
            models.CheckConstraint(
                condition=Q(stopping_delta__isnull=True)
                | Q(stopping_delta__gt=0, stopping_delta__lt=1),
                name="calibration_spec_stopping_delta_open_unit",
            ),
            models.CheckConstraint(
                condition=Q(method__in=CalibrationMethod.values), name="calibration_spec_method"
            ),
            models.CheckConstraint(
                condition=Exact(Length("content_sha256"), 64),
                name="calibration_spec_sha256_hex64",
            ),
            models.CheckConstraint(
                condition=Q(version__gte=1), name="calibration_spec_version_positive"
            ),
            models.CheckConstraint(
                condition=(Q(loss=Loss.CANDIDATE_FIELD) & ~Q(loss_field=""))
                | (~Q(loss=Loss.CANDIDATE_FIELD) & Q(loss_field="")),
                name="calibration_spec_loss_field_iff_candidate_field",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @property
    def certifies_selective_risk(self) -> bool:
        """Whether the spec includes selective-risk certification."""
        return self.method in (CalibrationMethod.SELECTIVE_RISK, CalibrationMethod.BOTH)

    @property
    def certifies_conformal_set(self) -> bool:
        """Whether the spec includes conformal prediction sets."""
        return self.method in (CalibrationMethod.CONFORMAL_SET, CalibrationMethod.BOTH)

    @property
    def loss_unit(self) -> str:
        """The sampling unit of the selective-risk loss (and of the held-out answer metrics)."""
        if self.selector == Selector.EACH_CANDIDATE:
            return "emitted answer (each candidate)"
        return "emitted answer (one per question)"


class RunStatus(models.TextChoices):
    """Where a calibration run is."""

    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


LIVE_RUN_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.DONE)


class RunTrigger(models.TextChoices):
    """Why a run was started."""

    MANUAL = "manual", "started by a manager"
    LABELS_CHANGED = "labels_changed", "resolved labels changed"
    COMMAND = "command", "manage.py certify"


class CalibrationInput(models.Model):
    """One distinct input snapshot of calibration runs, stored once however many runs read it.

    ``sha256`` is the sha256 of the canonical JSON of ``snapshot`` alone (a run's
    ``input_sha256`` also covers its spec and the statistics' version, so runs of several specs
    on the same labels share one row).
    """

    sha256 = models.CharField(max_length=64, unique=True)
    snapshot = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Exact(Length("sha256"), 64), name="calibration_input_sha256_hex64"
            ),
        ]

    def __str__(self) -> str:
        return f"calibration input {self.sha256[:12]}"


class CalibrationRun(LeasedWork):
    """One computation of a spec on the resolved labels.

    ``inputs`` (the snapshot of its :class:`CalibrationInput`, stored once per distinct
    snapshot) is everything the computation reads (per question: its candidates with their
    scores, canonical answers, resolved outcome and claim-label counts; see
    ``certification.selectors.calibration_inputs``), and ``input_sha256`` the sha256 of the
    canonical JSON of that snapshot, the spec's content hash and the statistics' version. Every
    number in ``result`` is a function of ``inputs`` and the spec, so it can be rebuilt
    (``certification.services.calibration_result_compute``). At most one pending, running or
    done run exists per (spec, input hash) (a partial unique constraint): starting a run on
    unchanged labels returns the existing one.

    While it runs, its worker holds its lease (``labeling.engine``); a run whose worker died is
    run again by the engine's recovery pass.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="calibration_runs")
    spec = models.ForeignKey(CalibrationSpec, on_delete=models.RESTRICT, related_name="runs")
    status = models.CharField(max_length=8, choices=RunStatus.choices, default=RunStatus.PENDING)
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    spec_sha256 = models.CharField(max_length=64)
    input_sha256 = models.CharField(max_length=64)
    stats_version = models.PositiveIntegerField()
    input = models.ForeignKey(CalibrationInput, on_delete=models.PROTECT, related_name="runs")
    result = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["spec", "-created_at"], name="calibration_run_spec_idx"),
            models.Index(fields=["status"], name="calibration_run_status_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["spec", "input_sha256"],
                condition=Q(status__in=LIVE_RUN_STATUSES),
                name="calibration_run_one_live_per_input",
            ),
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="calibration_run_status"
            ),
            models.CheckConstraint(
                condition=~Q(status=RunStatus.FAILED) | ~Q(error=""),
                name="calibration_run_failed_has_error",
            ),
            models.CheckConstraint(
                condition=Exact(Length("input_sha256"), 64) & Exact(Length("spec_sha256"), 64),
                name="calibration_run_sha256_hex64",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.spec} ({self.status})"

    @property
    def is_finished(self) -> bool:
        """Whether the run is done or failed (its page stops refreshing)."""
        return self.status in (RunStatus.DONE, RunStatus.FAILED)

    @property
    def inputs(self) -> dict[str, Any]:
        """The input snapshot the run computes from (stored once in its ``CalibrationInput``)."""
        snapshot: dict[str, Any] = self.input.snapshot
        return snapshot
