"""REST API of a project's label policy (read; edit the draft) and its evaluators.

``GET /api/projects/<slug>/policy/`` returns the newest policy version with its full
description (every member may read it: annotators label by it); ``PUT`` replaces the draft's
description (managers, while the version is not frozen). ``GET .../evaluators/`` lists the
automated judges whose labels were imported (adjudicators and managers), with the ids the
audit endpoints take.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling import permissions
from labeling.api.common import ErrorSerializer, paginated, project_and_role, written
from labeling.api.fields import StrictBooleanField
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.exceptions import InvalidTransition
from labeling.markdown import markdown_html
from labeling.models import EvidenceRelation, LabelPolicy, LabelScale
from labeling.selectors.evaluators import evaluator_list
from labeling.selectors.policies import REASONS, SCHEMA, policy_description_data
from labeling.services.policies import (
    GOLD_RULE_DEFAULTS,
    MAX_DESCRIPTION_LENGTH,
    MAX_GUIDELINE_LENGTH,
    MAX_REASON_TEXT_LENGTH,
    MAX_TEXT_LENGTH,
    policy_update,
)

NOT_FOUND = OpenApiResponse(ErrorSerializer, description="No such project (or not a member).")
SCALE_HELP = (
    "Level of measurement of the {level} labels, which picks the metric of Krippendorff's "
    "alpha: nominal (names: any two different labels disagree equally), ordinal (ranked in "
    "the listed order, lowest first: labels further apart disagree more), interval (the labels "
    "are numbers: disagreement grows with the squared difference) or ratio (numbers >= 0 with "
    "a true zero: disagreement is relative to their size). Interval and ratio need every "
    "label to be a number. Default nominal."
)
FORBIDDEN = OpenApiResponse(ErrorSerializer, description="Not authenticated, or not allowed.")


class AnswerLabelSerializer(serializers.Serializer):
    """One answer label a policy offers, with what people see of it."""

    value = serializers.ChoiceField(choices=list(SCHEMA["answer"]))
    text = serializers.CharField(
        max_length=MAX_TEXT_LENGTH, required=False, help_text="Display text."
    )
    description = serializers.CharField(
        max_length=MAX_DESCRIPTION_LENGTH, required=False, allow_blank=True
    )
    key = serializers.RegexField(
        "^[a-z0-9]$",
        required=False,
        help_text="Shortcut key, unique in the level; not 0 or one of a b c g j k n p r s u w x "
        "(the pages' own keys). Default: the 1-based position.",
    )

    class Meta:
        ref_name = "PolicyAnswerLabel"


class ClaimLabelSerializer(AnswerLabelSerializer):
    """One claim label a policy offers, with what people see of it and its evidence rule."""

    value = serializers.ChoiceField(choices=list(SCHEMA["claim"]))
    requires_evidence = StrictBooleanField(
        required=False,
        help_text="Must cite at least one evidence span; supported, contradicted or "
        "not_supported only. Default false.",
    )

    class Meta:
        ref_name = "PolicyClaimLabel"


class ReasonSerializer(serializers.Serializer):
    """One reason for evidence_unavailable the policy offers, with its display text."""

    value = serializers.ChoiceField(choices=list(REASONS))
    text = serializers.CharField(max_length=MAX_REASON_TEXT_LENGTH, required=False)

    class Meta:
        ref_name = "PolicyReason"


class PolicyDescriptionSerializer(serializers.Serializer):
    """A full label policy description (every field required; validated by the service)."""

    evidence_relation = serializers.ChoiceField(choices=EvidenceRelation.choices)
    guideline = serializers.CharField(
        max_length=MAX_GUIDELINE_LENGTH, allow_blank=True, help_text="Markdown."
    )
    answer_labels = AnswerLabelSerializer(many=True, allow_empty=False)
    claim_labels = ClaimLabelSerializer(many=True, allow_empty=False)
    unavailable_reasons = ReasonSerializer(many=True)
    # The gold rule: optional in a description (absent: no gold served, no qualification), and
    # shown to managers only (an annotator who knew it would know their first items are gold).
    gold_rate = serializers.FloatField(
        required=False, min_value=0, max_value=1, help_text="Managers only. Default 0."
    )
    qualification_required = StrictBooleanField(
        required=False, help_text="Managers only. Default false."
    )
    qualification_items = serializers.IntegerField(
        required=False, min_value=1, max_value=1000, help_text="Managers only (k). Default 5."
    )
    qualification_threshold = serializers.FloatField(
        required=False, min_value=0, max_value=1, help_text="Managers only. Default 0.8."
    )
    answer_scale = serializers.ChoiceField(
        choices=LabelScale.choices, required=False, help_text=SCALE_HELP.format(level="answer")
    )
    claim_scale = serializers.ChoiceField(
        choices=LabelScale.choices, required=False, help_text=SCALE_HELP.format(level="claim")
    )

    class Meta:
        ref_name = "PolicyDescription"


class PolicySerializer(PolicyDescriptionSerializer):
    """A label policy version: its description, version, state and rendered guideline."""

    version = serializers.IntegerField()
    frozen_at = serializers.DateTimeField(
        allow_null=True, help_text="Set when labelling started; a frozen version never changes."
    )
    editable = StrictBooleanField(help_text="A draft: managers may still edit it.")
    guideline_html = serializers.CharField(help_text="The guideline rendered, sanitised.")

    class Meta:
        ref_name = "Policy"


def policy_body(policy: LabelPolicy, *, manager: bool) -> dict[str, Any]:
    """Return the API body of ``policy``: its description, version, state and guideline HTML.

    The gold rule's fields are in it for a ``manager`` only.
    """
    description = policy_description_data(policy)
    if not manager:
        for name in GOLD_RULE_DEFAULTS:
            del description[name]
    return dict(
        PolicySerializer(
            {
                **description,
                "version": policy.version,
                "frozen_at": policy.frozen_at,
                "editable": policy.frozen_at is None,
                "guideline_html": str(markdown_html(policy.guideline)),
            }
        ).data
    )


class ProjectPolicyApi(APIView):
    """The project's newest label policy version (GET, members); edit the draft (PUT, managers)."""

    project_roles = {"PUT": permissions.MANAGERS}

    @extend_schema(
        operation_id="policy_retrieve", responses={200: PolicySerializer, 404: NOT_FOUND}
    )
    def get(self, request: Request, slug: str) -> Response:
        """Return the newest policy version."""
        project, role = project_and_role(request, slug)
        policy = project.policies.order_by("-version").first()
        if policy is None:
            raise InvalidTransition(f"project {project.slug!r} has no label policy")
        return Response(policy_body(policy, manager=permissions.can_manage(role)))

    @extend_schema(
        operation_id="policy_update",
        request=PolicyDescriptionSerializer,
        responses={
            200: PolicySerializer,
            400: OpenApiResponse(
                ErrorSerializer,
                description="Invalid description: `errors` names each field, e.g. "
                "claim_labels[1].key.",
            ),
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(
                ErrorSerializer,
                description="The newest version is frozen (labelling started), code "
                "policy_frozen: publish a new version instead.",
            ),
        },
    )
    def put(self, request: Request, slug: str) -> Response:
        """Replace the draft policy's description (the whole description is given)."""
        project, _ = project_and_role(request, slug)
        body = written(
            lambda: policy_update(project=project, actor=request.user, description=request.data),
            lambda policy: policy_body(policy, manager=True),
        )
        return Response(body)


class EvaluatorSerializer(serializers.Serializer):
    """An automated judge at one version, with how many labels of it were imported."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.CharField()
    description = serializers.CharField()
    label_count = serializers.IntegerField()

    class Meta:
        ref_name = "Evaluator"


class EvaluatorListApi(APIView):
    """The project's evaluators by name and version (adjudicators and managers)."""

    project_roles = {"GET": permissions.REVIEWERS}
    # Read by drf-spectacular to document the paginated envelope; paginated does the paging.
    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="evaluators_list",
        responses={200: EvaluatorSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the evaluators."""
        project, _ = project_and_role(request, slug)
        return paginated(request, evaluator_list(project=project), EvaluatorSerializer)
