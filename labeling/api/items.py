"""REST API of a project's items: the item list (filtered, paginated) and one item in full.

Scoping and errors as in :mod:`labeling.api.catalog`: the project comes from
``project_get_for_user`` (a non-member gets 404); role checks live in ``labeling.permissions``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling import permissions
from labeling.api.catalog import NOT_FOUND
from labeling.api.common import ErrorSerializer, paginated, project_and_role
from labeling.api.fields import StrictCharField
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.exceptions import PermissionDenied
from labeling.models import ItemStatus, Partition
from labeling.selectors import DISAGREEMENT_LEVELS, ITEM_SORTS, UNASSIGNED, item_get, item_list


class ClaimSerializer(serializers.Serializer):
    """A claim with its code-point span in the answer (null when unanchored)."""

    claim_id = serializers.IntegerField(
        source="pk", help_text="The id a label or a gold reference names (claims[i].claim_id)."
    )
    index = serializers.IntegerField()
    text = serializers.CharField(trim_whitespace=False)
    start = serializers.IntegerField(allow_null=True, help_text="Code points, 0-based.")
    end = serializers.IntegerField(allow_null=True, help_text="Code points, end-exclusive.")
    unanchored = serializers.BooleanField()
    machine_split = serializers.BooleanField()

    class Meta:
        ref_name = "Claim"


class ItemListApi(APIView):
    """The project's items, filtered and sorted, paginated; managers and adjudicators only."""

    # Read by drf-spectacular to document the paginated envelope; paginated does the paging.
    pagination_class = CappedLimitOffsetPagination

    class FilterSerializer(serializers.Serializer):
        partition = serializers.ChoiceField(choices=[*Partition.values, UNASSIGNED], required=False)
        generator = StrictCharField(required=False)
        q = StrictCharField(
            required=False,
            max_length=200,
            help_text=(
                "Case-insensitive substring of the question's external_id or text, the answer "
                "text or one of its claims' text."
            ),
        )
        status = serializers.ChoiceField(
            choices=ItemStatus.values, required=False, help_text="The item's status."
        )
        disagreement = serializers.ChoiceField(
            choices=list(DISAGREEMENT_LEVELS),
            required=False,
            help_text=(
                "answer / claim: the item's votes differed at that level (a disagreement, open "
                "or closed); none: never in disagreement."
            ),
        )
        resolved_label = StrictCharField(
            required=False,
            max_length=64,
            help_text="The answer label of the item's current resolution (resolved items).",
        )
        voted_label = StrictCharField(
            required=False,
            max_length=64,
            help_text=(
                "An answer label of one of the item's votes (submitted annotations; imported "
                "human prior votes too for managers)."
            ),
        )
        annotator = serializers.IntegerField(
            required=False,
            min_value=1,
            max_value=2**63 - 1,
            help_text=(
                "A user id: items that user submitted an annotation of. Managers only (403 for "
                "adjudicators, who do not see who voted)."
            ),
        )
        sort = serializers.ChoiceField(
            choices=list(ITEM_SORTS),
            required=False,
            help_text=(
                "Order (default id; '-' descending): id, updated (last submission, resolution "
                "or disagreement), votes (submitted plus prior), status (open, disagreement, "
                "resolved); ties by id."
            ),
        )

        class Meta:
            ref_name = "ItemFilter"

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        question_id = serializers.IntegerField(source="candidate.question_id")
        question_external_id = serializers.CharField(source="candidate.question.external_id")
        question_text = serializers.CharField(source="candidate.question.text")
        partition = serializers.CharField(source="candidate.question.partition", allow_null=True)
        candidate_key = serializers.CharField(source="candidate.key")
        generator = serializers.CharField(source="candidate.generator")
        sample_index = serializers.IntegerField(source="candidate.sample_index")
        is_selected = serializers.BooleanField(source="candidate.is_selected")
        claim_count = serializers.IntegerField()
        unanchored_count = serializers.IntegerField()
        status = serializers.CharField()
        overlap = serializers.IntegerField(help_text="Votes the item collects (N).")
        vote_count = serializers.IntegerField(help_text="Submitted annotations plus prior votes.")
        resolved_label = serializers.CharField(
            allow_null=True,
            help_text="The current resolution's answer label; null unless resolved.",
        )
        updated_at = serializers.DateTimeField(
            help_text="Latest of creation, submission, resolution and disagreement times."
        )

        class Meta:
            ref_name = "ItemListItem"

    @extend_schema(
        parameters=[FilterSerializer],
        responses={
            200: OutputSerializer(many=True),
            400: ErrorSerializer,
            403: ErrorSerializer,
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        """List items (annotators get 403: they never browse the project's items)."""
        project, role = project_and_role(request, slug)
        permissions.require_item_browser(role)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        if "annotator" in filters.validated_data and not permissions.can_manage(role):
            raise PermissionDenied(
                "only a project manager may filter by annotator", field="annotator"
            )
        items = item_list(
            project=project,
            filters=filters.validated_data,
            include_prior_votes=permissions.can_see_labels(role),
        )
        return paginated(request, items, self.OutputSerializer)


class ItemQuestionSerializer(serializers.Serializer):
    """The question of an item."""

    id = serializers.IntegerField()
    external_id = serializers.CharField()
    text = serializers.CharField(trim_whitespace=False)
    group_key = serializers.CharField()
    partition = serializers.CharField(allow_null=True)
    slices = serializers.DictField(child=serializers.CharField())

    class Meta:
        ref_name = "ItemQuestion"


class ItemCandidateSerializer(serializers.Serializer):
    """The candidate answer of an item, with the scores the user brought."""

    id = serializers.IntegerField()
    key = serializers.CharField()
    text = serializers.CharField(trim_whitespace=False)
    generator = serializers.CharField()
    generator_settings = serializers.DictField()
    sample_index = serializers.IntegerField()
    canonical_form = serializers.CharField(allow_null=True)
    retrieval_score = serializers.FloatField(allow_null=True)
    confidence = serializers.FloatField(allow_null=True)
    acceptance_score = serializers.FloatField(allow_null=True)
    frequency_rank = serializers.IntegerField(allow_null=True)
    is_selected = serializers.BooleanField()

    class Meta:
        ref_name = "ItemCandidate"


class PinnedSourceSerializer(serializers.Serializer):
    """A retrieved source version in full (a ``RetrievalLink`` with its version)."""

    source_version_id = serializers.IntegerField()
    document = serializers.CharField(source="source_version.document.key")
    uri = serializers.CharField(source="source_version.uri")
    sha256 = serializers.CharField(source="source_version.sha256")
    length = serializers.IntegerField(
        source="source_version.length", help_text="Length of the text in code points."
    )
    published_at = serializers.DateTimeField(source="source_version.published_at", allow_null=True)
    observed_at = serializers.DateTimeField(source="source_version.observed_at", allow_null=True)
    rank = serializers.IntegerField(allow_null=True)
    score = serializers.FloatField(allow_null=True)
    text = serializers.CharField(source="source_version.text", trim_whitespace=False)

    class Meta:
        ref_name = "PinnedSource"


class SiblingCandidateSerializer(serializers.Serializer):
    """Another candidate of the same question, with its item id."""

    item_id = serializers.IntegerField(source="item.pk")
    key = serializers.CharField()
    generator = serializers.CharField()
    sample_index = serializers.IntegerField()
    is_selected = serializers.BooleanField()

    class Meta:
        ref_name = "SiblingCandidate"


class EvaluatorLabelSerializer(serializers.Serializer):
    """An evaluator's verdict on the answer (``claim`` null) or on one claim. Managers only."""

    evaluator = serializers.CharField(source="evaluator.name")
    version = serializers.CharField(source="evaluator.version")
    claim = serializers.IntegerField(
        source="claim.index", allow_null=True, help_text="Claim index; null for the answer."
    )
    label = serializers.CharField(allow_null=True)  # type: ignore[assignment]
    score = serializers.FloatField(allow_null=True)
    available = serializers.BooleanField()

    class Meta:
        ref_name = "EvaluatorLabel"


class PriorEvidenceSerializer(serializers.Serializer):
    """An evidence span cited by a prior claim label (code points of the source text)."""

    source_version_id = serializers.IntegerField()
    start = serializers.IntegerField()
    end = serializers.IntegerField()
    quote = serializers.CharField(trim_whitespace=False)

    class Meta:
        ref_name = "PriorEvidence"


class PriorClaimLabelSerializer(serializers.Serializer):
    """A prior annotator's label of one claim."""

    claim = serializers.IntegerField(source="claim.index")
    label = serializers.CharField(allow_null=True)  # type: ignore[assignment]
    reason = serializers.CharField(allow_null=True)
    evidence = PriorEvidenceSerializer(many=True)

    class Meta:
        ref_name = "PriorClaimLabel"


class PriorSpanSerializer(serializers.Serializer):
    """A span of the answer flagged by a prior annotator."""

    start = serializers.IntegerField()
    end = serializers.IntegerField()
    quote = serializers.CharField(trim_whitespace=False)
    labels = serializers.ListField(child=serializers.CharField())
    note = serializers.CharField()

    class Meta:
        ref_name = "PriorSpan"


class PriorAnnotationSerializer(serializers.Serializer):
    """A label the dataset already carried, by a pseudonymous annotator. Managers only."""

    annotator = serializers.CharField()
    origin = serializers.CharField()
    answer_label = serializers.CharField(allow_null=True)
    answer_reason = serializers.CharField(allow_null=True)
    note = serializers.CharField()
    claim_labels = PriorClaimLabelSerializer(many=True)
    spans = PriorSpanSerializer(many=True)

    class Meta:
        ref_name = "PriorAnnotation"


class ItemDetailApi(APIView):
    """One item with its question, claims, pinned sources and the question's other candidates.

    ``evaluator_labels`` and ``prior_annotations`` are present for managers only: annotators never
    reach this endpoint (404) and adjudicators get the item without them.
    """

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        question = ItemQuestionSerializer(source="candidate.question")
        candidate = ItemCandidateSerializer()
        claims = ClaimSerializer(many=True, source="candidate.claims")
        sources = PinnedSourceSerializer(many=True, source="candidate.question.retrievals")
        other_candidates = serializers.SerializerMethodField()

        class Meta:
            ref_name = "ItemDetail"

        @extend_schema_field(SiblingCandidateSerializer(many=True))
        def get_other_candidates(self, item: Any) -> list[dict[str, Any]]:
            candidates = item.candidate.question.candidates.all()
            others = [c for c in candidates if c.pk != item.candidate_id]
            return list(SiblingCandidateSerializer(others, many=True).data)

    class ManagerOutputSerializer(OutputSerializer):
        evaluator_labels = EvaluatorLabelSerializer(
            many=True,
            source="candidate.evaluator_labels",
            required=False,
            help_text="Managers only; absent for other roles.",
        )
        prior_annotations = PriorAnnotationSerializer(
            many=True,
            source="candidate.prior_annotations",
            required=False,
            help_text="Managers only; absent for other roles.",
        )

        class Meta:
            ref_name = "ItemDetailWithLabels"

    @extend_schema(
        responses={
            200: OpenApiResponse(
                ManagerOutputSerializer,
                description="evaluator_labels and prior_annotations are present for managers only.",
            ),
            403: ErrorSerializer,
            404: NOT_FOUND,
        }
    )
    def get(self, request: Request, slug: str, item_id: int) -> Response:
        """Return the item; evaluator labels and prior annotations for managers only."""
        project, role = project_and_role(request, slug)
        permissions.require_item_browser(role)
        with_labels = permissions.can_see_labels(role)
        item = item_get(project=project, item_id=item_id, with_labels=with_labels)
        serializer = self.ManagerOutputSerializer if with_labels else self.OutputSerializer
        return Response(serializer(item).data)
