"""Selectors read: scoped by project and actor, with related rows loaded up front.

Every selector here runs a fixed number of queries, whatever the number of rows: counts come
from ``aggregate``/``annotate``/subqueries, never from per-row queries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Greatest

from labeling.exceptions import NotFound
from labeling.models import (
    Annotation,
    AnnotationOrigin,
    Assignment,
    AssignmentStatus,
    CandidateAnswer,
    Claim,
    Disagreement,
    EvaluatorLabel,
    ImportBatch,
    Item,
    ItemStatus,
    LabelPolicy,
    Membership,
    Partition,
    PriorAnnotation,
    PriorClaimLabel,
    Project,
    Question,
    Resolution,
    RetrievalLink,
    SourceVersion,
)
from labeling.permissions import is_overseer
from labeling.rows import raw_first
from labeling.vocabulary import CANNOT_DECIDE

UNASSIGNED = "unassigned"
# Overview rows in display order: the three partitions, then questions not yet partitioned.
PARTITION_KEYS: tuple[str, ...] = (*Partition.values, UNASSIGNED)


def _count_subquery(queryset: QuerySet[Any], outer_field: str) -> Coalesce:
    """Return ``COUNT(*)`` of ``queryset`` grouped by ``outer_field`` as a scalar subquery."""
    counted = queryset.order_by().values(outer_field).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def _member_role(user: Any) -> Subquery:
    active = Membership.objects.filter(project=OuterRef("pk"), user=user, is_active=True)
    return Subquery(active.values("role")[:1])


def _visible_projects(user: Any) -> QuerySet[Project]:
    projects = Project.objects.annotate(member_role=_member_role(user))
    if not is_overseer(user):
        projects = projects.filter(member_role__isnull=False)
    return projects


def project_list_for_user(*, user: Any) -> QuerySet[Project]:
    """Return the projects ``user`` may see, ordered by slug, each annotated with counts.

    Annotations: ``member_role`` (None for a staff user who is not a member),
    ``question_count`` and ``item_count``. Members see their projects; staff and superusers see
    all. One query.
    """
    return (
        _visible_projects(user)
        .annotate(
            question_count=_count_subquery(
                Question.objects.filter(project=OuterRef("pk")), "project"
            ),
            item_count=_count_subquery(Item.objects.filter(project=OuterRef("pk")), "project"),
        )
        .order_by("slug")
    )


def project_get_for_user(*, slug: str, user: Any) -> Project:
    """Return the project ``slug`` if ``user`` may see it, annotated with ``member_role``.

    Raises:
        NotFound: there is no such project, or ``user`` is not a member (the two are not told
            apart, so a non-member learns nothing about the project's existence).
    """
    # Every project request runs this: raw SQL through ``Manager.raw`` (still the model, with
    # the field converters) costs about a quarter of the CPU of the equivalent queryset.
    project = raw_first(
        Project,
        "SELECT p.*, m.role AS member_role FROM labeling_project p "
        "LEFT JOIN labeling_membership m ON m.project_id = p.id "
        "AND m.user_id = %s AND m.is_active WHERE p.slug = %s",
        [getattr(user, "pk", None), slug],
    )
    if project is None or (getattr(project, "member_role", None) is None and not is_overseer(user)):
        raise NotFound(f"no project {slug!r}")
    return project


# ---------------------------------------------------------------------------------------------
# Project overview
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionCounts:
    """Row counts of one partition (``dev``, ``calibration``, ``test`` or ``unassigned``).

    ``source_versions`` counts the distinct pinned source versions retrieved for the
    partition's questions; a version retrieved by questions of two partitions counts in both.
    """

    partition: str
    questions: int = 0
    candidates: int = 0
    items: int = 0
    claims: int = 0
    unanchored_claims: int = 0
    source_versions: int = 0


@dataclass(frozen=True)
class BatchSummary:
    """One import batch as the overview shows it (``created`` and ``notes`` from its report)."""

    id: int
    format: str
    filename: str
    file_sha256: str
    created_at: datetime
    created_by: str | None
    records: int | None
    created: Mapping[str, int]
    notes: Mapping[str, Any]

    # Templates resolve ``created.items`` as the key "items" first (a count here), so they
    # iterate these pairs instead.
    @property
    def created_pairs(self) -> list[tuple[str, int]]:
        """Return ``created`` as (name, count) pairs."""
        return list(self.created.items())

    @property
    def notes_pairs(self) -> list[tuple[str, Any]]:
        """Return ``notes`` as (name, value) pairs."""
        return list(self.notes.items())


@dataclass(frozen=True)
class ProjectOverview:
    """Counts and state of one project, read in a fixed number of queries.

    ``partitions`` holds one row per key of :data:`PARTITION_KEYS`, in that order; ``totals`` sums
    them except ``source_versions``, which is the project's number of pinned versions.
    """

    slug: str
    name: str
    partitions: tuple[PartitionCounts, ...]
    totals: PartitionCounts
    unanchored_claims: int
    batches: tuple[BatchSummary, ...]
    policy_version: int | None
    evidence_relation: str | None
    policy_frozen_at: datetime | None
    partition_frozen_at: datetime | None
    partition_seed: int | None
    partition_proportions: Mapping[str, float] | None


def _by_partition(rows: QuerySet[Any], key: str) -> dict[str, dict[str, int]]:
    """Turn ``values(key).annotate(...)`` rows into {partition: {count name: value}}."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        partition = row.pop(key) or UNASSIGNED
        out[partition] = row
    return out


def project_overview(*, project: Project, include_batches: bool) -> ProjectOverview:
    """Return the counts per partition, the import batches, the policy and the split state.

    Import batch reports count evaluator labels and prior labels (e.g. how many answers a
    dataset marks correct), so only managers get them: with ``include_batches`` False,
    ``batches`` is empty and not queried. Eight queries at most, whatever the number of
    questions, items or batches.
    """
    q_key, c_key = "partition", "question__partition"
    i_key = "candidate__question__partition"
    grouped = [
        (
            Question.objects.filter(project=project).values(q_key),
            q_key,
            {"questions": Count("pk")},
        ),
        (
            CandidateAnswer.objects.filter(question__project=project).values(c_key),
            c_key,
            {"candidates": Count("pk")},
        ),
        (Item.objects.filter(project=project).values(i_key), i_key, {"items": Count("pk")}),
        (
            Claim.objects.filter(candidate__question__project=project).values(i_key),
            i_key,
            {
                "claims": Count("pk"),
                "unanchored_claims": Count("pk", filter=Q(unanchored=True)),
            },
        ),
        (
            RetrievalLink.objects.filter(question__project=project).values(c_key),
            c_key,
            {"source_versions": Count("source_version", distinct=True)},
        ),
    ]
    counts: dict[str, dict[str, int]] = {p: {} for p in PARTITION_KEYS}
    for queryset, key, aggregates in grouped:
        grouped_rows = queryset.order_by().annotate(**aggregates)
        for partition, values in _by_partition(grouped_rows, key).items():
            counts[partition].update(values)
    rows = tuple(PartitionCounts(partition=p, **counts[p]) for p in PARTITION_KEYS)
    source_versions = SourceVersion.objects.filter(document__project=project).count()
    totals = PartitionCounts(
        partition="all",
        questions=sum(r.questions for r in rows),
        candidates=sum(r.candidates for r in rows),
        items=sum(r.items for r in rows),
        claims=sum(r.claims for r in rows),
        unanchored_claims=sum(r.unanchored_claims for r in rows),
        source_versions=source_versions,
    )
    batches = tuple(
        BatchSummary(
            id=b.pk,
            format=b.format,
            filename=b.filename,
            file_sha256=b.file_sha256,
            created_at=b.created_at,
            created_by=b.created_by.get_username() if b.created_by else None,
            records=(b.report or {}).get("records"),
            created=(b.report or {}).get("created", {}),
            notes=(b.report or {}).get("notes", {}),
        )
        for b in (
            ImportBatch.objects.filter(project=project)
            .select_related("created_by")
            .order_by("created_at", "pk")
            if include_batches
            else ()
        )
    )
    policy = project.policies.order_by("-version").first()
    return ProjectOverview(
        slug=project.slug,
        name=project.name,
        partitions=rows,
        totals=totals,
        unanchored_claims=totals.unanchored_claims,
        batches=batches,
        policy_version=policy.version if policy else None,
        evidence_relation=policy.evidence_relation if policy else None,
        policy_frozen_at=policy.frozen_at if policy else None,
        partition_frozen_at=project.partition_frozen_at,
        partition_seed=project.partition_seed,
        partition_proportions=project.partition_proportions,
    )


# ---------------------------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------------------------


#: Values of the item browser's ``disagreement`` filter.
DISAGREEMENT_LEVELS: tuple[str, ...] = ("answer", "claim", "none")
#: Sort keys of the item browser (``-`` first: descending), the default first.
ITEM_SORTS: tuple[str, ...] = (
    "id",
    "-id",
    "updated",
    "-updated",
    "votes",
    "-votes",
    "status",
    "-status",
)
# Statuses in the order of the flow: collecting votes, in disagreement, resolved; gold items
# (outside the flow) last.
_STATUS_RANK = Case(
    When(status=ItemStatus.OPEN, then=Value(0)),
    When(status=ItemStatus.DISAGREEMENT, then=Value(1)),
    When(status=ItemStatus.GOLD, then=Value(3)),
    default=Value(2),
    output_field=IntegerField(),
)


def _latest(queryset: QuerySet[Any], field: str) -> Subquery:
    """The latest ``field`` of ``queryset`` (correlated by the caller) as a scalar subquery."""
    return Subquery(
        queryset.filter(**{f"{field}__isnull": False}).order_by(f"-{field}").values(field)[:1]
    )


def item_list(
    *,
    project: Project,
    filters: Mapping[str, Any] | None = None,
    include_prior_votes: bool = False,
) -> QuerySet[Item]:
    """Return the items of ``project``, filtered and sorted, with question and candidate.

    ``filters`` (empty values ignored):

    - ``partition``: a partition value or ``"unassigned"``;
    - ``generator``: the candidate's generator (exact);
    - ``q``: case-insensitive substring of the question's external_id or text, the answer text
      or one of its claims' text;
    - ``status``: an item status (``open``, ``disagreement``, ``resolved``);
    - ``disagreement``: ``answer`` / ``claim``: the votes differed at that level (a
      disagreement opened, open or closed); ``none``: never in disagreement;
    - ``resolved_label``: the answer label of the item's current resolution;
    - ``voted_label``: an answer label of one of its votes (current revisions of submitted
      annotations; imported prior votes too with ``include_prior_votes``, managers only);
    - ``annotator``: a user id: items that user submitted an annotation of;
    - ``sort``: one of :data:`ITEM_SORTS` (default ``id``): item id, last update (the latest of
      creation, submission, resolution and disagreement times), number of votes, or status in
      flow order, ties by id.

    Annotations: ``claim_count``, ``unanchored_count``, ``vote_count`` and ``updated_at``,
    ``resolved_label`` (None unless resolved). One query per evaluated page.
    """
    filters = filters or {}
    items = Item.objects.filter(project=project).select_related("candidate__question")
    partition = filters.get("partition")
    if partition == UNASSIGNED:
        items = items.filter(candidate__question__partition__isnull=True)
    elif partition:
        items = items.filter(candidate__question__partition=partition)
    if generator := filters.get("generator"):
        items = items.filter(candidate__generator=generator)
    if q := (filters.get("q") or "").strip():
        claim_match = Claim.objects.filter(candidate=OuterRef("candidate"), text__icontains=q)
        items = items.filter(
            Q(candidate__question__external_id__icontains=q)
            | Q(candidate__question__text__icontains=q)
            | Q(candidate__text__icontains=q)
            | Exists(claim_match)
        )
    if status := filters.get("status"):
        items = items.filter(status=status)
    disagreements = Disagreement.objects.filter(item=OuterRef("pk"))
    level = filters.get("disagreement")
    if level == "answer":
        items = items.filter(Exists(disagreements.filter(answer_differs=True)))
    elif level == "claim":
        items = items.filter(Exists(disagreements.filter(claims_differ=True)))
    elif level == "none":
        items = items.filter(~Exists(disagreements))
    if resolved_label := filters.get("resolved_label"):
        items = items.filter(status=ItemStatus.RESOLVED, resolution__answer_label=resolved_label)
    if voted_label := filters.get("voted_label"):
        voted = Q(
            Exists(
                Annotation.objects.filter(item=OuterRef("pk"), current__answer_label=voted_label)
            )
        )
        if include_prior_votes:
            voted |= Q(
                Exists(
                    PriorAnnotation.objects.filter(
                        candidate=OuterRef("candidate"),
                        origin=AnnotationOrigin.HUMAN,
                        answer_label=voted_label,
                    )
                )
            )
        items = items.filter(voted)
    if annotator := filters.get("annotator"):
        items = items.filter(
            Exists(
                Assignment.objects.filter(
                    item=OuterRef("pk"),
                    annotator_id=annotator,
                    status=AssignmentStatus.SUBMITTED,
                )
            )
        )
    claims = Claim.objects.filter(candidate=OuterRef("candidate"))
    submitted = Assignment.objects.filter(item=OuterRef("pk"), status=AssignmentStatus.SUBMITTED)
    created = F("created_at")
    items = items.annotate(
        claim_count=_count_subquery(claims, "candidate"),
        unanchored_count=_count_subquery(claims.filter(unanchored=True), "candidate"),
        vote_count=_count_subquery(submitted, "item") + F("prior_votes"),
        updated_at=Greatest(
            created,
            Coalesce(_latest(submitted, "submitted_at"), created),
            Coalesce(
                _latest(Resolution.objects.filter(item=OuterRef("pk")), "created_at"), created
            ),
            Coalesce(_latest(disagreements, "opened_at"), created),
            Coalesce(_latest(disagreements, "closed_at"), created),
        ),
        resolved_label=Case(
            When(status=ItemStatus.RESOLVED, then=F("resolution__answer_label")),
            default=Value(None),
            output_field=CharField(),
        ),
    )
    sort = filters.get("sort") or "id"
    descending = sort.startswith("-")
    keys: dict[str, F | Case] = {
        "id": F("pk"),
        "updated": F("updated_at"),
        "votes": F("vote_count"),
        "status": _STATUS_RANK,
    }
    key = keys.get(sort.lstrip("-"), F("pk"))
    ordered = key.desc() if descending else key.asc()
    tie = F("pk").desc() if descending else F("pk").asc()
    return items.order_by(ordered, tie)


def item_answer_labels(*, project: Project) -> list[str]:
    """Return the answer labels an item's votes and resolution may carry, for the filters.

    The newest policy's answer labels, then "can't decide" (a vote, never a resolution). One
    query; empty before a policy exists.
    """
    policy = project.policies.order_by("-version").first()
    if policy is None:
        return []
    return [*policy.answer_labels, CANNOT_DECIDE]


def item_annotators(*, project: Project) -> list[tuple[int, str]]:
    """Return (user id, username) of every annotator of ``project``, by username. One query."""
    return list(
        Assignment.objects.filter(item__project=project, status=AssignmentStatus.SUBMITTED)
        .order_by("annotator__username")
        .values_list("annotator_id", "annotator__username")
        .distinct()
    )


def item_generators(*, project: Project) -> list[str]:
    """Return the distinct non-empty generators of ``project``'s candidates, sorted. One query."""
    return list(
        CandidateAnswer.objects.filter(question__project=project)
        .exclude(generator="")
        .order_by("generator")
        .values_list("generator", flat=True)
        .distinct()
    )


def item_get(*, project: Project, item_id: int, with_labels: bool = False) -> Item:
    """Return one item of ``project`` with everything its detail view shows.

    Loaded up front: the candidate and question, the candidate's claims, the question's
    retrievals with their pinned source versions and documents, and the question's other
    candidates with their items (``candidate.question.candidates``). With ``with_labels`` (for
    managers only; never for annotators) also the candidate's evaluator labels
    and prior annotations with their claim labels, evidence and spans.

    Raises:
        NotFound: no item ``item_id`` in ``project`` (an item of another project is not found).
    """
    prefetches: list[Any] = [
        Prefetch("candidate__claims", queryset=Claim.objects.order_by("index")),
        Prefetch(
            "candidate__question__retrievals",
            queryset=RetrievalLink.objects.select_related("source_version__document").order_by(
                "rank", "pk"
            ),
        ),
        Prefetch(
            "candidate__question__candidates",
            queryset=CandidateAnswer.objects.select_related("item").order_by("sample_index"),
        ),
    ]
    if with_labels:
        prefetches += [
            Prefetch(
                "candidate__evaluator_labels",
                queryset=EvaluatorLabel.objects.select_related("evaluator", "claim").order_by(
                    "evaluator__name", "evaluator__version", "claim__index", "pk"
                ),
            ),
            Prefetch(
                "candidate__prior_annotations",
                queryset=PriorAnnotation.objects.order_by("annotator").prefetch_related(
                    Prefetch(
                        "claim_labels",
                        queryset=PriorClaimLabel.objects.select_related("claim")
                        .prefetch_related("evidence")
                        .order_by("claim__index"),
                    ),
                    "spans",
                ),
            ),
        ]
    item = (
        Item.objects.filter(project=project, pk=item_id)
        .select_related("candidate__question")
        .prefetch_related(*prefetches)
        .first()
    )
    if item is None:
        raise NotFound(f"no item {item_id} in project {project.slug!r}")
    return item


def policy_version_list(*, project: Project) -> QuerySet[LabelPolicy]:
    """Return the project's label policy versions, oldest first, with previous and publisher.

    The caller has checked that the actor may see them (managers). One query.
    """
    return (
        LabelPolicy.objects.filter(project=project)
        .select_related("previous", "published_by")
        .order_by("version")
    )
