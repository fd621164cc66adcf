"""Reads for adjudicators: the disagreement queue, the next item of it, and the side-by-side view.

Reads never write: nothing here saves, updates or creates a row (tested by capturing the SQL).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.utils import timezone

from labeling.exceptions import InvalidInput, NotFound, PermissionDenied
from labeling.importers.record_errors import echo
from labeling.models import (
    LIVE_ASSIGNMENT_STATUSES,
    Assignment,
    CandidateAnswer,
    Claim,
    Disagreement,
    Item,
    ItemStatus,
    LabelPolicy,
    PriorAnnotation,
    Project,
    Question,
    Resolution,
    ResolutionStatus,
)
from labeling.permissions import REVIEWERS, require_role
from labeling.selectors.catalog import UNASSIGNED
from labeling.selectors.review import ClaimRow, SourceRow, claim_rows, source_rows
from labeling.selectors.vote_reads import (
    AgreedLabels,
    Span,
    Vote,
    VoteDiff,
    imported_evidence_waivers,
    item_votes,
    prior_evidence,
    votes_agreed,
    votes_compare,
)

QUEUE_LEVELS = ("answer", "claim")


#: The largest ``min_age_hours`` of the disagreement queue: a century. Larger values would
#: overflow the date arithmetic; no disagreement is that old.
MAX_QUEUE_AGE_HOURS = 24 * 366 * 100


def disagreement_queue(
    *, project: Project, filters: Mapping[str, Any] | None = None, actor: Any = None
) -> QuerySet[Item]:
    """Return the items of ``project`` waiting for adjudication, oldest disagreement first.

    ``filters`` (empty values ignored): ``partition`` (a partition value or ``"unassigned"``),
    ``level`` (``"answer"``: the answer labels differ; ``"claim"``: some claim's labels differ)
    and ``min_age_hours`` (0 to :data:`MAX_QUEUE_AGE_HOURS`). When ``actor`` is given and the
    project does not allow self-adjudication, the items they annotated are left out.

    Annotations: ``opened_at``, ``answer_differs`` and ``claims_differ`` of the open
    disagreement. Items come with candidate and question. One query per evaluated page.

    Raises:
        InvalidInput: an unknown level, or an age that is not a number of hours from 0 to
            :data:`MAX_QUEUE_AGE_HOURS`.
    """
    filters = filters or {}
    open_disagreement = Disagreement.objects.filter(item=OuterRef("pk"), closed_at__isnull=True)
    items = (
        Item.objects.filter(project=project, status=ItemStatus.DISAGREEMENT)
        .select_related("candidate__question")
        .annotate(
            opened_at=Subquery(open_disagreement.values("opened_at")[:1]),
            answer_differs=Subquery(open_disagreement.values("answer_differs")[:1]),
            claims_differ=Subquery(open_disagreement.values("claims_differ")[:1]),
        )
        .filter(opened_at__isnull=False)
    )
    partition = filters.get("partition")
    if partition == UNASSIGNED:
        items = items.filter(candidate__question__partition__isnull=True)
    elif partition:
        items = items.filter(candidate__question__partition=partition)
    level = filters.get("level")
    if level == "answer":
        items = items.filter(answer_differs=True)
    elif level == "claim":
        items = items.filter(claims_differ=True)
    elif level:
        raise InvalidInput(
            f"unknown level {echo(level)}; one of {list(QUEUE_LEVELS)}", field="level"
        )
    age = filters.get("min_age_hours")
    if age not in (None, ""):
        try:
            hours = float(age)
        except (TypeError, ValueError):
            hours = -1.0
        if not 0 <= hours <= MAX_QUEUE_AGE_HOURS:
            raise InvalidInput(
                f"expected a number of hours from 0 to {MAX_QUEUE_AGE_HOURS}, "
                f"got {str(age)[:40]!r}",
                field="min_age_hours",
            )
        items = items.filter(opened_at__lte=timezone.now() - timedelta(hours=hours))
    if actor is not None and not project.allow_self_adjudication:
        own = Assignment.objects.filter(
            item=OuterRef("pk"), annotator=actor, status__in=LIVE_ASSIGNMENT_STATUSES
        )
        items = items.exclude(Exists(own))
    return items.order_by("opened_at", "pk")


@dataclass(frozen=True)
class PriorFlag:
    """A span of the answer an imported annotator flagged, with the dataset's labels and note."""

    start: int
    end: int
    quote: str
    labels: tuple[str, ...]
    evidence: Span | None
    note: str = ""


@dataclass(frozen=True)
class AnnotatorColumn:
    """One column of the side-by-side view: "Annotator k" and their vote, never an identity.

    ``note`` is an imported annotation's note (a live vote's comment is ``vote.comment``);
    ``labelled_at`` when the imported label was made, if the dataset says.
    """

    pseudonym: str
    vote: Vote
    flags: tuple[PriorFlag, ...] = ()
    note: str = ""
    labelled_at: datetime | None = None

    @property
    def imported(self) -> bool:
        """Whether the vote is an imported prior annotation."""
        return not self.vote.live


@dataclass(frozen=True)
class AdjudicationView:
    """Everything the adjudicator compares; ``version`` goes back with the decision."""

    item: Item
    question: Question
    candidate: CandidateAnswer
    claims: tuple[ClaimRow, ...]
    sources: tuple[SourceRow, ...]
    annotators: tuple[AnnotatorColumn, ...]
    diff: VoteDiff
    version: int
    status: str
    resolution: Resolution | None
    can_adjudicate: bool
    policy: LabelPolicy | None = None
    history: tuple[Resolution, ...] = field(default_factory=tuple)
    #: What every vote agrees on (the decision's pre-fill).
    agreed: AgreedLabels | None = None
    #: Per claim id, the labels a decision may give without evidence (imported votes).
    evidence_waivers: Mapping[int, frozenset[str]] = field(default_factory=dict)

    @property
    def differing_claim_ids(self) -> frozenset[int]:
        """The ids of the claims whose votes differ (highlighted)."""
        return self.diff.claims


def annotated_by(*, item_id: int, actor: Any) -> bool:
    """Return whether ``actor`` holds a live or submitted assignment of the item. One query."""
    return Assignment.objects.filter(
        item_id=item_id, annotator=actor, status__in=LIVE_ASSIGNMENT_STATUSES
    ).exists()


def adjudication_view(*, project: Project, item_id: int, actor: Any) -> AdjudicationView:
    """Return the side-by-side view of an item's votes for an adjudicator.

    Annotators are shown as "Annotator 1..N": live ones by assignment slot, then imported ones
    in import order; never a username or a dataset annotator id (live comments and
    the notes of imported annotations are shown as the dataset gave them, as on the item
    page). Writes nothing. About ten queries, whatever the item.

    Raises:
        NotFound: the actor is not a member, or no such item in the project, or the item is
            still collecting annotations (it is in no queue yet), or it is a gold item (its
            labels are no votes).
        PermissionDenied: the actor is not an adjudicator or manager, or annotated the item
            and the project does not allow self-adjudication.
    """
    require_role(project=project, actor=actor, roles=REVIEWERS, action="adjudicate")
    item = (
        Item.objects.filter(project=project, pk=item_id)
        .select_related("candidate__question", "resolution")
        .prefetch_related(Prefetch("candidate__claims", queryset=Claim.objects.order_by("index")))
        .first()
    )
    if item is None or item.status in (ItemStatus.OPEN, ItemStatus.GOLD):
        raise NotFound(f"no item {item_id} awaiting or past adjudication in {project.slug!r}")
    if not project.allow_self_adjudication and annotated_by(item_id=item.pk, actor=actor):
        raise PermissionDenied(
            "you annotated this item; this project does not allow self-adjudication"
        )
    candidate = item.candidate
    claims = claim_rows(candidate.claims.all())
    votes = item_votes(item_ids=[item.pk])[item.pk]
    flags: dict[int, tuple[PriorFlag, ...]] = defaultdict(tuple)
    notes: dict[int, tuple[str, datetime | None]] = {}
    prior_ids = [v.ref for v in votes if not v.live]
    if prior_ids:
        for prior in PriorAnnotation.objects.filter(pk__in=prior_ids).prefetch_related("spans"):
            notes[prior.pk] = (prior.note, prior.labelled_at)
            flags[prior.pk] = tuple(
                PriorFlag(
                    start=s.start,
                    end=s.end,
                    quote=s.quote,
                    labels=tuple(s.labels),
                    evidence=prior_evidence(s),
                    note=s.note,
                )
                for s in prior.spans.all()
            )
    columns = tuple(
        AnnotatorColumn(
            pseudonym=f"Annotator {n}",
            vote=vote,
            flags=() if vote.live else flags[vote.ref],
            note="" if vote.live else notes[vote.ref][0],
            labelled_at=None if vote.live else notes[vote.ref][1],
        )
        for n, vote in enumerate(votes, start=1)
    )
    resolution = item.resolution
    can_adjudicate = item.status == ItemStatus.DISAGREEMENT or (
        resolution is not None and resolution.status != ResolutionStatus.CONSENSUS
    )
    policy = project.policies.filter(frozen_at__isnull=False).order_by("-version").first()
    history = tuple(
        Resolution.objects.filter(item=item).select_related("adjudicator").order_by("number")
    )
    return AdjudicationView(
        item=item,
        question=candidate.question,
        candidate=candidate,
        claims=claims,
        sources=source_rows(candidate.question_id),
        annotators=columns,
        diff=votes_compare(votes, [c.id for c in claims])
        if votes
        else VoteDiff(False, frozenset()),
        version=item.version,
        status=item.status,
        resolution=resolution,
        can_adjudicate=can_adjudicate,
        policy=policy,
        history=history,
        agreed=votes_agreed(votes, [c.id for c in claims]),
        evidence_waivers=imported_evidence_waivers(votes),
    )


def queue_next(
    *,
    project: Project,
    actor: Any,
    filters: Mapping[str, Any] | None = None,
    after: int | None = None,
) -> int | None:
    """Return the id of the queue item an adjudicator works on next, or None (queue empty).

    The queue is :func:`disagreement_queue` with ``filters`` for ``actor``; the next item is the
    first one after item ``after`` in queue order (oldest disagreement first), wrapping around
    to the first; ``after`` itself is never returned. Two queries at most.

    Raises:
        InvalidInput: as :func:`disagreement_queue` for invalid filters.
    """
    queue = disagreement_queue(project=project, filters=filters, actor=actor)
    if after is None:
        return queue.values_list("pk", flat=True).first()
    others = queue.exclude(pk=after)
    current = (
        Disagreement.objects.filter(item_id=after, closed_at__isnull=True)
        .values_list("opened_at", flat=True)
        .first()
    )
    if current is not None:
        later = others.filter(
            Q(opened_at__gt=current) | Q(opened_at=current, pk__gt=after)
        ).values_list("pk", flat=True)
        found = later.first()
        if found is not None:
            return found
    return others.values_list("pk", flat=True).first()
