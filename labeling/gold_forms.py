"""Forms of the gold pages: an item's reference labels, and a qualification decision.

The forms check only the shape of the post; the rules are the services'
(:func:`labeling.services.gold.gold_reference_set`,
:func:`labeling.services.gold.qualification_decide`), whose errors name the field, placed back
on the form by :meth:`GoldReferenceForm.add_service_error`.

The reference form has one row per claim: its label, a reason (for ``evidence_unavailable``)
and an evidence quote, pasted from a pinned source (the first place it occurs is cited, found
by :func:`labeling.selectors.gold.evidence_locate`; the API takes exact offsets and several
spans).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

from django import forms

from labeling.exceptions import LabelingError
from labeling.forms import SingleValueForm
from labeling.models import Claim, GoldReference, Item, LabelPolicy
from labeling.offsets import UNIT_CODEPOINT
from labeling.selectors.gold import evidence_locate
from labeling.selectors.policies import policy_label_choices, policy_reason_choices
from labeling.services.gold import (
    MAX_DECISION_NOTE_LENGTH,
    MAX_RATIONALE_LENGTH,
    GoldReferenceInput,
)
from labeling.services.label_checks import ClaimInput, EvidenceInput

# A service error's field: "claims[2].label", "claims[0].evidence[0].quote", "claims[1].reason".
_CLAIM_FIELD = re.compile(r"^claims\[(\d+)\](?:\.(label|reason|evidence))?")


def _claim_name(claim: Claim, part: str) -> str:
    return f"claim-{claim.pk}-{part}"


class GoldReferenceForm(SingleValueForm):
    """The reference labels of one item: answer label and reason, one row per claim, rationale."""

    answer_label = forms.ChoiceField(label="Answer label")
    answer_reason = forms.ChoiceField(label="Reason (evidence unavailable)", required=False)
    rationale = forms.CharField(
        label="Rationale (managers only)",
        required=False,
        max_length=MAX_RATIONALE_LENGTH,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3}),
    )

    def __init__(
        self, *args: Any, item: Item, claims: Sequence[Claim], policy: LabelPolicy, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.item = item
        self.claims = list(claims)
        reasons = [("", "—"), *((r.value, r.text) for r in policy_reason_choices(policy))]
        answer = cast(forms.ChoiceField, self.fields["answer_label"])
        answer.choices = [(c.value, c.text) for c in policy_label_choices(policy, "answer")]
        cast(forms.ChoiceField, self.fields["answer_reason"]).choices = reasons
        claim_choices = [(c.value, c.text) for c in policy_label_choices(policy, "claim")]
        for claim in self.claims:
            # The table's cells show no label tags: each control names itself (aria-label).
            self.fields[_claim_name(claim, "label")] = forms.ChoiceField(
                label=f"Claim {claim.index}",
                choices=claim_choices,
                widget=forms.Select(attrs={"aria-label": f"label of claim {claim.index}"}),
            )
            self.fields[_claim_name(claim, "reason")] = forms.ChoiceField(
                label=f"Reason of claim {claim.index}",
                choices=reasons,
                required=False,
                widget=forms.Select(attrs={"aria-label": f"reason of claim {claim.index}"}),
            )
            self.fields[_claim_name(claim, "quote")] = forms.CharField(
                label=f"Evidence of claim {claim.index}",
                required=False,
                strip=False,
                widget=forms.Textarea(
                    attrs={"rows": 2, "aria-label": f"evidence quote of claim {claim.index}"}
                ),
                help_text="Paste the exact text from a pinned source (its first occurrence).",
            )

    @staticmethod
    def initial_for(reference: GoldReference | None) -> dict[str, Any]:
        """Return the form's initial values: the current reference's (first span's quote)."""
        if reference is None:
            return {}
        initial: dict[str, Any] = {
            "answer_label": reference.answer_label,
            "answer_reason": reference.answer_reason or "",
            "rationale": reference.rationale,
        }
        for label in reference.claim_labels.all():
            initial[f"claim-{label.claim_id}-label"] = label.label
            initial[f"claim-{label.claim_id}-reason"] = label.reason or ""
            spans = list(label.evidence.all())
            initial[f"claim-{label.claim_id}-quote"] = spans[0].quote if spans else ""
        return initial

    def rows(self) -> list[tuple[Claim, Any, Any, Any]]:
        """Return (claim, label field, reason field, quote field) per claim (for the template)."""
        return [
            (
                c,
                self[_claim_name(c, "label")],
                self[_claim_name(c, "reason")],
                self[_claim_name(c, "quote")],
            )
            for c in self.claims
        ]

    def reference(self) -> GoldReferenceInput | None:
        """Return the reference the valid form holds, or None after adding a quote's error."""
        data = self.cleaned_data
        claims = []
        for claim in self.claims:
            quote = data[_claim_name(claim, "quote")]
            evidence: tuple[EvidenceInput, ...] = ()
            if quote:
                span = evidence_locate(item=self.item, quote=quote)
                if span is None:
                    self.add_error(
                        _claim_name(claim, "quote"), "this text is not in any pinned source"
                    )
                    continue
                evidence = (
                    EvidenceInput(
                        source_version_id=span.source_version_id,
                        start=span.start,
                        end=span.end,
                        quote=quote,
                        unit=UNIT_CODEPOINT,
                    ),
                )
            claims.append(
                ClaimInput(
                    claim_id=claim.pk,
                    label=data[_claim_name(claim, "label")],
                    reason=data[_claim_name(claim, "reason")] or None,
                    evidence=evidence,
                )
            )
        if self.errors:
            return None
        return GoldReferenceInput(
            answer_label=data["answer_label"],
            answer_reason=data["answer_reason"] or None,
            claims=tuple(claims),
            rationale=data["rationale"],
        )

    def add_service_error(self, error: LabelingError) -> None:
        """Place each problem of a service error on the field it names (else on the form)."""
        problems = error.data.get("errors") or [{"field": error.field, "reason": error.reason}]
        for problem in problems:
            self.add_error(self._field_of(problem.get("field")), str(problem.get("reason")))

    def _field_of(self, name: Any) -> str | None:
        if not isinstance(name, str):
            return None
        if name in ("answer_label", "answer_reason", "rationale"):
            return name
        match = _CLAIM_FIELD.match(name)
        if match is None or int(match.group(1)) >= len(self.claims):
            return None
        part = {"label": "label", "reason": "reason", "evidence": "quote", None: "label"}
        return _claim_name(self.claims[int(match.group(1))], part[match.group(2)])


class QualificationDecisionForm(SingleValueForm):
    """A manager's decision on one annotator's qualification."""

    user_id = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    decision = forms.ChoiceField(choices=[("admit", "Admit"), ("refuse", "Refuse")])
    note = forms.CharField(required=False, max_length=MAX_DECISION_NOTE_LENGTH, strip=False)
