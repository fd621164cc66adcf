"""REST API of labelling work: assignments and annotations (adjudication and settings: siblings).

One ``APIView`` per operation, except where one URL carries two methods (settings
GET/PATCH, members GET/POST): one class per URL then, one method per operation, because Django
routes by path only and a dispatching shim would hide the operations from the schema.

Scoping: the project comes from ``project_get_for_user`` (a non-member gets 404), and every object
id is looked up inside that project and, for an annotator's work, among the actor's own rows, so
an object of another project or another annotator answers 404. Roles are checked by the services
and selectors; a view's ``project_roles`` checks them again before a body is validated (403
before 400) and for reads that take no actor; domain errors become HTTP in
``labeling.api_errors`` (409 for conflicts, incl. ``lease_expired`` and ``stale_version``).

Blindness: annotator responses are built from ``LabellingFormView`` and the actor's own
annotation rows only, so an annotator never sees other people's votes, evaluator labels or
imported prior labels; see ``labeling/api/serializers.py``.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.common import ErrorSerializer, paginated, represent, written
from labeling.api.fields import StrictBooleanField, StrictCharField
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.api.serializers import (
    ClaimInputSerializer,
    LabellingFormSerializer,
    SpanSerializer,
    claim_inputs,
)
from labeling.exceptions import InvalidInput
from labeling.models import MAX_ID, SkipReason
from labeling.selectors import assignment_get_for_actor, labelling_form_view, project_get_for_user
from labeling.selectors.pages import own_annotation_list
from labeling.selectors.review import LabellingFormView
from labeling.services import AnnotationInput, annotation_submit, assignment_skip, item_claim_next

NOT_FOUND = OpenApiResponse(
    ErrorSerializer, description="No such project (or not a member), or no such object in it."
)
FORBIDDEN = OpenApiResponse(
    ErrorSerializer, description="Not authenticated, or the role does not allow it."
)
BAD_INPUT = OpenApiResponse(
    ErrorSerializer,
    description="Invalid input: `errors` names each field (e.g. claims[1].evidence[0].quote); "
    "a domain error also names it in `field`.",
)
CONFLICT = OpenApiResponse(ErrorSerializer, description="The object's state does not allow it.")
# An entity tag as If-Match carries it: "2", W/"2" (the revision number), or the bare number.
ENTITY_TAG = re.compile(r'^(?:W/)?"(\d{1,19})"$|^(\d{1,19})$')


#: The response header of the labelling form and of each submit: the current revision.
ETAG_HEADER = OpenApiParameter(
    "ETag",
    str,
    OpenApiParameter.HEADER,
    response=[200],
    description='The current revision of your annotation, e.g. "2" ("0" before the first '
    "submit): send it back as If-Match.",
)


def revision_etag(number: int) -> str:
    """Return the ETag of an annotation's revision ``number`` (0: none yet), e.g. ``"2"``."""
    return f'"{number}"'


def form_etag(form: LabellingFormView) -> dict[str, str]:
    """Return the ETag header of a labelling form: its current revision (0 before a submit)."""
    return {"ETag": revision_etag((form.current.revision or 0) if form.current else 0)}


def based_on_revision(request: Request, revision: int | None) -> int | None:
    """Return the revision a submit was made on, from ``If-Match`` or the body's ``revision``.

    Raises:
        InvalidInput: ``If-Match`` is not one entity tag of a revision (field ``If-Match``), or
            it and ``revision`` name different revisions (field ``revision``).
    """
    header = request.headers.get("If-Match")
    if header is None:
        return revision
    match = ENTITY_TAG.match(header.strip())
    if match is None:
        raise InvalidInput(
            'expected one entity tag of a revision, e.g. "2" ("0" before the first submit)',
            field="If-Match",
        )
    tagged = int(match.group(1) or match.group(2))
    if tagged > MAX_ID:
        raise InvalidInput(f"at most {MAX_ID}", field="If-Match")
    if revision is not None and revision != tagged:
        raise InvalidInput(
            f"revision {revision} in the body, {tagged} in If-Match: send one", field="revision"
        )
    return tagged


# ---------------------------------------------------------------------------------------------
# Annotators: next item, the labelling form, submit / revise, skip, own annotations
# ---------------------------------------------------------------------------------------------


