"""Serializers shared by several API views (a serializer moves here only when it is reused).

- label inputs (claims with evidence): the annotation submit and the adjudication resolve;
- the labelling form: "next item" and the assignment read;
- claims, pinned sources, votes and resolutions: the labelling form and the side-by-side view;
- the project's labelling settings: the settings read/update and the start of labelling.

Blindness: what an annotator receives is built only from
``labeling.selectors.review.LabellingFormView`` and their own annotation rows, and these
serializers name their fields explicitly, so nothing else (item status, slot, vote counts,
question metadata) can slip into a response.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from labeling.api.fields import StrictBooleanField, StrictCharField
from labeling.models import ServingOrder
from labeling.offsets import UNIT_CODEPOINT, UNIT_UTF16, UNITS
from labeling.services.label_checks import ClaimInput, EvidenceInput

# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


class EvidenceInputSerializer(serializers.Serializer):
    """An evidence span selected in a pinned source (offsets in ``unit``, end-exclusive)."""

    source_version_id = serializers.IntegerField(min_value=1)
    start = serializers.IntegerField(min_value=0)
    end = serializers.IntegerField(min_value=0)
    quote = StrictCharField(
        trim_whitespace=False, help_text="The selected text; must equal the text at the offsets."
    )
    unit = serializers.ChoiceField(
        choices=UNITS,
        default=UNIT_UTF16,
        help_text="utf16: browser offsets (UTF-16 code units, the default); "
        "codepoint: Unicode code points (as stored).",
    )

    class Meta:
        ref_name = "EvidenceInput"


class ClaimInputSerializer(serializers.Serializer):
    """The label of one claim of the candidate, with its evidence."""

    claim_id = serializers.IntegerField(min_value=1)
    label = StrictCharField(max_length=64)  # type: ignore[assignment]
    reason = StrictCharField(
        max_length=64,
        required=False,
        allow_null=True,
        default=None,
        help_text="Required iff label is evidence_unavailable; one of the policy's reasons.",
    )
    boundary_error = StrictBooleanField(
        default=False, help_text="The claim's boundaries in the answer are wrong."
    )
    evidence = EvidenceInputSerializer(
        many=True, default=list, help_text="At least one span for supported / contradicted."
    )

    class Meta:
        ref_name = "ClaimInput"


def claim_inputs(claims: Iterable[Mapping[str, Any]]) -> tuple[ClaimInput, ...]:
    """Convert validated ``ClaimInputSerializer`` data into the services' frozen dataclasses."""
    return tuple(
        ClaimInput(
            claim_id=claim["claim_id"],
            label=claim["label"],
            reason=claim.get("reason"),
            boundary_error=claim.get("boundary_error", False),
            evidence=tuple(EvidenceInput(**span) for span in claim.get("evidence", ())),
        )
        for claim in claims
    )


# ---------------------------------------------------------------------------------------------
# Items as labelling pages show them (labeling.selectors.review rows)
# ---------------------------------------------------------------------------------------------


class ClaimRowSerializer(serializers.Serializer):
    """A claim of the candidate: its id (to label it) and code-point span in the answer."""

    id = serializers.IntegerField()
    index = serializers.IntegerField()
    text = serializers.CharField(trim_whitespace=False)
    start = serializers.IntegerField(allow_null=True, help_text="Code points, 0-based.")
    end = serializers.IntegerField(allow_null=True, help_text="Code points, end-exclusive.")
    unanchored = StrictBooleanField(help_text="The claim's text is not in the answer.")

    class Meta:
        ref_name = "LabellingClaim"


class SourceRowSerializer(serializers.Serializer):
    """A pinned source version of the question, in full, with the sha256 of its text."""

    source_version_id = serializers.IntegerField(source="id")
    document = serializers.CharField(source="document_key")
    uri = serializers.CharField()
    rank = serializers.IntegerField(allow_null=True)
    sha256 = serializers.CharField(help_text="Hex sha256 of the UTF-8 text.")
    text = serializers.CharField(trim_whitespace=False)

    class Meta:
        ref_name = "LabellingSource"


class PolicyVocabularySerializer(serializers.Serializer):
    """The labels the form offers: the frozen policy's, plus "can't decide"."""

    version = serializers.IntegerField()
    guideline = serializers.CharField(trim_whitespace=False)
    answer_labels = serializers.ListField(child=serializers.CharField())
    claim_labels = serializers.ListField(child=serializers.CharField())
    unavailable_reasons = serializers.ListField(child=serializers.CharField())
    cannot_decide = serializers.CharField(help_text='The label of a "can\'t decide" vote.')

    class Meta:
        ref_name = "PolicyVocabulary"


class SpanSerializer(serializers.Serializer):
    """A stored evidence span: code points of the pinned source text, end-exclusive."""

    source_version_id = serializers.IntegerField()
    start = serializers.IntegerField(help_text="Code points, 0-based.")
    end = serializers.IntegerField(help_text="Code points, end-exclusive.")
    quote = serializers.CharField(trim_whitespace=False)
    unit = serializers.SerializerMethodField(
        help_text="Always codepoint: send it back with the span to cite the same text."
    )

    class Meta:
        ref_name = "Span"

    def get_unit(self, obj: Any) -> str:
        return UNIT_CODEPOINT


