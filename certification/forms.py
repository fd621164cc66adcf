"""Forms of the certification pages. They collect input; the services hold every rule."""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, cast

from django import forms

from certification.certificates.calculator import (
    MAX_GROUP_SIZE,
    MAX_SIZE,
    coverage_inputs_check,
)
from certification.certificates.contract import BOUNDED_LOSS_SOURCES
from certification.contract import spec_content
from certification.models import (
    Acceptance,
    AnswerField,
    CalibrationMethod,
    CalibrationPartition,
    CalibrationSpec,
    CountAs,
    Denominator,
    FlagWhen,
    Loss,
    Multiplicity,
    Release,
    SampleKind,
    Selector,
    TieRule,
    Utility,
    release_version_key,
)
from certification.selectors import CANDIDATE_SCORE_FIELDS, RCCS_PARTITIONS
from certification.services.calibration_specs import SPEC_DEFAULTS
from certification.services.releases.freeze import MAX_NOTES
from certification.stats.canonical import canonicaliser_names
from certification.stats.limits import MAX_ADDITIONAL
from labeling.api.params import DECIMAL_REASON
from labeling.forms import SingleValueForm
from labeling.vocabulary import INADMISSIBLE


def _choices(values: Iterable[str]) -> list[tuple[str, str]]:
    return [(v, v) for v in values]


#: The first option of a required select without a default: nothing is chosen for the user.
BLANK_CHOICE = [("", "— choose —")]


def _initial(value: Any) -> Any:
    """A contract value as the spec form shows it (a list as text, None as empty)."""
    if isinstance(value, list):
        return ", ".join(repr(v) for v in value)
    return "" if value is None else value