class AssignmentClaimNextApi(APIView):
    """Claim the next item to label (annotators): the same lease again from a second tab."""

    @extend_schema(
        operation_id="assignments_next",
        request=None,
        responses={
            200: OpenApiResponse(
                LabellingFormSerializer, description="The leased item's labelling form."
            ),
            204: OpenApiResponse(description="No item needs you now."),
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(ErrorSerializer, description="Labelling has not started."),
        },
        parameters=[ETAG_HEADER],
    )
    def post(self, request: Request, slug: str) -> Response:
        """Lease the next item in serving order (or the actor's live lease) and return its form."""
        project = project_get_for_user(slug=slug, user=request.user)

        def render(assignment: Any) -> Any:
            if assignment is None:
                return None
            form = labelling_form_view(project=project, assignment=assignment)
            return represent(LabellingFormSerializer, form), form_etag(form)

        rendered = written(lambda: item_claim_next(project=project, actor=request.user), render)
        if rendered is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        data, headers = rendered
        return Response(data, headers=headers)


class AssignmentDetailApi(APIView):
    """The labelling form of one of the actor's own assignments (any status)."""

    @extend_schema(
        operation_id="assignments_retrieve",
        responses={200: LabellingFormSerializer, 404: NOT_FOUND, 409: CONFLICT},
        parameters=[ETAG_HEADER],
    )
    def get(self, request: Request, slug: str, assignment_id: int) -> Response:
        """Return the form: question, candidate, claims, pinned sources, own current revision."""
        project = project_get_for_user(slug=slug, user=request.user)
        assignment = assignment_get_for_actor(
            project=project, assignment_id=assignment_id, actor=request.user
        )
        form = labelling_form_view(project=project, assignment=assignment)
        return Response(LabellingFormSerializer(form).data, headers=form_etag(form))


class AnnotationSubmitApi(APIView):
    """Submit (first PUT) or revise (later PUTs) the actor's annotation of an assigned item.

    Idempotent: the same content again writes nothing and returns the annotation unchanged.
    """

    class InputSerializer(serializers.Serializer):
        answer_label = StrictCharField(max_length=64)
        answer_reason = StrictCharField(
            max_length=64,
            required=False,
            allow_null=True,
            default=None,
            help_text="Required iff answer_label is evidence_unavailable.",
        )
        comment = StrictCharField(
            required=False, allow_blank=True, default="", trim_whitespace=False
        )
        time_spent_seconds = serializers.FloatField(
            required=False,
            allow_null=True,
            default=None,
            help_text="Measured by the client; 0 to 86,400.",
        )
        claims = ClaimInputSerializer(
            many=True, default=list, help_text="Every claim of the candidate, exactly once."
        )
        revision = serializers.IntegerField(
            min_value=0,
            max_value=MAX_ID,
            required=False,
            allow_null=True,
            default=None,
            help_text="The revision the labels were made on (0 before the first submit; the "
            "form's current.revision, or the ETag of the form or of the last PUT). A submit "
            "made on an older revision is refused with 409 stale_version. Omitted (and no "
            "If-Match header): 0, a first submit; a revision sends the revision it replaces.",
        )
        policy_version = serializers.IntegerField(
            min_value=1,
            max_value=MAX_ID,
            required=False,
            allow_null=True,
            default=None,
            help_text="The label policy version the form was loaded under (the form's "
            "policy.version). After a manager published a newer version the submit is refused "
            "with 409 stale_version (field policy_version; the body adds policy_version and "
            "current_policy_version): reload the form. Omitted: the labels are checked against "
            "the current version.",
        )

        class Meta:
            ref_name = "AnnotationInput"

    class OutputSerializer(serializers.Serializer):
        class ClaimLabelSerializer(serializers.Serializer):
            claim_id = serializers.IntegerField()
            label = serializers.CharField()  # type: ignore[assignment]
            reason = serializers.CharField(allow_null=True)
            boundary_error = StrictBooleanField()
            evidence = SpanSerializer(many=True, source="evidence.all")

            class Meta:
                ref_name = "OwnClaimLabel"

        class RevisionSerializer(serializers.Serializer):
            number = serializers.IntegerField()
            policy_version = serializers.IntegerField(source="policy.version")
            answer_label = serializers.CharField()
            answer_reason = serializers.CharField(allow_null=True)
            comment = serializers.CharField(trim_whitespace=False)
            time_spent_seconds = serializers.FloatField(allow_null=True)
            created_at = serializers.DateTimeField()

            class Meta:
                ref_name = "OwnRevision"

        id = serializers.IntegerField()
        assignment_id = serializers.IntegerField()
        item_id = serializers.IntegerField()
        revision_count = serializers.IntegerField()
        current = RevisionSerializer()
        claims = ClaimLabelSerializer(many=True, source="current.claim_labels.all")

        class Meta:
            ref_name = "OwnAnnotation"

    @extend_schema(
        operation_id="assignments_annotation_update",
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(
                ErrorSerializer,
                description="lease_expired: the slot was given back, nothing saved; "
                "invalid_transition: the item is resolved (no more revisions); "
                "stale_version: another session saved a revision since the one the labels "
                "were made on, nothing saved (the body adds based_on_revision, "
                "current_revision and current, the current labels); or a new label policy "
                "version was published since the form was loaded (field policy_version).",
            ),
        },
        parameters=[
            OpenApiParameter(
                "If-Match",
                str,
                OpenApiParameter.HEADER,
                required=False,
                description='The ETag of the revision the labels were made on, e.g. "2" '
                '("0" before the first submit); as the body\'s revision.',
            ),
            ETAG_HEADER,
        ],
    )
    def put(self, request: Request, slug: str, assignment_id: int) -> Response:
        """Save the labels as the actor's current annotation of the item.

        The response's ``ETag`` is the current revision number, for the next ``If-Match``.
        """
        project = project_get_for_user(slug=slug, user=request.user)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        fields = dict(given.validated_data)
        based_on = based_on_revision(request, fields.pop("revision"))
        data = AnnotationInput(
            **{**fields, "claims": claim_inputs(fields["claims"])}, based_on_revision=based_on
        )
        body, headers = written(
            lambda: annotation_submit(
                project=project, assignment_id=assignment_id, actor=request.user, data=data
            ),
            lambda annotation: (
                represent(self.OutputSerializer, annotation),
                {"ETag": revision_etag(annotation.revision_count)},
            ),
        )
        return Response(body, headers=headers)


