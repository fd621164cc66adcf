"""Forms of the labelling pages: input parsing only; rules live in the services."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.http import QueryDict

from labeling.exceptions import InvalidInput, MultipleValues
from labeling.importers import claims_choice_error, evaluator_version_error, formats
from labeling.importers.claims import CLAIM_MODES
from labeling.importers.record_errors import echo
from labeling.models import ItemStatus, Partition, Role, ServingOrder, SkipReason
from labeling.selectors import UNASSIGNED
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput

DEFAULT_PROPORTIONS: dict[str, float] = {
    Partition.DEV: 0.2,
    Partition.CALIBRATION: 0.4,
    Partition.TEST: 0.4,
}


class SingleValueForm(forms.Form):
    """A form whose single-value fields refuse a post that gives them several values.

    Django reads the last value of a repeated field; a browser sends each select, radio group
    and input once, so a repeat is a forged or broken post. The field gets the error "2 values
    given; this field takes exactly one" (the page answers 400). Fields that take several
    values (multiple choices, multiple files) and disabled fields are not checked.
    """

    def clean(self) -> dict[str, Any]:
        """Add the error of each single-value field given several values."""
        cleaned = super().clean()
        for name, bound in self.fields.items():
            several = isinstance(bound, forms.MultipleChoiceField) or getattr(
                bound.widget, "allow_multiple_selected", False
            )
            if several or bound.disabled:
                continue
            source = self.files if isinstance(bound, forms.FileField) else self.data
            count = len(source.getlist(self.add_prefix(name))) if hasattr(source, "getlist") else 0
            if count > 1:
                self.add_error(name, MultipleValues.of(name, count).reason)
        return cleaned if cleaned is not None else self.cleaned_data


def format_choices() -> list[tuple[str, str]]:
    """Return the importable formats as form choices, native first."""
    known = formats()
    names = sorted(known, key=lambda name: (name != "native", name))
    return [(name, f"{name} — {known[name].description}") for name in names]


def _choice_field(form: forms.BaseForm, name: str) -> forms.ChoiceField:
    """Return the form's bound copy of the choice field ``name`` (to set its choices)."""
    field = form.fields[name]
    if not isinstance(field, forms.ChoiceField):
        raise TypeError(f"{type(form).__name__}.{name} is a {type(field).__name__}, not a choice")
    return field


