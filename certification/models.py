"""Certification data: the agreement report of a project (issue 3, item 8); calibration specs
and calibration runs (issue 4). Later issues add evaluator audits and releases here.
"""

from __future__ import annotations

from django.conf import settings
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
    """

    project = models.OneToOneField(
        Project, on_delete=models.CASCADE, related_name="agreement_report"
    )
    computed_at = models.DateTimeField()
    input_sha256 = models.CharField(max_length=64)
    answer = models.JSONField(default=dict)
    claim = models.JSONField(default=dict)

    class Meta:
        ordering = ["project"]
        constraints = [
            models.CheckConstraint(
                condition=Q(input_sha256="") | Exact(Length("input_sha256"), 64),
                name="agreement_report_sha256_hex64",
            ),
        ]

    def __str__(self) -> str:
        return f"agreement of project {self.project_id}"


# ---------------------------------------------------------------------------------------------
# Calibration specs and runs (issue 4)
# ---------------------------------------------------------------------------------------------


class CalibrationMethod(models.TextChoices):
    """What a spec certifies (seed 000 selective risk; seed 004 conformal sets)."""

    SELECTIVE_RISK = "selective_risk", "selective risk (Learn then Test)"
    CONFORMAL_SET = "conformal_set", "conformal prediction sets"
    BOTH = "both", "both"


class Loss(models.TextChoices):
    """The 0/1 loss of one emitted answer (the unit of the selective-risk certificate)."""

    ANSWER_INADMISSIBLE = "answer_inadmissible", "1 if the resolved answer label is not admissible"
    ANY_ERROR = (
        "any_error",
        "1 if the answer is not admissible or any of its claims is not supported",
    )


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
    """The frozen evaluation contract of seed 000 ("Freeze the evaluation contract").

    Written before calibration and immutable once a run uses it: the services refuse edits
    then, and a revision is a new row (``version`` + 1) linked to its predecessor by
    ``previous``. ``content_sha256`` is the sha256 of the canonical JSON of the contract
    (``certification.services.calibration.spec_content``): two specs with the same hash state
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


class CalibrationRun(models.Model):
    """One computation of a spec on the resolved labels (DESIGN.md §1 "calibration run").

    ``inputs`` is the snapshot of everything the computation reads (per question: its
    candidates with their scores, canonical answers, resolved outcome and claim-label counts;
    see ``certification.selectors.calibration_inputs``), and ``input_sha256`` the sha256 of the
    canonical JSON of that snapshot, the spec's content hash and the statistics' version. Every
    number in ``result`` is a function of ``inputs`` and the spec, so it can be rebuilt
    (``certification.services.calibration_result_compute``). At most one pending, running or
    done run exists per (spec, input hash) (a partial unique constraint): starting a run on
    unchanged labels returns the existing one.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="calibration_runs")
    spec = models.ForeignKey(CalibrationSpec, on_delete=models.RESTRICT, related_name="runs")
    status = models.CharField(max_length=8, choices=RunStatus.choices, default=RunStatus.PENDING)
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    spec_sha256 = models.CharField(max_length=64)
    input_sha256 = models.CharField(max_length=64)
    stats_version = models.PositiveIntegerField()
    inputs = models.JSONField(default=dict)
    result = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["spec", "-created_at"], name="calibration_run_spec_idx")]
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


# ---------------------------------------------------------------------------------------------
# Evaluator audits (issue 5)
# ---------------------------------------------------------------------------------------------


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
                condition=Q(input_sha256="") | Exact(Length("input_sha256"), 64),
                name="audit_report_sha256_hex64",
            ),
            models.CheckConstraint(
                condition=Q(confidence__gt=0) & Q(confidence__lt=1),
                name="audit_report_confidence_open_unit",
            ),
        ]

    def __str__(self) -> str:
        return f"audit of evaluator {self.evaluator_id}"

    @property
    def uses_score(self) -> bool:
        """Whether the evaluator's verdict is its score against the declared threshold."""
        return self.score_threshold is not None