class CalibrationSpecForm(SingleValueForm):
    """The calibration contract: what a calibration certifies, fixed before it runs.

    Numbers are read as text so that the service sees exactly what was typed (alpha 0.1 is the
    decimal 0.1, not the nearest float). Validation errors come back from
    ``calibration_spec_create`` / ``calibration_spec_revise`` naming the field; the initial
    values are the service's defaults (``SPEC_DEFAULTS``), and the two required choices
    (method, selector) start unchosen.
    """

    name = forms.CharField(
        max_length=200,
        help_text="A short name of the spec. A revision keeps the name and adds 1 to the version.",
    )
    description = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="In words: which questions (the population), which data snapshot and how the "
        "answers were generated. It is copied into the guarantee ledger.",
    )
    method = forms.ChoiceField(
        choices=BLANK_CHOICE + CalibrationMethod.choices,
        help_text="What to certify. Selective risk finds score thresholds at which the error "
        "rate of the answers given is at most alpha; conformal sets give each question a set "
        "of answers that holds an admissible one with probability at least 1 − alpha.",
    )
    loss = forms.ChoiceField(
        choices=Loss.choices,
        help_text="What makes an answer wrong. The two 0/1 losses (wrong or not) use the exact "
        "binomial test; the bounded losses (a number from 0 to 1 per answer, selective risk "
        "only) use the Hoeffding–Bentkus test.",
    )
    loss_field = forms.CharField(
        required=False,
        max_length=300,
        help_text="For the candidate_field loss only: acceptance_score, confidence, "
        "retrieval_score or metadata.<key>, a number in [0, 1] of each candidate.",
    )
    denominator = forms.ChoiceField(
        choices=Denominator.choices,
        help_text="What the errors are divided by: the answers given (the error rate of what "
        "is answered), or every eligible question (how often a wrong answer is given at all).",
    )
    alpha = forms.CharField(
        max_length=20,
        help_text="The error rate you accept, strictly between 0 and 1 (0.1 is 10 %): the "
        "risk limit of selective risk, the share of questions whose set may miss for "
        "conformal sets.",
    )
    delta = forms.CharField(
        max_length=20,
        help_text="The chance you accept that the certificate itself is wrong (a threshold "
        "certified although its true risk exceeds alpha), strictly between 0 and 1.",
    )
    thresholds = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="The score thresholds to test, fixed now, separated by commas or spaces, in "
        "testing order. Every one counts in the multiplicity correction, even one that "
        "accepts nothing. Selective risk needs at least one.",
    )
    acceptance = forms.ChoiceField(
        choices=Acceptance.choices,
        help_text="When an answer is given: its score compared with the threshold. Use <= for "
        "a score where smaller is better (frequency_rank).",
    )
    score_field = forms.ChoiceField(
        required=False,
        help_text="The score the thresholds apply to: a candidate field, or an evaluator's "
        "score in this project. Selective risk needs one; an answer without it is never given.",
    )
    selector = forms.ChoiceField(
        choices=BLANK_CHOICE + Selector.choices,
        help_text="Which candidate is a question's answer. With every candidate, each "
        "candidate is a unit of its own (not allowed with conformal sets, which are per "
        "question).",
    )
    utility = forms.ChoiceField(
        choices=Utility.choices,
        help_text="Which certified threshold becomes the operating point (ties: the earlier "
        "one in the list).",
    )
    multiplicity = forms.ChoiceField(
        choices=Multiplicity.choices,
        help_text="How testing several thresholds is paid for: Bonferroni tests each at delta "
        "divided by their number; fixed sequence tests them in the listed order at delta and "
        "stops at the first that fails.",
    )
    canonicaliser = forms.ChoiceField(
        help_text="When two sampled answers count as the same answer: exact (the same "
        "string), text (case, spacing and punctuation ignored) or numeric (the same number, "
        '"42.0" = "42").',
    )
    tie_rule = forms.ChoiceField(
        choices=TieRule.choices,
        help_text="How answers sampled equally often are ranked against each other.",
    )
    answer_field = forms.ChoiceField(
        choices=AnswerField.choices,
        help_text="Which field of a candidate is its answer when answers are counted.",
    )
    stopping_delta = forms.CharField(
        required=False,
        max_length=20,
        help_text="Optional, strictly between 0 and 1: stop reading a question's samples once "
        "its most frequent answer is a clear majority at this error chance (Hoeffding), alike "
        "for calibration and test questions. Empty: read every sample.",
    )
    partition = forms.ChoiceField(
        choices=CalibrationPartition.choices,
        help_text="The labelled questions to calibrate on. The test partition is always kept "
        "apart for the held-out report.",
    )
    unresolved_as = forms.ChoiceField(
        choices=CountAs.choices,
        help_text="An answer the adjudication left unresolved: counted as an error (the safe "
        "choice), or left out and its count reported.",
    )
    evidence_unavailable_as = forms.ChoiceField(
        choices=CountAs.choices,
        help_text="An answer whose evidence could not be read (not found, blocked, changed): "
        "counted as an error, or left out and its count reported.",
    )
    abstained_as = forms.ChoiceField(
        choices=CountAs.choices,
        help_text="A refusal or non-answer: counted as an error, or left out and its count "
        "reported.",
    )
    pending_as = forms.ChoiceField(
        choices=CountAs.choices,
        help_text="Items not resolved yet: excluded (the certificate then covers only resolved "
        "items) or counted as errors.",
    )
    report_confidence = forms.CharField(
        max_length=20,
        help_text="The confidence of the intervals of the held-out test report, strictly "
        "between 0 and 1 (0.95 is 95 %).",
    )
    seed = forms.IntegerField(
        min_value=0,
        help_text="Seed of the random calibration/test splits simulated for the report: the "
        "same seed gives the same numbers.",
    )

    def __init__(
        self, *args: Any, evaluators: Iterable[tuple[str, str]] = (), **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        fields = self.fields
        score_choices = [("", "— none (conformal only) —")]
        score_choices += _choices(CANDIDATE_SCORE_FIELDS)
        score_choices += [
            (f"evaluator:{name}@{version}", f"evaluator {name}@{version}")
            for name, version in evaluators
        ]
        fields["score_field"].choices = score_choices  # type: ignore[attr-defined]
        fields["canonicaliser"].choices = _choices(canonicaliser_names())  # type: ignore[attr-defined]
        for name, default in SPEC_DEFAULTS.items():
            fields[name].initial = _initial(default)

    @classmethod
    def initial_from(cls, spec: CalibrationSpec) -> dict[str, Any]:
        """Initial values that reproduce ``spec`` (for a revision)."""
        content = {key: _initial(value) for key, value in spec_content(spec).items()}
        content["loss"], content["loss_field"] = spec.loss, spec.loss_field
        return {"name": spec.name, **content}

    def clean(self) -> dict[str, Any]:
        """Refuse a candidate field given with a loss that reads none."""
        cleaned = super().clean()
        if cleaned.get("loss_field") and cleaned.get("loss") not in BOUNDED_LOSS_SOURCES:
            self.add_error("loss_field", "only a bounded loss (candidate_field) reads a field")
        return cleaned

    def contract(self) -> dict[str, Any]:
        """The cleaned values as the services take them (``name`` left out).

        A bounded loss becomes its object ``{"kind": "bounded", "source": ..., "field": ...}``
        (``field`` when one was typed).
        """
        data = dict(self.cleaned_data)
        data.pop("name", None)
        field = data.pop("loss_field", "")
        if data["loss"] in BOUNDED_LOSS_SOURCES:
            data["loss"] = {"kind": "bounded", "source": data["loss"]}
            if field:
                data["loss"]["field"] = field
        return data


def _label_list(value: str) -> list[str]:
    return [part.strip() for part in value.replace("\n", ",").split(",") if part.strip()]


class AuditDeclarationForm(SingleValueForm):
    """An evaluator audit's declaration: positive labels, or a score threshold."""

    human_positive = forms.CharField(
        initial=INADMISSIBLE,
        help_text="Resolved answer labels counted positive, comma-separated.",
    )
    evaluator_positive = forms.CharField(
        required=False,
        initial=INADMISSIBLE,
        help_text="Evaluator labels counted positive (ignored when a threshold is set).",
    )
    score_threshold = forms.FloatField(
        required=False, help_text="For a score-only evaluator: its score becomes a flag."
    )
    flag_when = forms.ChoiceField(
        choices=FlagWhen.choices, initial=FlagWhen.LT, help_text="The flag is score <op> threshold."
    )
    confidence = forms.DecimalField(initial="0.95", min_value=0, max_value=1, decimal_places=8)

    def declaration(self) -> dict[str, Any]:
        """The cleaned values as ``audit_report_configure`` takes them."""
        data = self.cleaned_data
        return {
            "human_positive": _label_list(data["human_positive"]),
            "evaluator_positive": _label_list(data.get("evaluator_positive") or ""),
            "score_threshold": data.get("score_threshold"),
            "flag_when": data["flag_when"],
            "confidence": data["confidence"],
        }


class AuditSampleForm(SingleValueForm):
    """Draw an audit sample: kind, size (the budget of an active one), seed, strata or floor."""

    kind = forms.TypedChoiceField(
        choices=SampleKind.choices,
        initial=SampleKind.STRATIFIED,
        required=False,
        empty_value=SampleKind.STRATIFIED,
    )
    size = forms.IntegerField(min_value=1, help_text="For an active sample: the expected size.")
    seed = forms.IntegerField(min_value=0, initial=0)
    slice_dimension = forms.ChoiceField(
        required=False,
        choices=[
            ("", "verdict only"),
            ("domain", "domain"),
            ("question_type", "question type"),
            ("generator", "generator"),
        ],
        help_text="Stratified samples only.",
    )
    floor = forms.FloatField(
        required=False,
        help_text="Active samples only: each item's probability is at least this share of the "
        "uniform rate (empty: 0.2).",
    )


class AuditTargetForm(SingleValueForm):
    """A manager's target for the workload error rate (empty: no target)."""

    anytime_target = forms.DecimalField(
        required=False,
        max_digits=10,
        decimal_places=8,
        label="Target error rate",
        help_text="In (0, 1), e.g. 0.10: the page says when labelling may stop.",
    )


class ReleaseFreezeForm(SingleValueForm):
    """Freeze a release: version, parent, the calibration runs it certifies, notes."""

    version = forms.CharField(
        max_length=32,
        help_text="An increasing integer (3) or a semantic version (1.2.0), greater than the "
        "parent's.",
    )
    parent = forms.TypedChoiceField(coerce=int, required=False, empty_value=None)
    runs = forms.TypedMultipleChoiceField(
        coerce=int, required=False, widget=forms.CheckboxSelectMultiple
    )
    notes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=MAX_NOTES
    )

    def __init__(self, *args: Any, releases: list[Release], runs: list[Any], **kwargs: Any):
        super().__init__(*args, **kwargs)
        ordered = sorted(releases, key=lambda r: release_version_key(r.version), reverse=True)
        self.releases = {release.pk: release for release in ordered}
        cast(forms.ChoiceField, self.fields["parent"]).choices = [("", "(none)")] + [
            (release.pk, release.version) for release in ordered
        ]
        cast(forms.ChoiceField, self.fields["runs"]).choices = [
            (run.pk, f"run {run.pk} · {run.spec} · {run.outcome or 'done'}") for run in runs
        ]

    def parent_release(self) -> Release | None:
        """The chosen parent release (cleaned), or None."""
        parent_id = self.cleaned_data.get("parent")
        return None if parent_id is None else self.releases[parent_id]