class ImportForm(SingleValueForm):
    """A workload file and its format."""

    file = forms.FileField(help_text="A workload file; native is JSONL, one question per line.")
    format = forms.ChoiceField(initial="native")
    claims = forms.ChoiceField(
        required=False,
        choices=[
            ("", "default: the format's own claims, else one per sentence"),
            *CLAIM_MODES.items(),
        ],
        help_text="For formats whose answers come without claims (e.g. otel): how each answer "
        "is split into claims. Formats that give their claims take the default.",
    )
    evaluator_version = forms.CharField(
        required=False,
        max_length=255,
        help_text="For formats with evaluator score columns (ragas): the version of the "
        "evaluator that computed them, e.g. ragas-0.2.6.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Formats are read at request time: adapters register in labeling.importers.formats().
        _choice_field(self, "format").choices = format_choices()

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        refused = claims_choice_error(cleaned.get("format", ""), cleaned.get("claims") or None)
        if refused is not None:
            self.add_error("claims", refused)
        version = evaluator_version_error(
            cleaned.get("format", ""), cleaned.get("evaluator_version") or None
        )
        if version is not None:
            self.add_error("evaluator_version", version)
        return cleaned


class PartitionForm(SingleValueForm):
    """The seed and declared proportions of the grouped split (checked by ``partition_freeze``)."""

    seed = forms.IntegerField(
        min_value=0,
        max_value=2**63 - 1,
        help_text="Recorded with the split; the same seed and data give the same split.",
    )
    dev = forms.FloatField(min_value=0, max_value=1, initial=DEFAULT_PROPORTIONS[Partition.DEV])
    calibration = forms.FloatField(
        min_value=0, max_value=1, initial=DEFAULT_PROPORTIONS[Partition.CALIBRATION]
    )
    test = forms.FloatField(min_value=0, max_value=1, initial=DEFAULT_PROPORTIONS[Partition.TEST])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A fresh suggestion each time; the manager may replace it. Not a secret, just unbiased.
        self.fields["seed"].initial = secrets.randbelow(2**31)

    def proportions(self) -> dict[str, float]:
        """Return the cleaned proportions keyed by partition."""
        return {p: self.cleaned_data[p] for p in Partition.values}


ITEM_SORT_CHOICES = [
    ("id", "id, ascending"),
    ("-id", "id, descending"),
    ("-updated", "last updated, newest first"),
    ("updated", "last updated, oldest first"),
    ("-votes", "votes, most first"),
    ("votes", "votes, fewest first"),
    ("status", "status (open, disagreement, resolved)"),
    ("-status", "status (resolved, disagreement, open)"),
]


class ItemFilterForm(SingleValueForm):
    """Filters and sort of the item browser; invalid values are reported and ignored."""

    partition = forms.ChoiceField(required=False)
    generator = forms.ChoiceField(required=False)
    q = forms.CharField(required=False, max_length=200, label="Search")
    status = forms.ChoiceField(required=False)
    disagreement = forms.ChoiceField(required=False, label="Disagreement level")
    resolved_label = forms.ChoiceField(required=False, label="Resolved label")
    voted_label = forms.ChoiceField(required=False, label="Voted label")
    annotator = forms.ChoiceField(required=False, label="Labelled by")
    sort = forms.ChoiceField(required=False, choices=ITEM_SORT_CHOICES)

    def __init__(
        self,
        *args: Any,
        generators: list[str],
        labels: Sequence[str] = (),
        annotators: Sequence[tuple[int, str]] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        _choice_field(self, "partition").choices = [
            ("", "any"),
            *Partition.choices,
            (UNASSIGNED, UNASSIGNED),
        ]
        _choice_field(self, "generator").choices = [("", "any"), *((g, g) for g in generators)]
        _choice_field(self, "status").choices = [("", "any"), *ItemStatus.choices]
        _choice_field(self, "disagreement").choices = [
            ("", "any"),
            ("answer", "the answer label differed"),
            ("claim", "a claim label differed"),
            ("none", "never in disagreement"),
        ]
        label_choices = [(label, label.replace("_", " ")) for label in labels]
        _choice_field(self, "resolved_label").choices = [("", "any"), *label_choices]
        _choice_field(self, "voted_label").choices = [("", "any"), *label_choices]
        _choice_field(self, "annotator").choices = [
            ("", "anyone"),
            *((str(pk), name) for pk, name in annotators),
        ]

    def filters(self) -> dict[str, str]:
        """Return the filters that are valid and set; invalid ones are left out (and reported)."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return {k: v for k, v in self.cleaned_data.items() if v}


class _ItemIds(forms.MultipleHiddenInput):
    """Several item ids under one name (the checked rows)."""

    allow_multiple_selected = True


class ItemBulkForm(SingleValueForm):
    """A bulk action of the item browser on the checked items (managers)."""

    action = forms.ChoiceField(
        choices=[("prioritise", "Prioritise"), ("return", "Return to the queue")]
    )
    items = forms.Field(widget=_ItemIds, required=False)
    extra_votes = forms.IntegerField(
        min_value=1,
        max_value=100,
        required=False,
        initial=1,
        label="More votes per item",
        help_text="Return to the queue: how many more annotations each item collects.",
    )

    def clean_items(self) -> list[int]:
        """Return the checked item ids (at least one), each a positive integer."""
        values = self.data.getlist("items") if hasattr(self.data, "getlist") else []
        if not values:
            raise forms.ValidationError("Check at least one item.")
        if not all(v.isdigit() and 0 < int(v) < 2**63 for v in values):
            raise forms.ValidationError("Item ids are positive integers.")
        return [int(v) for v in values]


# ---------------------------------------------------------------------------------------------
# Members and settings
# ---------------------------------------------------------------------------------------------


class MembershipInviteForm(SingleValueForm):
    """Invite a person by username or e-mail address; they join only once they accept."""

    invitee = forms.CharField(
        max_length=254,
        label="Username or e-mail",
        help_text="An account's username, or the e-mail address of a new person.",
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ANNOTATOR)


class JoinForm(SingleValueForm):
    """Accept an e-mailed invitation: choose a username and a password."""

    username = forms.CharField(max_length=150)
    password1 = forms.CharField(label="Password", strip=False, widget=forms.PasswordInput)
    password2 = forms.CharField(label="Password (again)", strip=False, widget=forms.PasswordInput)

    def clean(self) -> dict[str, Any]:
        """Refuse two different passwords."""
        data = super().clean() or {}
        if data.get("password1") and data.get("password1") != data.get("password2"):
            self.add_error("password2", "The two passwords differ.")
        return data


class MembershipChangeForm(SingleValueForm):
    """Change one member's role."""

    user_id = forms.IntegerField(widget=forms.HiddenInput)
    role = forms.ChoiceField(choices=Role.choices)


class ProjectSettingsForm(SingleValueForm):
    """Labelling settings; overlap and serving order are locked once labelling has started."""

    LOCKED_AFTER_START = ("overlap", "serving_order", "serving_seed")

    # Bounds are the service's rules (project_labelling_configure); its errors name the field.
    overlap = forms.IntegerField(help_text="Independent annotations per item (N).")
    lease_minutes = forms.IntegerField(
        help_text="How long an annotator holds an item before its slot is given back."
    )
    serving_order = forms.ChoiceField(choices=ServingOrder.choices)
    serving_seed = forms.IntegerField(
        required=False, help_text="Seed of the seeded random order (required for it)."
    )
    allow_self_adjudication = forms.BooleanField(
        required=False, help_text="May an adjudicator resolve an item they annotated?"
    )

    def __init__(self, *args: Any, locked: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.locked = locked
        if locked:
            # Disabled fields ignore posted values and keep their initial (current) value.
            for name in self.LOCKED_AFTER_START:
                self.fields[name].disabled = True

    def changes(self) -> dict[str, Any]:
        """Return the fields to pass to ``project_labelling_configure`` (locked ones left out)."""
        return {
            name: value
            for name, value in self.cleaned_data.items()
            if not (self.locked and name in self.LOCKED_AFTER_START)
        }


# ---------------------------------------------------------------------------------------------
# Annotating and adjudicating
# ---------------------------------------------------------------------------------------------


class SkipForm(SingleValueForm):
    """Skip an item with a reason."""

    # No reason is pre-selected: the person chooses one (the empty choice is refused).
    reason = forms.ChoiceField(choices=[("", "— choose a reason —"), *SkipReason.choices])
    note = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2})
    )


