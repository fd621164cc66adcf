"""REST API of adjudication: the disagreement queue, the side-by-side view, resolve, unresolved.

One ``APIView`` per operation. Scoping and errors as in :mod:`labeling.api.work`: the project
comes from ``project_get_for_user`` (a non-member gets 404), every object id is looked up inside
that project, and a view's ``project_roles`` checks the role before a body is validated.
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
from labeling.api.serializers import (
    ClaimInputSerializer,
    ClaimRowSerializer,
    ClaimVoteSerializer,
    ResolutionSerializer,
    SourceRowSerializer,
    SpanSerializer,
    claim_inputs,
    claim_votes,
)
from labeling.api.work import BAD_INPUT, FORBIDDEN, NOT_FOUND
from labeling.models import Partition, UnresolvedReason
from labeling.selectors import (
    UNASSIGNED,
    adjudication_view,
    disagreement_queue,
    project_get_for_user,
)
from labeling.selectors.adjudication import MAX_QUEUE_AGE_HOURS, QUEUE_LEVELS
from labeling.services import adjudication_mark_unresolved, adjudication_resolve


class DisagreementListApi(APIView):
    """The disagreement queue, oldest first (adjudicators and managers).

    Items the actor annotated are left out unless the project allows self-adjudication.
    """

    project_roles = {"GET": permissions.REVIEWERS}

    pagination_class = CappedLimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        partition = serializers.ChoiceField(choices=[*Partition.values, UNASSIGNED], required=False)
        level = serializers.ChoiceField(
            choices=QUEUE_LEVELS,
            required=False,
            help_text="answer: the answer labels differ; claim: some claim's labels differ.",
        )
        min_age_hours = serializers.FloatField(
            min_value=0,
            max_value=MAX_QUEUE_AGE_HOURS,
            required=False,
            help_text="Disagreements at least this old (hours, at most a century).",
        )

        class Meta:
            ref_name = "DisagreementFilter"

    class OutputSerializer(serializers.Serializer):
        item_id = serializers.IntegerField(source="pk")
        version = serializers.IntegerField()
        question_external_id = serializers.CharField(source="candidate.question.external_id")
        question_text = serializers.CharField(source="candidate.question.text")
        partition = serializers.CharField(source="candidate.question.partition", allow_null=True)
        candidate_key = serializers.CharField(source="candidate.key")
        opened_at = serializers.DateTimeField()
        answer_differs = StrictBooleanField()
        claims_differ = StrictBooleanField()

        class Meta:
            ref_name = "DisagreementListItem"

    @extend_schema(
        operation_id="disagreements_list",
        parameters=[FilterSerializer],
        responses={
            200: OutputSerializer(many=True),
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the items waiting for adjudication."""
        project, _ = project_and_role(request, slug)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        items = disagreement_queue(
            project=project, filters=filters.validated_data, actor=request.user
        )
        return paginated(request, items, self.OutputSerializer)


class PolicySerializer(serializers.Serializer):
    """The frozen label policy the decision is made under (no "can't decide" for adjudicators)."""

    version = serializers.IntegerField()
    guideline = serializers.CharField(trim_whitespace=False)
    answer_labels = serializers.ListField(child=serializers.CharField())
    claim_labels = serializers.ListField(child=serializers.CharField())
    unavailable_reasons = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "LabelPolicyVocabulary"


class PriorFlagSerializer(serializers.Serializer):
    """A span of the answer an imported annotator flagged, with the dataset's labels and note."""

    start = serializers.IntegerField()
    end = serializers.IntegerField()
    quote = serializers.CharField(trim_whitespace=False)
    labels = serializers.ListField(child=serializers.CharField())
    evidence = SpanSerializer(allow_null=True)
    note = serializers.CharField(trim_whitespace=False)

    class Meta:
        ref_name = "PriorFlag"