class ClaimVoteSerializer(serializers.Serializer):
    """One vote's label of one claim (``label`` null: the vote did not label it)."""

    claim_id = serializers.IntegerField()
    label = serializers.CharField(allow_null=True)  # type: ignore[assignment]
    reason = serializers.CharField(allow_null=True)
    boundary_error = StrictBooleanField()
    evidence = SpanSerializer(many=True)

    class Meta:
        ref_name = "ClaimVote"


def claim_votes(claims: Mapping[int, Any]) -> list[dict[str, Any]]:
    """Return a vote's ``{claim_id: ClaimVote}`` as a list by claim id, serialized."""
    rows = [
        {
            "claim_id": claim_id,
            "label": vote.label,
            "reason": vote.reason,
            "boundary_error": vote.boundary_error,
            "evidence": vote.evidence,
        }
        for claim_id, vote in sorted(claims.items())
    ]
    return list(ClaimVoteSerializer(rows, many=True).data)


class OwnVoteSerializer(serializers.Serializer):
    """The actor's own current revision (never anyone else's)."""

    annotation_id = serializers.IntegerField(source="ref")
    revision = serializers.IntegerField()
    answer_label = serializers.CharField()
    answer_reason = serializers.CharField(allow_null=True)
    comment = serializers.CharField(trim_whitespace=False)
    submitted_at = serializers.DateTimeField(allow_null=True)
    claims = serializers.SerializerMethodField()

    class Meta:
        ref_name = "OwnVote"

    @extend_schema_field(ClaimVoteSerializer(many=True))
    def get_claims(self, vote: Any) -> list[dict[str, Any]]:
        return claim_votes(vote.claims)


class LabellingFormSerializer(serializers.Serializer):
    """What an annotator sees for one assignment (``LabellingFormView``), and nothing else.

    No question metadata, generator, item status, slot, vote count, other annotator, evaluator
    or prior label: the view object does not carry them, and the fields here are explicit.
    """

    assignment_id = serializers.IntegerField()
    assignment_status = serializers.CharField(
        help_text="leased, submitted, skipped or expired (the actor's own assignment)."
    )
    lease_expires_at = serializers.DateTimeField()
    item_id = serializers.IntegerField()
    question_text = serializers.CharField(trim_whitespace=False)
    candidate_text = serializers.CharField(trim_whitespace=False)
    claims = ClaimRowSerializer(many=True)
    sources = SourceRowSerializer(many=True)
    policy = PolicyVocabularySerializer()
    current = OwnVoteSerializer(allow_null=True, help_text="Null before the first submit.")

    class Meta:
        ref_name = "LabellingForm"


# ---------------------------------------------------------------------------------------------
# Resolutions
# ---------------------------------------------------------------------------------------------


class ResolvedClaimLabelSerializer(serializers.Serializer):
    """A resolution's label of one claim, with its evidence."""

    claim_id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    reason = serializers.CharField(allow_null=True)
    evidence = SpanSerializer(many=True, source="evidence.all")
    evidence_waived = StrictBooleanField(
        help_text="Accepted without evidence: the label adopts imported votes that cited no span."
    )

    class Meta:
        ref_name = "ResolvedClaimLabel"


class ResolutionSerializer(serializers.Serializer):
    """A resolution (consensus, adjudicated or unresolved) as adjudicators and managers see it."""

    id = serializers.IntegerField()
    item_id = serializers.IntegerField()
    number = serializers.IntegerField(help_text="1, then + 1 for each correction.")
    status = serializers.CharField()
    answer_label = serializers.CharField(allow_null=True)
    answer_reason = serializers.CharField(allow_null=True)
    unresolved_reason = serializers.CharField(allow_null=True)
    rationale = serializers.CharField(trim_whitespace=False)
    adjudicator = serializers.CharField(
        source="adjudicator.username", allow_null=True, help_text="Null for consensus."
    )
    policy_version = serializers.IntegerField(source="policy.version")
    created_at = serializers.DateTimeField()
    claims = ResolvedClaimLabelSerializer(many=True, source="claim_labels.all")

    class Meta:
        ref_name = "Resolution"


# ---------------------------------------------------------------------------------------------
# Project labelling settings
# ---------------------------------------------------------------------------------------------


class LabellingSettingsSerializer(serializers.Serializer):
    """A project's labelling settings (overlap, lease, serving order) and whether it started."""

    overlap = serializers.IntegerField(help_text="Independent annotations per item (N).")
    lease_minutes = serializers.IntegerField()
    serving_order = serializers.ChoiceField(choices=ServingOrder.choices)
    serving_seed = serializers.IntegerField(allow_null=True)
    allow_self_adjudication = StrictBooleanField()
    labelling_started_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "LabellingSettings"