class QueueFilterForm(SingleValueForm):
    """Filters of the disagreement queue; invalid values are reported and ignored."""

    partition = forms.ChoiceField(
        required=False, choices=[("", "any"), *Partition.choices, (UNASSIGNED, UNASSIGNED)]
    )
    level = forms.ChoiceField(
        required=False,
        choices=[("", "any"), ("answer", "answer label differs"), ("claim", "claim labels differ")],
    )
    min_age_hours = forms.IntegerField(
        required=False, min_value=0, max_value=24 * 365, label="Waiting at least (hours)"
    )

    def filters(self) -> dict[str, Any]:
        """Return the valid filters that are set."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return {k: v for k, v in self.cleaned_data.items() if v not in (None, "")}


# Field names of the labelling and adjudication forms (see templates/labeling/annotate.html):
#   answer_label, answer_reason, comment, time_spent_seconds
#   claim-<claim_id>-label, claim-<claim_id>-reason, claim-<claim_id>-boundary_error
#   claim-<claim_id>-evidence-<n>-{source_version_id,start,end,quote_json,unit}
# ``quote_json`` is the quote as a JSON string literal: form encoding rewrites every newline of a
# field value to CRLF, which would change a quote; a JSON literal has no raw newline to rewrite.
EVIDENCE_FIELD = re.compile(
    r"^claim-(?P<claim>\d+)-evidence-(?P<n>\d+)-(?P<field>source_version_id|start|end|quote_json|unit)$"
)


@dataclass
class EvidenceState:
    """One cited span as the page holds it (strings as posted, or a stored span)."""

    source_version_id: str
    start: str
    end: str
    quote: str
    unit: str = "utf16"

    @property
    def quote_json(self) -> str:
        """The quote as a JSON string literal, ASCII only (lone surrogates survive)."""
        return json.dumps(self.quote)

    @property
    def quote_display(self) -> str:
        """The quote, printable in an UTF-8 page (a lone surrogate becomes U+FFFD)."""
        return self.quote.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


@dataclass
class ClaimState:
    """A claim's label, reason, boundary flag and evidence as the page holds them."""

    label: str = ""
    reason: str = ""
    boundary_error: bool = False
    evidence: list[EvidenceState] = field(default_factory=list)


