"""REST API of gold items and qualification (managers only).

A gold item's reference labels (read, set), the project's gold items, and each annotator's
qualification with a manager's decision. Thin adapters over ``labeling.services.gold`` and
``labeling.selectors.gold``. Nothing here answers an annotator (403; 404 for a non-member): the
reference and which items are gold are managers' secrets.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling import permissions
from labeling.api.common import ErrorSerializer, paginated, project_and_role, request_actor, written
from labeling.api.fields import StrictBooleanField, StrictCharField
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.api.serializers import ClaimInputSerializer, claim_inputs
from labeling.exceptions import NotFound
from labeling.models import MAX_ID, GoldReference, Item, ItemStatus
from labeling.selectors.gold import gold_item_list, gold_reference_current, qualification_list
from labeling.services.gold import (
    MAX_DECISION_NOTE_LENGTH,
    MAX_RATIONALE_LENGTH,
    GoldReferenceInput,
    gold_reference_set,
    qualification_decide,
)

NOT_FOUND = OpenApiResponse(
    ErrorSerializer,
    description="No such project (or not a member), or no such item or annotator in it.",
)
FORBIDDEN = OpenApiResponse(
    ErrorSerializer, description="Not authenticated, or not a manager of the project."
)
BAD_INPUT = OpenApiResponse(
    ErrorSerializer, description="Invalid input: `errors` names each field, e.g. claims[1].label."
)


class GoldEvidenceSerializer(serializers.Serializer):
    """A reference's evidence span (code points of the pinned source text)."""

    source_version_id = serializers.IntegerField()
    start = serializers.IntegerField()
    end = serializers.IntegerField()
    quote = serializers.CharField()

    class Meta:
        ref_name = "GoldEvidence"


class GoldClaimLabelSerializer(serializers.Serializer):
    """A reference's label of one claim."""

    claim_id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    reason = serializers.CharField(allow_null=True)
    evidence = GoldEvidenceSerializer(many=True, source="evidence.all")

    class Meta:
        ref_name = "GoldClaimLabel"


class GoldReferenceSerializer(serializers.Serializer):
    """A gold item's current reference labels (an append-only revision)."""

    item_id = serializers.IntegerField()
    number = serializers.IntegerField(help_text="1 for the first reference; + 1 per change.")
    policy_version = serializers.IntegerField(source="policy.version")
    answer_label = serializers.CharField()
    answer_reason = serializers.CharField(allow_null=True)
    rationale = serializers.CharField()
    claim_labels = GoldClaimLabelSerializer(many=True, source="claim_labels.all")
    created_by = serializers.CharField(
        source="created_by.username", allow_null=True, default=None, help_text="Null: an import."
    )
    import_batch_id = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "GoldReference"


def _reference_body(reference: GoldReference) -> dict[str, Any]:
    fresh = gold_reference_current(item=reference.item)
    return dict(GoldReferenceSerializer(fresh).data)


