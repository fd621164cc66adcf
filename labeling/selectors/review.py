"""Reads of labelling work: the policy labels are made under, the labelling form, progress.

Reads never write: nothing here saves, updates or creates a row (tested by capturing the SQL).
An item's votes are read in :mod:`labeling.selectors.vote_reads`; the adjudicators' queue and
side-by-side view in :mod:`labeling.selectors.adjudication`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import Count, Q

from labeling.exceptions import InvalidTransition, NotFound
from labeling.models import (
    CANNOT_DECIDE,
    LIVE_ASSIGNMENT_STATUSES,
    Assignment,
    AssignmentStatus,
    Claim,
    Item,
    ItemStatus,
    LabelPolicy,
    Project,
    ResolutionStatus,
)
from labeling.rows import raw_first, select_rows
from labeling.selectors.policies import (
    LabelChoice,
    ReasonChoice,
    policy_evidence_labels,
    policy_label_choices,
    policy_reason_choices,
)
from labeling.selectors.vote_reads import Vote, live_votes

# ---------------------------------------------------------------------------------------------
# Policy
# ---------------------------------------------------------------------------------------------


def labelling_policy_get(*, project: Project) -> LabelPolicy:
    """Return the policy labels are made under: the project's newest frozen policy.

    Labelling freezes the newest policy when it starts; a policy version created later is not
    used until it is frozen. One query.

    Raises:
        InvalidTransition: labelling has not started (no frozen policy).
    """
    # Read two or three times in every labelling request: raw SQL through ``Manager.raw`` (the
    # model, with its field converters) costs about a quarter of the CPU of the queryset.
    policy = raw_first(
        LabelPolicy,
        "SELECT * FROM labeling_labelpolicy WHERE project_id = %s "
        "AND frozen_at IS NOT NULL ORDER BY version DESC LIMIT 1",
        [project.pk],
    )
    if policy is None or project.labelling_started_at is None:
        raise InvalidTransition(
            f"labelling has not started in project {project.slug!r}; a manager starts it"
        )
    return policy


# ---------------------------------------------------------------------------------------------
# Rows pages show
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimRow:
    """A claim of the candidate as pages show it."""

    id: int
    index: int
    text: str
    start: int | None
    end: int | None
    unanchored: bool


@dataclass(frozen=True)
class SourceRow:
    """A pinned source version of the question, in full."""

    id: int
    document_key: str
    uri: str
    text: str
    sha256: str
    rank: int | None


def claim_rows(claims: Iterable[Claim]) -> tuple[ClaimRow, ...]:
    """Return claims as :class:`ClaimRow` rows, by index."""
    return tuple(
        ClaimRow(c.pk, c.index, c.text, c.start, c.end, c.unanchored)
        for c in sorted(claims, key=lambda c: c.index)
    )


def source_rows(question_id: int) -> tuple[SourceRow, ...]:
    """Return a question's pinned source versions by retrieval rank: one plain statement."""
    rows = select_rows(
        "SELECT v.id, d.key, v.uri, d.uri, v.text, v.sha256, l.rank "
        "FROM labeling_retrievallink l "
        "JOIN labeling_sourceversion v ON v.id = l.source_version_id "
        "JOIN labeling_sourcedocument d ON d.id = v.document_id "
        "WHERE l.question_id = %s ORDER BY l.rank, l.id",
        [question_id],
    )
    return tuple(
        SourceRow(id=v_id, document_key=key, uri=v_uri or d_uri, text=text, sha256=sha, rank=rank)
        for v_id, key, v_uri, d_uri, text, sha, rank in rows
    )


def _form_item(*, project: Project, item_id: int) -> tuple[int, str, int, str, int, str] | None:
    """Return an item's id and status; its candidate's id, text and question id; the question text.

    None if the item is not in ``project``. One plain statement (:mod:`labeling.rows`): the
    labelling form reads it on every next item.
    """
    rows = select_rows(
        "SELECT i.id, i.status, c.id, c.text, c.question_id, q.text FROM labeling_item i "
        "JOIN labeling_candidateanswer c ON c.id = i.candidate_id "
        "JOIN labeling_question q ON q.id = c.question_id "
        "WHERE i.id = %s AND i.project_id = %s",
        [item_id, project.pk],
    )
    return rows[0] if rows else None


def _form_claims(candidate_id: int) -> tuple[ClaimRow, ...]:
    """Return the claims of a candidate, by index. One plain statement (:mod:`labeling.rows`)."""
    rows = select_rows(
        'SELECT id, "index", text, "start", "end", unanchored '
        'FROM labeling_claim WHERE candidate_id = %s ORDER BY "index"',
        [candidate_id],
    )
    return tuple(
        ClaimRow(pk, index, text, start, end, bool(unanchored))
        for pk, index, text, start, end, unanchored in rows
    )


