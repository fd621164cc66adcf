"""Forms of the "New project" and label policy pages.

The forms check only the shape of the post; the rules are the services'
(:func:`labeling.services.projects.project_create`,
:func:`labeling.services.policies.policy_description_check`), whose errors name the field, placed
back on the form by :meth:`PolicyForm.add_service_error`.

The policy form has one fixed row per label of the schema and level (offered or not, position,
display text, description, shortcut key and, for claim labels that can cite, "requires
evidence"), one per reason (offered, display text) and a scale per level: a page without
JavaScript can leave labels out, reorder them and rename them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django import forms

from labeling.exceptions import LabelingError
from labeling.forms import SingleValueForm
from labeling.models import EvidenceRelation, LabelPolicy, LabelScale
from labeling.policy_presets import DEFAULT_PRESET, preset_choices
from labeling.selectors.policies import (
    CITABLE,
    DEFAULT_DESCRIPTIONS,
    DEFAULT_REASON_TEXTS,
    DEFAULT_TEXTS,
    LEVELS,
    REASONS,
    SCHEMA,
    Level,
    policy_description_data,
)
from labeling.services.labelling_queue import MAX_LEASE_MINUTES, MAX_OVERLAP
from labeling.services.policies import (
    GOLD_RULE_DEFAULTS,
    MAX_DESCRIPTION_LENGTH,
    MAX_GUIDELINE_LENGTH,
    MAX_QUALIFICATION_ITEMS,
    MAX_REASON_TEXT_LENGTH,
    MAX_TEXT_LENGTH,
    SCALE_FIELDS,
)
from labeling.services.projects import MAX_NAME_LENGTH, MAX_PROJECT_DESCRIPTION_LENGTH

# A service error's field: "claim_labels[2].key", "unavailable_reasons[0].text", "guideline".
_ROW_FIELD = re.compile(r"^(answer_labels|claim_labels|unavailable_reasons)\[(\d+)\](?:\.(\w+))?$")


class ProjectCreateForm(SingleValueForm):
    """Name, slug, description, policy preset, overlap and lease of a new project."""

    name = forms.CharField(max_length=MAX_NAME_LENGTH)
    slug = forms.CharField(
        max_length=64,
        help_text="The project's URL name: letters, digits, '-' and '_' (e.g. faithbench-2).",
    )
    description = forms.CharField(
        required=False,
        max_length=MAX_PROJECT_DESCRIPTION_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    preset = forms.ChoiceField(
        choices=preset_choices,
        initial=DEFAULT_PRESET,
        widget=forms.RadioSelect,
        help_text="The label policy the project starts with; you can edit it before labelling "
        "starts.",
    )
    overlap = forms.IntegerField(
        min_value=1,
        max_value=MAX_OVERLAP,
        initial=2,
        help_text="Independent annotations per item.",
    )
    lease_minutes = forms.IntegerField(
        min_value=1,
        max_value=MAX_LEASE_MINUTES,
        initial=30,
        help_text="How long an annotator holds an item before its slot is given back.",
    )


@dataclass(frozen=True)
class LabelRow:
    """The form fields of one label of one level (the template draws a table row of them)."""

    level: Level
    value: str
    offered: forms.BoundField
    position: forms.BoundField
    text: forms.BoundField
    description: forms.BoundField
    key: forms.BoundField
    requires_evidence: forms.BoundField | None


@dataclass(frozen=True)
class ReasonRow:
    """The form fields of one reason for ``evidence_unavailable``."""

    value: str
    offered: forms.BoundField
    text: forms.BoundField


def _aria(widget: type[forms.Widget], label: str) -> forms.Widget:
    return widget(attrs={"aria-label": label})


def _name(level: str, value: str, part: str) -> str:
    return f"{level}-{value}-{part}"


class PolicyForm(SingleValueForm):
    """The whole description of a draft label policy, as one form (see the module docstring)."""

    evidence_relation = forms.ChoiceField(choices=EvidenceRelation.choices)
    guideline = forms.CharField(
        label="Guideline (Markdown)",
        required=False,
        max_length=MAX_GUIDELINE_LENGTH,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 18, "class": "mono"}),
        help_text="Markdown. Shown to annotators with every item; raw HTML is not rendered.",
    )
    # The gold rule (labeling.services.gold); the service checks the ranges again.
    gold_rate = forms.FloatField(
        label="Gold rate",
        min_value=0,
        max_value=1,
        widget=forms.NumberInput(attrs={"step": "0.01"}),
        help_text="Probability (0 to 1) that 'next item' serves a gold item to a qualified "
        "annotator.",
    )
    qualification_required = forms.BooleanField(
        label="A new annotator qualifies on gold items first", required=False
    )
    qualification_items = forms.IntegerField(
        label="Gold items to qualify (k)", min_value=1, max_value=MAX_QUALIFICATION_ITEMS
    )
    qualification_threshold = forms.FloatField(
        label="Agreement needed to qualify",
        min_value=0,
        max_value=1,
        widget=forms.NumberInput(attrs={"step": "0.01"}),
        help_text="Share (0 to 1) of the k items' labels equal to the reference.",
    )
    # Each level's scale (labeling.models.LabelScale); the service checks it against the labels.
    answer_scale = forms.ChoiceField(
        label="Scale of the answer labels",
        choices=LabelScale.choices,
        widget=forms.Select(attrs={"aria-describedby": "scale-help"}),
    )
    claim_scale = forms.ChoiceField(
        label="Scale of the claim labels",
        choices=LabelScale.choices,
        widget=forms.Select(attrs={"aria-describedby": "scale-help"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        count = {level: len(SCHEMA[level]) for level in LEVELS}
        for level in LEVELS:
            for value in SCHEMA[level]:
                label = value.replace("_", " ")
                self.fields[_name(level, value, "offered")] = forms.BooleanField(
                    required=False, widget=_aria(forms.CheckboxInput, f"offer {label}")
                )
                # Not required: a label left out needs none; the service checks offered ones.
                self.fields[_name(level, value, "position")] = forms.IntegerField(
                    required=False,
                    min_value=1,
                    max_value=count[level],
                    widget=_aria(forms.NumberInput, f"position of {label}"),
                )
                self.fields[_name(level, value, "text")] = forms.CharField(
                    required=False,
                    max_length=MAX_TEXT_LENGTH,
                    strip=False,
                    widget=_aria(forms.TextInput, f"display text of {label}"),
                )
                self.fields[_name(level, value, "description")] = forms.CharField(
                    required=False,
                    max_length=MAX_DESCRIPTION_LENGTH,
                    strip=False,
                    widget=forms.Textarea(
                        attrs={"rows": 2, "aria-label": f"description of {label}"}
                    ),
                )
                self.fields[_name(level, value, "key")] = forms.CharField(
                    required=False,
                    max_length=1,
                    strip=False,
                    widget=forms.TextInput(attrs={"size": 2, "aria-label": f"key of {label}"}),
                )
                if level == "claim" and value in CITABLE:
                    self.fields[_name(level, value, "requires_evidence")] = forms.BooleanField(
                        required=False,
                        widget=_aria(forms.CheckboxInput, f"{label} requires evidence"),
                    )
        for value in REASONS:
            label = value.replace("_", " ")
            self.fields[_name("reason", value, "offered")] = forms.BooleanField(
                required=False, widget=_aria(forms.CheckboxInput, f"offer reason {label}")
            )
            self.fields[_name("reason", value, "text")] = forms.CharField(
                required=False,
                max_length=MAX_REASON_TEXT_LENGTH,
                strip=False,
                widget=_aria(forms.TextInput, f"display text of reason {label}"),
            )
        self._order: dict[str, list[str]] = {}

    @staticmethod
    def initial_for(policy: LabelPolicy) -> dict[str, Any]:
        """Return the form's initial values: ``policy``'s description, labels not offered too.

        A label the policy leaves out is shown unticked with its default text and key.
        """
        data = policy_description_data(policy)
        initial: dict[str, Any] = {
            "evidence_relation": data["evidence_relation"],
            "guideline": data["guideline"],
            **{name: data[name] for name in GOLD_RULE_DEFAULTS},
            **{name: data[name] for name in SCALE_FIELDS.values()},
        }
        for level in LEVELS:
            rows = {row["value"]: row for row in data[f"{level}_labels"]}
            rest = [v for v in SCHEMA[level] if v not in rows]
            for position, value in enumerate([*rows, *rest], start=1):
                # A label not offered shows the default details.
                row = rows.get(value) or {
                    "text": DEFAULT_TEXTS[value],
                    "description": DEFAULT_DESCRIPTIONS[level][value],
                    "requires_evidence": False,
                }
                initial[_name(level, value, "offered")] = value in rows
                initial[_name(level, value, "position")] = position
                initial[_name(level, value, "text")] = row["text"]
                initial[_name(level, value, "description")] = row["description"]
                initial[_name(level, value, "key")] = row["key"] if value in rows else ""
                if level == "claim" and value in CITABLE:
                    initial[_name(level, value, "requires_evidence")] = bool(
                        row.get("requires_evidence")
                    )
        reasons = {row["value"]: row["text"] for row in data["unavailable_reasons"]}
        for value in REASONS:
            initial[_name("reason", value, "offered")] = value in reasons
            initial[_name("reason", value, "text")] = reasons.get(
                value, DEFAULT_REASON_TEXTS[value]
            )
        return initial

    def label_rows(self, level: Level) -> list[LabelRow]:
        """Return the rows of ``level`` in the order the form shows them (by position)."""

        def position(value: str) -> int:
            bound = self[_name(level, value, "position")]
            try:
                return int(bound.value())
            except (TypeError, ValueError):
                return len(SCHEMA[level]) + 1

        values = sorted(SCHEMA[level], key=lambda v: (position(v), SCHEMA[level].index(v)))
        return [
            LabelRow(
                level=level,
                value=value,
                offered=self[_name(level, value, "offered")],
                position=self[_name(level, value, "position")],
                text=self[_name(level, value, "text")],
                description=self[_name(level, value, "description")],
                key=self[_name(level, value, "key")],
                requires_evidence=(
                    self[_name(level, value, "requires_evidence")]
                    if _name(level, value, "requires_evidence") in self.fields
                    else None
                ),
            )
            for value in values
        ]

    def reason_rows(self) -> list[ReasonRow]:
        """Return the rows of the reasons, in the schema's order."""
        return [
            ReasonRow(
                value=value,
                offered=self[_name("reason", value, "offered")],
                text=self[_name("reason", value, "text")],
            )
            for value in REASONS
        ]

    @property
    def answer_rows(self) -> list[LabelRow]:
        """The answer label rows (for the template)."""
        return self.label_rows("answer")

    @property
    def claim_rows(self) -> list[LabelRow]:
        """The claim label rows (for the template)."""
        return self.label_rows("claim")

    def description(self) -> dict[str, Any]:
        """Return the policy description the valid form holds (the service validates it).

        Only offered labels and reasons are included, labels ordered by position (ties in the
        schema's order).
        """
        data = self.cleaned_data
        result: dict[str, Any] = {
            "evidence_relation": data["evidence_relation"],
            "guideline": data["guideline"],
            **{name: data[name] for name in GOLD_RULE_DEFAULTS},
            **{name: data[name] for name in SCALE_FIELDS.values()},
        }
        for level in LEVELS:
            offered = [v for v in SCHEMA[level] if data.get(_name(level, v, "offered"))]
            schema = SCHEMA[level]
            offered.sort(
                key=lambda v: (
                    data[_name(level, v, "position")] or schema.index(v) + 1,
                    schema.index(v),
                )
            )
            self._order[level] = offered
            rows = []
            for value in offered:
                row: dict[str, Any] = {
                    "value": value,
                    "text": data[_name(level, value, "text")],
                    "description": data[_name(level, value, "description")],
                }
                if data[_name(level, value, "key")]:  # else the default (its position)
                    row["key"] = data[_name(level, value, "key")]
                if level == "claim":
                    row["requires_evidence"] = bool(
                        data.get(_name(level, value, "requires_evidence"))
                    )
                rows.append(row)
            result[f"{level}_labels"] = rows
        reasons = [v for v in REASONS if data.get(_name("reason", v, "offered"))]
        self._order["reason"] = reasons
        result["unavailable_reasons"] = [
            {"value": v, "text": data[_name("reason", v, "text")]} for v in reasons
        ]
        return result

    def add_service_error(self, error: LabelingError) -> None:
        """Place each problem of a service error on the field it names (else on the form).

        ``claim_labels[2].key`` is the key of the third offered claim label (as
        :meth:`description` ordered them); ``claim_labels`` and unknown names go to the form.
        """
        problems = error.data.get("errors") or [{"field": error.field, "reason": error.reason}]
        for problem in problems:
            self.add_error(self._field_of(problem.get("field")), str(problem.get("reason")))

    def _field_of(self, name: Any) -> str | None:
        if not isinstance(name, str):
            return None
        if name in ("evidence_relation", "guideline", *GOLD_RULE_DEFAULTS, *SCALE_FIELDS.values()):
            return name
        match = _ROW_FIELD.match(name)
        if match is None:
            return None
        group, index, part = match.group(1), int(match.group(2)), match.group(3)
        level = "reason" if group == "unavailable_reasons" else group.split("_")[0]
        order = self._order.get(level, [])
        if index >= len(order):
            return None
        field = _name(level, order[index], part or "offered")
        return field if field in self.fields else None