class AuditSample(models.Model):
    """A seeded stratified random sample of an evaluator's labelled items, for blind labelling.

    Strata are evaluator verdict (positive / negative / unavailable under the audit's declared
    polarity) × the value of one slice dimension. ``design`` records, per stratum, its
    population N_h, sampled n_h and inclusion probability n_h / N_h; ``population`` maps every
    evaluator-labelled item id (as a string) to its stratum, so that the error-rate estimates
    can weight the audited items by the design that drew them.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="audit_samples")
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
    """One sampled item with its stratum and inclusion probability."""

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


# ---------------------------------------------------------------------------------------------
# Releases: certified label sets (issue 6, DESIGN.md §5)
# ---------------------------------------------------------------------------------------------

RELEASE_VERSION_PATTERN = r"^(0|[1-9][0-9]{0,8})(\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8}))?$"


def release_version_key(version: str) -> tuple[int, ...]:
    """Return the sort key of a release version: "3" → (3,), "1.2.0" → (1, 2, 0).

    Versions of both kinds compare by their numbers: "2" > "1.9.9" and "1.10.0" > "1.9.0".
    """
    return tuple(int(part) for part in version.split("."))


class Release(models.Model):
    """A frozen, immutable certified label set of a project (DESIGN.md §5).

    Freezing pins the database state the release describes: ``cutoff`` holds, per append-only
    table, the largest row id committed when the release was frozen (labels are append-only, so
    "rows with id ≤ cutoff" is exactly the state at that moment), and ``report`` holds the
    agreement, held-out and audit figures as they stood. Builds read only that state, so every
    build of a release gives byte-identical files. ``certifies`` lists the calibration specs and
    runs the release certifies (spec id, version, content sha256; run id, input sha256).
    The project's slug, name and split are copied as they stood (a later rename or split must
    not change a rebuild): a split frozen after the release leaves its questions unpartitioned.

    Immutable: the database refuses any UPDATE (trigger); the app, API and admin offer neither
    edit nor delete; a correction is a new release whose ``parent`` is this one. ``version`` is an
    increasing integer ("3") or a semantic version ("1.2.0"); it grows along the parent chain.
    """

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="releases")
    version = models.CharField(max_length=32)
    # The project's slug and name are pinned too: a later rename must not change the files.
    project_slug = models.CharField(
        max_length=64, help_text="The project's slug when the release was frozen."
    )
    project_name = models.CharField(
        max_length=200, help_text="The project's name when the release was frozen."
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    policy = models.ForeignKey("labeling.LabelPolicy", on_delete=models.PROTECT, related_name="+")
    partition = models.JSONField(
        default=dict,
        help_text="The split as it stood when the release was frozen: frozen, seed, proportions.",
    )
    certifies = models.JSONField(default=list, blank=True)
    cutoff = models.JSONField(default=dict)
    report = models.JSONField(default=dict)
    notes = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["project", "version"], name="release_unique_version"),
            models.CheckConstraint(
                condition=Q(version__regex=RELEASE_VERSION_PATTERN), name="release_version_format"
            ),
            models.CheckConstraint(
                condition=~Q(parent=models.F("pk")), name="release_not_own_parent"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug} {self.version}"


class BuildStatus(models.TextChoices):
    """Where a release build stands."""

    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class ReleaseBuild(models.Model):
    """One build of a release's files by the Celery task (with progress for the page).

    The first done build is the release's content: its files are in the release storage under
    ``storage_prefix`` and ``files`` lists each file's name, sha256 and size (the manifest's own
    hash is ``manifest_sha256``). A later build (a rebuild) writes elsewhere, is compared file by
    file with the first, and records whether every byte matched (``matches``).
    """

    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="builds")
    status = models.CharField(
        max_length=8, choices=BuildStatus.choices, default=BuildStatus.PENDING
    )
    is_rebuild = models.BooleanField(default=False)
    storage_prefix = models.CharField(max_length=500, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    files = models.JSONField(default=list, blank=True)
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    archive_sha256 = models.CharField(max_length=64, blank=True)
    archive_size = models.PositiveBigIntegerField(null=True, blank=True)
    matches = models.BooleanField(null=True, blank=True)
    mismatches = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["release", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=BuildStatus.values), name="release_build_status"
            ),
            models.CheckConstraint(
                condition=~Q(status=BuildStatus.FAILED) | ~Q(error=""),
                name="release_build_failed_has_error",
            ),
            models.UniqueConstraint(
                fields=["release"],
                condition=Q(is_rebuild=False),
                name="release_build_one_first_build",
            ),
        ]

    def __str__(self) -> str:
        kind = "rebuild" if self.is_rebuild else "build"
        return f"{kind} {self.pk} of release {self.release_id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        """Whether the build is done or failed (its page stops refreshing)."""
        return self.status in (BuildStatus.DONE, BuildStatus.FAILED)


class ReleaseTag(models.Model):
    """A movable name (``latest``, ``paper-v1``) pointing at one release of a project.

    Every move is kept in ``ReleaseTagMove``.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="release_tags")
    name = models.SlugField(max_length=64)
    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="tags")
    moved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    moved_at = models.DateTimeField()

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="release_tag_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} → {self.release_id}"


class ReleaseTagMove(models.Model):
    """One placement of a tag on a release (append-only history of ``ReleaseTag``)."""

    tag = models.ForeignKey(ReleaseTag, on_delete=models.CASCADE, related_name="moves")
    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="+")
    previous = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    moved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    moved_at = models.DateTimeField()

    class Meta:
        ordering = ["tag", "moved_at", "pk"]

    def __str__(self) -> str:
        return f"{self.tag_id}: {self.previous_id} → {self.release_id}"