@dataclass
class LabelsState:
    """Everything the labelling (or adjudication) form holds, parsed from a POST or a record.

    ``claims`` is keyed by claim id. Parsing never fails: values stay strings until
    :meth:`claim_inputs` converts them, which raises ``InvalidInput`` naming the field.
    """

    answer_label: str = ""
    answer_reason: str = ""
    comment: str = ""
    time_spent_seconds: str = ""
    claims: dict[int, ClaimState] = field(default_factory=dict)
    #: The revision the labels were made on, as posted ("": not said).
    revision: str = ""
    #: The label policy version the form was loaded under, as posted ("": not said).
    policy_version: str = ""

    @classmethod
    def from_post(cls, data: QueryDict, claim_ids: Sequence[int]) -> LabelsState:
        """Read the form fields of the claims ``claim_ids`` (others are ignored)."""
        claims = {
            cid: ClaimState(
                label=data.get(f"claim-{cid}-label", ""),
                reason=data.get(f"claim-{cid}-reason", ""),
                boundary_error=data.get(f"claim-{cid}-boundary_error") in ("on", "true", "1"),
            )
            for cid in claim_ids
        }
        spans: dict[tuple[int, int], dict[str, str]] = {}
        for key in data:
            match = EVIDENCE_FIELD.match(key)
            if match and int(match["claim"]) in claims:
                spans.setdefault((int(match["claim"]), int(match["n"])), {})[match["field"]] = (
                    data.get(key, "")
                )
        for (cid, _n), raw in sorted(spans.items()):
            try:
                quote = json.loads(raw.get("quote_json", '""'))
            except ValueError:
                quote = raw.get("quote_json", "")
            claims[cid].evidence.append(
                EvidenceState(
                    source_version_id=raw.get("source_version_id", ""),
                    start=raw.get("start", ""),
                    end=raw.get("end", ""),
                    quote=quote if isinstance(quote, str) else str(quote),
                    unit=raw.get("unit", "utf16"),
                )
            )
        return cls(
            answer_label=data.get("answer_label", ""),
            answer_reason=data.get("answer_reason", ""),
            comment=data.get("comment", ""),
            time_spent_seconds=data.get("time_spent_seconds", ""),
            claims=claims,
            revision=data.get("revision", ""),
            policy_version=data.get("policy_version", ""),
        )

    def claim_inputs(self, claim_ids: Sequence[int]) -> tuple[ClaimInput, ...]:
        """Convert the claims, in ``claim_ids`` order, to service input.

        Raises:
            InvalidInput: an offset or source id is not an integer (field
                ``claims[i].evidence[j].<name>``, ``i`` the position in ``claim_ids``).
        """
        result = []
        for i, cid in enumerate(claim_ids):
            state = self.claims.get(cid, ClaimState())
            evidence = tuple(
                EvidenceInput(
                    source_version_id=_integer(
                        ev.source_version_id, f"claims[{i}].evidence[{j}].source_version_id"
                    ),
                    start=_integer(ev.start, f"claims[{i}].evidence[{j}].start"),
                    end=_integer(ev.end, f"claims[{i}].evidence[{j}].end"),
                    quote=ev.quote,
                    unit=ev.unit,
                )
                for j, ev in enumerate(state.evidence)
            )
            result.append(
                ClaimInput(
                    claim_id=cid,
                    label=state.label,
                    reason=state.reason or None,
                    boundary_error=state.boundary_error,
                    evidence=evidence,
                )
            )
        return tuple(result)

    def annotation_input(self, claim_ids: Sequence[int]) -> AnnotationInput:
        """Convert to ``annotation_submit`` input.

        Raises:
            InvalidInput: a number is malformed (field named as in :meth:`claim_inputs`,
                ``time_spent_seconds``, ``revision`` or ``policy_version``).
        """
        spent: float | None = None
        if self.time_spent_seconds.strip():
            try:
                spent = float(self.time_spent_seconds)
            except ValueError as exc:
                raise InvalidInput("not a number", field="time_spent_seconds") from exc
        revision = self.revision.strip()
        policy_version = self.policy_version.strip()
        return AnnotationInput(
            answer_label=self.answer_label,
            answer_reason=self.answer_reason or None,
            claims=self.claim_inputs(claim_ids),
            comment=self.comment,
            time_spent_seconds=spent,
            based_on_revision=_integer(revision, "revision") if revision else None,
            policy_version=_integer(policy_version, "policy_version") if policy_version else None,
        )