class GoldReferenceApi(APIView):
    """A gold item's reference labels: read (GET) or set (PUT), managers only.

    PUT on an item nobody has labelled makes it gold; on a gold item it writes a new revision
    of the reference (the same labels and rationale again write nothing).
    """

    project_roles = {"GET": permissions.MANAGERS, "PUT": permissions.MANAGERS}

    class InputSerializer(serializers.Serializer):
        answer_label = StrictCharField(max_length=64)
        answer_reason = StrictCharField(
            max_length=64, required=False, allow_null=True, default=None
        )
        claims = ClaimInputSerializer(
            many=True, default=list, help_text="Every claim of the candidate, once."
        )
        rationale = StrictCharField(
            trim_whitespace=False,
            allow_blank=True,
            default="",
            max_length=MAX_RATIONALE_LENGTH,
        )

        class Meta:
            ref_name = "GoldReferenceInput"

    @extend_schema(
        operation_id="gold_reference_retrieve",
        responses={200: GoldReferenceSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        """Return the item's current reference (404 when the item is not gold)."""
        project, _ = project_and_role(request, slug)
        item = Item.objects.filter(
            project=project, pk=min(item_id, MAX_ID), status=ItemStatus.GOLD
        ).first()
        reference = gold_reference_current(item=item) if item is not None else None
        if reference is None:
            raise NotFound(f"item {item_id} of project {project.slug!r} is not a gold item")
        return Response(GoldReferenceSerializer(reference).data)

    @extend_schema(
        operation_id="gold_reference_set",
        request=InputSerializer,
        responses={
            200: GoldReferenceSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(
                ErrorSerializer,
                description="The item has votes (given to an annotator, imported prior votes "
                "or a resolution): only an item nobody has labelled can become gold.",
            ),
        },
    )
    def put(self, request: Request, slug: str, item_id: int) -> Response:
        """Set the item's reference labels (the item becomes gold)."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        body = written(
            lambda: gold_reference_set(
                project=project,
                item_id=item_id,
                actor=request_actor(request),
                data=GoldReferenceInput(
                    answer_label=data["answer_label"],
                    answer_reason=data["answer_reason"],
                    claims=claim_inputs(data["claims"]),
                    rationale=data["rationale"],
                ),
            ),
            _reference_body,
        )
        return Response(body)


class GoldItemSerializer(serializers.Serializer):
    """A gold item of the project (managers only)."""

    item_id = serializers.IntegerField(source="pk")
    question_external_id = serializers.CharField(source="candidate.question.external_id")
    candidate_key = serializers.CharField(source="candidate.key")

    class Meta:
        ref_name = "GoldItem"


class GoldItemListApi(APIView):
    """The project's gold items, by id (managers)."""

    project_roles = {"GET": permissions.MANAGERS}
    pagination_class = CappedLimitOffsetPagination

    @extend_schema(
        operation_id="gold_items_list",
        responses={200: GoldItemSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the gold items."""
        project, _ = project_and_role(request, slug)
        return paginated(request, gold_item_list(project=project), GoldItemSerializer)


class QualificationSerializer(serializers.Serializer):
    """An annotator's qualification: status, figures and the manager's decision."""

    user_id = serializers.IntegerField()
    username = serializers.CharField()
    status = serializers.CharField(
        help_text="passed, failed, admitted, refused, qualifying or not_required. failed: "
        "below the threshold (or too few gold items), a manager decides; qualifying: still "
        "labelling the k gold items; not_required: the rule is off.",
    )
    items = serializers.IntegerField(help_text="Gold items compared (at most k).")
    agreed = serializers.IntegerField(help_text="Labels equal to the reference.")
    compared = serializers.IntegerField(help_text="Labels compared (answer + claims).")
    gold_submitted = serializers.IntegerField(help_text="Every gold item they submitted.")
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_note = serializers.CharField()

    class Meta:
        ref_name = "Qualification"


class QualificationListApi(APIView):
    """Each active annotator's qualification, by username (managers)."""

    project_roles = {"GET": permissions.MANAGERS}

    @extend_schema(
        operation_id="qualifications_list",
        responses={200: QualificationSerializer(many=True), 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the qualifications (every annotator; not paginated)."""
        project, _ = project_and_role(request, slug)
        return Response(
            QualificationSerializer(qualification_list(project=project), many=True).data
        )


class QualificationDecideApi(APIView):
    """Decide an annotator's qualification: admit them to regular work, or refuse (managers)."""

    project_roles = {"POST": permissions.MANAGERS}

    class InputSerializer(serializers.Serializer):
        admit = StrictBooleanField(help_text="true: regular work; false: no work.")
        note = StrictCharField(
            trim_whitespace=False,
            allow_blank=True,
            default="",
            max_length=MAX_DECISION_NOTE_LENGTH,
        )

        class Meta:
            ref_name = "QualificationDecisionInput"

    @extend_schema(
        operation_id="qualifications_decide",
        request=InputSerializer,
        responses={
            200: QualificationSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(ErrorSerializer, description="Labelling has not started."),
        },
    )
    def post(self, request: Request, slug: str, user_id: int) -> Response:
        """Record the decision."""
        project, _ = project_and_role(request, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)

        def render(qualification: Any) -> Any:
            row = next(r for r in qualification_list(project=project) if r.user_id == user_id)
            return QualificationSerializer(row).data

        body = written(
            lambda: qualification_decide(
                project=project,
                annotator_id=user_id,
                actor=request_actor(request),
                **given.validated_data,
            ),
            render,
        )
        return Response(body)