class AssignmentSkipApi(APIView):
    """Skip an assigned item with a reason: its slot goes back; it is never served to you again."""

    class InputSerializer(serializers.Serializer):
        reason = serializers.ChoiceField(choices=SkipReason.choices)
        note = StrictCharField(required=False, allow_blank=True, default="", max_length=2000)

        class Meta:
            ref_name = "SkipInput"

    class OutputSerializer(serializers.Serializer):
        assignment_id = serializers.IntegerField(source="pk")
        item_id = serializers.IntegerField()
        status = serializers.CharField()
        skip_reason = serializers.CharField()
        skip_note = serializers.CharField()
        ended_at = serializers.DateTimeField(allow_null=True)

        class Meta:
            ref_name = "SkippedAssignment"

    @extend_schema(
        operation_id="assignments_skip",
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            400: BAD_INPUT,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(ErrorSerializer, description="Already submitted: revise it."),
        },
    )
    def post(self, request: Request, slug: str, assignment_id: int) -> Response:
        """Skip the item."""
        project = project_get_for_user(slug=slug, user=request.user)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        body = written(
            lambda: assignment_skip(
                project=project,
                assignment_id=assignment_id,
                actor=request.user,
                **given.validated_data,
            ),
            lambda assignment: self.OutputSerializer(assignment).data,
        )
        return Response(body)


class AnnotationListApi(APIView):
    """The actor's own annotations in the project, newest first (empty for non-annotators)."""

    pagination_class = CappedLimitOffsetPagination

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        assignment_id = serializers.IntegerField()
        item_id = serializers.IntegerField()
        question_text = serializers.CharField(source="item.candidate.question.text")
        candidate_text = serializers.CharField(source="item.candidate.text")
        revision_count = serializers.IntegerField()
        answer_label = serializers.CharField(source="current.answer_label", allow_null=True)
        submitted_at = serializers.DateTimeField(source="assignment.submitted_at", allow_null=True)
        revised_at = serializers.DateTimeField(source="current.created_at", allow_null=True)

        class Meta:
            ref_name = "OwnAnnotationListItem"

    @extend_schema(
        operation_id="annotations_list",
        responses={200: OutputSerializer(many=True), 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        """List the actor's own annotations (never anyone else's, never the item's status)."""
        project = project_get_for_user(slug=slug, user=request.user)
        annotations = own_annotation_list(project=project, actor=request.user)
        return paginated(request, annotations, self.OutputSerializer)


# ---------------------------------------------------------------------------------------------
# Managers: settings, start, members
# ---------------------------------------------------------------------------------------------