#: Fields of the labelling form besides the claims' (each takes one value).
LABELS_FIELDS = (
    "answer_label",
    "answer_reason",
    "comment",
    "time_spent_seconds",
    "revision",
    "policy_version",
)
#: Fields the adjudication form adds.
DECISION_FIELDS = ("action", "expected_version", "unresolved_reason", "rationale")
_CLAIM_FIELD = re.compile(r"^claim-(?P<claim>\d+)-(?P<field>label|reason|boundary_error)$")


def single_values_check(
    data: QueryDict, claim_ids: Sequence[int], fields: Sequence[str] = LABELS_FIELDS
) -> None:
    """Refuse a labelling or adjudication form that gives one of its fields several values.

    Browsers send each radio group, select and hidden input once; a repeated field is a forged
    or broken post, and reading one of its values would store a choice nobody made. Fields are
    named as the services name them: ``answer_label``, ``claims[2].label`` (2: the claim's
    position in ``claim_ids``), ``claims[2].evidence``.

    Raises:
        MultipleValues: ``field`` the repeated field (an ``InvalidInput``, HTTP 400).
    """
    position = {cid: i for i, cid in enumerate(claim_ids)}
    for key, values in data.lists():
        if len(values) < 2:
            continue
        if key in fields:
            name = key
        elif (claim := _CLAIM_FIELD.match(key)) and int(claim["claim"]) in position:
            name = f"claims[{position[int(claim['claim'])]}].{claim['field']}"
        elif (span := EVIDENCE_FIELD.match(key)) and int(span["claim"]) in position:
            name = f"claims[{position[int(span['claim'])]}].evidence"
        else:
            continue
        raise MultipleValues.of(name, len(values))


def _integer(value: str, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{echo(value)} is not an integer", field=name) from exc


class ApiTokenForm(SingleValueForm):
    """A new API token: its name and lifetime (the service checks both)."""

    LIFETIMES = [(7, "7 days"), (30, "30 days"), (90, "90 days"), (365, "1 year")]

    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'CI export'.")
    expires_in_days = forms.TypedChoiceField(
        choices=LIFETIMES, coerce=int, initial=30, label="Expires after"
    )


class WorkPeriodForm(forms.Form):
    """The period of a work report: ``from`` and ``to`` dates (YYYY-MM-DD), both optional."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # "from" is a reserved word: the fields are added here rather than declared
        for name in ("from", "to"):
            self.fields[name] = forms.DateField(
                required=False,
                input_formats=["%Y-%m-%d"],
                widget=forms.DateInput(format="%Y-%m-%d", attrs={"type": "date"}),
            )