class ReleaseTagForm(SingleValueForm):
    """Point a tag (new or existing) at a release."""

    name = forms.CharField(max_length=64, help_text="e.g. latest, paper-v1")


class CoverageCalculatorForm(SingleValueForm):
    """The coverage calculator's inputs (read by GET; every error names its field)."""

    n = forms.IntegerField(
        min_value=1, max_value=MAX_SIZE, label="Calibration size n", initial=12288
    )
    alpha = forms.DecimalField(
        max_digits=20, decimal_places=18, label="Miscoverage alpha", initial=Decimal("0.1")
    )
    n_test = forms.IntegerField(
        min_value=1,
        max_value=MAX_SIZE,
        required=False,
        label="Test size",
        help_text="Adds the test binomial term (optional).",
    )
    group_size = forms.IntegerField(
        min_value=1,
        max_value=MAX_GROUP_SIZE,
        required=False,
        label="Group size m",
        help_text="Rows per group (document, entity), with the correlation below.",
    )
    icc = forms.FloatField(
        min_value=-1,
        max_value=1,
        required=False,
        label="Within-group correlation rho",
        help_text="ICC of the coverage indicator within a group, in [-1, 1].",
    )

    def clean_alpha(self) -> Decimal:
        """Alpha is a plain decimal (as the API takes it) strictly between 0 and 1."""
        if not re.fullmatch(r"-?\d{0,2}(?:\.\d{0,18})?", str(self.data.get("alpha", ""))):
            raise forms.ValidationError(DECIMAL_REASON)
        value = cast(Decimal, self.cleaned_data["alpha"])
        if not 0 < value < 1:
            raise forms.ValidationError("alpha must lie strictly between 0 and 1")
        return value

    def clean(self) -> dict[str, Any]:
        """Group size and correlation go together and give a positive design effect."""
        cleaned = super().clean()
        if not self.has_error("icc") and not self.has_error("group_size"):
            for field, messages in coverage_inputs_check(cleaned).items():
                self.add_error(field, messages)
        return cleaned


class RCCSPartitionForm(SingleValueForm):
    """The RCCS page's partition filter (read by GET)."""

    partition = forms.ChoiceField(
        choices=[("", "every partition"), *_choices(RCCS_PARTITIONS)], required=False
    )


class PlanForm(SingleValueForm):
    """The spec page's label budget planner: a number of additional calibration units."""

    n_more = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_ADDITIONAL,
        label="More calibration units",
        help_text="The chance of certifying is shown for this many more resolved units.",
    )