class DisagreementDetailApi(APIView):
    """The side-by-side view of an item's votes, annotators shown as "Annotator 1..N"."""

    class OutputSerializer(serializers.Serializer):
        class QuestionSerializer(serializers.Serializer):
            id = serializers.IntegerField()
            external_id = serializers.CharField()
            text = serializers.CharField(trim_whitespace=False)
            partition = serializers.CharField(allow_null=True)

            class Meta:
                ref_name = "AdjudicationQuestion"

        class ColumnSerializer(serializers.Serializer):
            annotator = serializers.CharField(source="pseudonym", help_text='"Annotator k".')
            imported = StrictBooleanField(help_text="An imported prior annotation.")
            automatic = StrictBooleanField(source="vote.automatic")
            revision = serializers.IntegerField(source="vote.revision", allow_null=True)
            submitted_at = serializers.DateTimeField(source="vote.submitted_at", allow_null=True)
            answer_label = serializers.CharField(source="vote.answer_label", allow_null=True)
            answer_reason = serializers.CharField(source="vote.answer_reason", allow_null=True)
            comment = serializers.CharField(source="vote.comment", trim_whitespace=False)
            claims = serializers.SerializerMethodField()
            flags = PriorFlagSerializer(many=True, help_text="Imported annotations only.")
            note = serializers.CharField(
                trim_whitespace=False, help_text="An imported annotation's note ('' if none)."
            )
            labelled_at = serializers.DateTimeField(
                allow_null=True, help_text="When an imported label was made, if known."
            )

            class Meta:
                ref_name = "AnnotatorColumn"

            @extend_schema_field(ClaimVoteSerializer(many=True))
            def get_claims(self, column: Any) -> list[dict[str, Any]]:
                return claim_votes(column.vote.claims)

        class DiffSerializer(serializers.Serializer):
            answer_differs = StrictBooleanField()
            claim_ids = serializers.SerializerMethodField(help_text="Claims that differ.")

            class Meta:
                ref_name = "VoteDiff"

            @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
            def get_claim_ids(self, diff: Any) -> list[int]:
                return sorted(diff.claims)

        item_id = serializers.IntegerField(source="item.pk")
        version = serializers.IntegerField(help_text="Send back as expected_version.")
        status = serializers.CharField(help_text="disagreement or resolved.")
        can_adjudicate = StrictBooleanField()
        question = QuestionSerializer()
        candidate_text = serializers.CharField(source="candidate.text", trim_whitespace=False)
        claims = ClaimRowSerializer(many=True)
        sources = SourceRowSerializer(many=True)
        policy = PolicySerializer(allow_null=True)
        annotators = ColumnSerializer(many=True)
        differences = DiffSerializer(source="diff")
        resolution = ResolutionSerializer(allow_null=True)
        history = ResolutionSerializer(many=True, help_text="Every resolution, oldest first.")

        class Meta:
            ref_name = "AdjudicationView"

    @extend_schema(
        operation_id="disagreements_retrieve",
        responses={200: OutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        """Return the item with every vote side by side and where they differ."""
        project = project_get_for_user(slug=slug, user=request.user)
        view = adjudication_view(project=project, item_id=item_id, actor=request.user)
        return Response(self.OutputSerializer(view).data)


ADJUDICATION_ERRORS: dict[int, Any] = {
    400: BAD_INPUT,
    403: FORBIDDEN,
    404: NOT_FOUND,
    409: OpenApiResponse(
        ErrorSerializer,
        description="stale_version: the item changed since you loaded it (reload, decide "
        "again); invalid_transition: the item is open or resolved by consensus.",
    ),
}


class AdjudicationResolveApi(APIView):
    """Resolve a disputed item with final labels and a rationale (or correct a decision)."""

    project_roles = {"POST": permissions.REVIEWERS}

    class InputSerializer(serializers.Serializer):
        expected_version = serializers.IntegerField(
            min_value=0, help_text="The item version the decision was made on."
        )
        answer_label = StrictCharField(max_length=64)
        answer_reason = StrictCharField(
            max_length=64, required=False, allow_null=True, default=None
        )
        claims = ClaimInputSerializer(many=True, default=list)
        rationale = StrictCharField(trim_whitespace=False, max_length=10_000)

        class Meta:
            ref_name = "ResolveInput"

    @extend_schema(
        operation_id="disagreements_resolve",
        request=InputSerializer,
        responses={201: ResolutionSerializer, **ADJUDICATION_ERRORS},
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        """Write the adjudicated resolution."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        body = written(
            lambda: adjudication_resolve(
                project=project,
                item_id=item_id,
                actor=request.user,
                **{**given.validated_data, "claims": claim_inputs(given.validated_data["claims"])},
            ),
            lambda resolution: ResolutionSerializer(resolution).data,
        )
        return Response(body, status=status.HTTP_201_CREATED)


class AdjudicationMarkUnresolvedApi(APIView):
    """Mark a disputed item unresolved with a reason (a rationale is required for "other")."""

    project_roles = {"POST": permissions.REVIEWERS}

    class InputSerializer(serializers.Serializer):
        expected_version = serializers.IntegerField(min_value=0)
        reason = serializers.ChoiceField(choices=UnresolvedReason.choices)
        rationale = StrictCharField(
            required=False,
            allow_blank=True,
            default="",
            trim_whitespace=False,
            max_length=10_000,
            help_text='Required (not blank) when reason is "other".',
        )

        class Meta:
            ref_name = "UnresolvedInput"

    @extend_schema(
        operation_id="disagreements_unresolved",
        request=InputSerializer,
        responses={201: ResolutionSerializer, **ADJUDICATION_ERRORS},
    )
    def post(self, request: Request, slug: str, item_id: int) -> Response:
        """Write the unresolved resolution."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        body = written(
            lambda: adjudication_mark_unresolved(
                project=project, item_id=item_id, actor=request.user, **given.validated_data
            ),
            lambda resolution: ResolutionSerializer(resolution).data,
        )
        return Response(body, status=status.HTTP_201_CREATED)
