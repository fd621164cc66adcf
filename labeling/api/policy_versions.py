"""REST API of label policy versions: list them, preview and publish a new one (managers).

``POST /api/projects/<slug>/policy/versions/`` with ``dry_run: true`` answers the diff against
the current version and what would happen to the items, writing nothing; without it, the new
version is published (see :mod:`labeling.services.policy_versions`).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling import permissions
from labeling.api.common import ErrorSerializer, paginated, project_and_role, written
from labeling.api.fields import StrictBooleanField, StrictCharField
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.api.work import BAD_INPUT, FORBIDDEN, NOT_FOUND
from labeling.models import MAX_ID, LabelPolicy
from labeling.selectors.catalog import policy_version_list
from labeling.selectors.policies import policy_description_data
from labeling.services.policy_versions import (
    PolicyPublication,
    Resolved,
    policy_version_publish,
)


class PolicyVersionSerializer(serializers.Serializer):
    """One label policy version: its content, when it was frozen, its change note."""

    version = serializers.IntegerField()
    previous_version = serializers.IntegerField(source="previous.version", allow_null=True)
    frozen_at = serializers.DateTimeField(allow_null=True)
    change_note = serializers.CharField(help_text="Empty for the version labelling started under.")
    published_by = serializers.CharField(
        source="published_by.username", allow_null=True, help_text="Username of the publisher."
    )
    description = serializers.SerializerMethodField(
        help_text="The full policy description (labels with display text, description, key "
        "and evidence rule; reasons; guideline): the shape POST takes as content."
    )

    class Meta:
        ref_name = "PolicyVersion"

    @extend_schema_field(serializers.DictField(child=serializers.JSONField()))
    def get_description(self, policy: LabelPolicy) -> dict[str, Any]:
        return policy_description_data(policy)


class PolicyChangeSerializer(serializers.Serializer):
    """One changed field of the policy: old and new value, what a list gained and lost."""

    field = serializers.CharField()
    old = serializers.JSONField()
    new = serializers.JSONField()
    added = serializers.ListField(child=serializers.JSONField())
    removed = serializers.ListField(child=serializers.JSONField())
    changed = serializers.ListField(
        child=serializers.JSONField(), help_text="Mapping keys whose value changed."
    )

    class Meta:
        ref_name = "PolicyChange"


class PolicyVersionListApi(APIView):
    """The project's label policy versions (GET), or publish a new one (POST) (managers).

    POST publishes version v+1 after labelling started; ``dry_run`` answers the diff and the
    item counts without writing. Publishing needs the version it is based on (the current one:
    409 ``stale_version`` otherwise) and a change note. ``resolved`` says what happens to the
    items whose votes are complete (resolved or disputed): ``keep`` or ``reopen`` (returned for
    labelling under the new version, votes kept). Open items holding votes under the old
    version always collect fresh votes under the new one.
    """

    project_roles = {"GET": permissions.MANAGERS, "POST": permissions.MANAGERS}
    pagination_class = CappedLimitOffsetPagination

    class InputSerializer(serializers.Serializer):
        based_on_version = serializers.IntegerField(
            min_value=1, max_value=MAX_ID, help_text="The current version the change is made on."
        )
        note = StrictCharField(
            allow_blank=True,
            trim_whitespace=False,
            help_text="What changed and why (required, not blank).",
        )
        content = serializers.JSONField(
            help_text="The new version's full policy description, as a draft policy takes it: "
            '{"evidence_relation", "guideline", "answer_labels": [{"value", "text", '
            '"description", "key"}], "claim_labels": [{... "requires_evidence"}], '
            '"unavailable_reasons": [{"value", "text"}]} (every key required; see a '
            "version's description), and optionally the gold rule: gold_rate, "
            "qualification_required, qualification_items, qualification_threshold (absent: no "
            "gold served, no qualification)."
        )
        resolved = serializers.ChoiceField(
            choices=[(c, c) for c in Resolved.CHOICES],
            default=Resolved.KEEP,
            help_text="keep: resolved and disputed items stay as they are; reopen: they are "
            "returned for labelling under the new version (their votes are kept).",
        )
        dry_run = StrictBooleanField(
            default=False, help_text="Answer the diff and counts only; write nothing."
        )

        class Meta:
            ref_name = "PolicyPublishInput"

    class OutputSerializer(serializers.Serializer):
        dry_run = StrictBooleanField()
        previous_version = serializers.IntegerField()
        version = serializers.IntegerField()
        resolved = serializers.CharField()
        restarted = serializers.IntegerField(
            help_text="Open items holding votes under the old version, returned for labelling."
        )
        reopened = serializers.IntegerField(help_text="Resolved or disputed items reopened.")
        kept = serializers.IntegerField(help_text="Resolved or disputed items left as they are.")
        diff = PolicyChangeSerializer(many=True)
        policy = PolicyVersionSerializer(allow_null=True, help_text="Null for a dry run.")

        class Meta:
            ref_name = "PolicyPublication"

    @extend_schema(
        operation_id="policy_versions_list",
        responses={200: PolicyVersionSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the policy versions, oldest first."""
        project, _ = project_and_role(request, slug)
        return paginated(request, policy_version_list(project=project), PolicyVersionSerializer)

    @extend_schema(
        operation_id="policy_versions_publish",
        request=InputSerializer,
        responses={
            200: OpenApiResponse(OutputSerializer, description="A dry run: nothing written."),
            201: OpenApiResponse(OutputSerializer, description="The new version, published."),
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(
                ErrorSerializer,
                description="invalid_transition: labelling has not started (edit the draft "
                "policy); stale_version: based_on_version is not the current version.",
            ),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Preview (``dry_run``) or publish the next policy version."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)

        def render(result: PolicyPublication) -> Any:
            return self.OutputSerializer(
                {
                    **result.__dict__,
                    "diff": [change.as_json() for change in result.diff],
                }
            ).data

        body = written(
            lambda: policy_version_publish(project=project, actor=request.user, **fields),
            render,
        )
        return Response(body, status=status.HTTP_200_OK if body["dry_run"] else 201)
