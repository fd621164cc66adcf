"""Reads of the web pages that the shared selectors do not cover (members, own work).

Every selector here is scoped by project and, where it reads labelling work, by the actor:
an annotator's pages read only the actor's own rows. Reads never write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone

from labeling.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    Item,
    ItemStatus,
    Membership,
    Project,
    Resolution,
    ResolutionStatus,
    ResolvedClaimLabel,
)
from labeling.selectors.gold import gold_unseen_ids
from labeling.selectors.vote_reads import ClaimVote, Span, Vote


def member_list(*, project: Project) -> QuerySet[Membership]:
    """Return the memberships of ``project`` with their users, by role then username. One query."""
    return (
        Membership.objects.filter(project=project)
        .select_related("user")
        .order_by("role", "user__username")
    )


@dataclass(frozen=True)
class OwnProgress:
    """An annotator's own work in a project; nothing about anyone else's."""

    submitted: int
    skipped: int


def own_progress(*, project: Project, actor: Any) -> OwnProgress:
    """Return how many items ``actor`` submitted and skipped in ``project``. One query."""
    mine = Assignment.objects.filter(item__project=project, annotator=actor)
    counts = mine.aggregate(
        submitted=Count("pk", filter=Q(status=AssignmentStatus.SUBMITTED)),
        skipped=Count("pk", filter=Q(status=AssignmentStatus.SKIPPED)),
    )
    return OwnProgress(submitted=counts["submitted"], skipped=counts["skipped"])


# The workbench counts the open items left for an annotator up to this many, then says "1000+":
# counting them all would read every open item of the project each time an item is shown.
QUEUE_LEFT_CAP = 1000


@dataclass(frozen=True)
class OwnQueue:
    """An annotator's progress through the project's queue; nothing about anyone else's.

    ``done``: items submitted; ``skipped``: items skipped; ``left``: items still to label by
    this annotator (the items they hold now, and open items with a free place they never took);
    ``more``: more open items than ``QUEUE_LEFT_CAP`` were left (``left`` counts that many);
    ``total``: their sum (the bar's maximum).
    """

    done: int
    skipped: int
    left: int
    more: bool = False

    @property
    def total(self) -> int:
        """``done + skipped + left``."""
        return self.done + self.skipped + self.left

    def as_json(self) -> dict[str, int]:
        """The figures as a JSON answer carries them."""
        return {
            "done": self.done,
            "skipped": self.skipped,
            "left": self.left,
            "more": self.more,
            "total": self.total,
        }


def own_queue(*, project: Project, actor: Any) -> OwnQueue:
    """Return how far ``actor`` is through the project's queue. Two queries.

    ``left`` counts the actor's valid leases and the open items with a free place that the
    actor holds no assignment of (an expired one of theirs does not count: such an item may
    come back to them). A free place may be taken by someone else first, so ``left`` is an
    upper bound of what the actor will still be served. The open items are counted up to
    ``QUEUE_LEFT_CAP`` (``more`` when there are more), through the partial index of the items
    with a free place, so the count costs the same in a project of any size. When the labelling
    policy serves gold items, the gold items never given to the actor count too (counted like
    any other item, so being given one, or submitting it, changes the counts as a regular item
    does).
    """
    now = timezone.now()
    counts = Assignment.objects.filter(item__project=project, annotator=actor).aggregate(
        done=Count("pk", filter=Q(status=AssignmentStatus.SUBMITTED)),
        skipped=Count("pk", filter=Q(status=AssignmentStatus.SKIPPED)),
        held=Count("pk", filter=Q(status=AssignmentStatus.LEASED, lease_expires_at__gt=now)),
    )
    taken = Assignment.objects.filter(item=OuterRef("pk"), annotator=actor).exclude(
        status=AssignmentStatus.EXPIRED
    )
    free = (
        Item.objects.filter(project=project, status=ItemStatus.OPEN)
        .filter(assigned_count__lt=F("overlap") - F("prior_votes"))
        .exclude(Exists(taken))
        # In serving order, as item_free_queue_idx holds them: the count reads that index and
        # stops at the cap, wherever the open items lie in the table.
        .order_by("queue_position", "pk")[: QUEUE_LEFT_CAP + 1]
        .count()
    )
    more = free > QUEUE_LEFT_CAP
    free = min(free, QUEUE_LEFT_CAP)
    if _serves_gold(project):
        free += len(gold_unseen_ids(project=project, actor=actor))
    return OwnQueue(
        done=counts["done"], skipped=counts["skipped"], left=counts["held"] + free, more=more
    )


def _serves_gold(project: Project) -> bool:
    """Whether the labelling policy serves gold items (a gold rate, or qualification)."""
    policy = project.policies.filter(frozen_at__isnull=False).order_by("-version").first()
    return policy is not None and (policy.gold_rate > 0 or policy.qualification_required)


def own_previous_submission(
    *, project: Project, actor: Any, exclude: int | None = None
) -> Assignment | None:
    """Return the actor's latest submission that can still be revised (not ``exclude``).

    One query. The labelling page links to it ("Revise previous"). Only an item still
    collecting votes (open; gold work while gold) takes a revision, as
    ``labelling_form_view``'s ``editable`` says: a submission whose vote closed its item is
    never offered.
    """
    rows = Assignment.objects.filter(
        Q(gold=False, item__status=ItemStatus.OPEN) | Q(gold=True, item__status=ItemStatus.GOLD),
        item__project=project,
        annotator=actor,
        status=AssignmentStatus.SUBMITTED,
    )
    if exclude is not None:
        rows = rows.exclude(pk=exclude)
    return rows.order_by("-submitted_at", "-pk").first()


def own_undoable_skip(*, project: Project, actor: Any) -> Assignment | None:
    """Return the actor's latest skip whose lease still runs (it can be undone). One query.

    :func:`labeling.services.skips.assignment_skip_undo` has the final say (the item's
    place may have been taken meanwhile).
    """
    return (
        Assignment.objects.filter(
            item__project=project,
            annotator=actor,
            status=AssignmentStatus.SKIPPED,
            lease_expires_at__gt=timezone.now(),
            item__status__in=[ItemStatus.OPEN, ItemStatus.GOLD],
        )
        .order_by("-ended_at", "-pk")
        .first()
    )


def own_annotation_list(*, project: Project, actor: Any) -> QuerySet[Annotation]:
    """Return ``actor``'s own annotations in ``project``, newest first.

    The question and current revision are loaded. No other annotator's row and no item status is
    read. One query.
    """
    return (
        Annotation.objects.filter(item__project=project, annotator=actor)
        .select_related("current", "assignment", "item__candidate__question")
        .order_by("-assignment__submitted_at", "-pk")
    )


def resolution_vote(*, resolution: Resolution | None) -> Vote | None:
    """Return an adjudicated resolution's labels as a :class:`Vote` (to pre-fill a correction).

    None for no resolution, or one without labels (consensus items are not adjudicated;
    unresolved ones carry no labels). Two queries.
    """
    if resolution is None or resolution.status != ResolutionStatus.ADJUDICATED:
        return None
    claim_labels = ResolvedClaimLabel.objects.filter(resolution=resolution).prefetch_related(
        "evidence"
    )
    return Vote(
        item_id=resolution.item_id,
        live=False,
        ref=resolution.pk,
        slot=None,
        answer_label=resolution.answer_label,
        answer_reason=resolution.answer_reason,
        claims={
            cl.claim_id: ClaimVote(
                label=cl.label,
                reason=cl.reason,
                evidence=tuple(
                    Span(e.source_version_id, e.start, e.end, e.quote) for e in cl.evidence.all()
                ),
            )
            for cl in claim_labels
        },
        comment="",
    )


def resolution_waived_claims(*, resolution: Resolution | None) -> list[int]:
    """Return the claim indexes (0-based, ascending) whose resolved label waived evidence.

    Evidence is waived when the decision adopted the label of imported votes that cited no
    span (``ResolvedClaimLabel.evidence_waived``). Empty for no resolution. One query.
    """
    if resolution is None:
        return []
    return list(
        ResolvedClaimLabel.objects.filter(resolution=resolution, evidence_waived=True)
        .order_by("claim__index")
        .values_list("claim__index", flat=True)
    )


def resolved_claim_labels(*, resolution: Resolution | None) -> list[ResolvedClaimLabel]:
    """Return a resolution's claim labels in claim order (none if unresolved). Two queries."""
    if resolution is None:
        return []
    return list(
        ResolvedClaimLabel.objects.filter(resolution=resolution)
        .select_related("claim")
        .prefetch_related("evidence")
        .order_by("claim__index")
    )


def labelling_start_preview(*, project: Project) -> dict[int, int]:
    """Return how many open items carry each number of imported votes: ``{votes: items}``.

    A vote is a prior annotation with an answer label. At the start, an item whose imported
    votes reach the overlap is compared at once (to a consensus, or to the disagreement queue)
    and never offered to annotators (``labeling.services.labelling_start``); the settings page
    says how many items each overlap leaves open. One query.
    """
    counted = (
        Item.objects.filter(project=project, status=ItemStatus.OPEN)
        .annotate(
            votes=Count(
                "candidate__prior_annotations",
                filter=Q(candidate__prior_annotations__answer_label__gt=""),
            )
        )
        .values_list("votes", flat=True)
    )
    histogram: dict[int, int] = {}
    for votes in counted:
        histogram[votes] = histogram.get(votes, 0) + 1
    return dict(sorted(histogram.items()))