# ---------------------------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProgressCounts:
    """Items of a project by where they are in the flow (they sum to ``total``).

    Gold items, outside the flow, are not counted. ``open_untouched``: open, holding no live or
    submitted assignment. ``in_progress``: open, holding at least one.
    ``awaiting_adjudication``: in the disagreement queue. The last three count resolved items by
    the status of their current resolution.
    """

    total: int = 0
    open_untouched: int = 0
    in_progress: int = 0
    awaiting_adjudication: int = 0
    resolved_consensus: int = 0
    resolved_adjudicated: int = 0
    unresolved: int = 0


def project_progress(*, project: Project) -> ProgressCounts:
    """Return the progress counts of ``project``'s items. One query."""
    open_ = Q(status=ItemStatus.OPEN)
    resolved = Q(status=ItemStatus.RESOLVED)
    # Gold items are outside the voting flow (they check annotators; never resolved).
    counts = (
        Item.objects.filter(project=project)
        .exclude(status=ItemStatus.GOLD)
        .aggregate(
            total=Count("pk"),
            open_untouched=Count("pk", filter=open_ & Q(assigned_count=0)),
            in_progress=Count("pk", filter=open_ & Q(assigned_count__gt=0)),
            awaiting_adjudication=Count("pk", filter=Q(status=ItemStatus.DISAGREEMENT)),
            resolved_consensus=Count(
                "pk", filter=resolved & Q(resolution__status=ResolutionStatus.CONSENSUS)
            ),
            resolved_adjudicated=Count(
                "pk", filter=resolved & Q(resolution__status=ResolutionStatus.ADJUDICATED)
            ),
            unresolved=Count(
                "pk", filter=resolved & Q(resolution__status=ResolutionStatus.UNRESOLVED)
            ),
        )
    )
    return ProgressCounts(**counts)


# ---------------------------------------------------------------------------------------------
# Labelling form
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyVocabularyView:
    """The labels the form offers: the frozen policy's, plus "can't decide"."""

    version: int
    guideline: str
    answer_labels: tuple[str, ...]
    claim_labels: tuple[str, ...]
    unavailable_reasons: tuple[str, ...]
    cannot_decide: str = CANNOT_DECIDE
    # The policy's labels with their words, keys and definitions, its reasons' words, and the
    # claim labels that must cite evidence (labeling.selectors.policies).
    answer_choices: tuple[LabelChoice, ...] = ()
    claim_choices: tuple[LabelChoice, ...] = ()
    reason_choices: tuple[ReasonChoice, ...] = ()
    evidence_labels: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LabellingFormView:
    """What an annotator sees for one assignment, and nothing else.

    No question metadata, no generator, no other annotator's label or identity, no vote or
    assignment counts, no evaluator or prior labels, no item status. ``current`` is the actor's
    own current vote (None before the first submit). ``editable`` is False when the lease is
    over (expired or skipped) or the votes were compared (then a revision would be refused).
    """

    assignment_id: int
    assignment_status: str
    lease_expires_at: datetime
    item_id: int
    question_text: str
    candidate_text: str
    claims: tuple[ClaimRow, ...]
    sources: tuple[SourceRow, ...]
    policy: PolicyVocabularyView
    current: Vote | None
    editable: bool


def labelling_form_view(*, project: Project, assignment: Assignment) -> LabellingFormView:
    """Return the labelling form's content for the actor's own ``assignment``.

    The caller has checked that ``assignment`` belongs to the actor (``assignment_get_for_actor``).
    Writes nothing. Six queries at most.

    Raises:
        NotFound: the assignment's item is not in ``project``.
        InvalidTransition: labelling has not started.
    """
    found = _form_item(project=project, item_id=assignment.item_id)
    if found is None:
        raise NotFound(f"no assignment {assignment.pk} in project {project.slug!r}")
    item_id, item_status, candidate_id, candidate_text, question_id, question_text = found
    policy = labelling_policy_get(project=project)
    current: Vote | None = None
    if assignment.status == AssignmentStatus.SUBMITTED:
        own = live_votes([item_id], assignment_id=assignment.pk)
        # Not the slot: "slot 2" would tell the annotator that someone else has slot 1.
        current = replace(own[0], slot=None) if own else None
    # Gold work stays editable like an item still collecting votes (nothing may tell it apart).
    collecting = ItemStatus.GOLD if assignment.gold else ItemStatus.OPEN
    editable = assignment.status in LIVE_ASSIGNMENT_STATUSES and item_status == collecting
    return LabellingFormView(
        assignment_id=assignment.pk,
        assignment_status=assignment.status,
        lease_expires_at=assignment.lease_expires_at,
        item_id=item_id,
        question_text=question_text,
        candidate_text=candidate_text,
        claims=_form_claims(candidate_id),
        sources=source_rows(question_id),
        policy=PolicyVocabularyView(
            version=policy.version,
            guideline=policy.guideline,
            answer_labels=tuple(policy.answer_labels),
            claim_labels=tuple(policy.claim_labels),
            unavailable_reasons=tuple(policy.unavailable_reasons),
            answer_choices=tuple(policy_label_choices(policy, "answer")),
            claim_choices=tuple(policy_label_choices(policy, "claim")),
            reason_choices=tuple(policy_reason_choices(policy)),
            evidence_labels=policy_evidence_labels(policy),
        ),
        current=current,
        editable=editable,
    )
