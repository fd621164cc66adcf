"""Reads of labelling work for annotators, adjudicators and the dashboard.

Reads never write: nothing here saves, updates or creates a row (tested by capturing the SQL).

Votes. An item's votes are the current revisions of its submitted annotations (live votes,
ordered by assignment slot) and the imported prior annotations of its candidate that carry an
answer label (prior votes, in import order). :func:`votes_compare` is the one definition of
"the votes differ", used by the comparison service and by the side-by-side view.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.utils import timezone

from labeling.exceptions import InvalidInput, InvalidTransition, NotFound, PermissionDenied
from labeling.importers.record_errors import echo
from labeling.models import (
    CANNOT_DECIDE,
    LIVE_ASSIGNMENT_STATUSES,
    AnnotationOrigin,
    Assignment,
    AssignmentStatus,
    CandidateAnswer,
    Claim,
    Disagreement,
    Item,
    ItemStatus,
    LabelPolicy,
    PriorAnnotation,
    PriorSpan,
    Project,
    Question,
    Resolution,
    ResolutionStatus,
)
from labeling.permissions import REVIEWERS, require_role
from labeling.rows import aware, in_ids, raw_first, select_rows
from labeling.selectors.catalog import UNASSIGNED
from labeling.selectors.policies import (
    LabelChoice,
    ReasonChoice,
    policy_evidence_labels,
    policy_label_choices,
    policy_reason_choices,
)
from labeling.vocabulary import EVIDENCE_REQUIRED, EVIDENCE_UNAVAILABLE

QUEUE_LEVELS = ("answer", "claim")
#: The largest ``min_age_hours`` of the disagreement queue: a century. Larger values would
#: overflow the date arithmetic; no disagreement is that old.
MAX_QUEUE_AGE_HOURS = 24 * 366 * 100


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
# Votes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """An evidence span: code-point offsets into a pinned source version, with its quote."""

    source_version_id: int
    start: int
    end: int
    quote: str


@dataclass(frozen=True)
class ClaimVote:
    """One vote's label of one claim (``label`` None: the vote did not label the claim)."""

    label: str | None
    reason: str | None = None
    boundary_error: bool = False
    evidence: tuple[Span, ...] = ()

    @property
    def key(self) -> tuple[str | None, str | None]:
        """What the comparison compares: the label, and the reason of evidence_unavailable."""
        return (self.label, self.reason if self.label == EVIDENCE_UNAVAILABLE else None)


@dataclass(frozen=True)
class Vote:
    """One annotator's judgement of an item, live or imported.

    ``ref`` is the Annotation id (live) or the PriorAnnotation id (prior). ``slot`` is the
    assignment's slot (live only); ``automatic`` marks prior labels made by a program (e.g.
    exact match against a reference). No user or dataset annotator identity is carried.
    """

    item_id: int
    live: bool
    ref: int
    slot: int | None
    answer_label: str | None
    answer_reason: str | None
    claims: Mapping[int, ClaimVote]
    automatic: bool = False
    comment: str = ""
    revision: int | None = None
    submitted_at: datetime | None = None

    @property
    def answer_key(self) -> tuple[str | None, str | None]:
        """What the comparison compares at answer level (label, reason if unavailable)."""
        reason = self.answer_reason if self.answer_label == EVIDENCE_UNAVAILABLE else None
        return (self.answer_label, reason)


@dataclass(frozen=True)
class VoteDiff:
    """Where an item's votes differ. ``claims`` holds the ids of the differing claims."""

    answer_differs: bool
    claims: frozenset[int]

    @property
    def claims_differ(self) -> bool:
        """Whether any claim's votes differ."""
        return bool(self.claims)

    @property
    def consensus(self) -> bool:
        """Whether every vote is equal at every level (and none is "can't decide")."""
        return not self.answer_differs and not self.claims


def votes_compare(votes: Sequence[Vote], claim_ids: Iterable[int]) -> VoteDiff:
    """Compare an item's votes at answer and claim level.

    A level differs when the votes carry more than one (label, reason-if-unavailable) value,
    when any vote there is ``cannot_decide`` (never a consensus), or, for a claim, when a vote
    did not label it (an imported label without that claim: an adjudicator decides). Boundary
    flags, comments and evidence spans are not compared (differing evidence under equal labels
    is not a disagreement; both are kept).

    ``votes`` holds at least one vote; ``claim_ids`` are every claim of the item's candidate.
    """
    answers = {v.answer_key for v in votes}
    answer_differs = len(answers) > 1 or any(label == CANNOT_DECIDE for label, _ in answers)
    differing = set()
    for claim_id in claim_ids:
        keys = {v.claims.get(claim_id, ClaimVote(label=None)).key for v in votes}
        if len(keys) > 1 or any(label in (None, CANNOT_DECIDE) for label, _ in keys):
            differing.add(claim_id)
    return VoteDiff(answer_differs=answer_differs, claims=frozenset(differing))


@dataclass(frozen=True)
class AgreedLabels:
    """What every vote of an item agrees on: the pre-fill of an adjudication.

    ``vote`` holds the agreed answer label (and reason) when ``answer`` is True, and the
    agreed label, reason and evidence of each claim in ``claims`` (claim ids); other fields
    are empty. The evidence of an agreed claim is the union of the votes' spans, as under
    consensus: each span was cited by an annotator who gave that label, the adjudicator removes
    the ones they reject (an intersection of spans selected independently is nearly always
    empty). Boundary flags are not part of a decision, so nothing is agreed about them.
    """

    vote: Vote
    answer: bool
    claims: frozenset[int]


def votes_agreed(votes: Sequence[Vote], claim_ids: Iterable[int]) -> AgreedLabels:
    """Return the labels every vote of an item agrees on (see :class:`AgreedLabels`).

    A level is agreed when every vote carries the same (label, reason-if-unavailable) there and
    that label is not ``cannot_decide`` (the same rule as :func:`votes_compare`). No vote: no
    agreement.
    """
    item_id = votes[0].item_id if votes else 0
    answers = {v.answer_key for v in votes}
    answer: tuple[str | None, str | None] = (None, None)
    if len(answers) == 1:
        label, _ = next(iter(answers))
        if label not in (None, CANNOT_DECIDE):
            answer = (label, votes[0].answer_reason)
    claims: dict[int, ClaimVote] = {}
    for claim_id in claim_ids:
        cast = [v.claims.get(claim_id, ClaimVote(label=None)) for v in votes]
        keys = {c.key for c in cast}
        if len(keys) != 1 or next(iter(keys))[0] in (None, CANNOT_DECIDE):
            continue
        spans = {(s.source_version_id, s.start, s.end): s for c in cast for s in c.evidence}
        claims[claim_id] = ClaimVote(
            label=cast[0].label,
            reason=cast[0].reason,
            evidence=tuple(spans[k] for k in sorted(spans)),
        )
    return AgreedLabels(
        vote=Vote(
            item_id=item_id,
            live=False,
            ref=0,
            slot=None,
            answer_label=answer[0],
            answer_reason=answer[1],
            claims=claims,
        ),
        answer=answer[0] is not None,
        claims=frozenset(claims),
    )


def imported_evidence_waivers(votes: Sequence[Vote]) -> dict[int, frozenset[str]]:
    """Return, per claim id, the labels a decision may give that claim without evidence.

    Evidence rule for imported votes: ``supported`` and ``contradicted`` need evidence, but a
    dataset may carry such labels without any span (FaithBench flags problems only, so its
    "supported" sentences cite nothing). A decision that adopts, for a claim, a label that only
    imported votes gave it, none of them with a span, is accepted without evidence; the stored
    claim label records that its evidence was waived. A label that a live annotator gave, or
    that some vote gave with a span, needs evidence as usual (there is evidence to copy), and
    so does any label the adjudicator chooses by themself.

    Returns:
        ``{claim_id: labels}``; claims without a waivable label are left out.
    """
    givers: dict[tuple[int, str], list[tuple[Vote, ClaimVote]]] = defaultdict(list)
    for vote in votes:
        for claim_id, claim_vote in vote.claims.items():
            if claim_vote.label in EVIDENCE_REQUIRED:
                givers[(claim_id, claim_vote.label)].append((vote, claim_vote))
    waivers: dict[int, set[str]] = defaultdict(set)
    for (claim_id, label), cast in givers.items():
        if all(not vote.live and not claim_vote.evidence for vote, claim_vote in cast):
            waivers[claim_id].add(label)
    return {claim_id: frozenset(labels) for claim_id, labels in waivers.items()}


def _prior_evidence(span: PriorSpan) -> Span | None:
    """The evidence of an imported flag, or None. The database keeps the four fields together."""
    if span.evidence_source_version_id is None:
        return None
    if span.evidence_start is None or span.evidence_end is None or span.evidence_quote is None:
        raise RuntimeError(f"prior span {span.pk} has incomplete evidence")
    return Span(
        span.evidence_source_version_id, span.evidence_start, span.evidence_end, span.evidence_quote
    )


#: Ids per ``IN`` list of the live-vote reads (SQLite allows 32,766 parameters).
VOTE_CHUNK = 2000


def _rows_by_ids(sql: str, column: str, ids: Sequence[int]) -> Iterator[tuple[Any, ...]]:
    """The rows of ``sql`` for ``ids``, one statement per :data:`VOTE_CHUNK` ids.

    ``sql`` holds ``{in_ids}`` where the condition "``column`` is one of the chunk's ids"
    goes (:func:`labeling.rows.in_ids`); the rows come chunk after chunk, each chunk in the
    statement's order.
    """
    for at in range(0, len(ids), VOTE_CHUNK):
        where, params = in_ids(column, ids[at : at + VOTE_CHUNK])
        yield from select_rows(sql.format(in_ids=where), params)


def _evidence_by_label(
    table: str, labels: Mapping[int, Mapping[int, tuple[Any, ...]]]
) -> dict[int, list[Span]]:
    """The cited spans of the claim labels in ``labels`` (``{vote: {claim: (label id, ...)}}``).

    ``table`` is the evidence table (live or prior); an empty span (end == start) cites
    nothing and is left out (the live table holds none). Spans in source, offset order.
    """
    label_ids = [entry[0] for claims in labels.values() for entry in claims.values()]
    evidence: dict[int, list[Span]] = {}
    for label_id, source_version_id, begin, end, quote in _rows_by_ids(
        'SELECT claim_label_id, source_version_id, "start", "end", quote '  # noqa: S608
        f"FROM {table} WHERE {{in_ids}} "
        'AND "end" > "start" ORDER BY claim_label_id, source_version_id, "start", "end"',
        "claim_label_id",
        label_ids,
    ):
        evidence.setdefault(label_id, []).append(Span(source_version_id, begin, end, quote))
    return evidence


def _live_votes(item_ids: list[int], *, assignment_id: int | None = None) -> list[Vote]:
    """The live votes of the items, by item, assignment slot and assignment. Three statements.

    ``assignment_id``: only the vote of that assignment (the labelling form's own vote).

    Every submit that completes an item's overlap reads them, and whole-project work reads
    many: plain statements (:mod:`labeling.rows`) instead of the queryset with its two
    prefetches (``Annotation`` with ``current`` and ``assignment``, the current revision's
    claim labels by claim index, their evidence by source version and offsets).
    """
    if not item_ids:
        return []
    # The f-strings below add only placeholders (labeling.rows.in_ids).
    where, params = in_ids("n.item_id", item_ids)
    sql = (
        "SELECT n.id, n.item_id, a.slot, a.submitted_at, r.id, r.answer_label, "  # noqa: S608
        "r.answer_reason, r.comment, r.number FROM labeling_annotation n "
        "JOIN labeling_assignment a ON a.id = n.assignment_id "
        "JOIN labeling_annotationrevision r ON r.id = n.current_id "
        f"WHERE a.status = %s AND {where}"
    )
    params = [AssignmentStatus.SUBMITTED, *params]
    if assignment_id is not None:
        sql += " AND n.assignment_id = %s"
        params.append(assignment_id)
    rows = select_rows(sql + " ORDER BY n.item_id, a.slot, n.assignment_id", params)
    if not rows:
        return []
    labels: dict[int, dict[int, tuple[int, str, str | None, bool]]] = {}
    for label_id, revision_id, claim_id, label, reason, boundary in _rows_by_ids(
        "SELECT cl.id, cl.revision_id, cl.claim_id, cl.label, cl.reason, cl.boundary_error "
        "FROM labeling_claimlabel cl JOIN labeling_claim c ON c.id = cl.claim_id "
        'WHERE {in_ids} ORDER BY cl.revision_id, c."index", cl.claim_id',
        "cl.revision_id",
        [row[4] for row in rows],
    ):
        labels.setdefault(revision_id, {})[claim_id] = (label_id, label, reason, bool(boundary))
    evidence = _evidence_by_label("labeling_evidencespan", labels)
    return [
        Vote(
            item_id=item_id,
            live=True,
            ref=annotation_id,
            slot=slot,
            answer_label=answer_label,
            answer_reason=answer_reason,
            claims={
                claim_id: ClaimVote(
                    label=label,
                    reason=reason,
                    boundary_error=boundary,
                    evidence=tuple(evidence.get(label_id, ())),
                )
                for claim_id, (label_id, label, reason, boundary) in labels.get(
                    revision_id, {}
                ).items()
            },
            comment=comment,
            revision=number,
            submitted_at=aware(submitted_at),
        )
        for (
            annotation_id,
            item_id,
            slot,
            submitted_at,
            revision_id,
            answer_label,
            answer_reason,
            comment,
            number,
        ) in rows
    ]


def _prior_votes(item_ids: list[int]) -> list[Vote]:
    """The prior votes of the items, by candidate and import order. Three statements.

    Prior votes count only while the item counts them (``Item.prior_votes``): an item returned
    for labelling under a new policy version collects fresh votes only. A prior annotation
    without an answer label is no vote; an empty prior span (end == start) cites nothing.
    Plain statements, as for the live votes: starting labelling reads the prior votes of every
    item.
    """
    where, params = in_ids("i.id", item_ids)
    rows = select_rows(
        "SELECT p.id, i.id, p.answer_label, p.answer_reason, p.origin "  # noqa: S608
        "FROM labeling_priorannotation p JOIN labeling_item i ON i.candidate_id = p.candidate_id "
        f"WHERE {where} AND i.prior_votes > 0 "
        "AND p.answer_label IS NOT NULL AND p.answer_label <> '' "
        "ORDER BY p.candidate_id, p.id",
        params,
    )
    if not rows:
        return []
    labels: dict[int, dict[int, tuple[int, str | None, str | None]]] = {}
    for label_id, prior_id, claim_id, label, reason in _rows_by_ids(
        "SELECT id, prior_annotation_id, claim_id, label, reason FROM labeling_priorclaimlabel "
        "WHERE {in_ids} ORDER BY prior_annotation_id, id",
        "prior_annotation_id",
        [row[0] for row in rows],
    ):
        labels.setdefault(prior_id, {})[claim_id] = (label_id, label, reason)
    evidence = _evidence_by_label("labeling_priorevidence", labels)
    return [
        Vote(
            item_id=item_id,
            live=False,
            ref=prior_id,
            slot=None,
            answer_label=answer_label,
            answer_reason=answer_reason,
            claims={
                claim_id: ClaimVote(
                    label=label, reason=reason, evidence=tuple(evidence.get(label_id, ()))
                )
                for claim_id, (label_id, label, reason) in labels.get(prior_id, {}).items()
            },
            automatic=origin == AnnotationOrigin.AUTOMATIC,
        )
        for prior_id, item_id, answer_label, answer_reason, origin in rows
    ]


def item_votes(
    *, item_ids: Iterable[int], prior_item_ids: Iterable[int] | None = None
) -> dict[int, list[Vote]]:
    """Return the votes of each item: live ones by assignment slot, then prior ones by import.

    A live vote is the current revision of an annotation whose assignment is submitted (not
    retired); a prior vote is a prior annotation (human or automatic origin) with an answer
    label, while the item counts prior votes (``Item.prior_votes`` > 0). ``prior_item_ids``,
    when the caller knows them, are the items among ``item_ids`` that count prior votes (the
    others' prior annotations are not read). Items without votes map to an empty list. Three
    statements per 2,000 items for the live votes, and three for the prior ones when an item
    counts them.
    """
    ids = list(dict.fromkeys(item_ids))  # each item once, whatever the chunk
    prior_ids = ids if prior_item_ids is None else list(prior_item_ids)
    votes: dict[int, list[Vote]] = {pk: [] for pk in ids}
    for at in range(0, len(ids), VOTE_CHUNK):
        for vote in _live_votes(ids[at : at + VOTE_CHUNK]):
            votes[vote.item_id].append(vote)
    if not prior_ids:
        return votes  # no query (nor its construction) for items counting no prior vote
    for at in range(0, len(prior_ids), VOTE_CHUNK):
        for vote in _prior_votes(prior_ids[at : at + VOTE_CHUNK]):
            votes[vote.item_id].append(vote)
    return votes


# ---------------------------------------------------------------------------------------------
# Disagreement queue
# ---------------------------------------------------------------------------------------------


def disagreement_queue(
    *, project: Project, filters: Mapping[str, Any] | None = None, actor: Any = None
) -> QuerySet[Item]:
    """Return the items of ``project`` waiting for adjudication, oldest disagreement first.

    Args:
        project: the project (already checked visible to the actor).
        filters: optional ``partition`` (a partition value or ``"unassigned"``), ``level``
            (``"answer"``: the answer labels differ; ``"claim"``: some claim's labels differ)
            and ``min_age_hours`` (the disagreement is at least that old, 0 to
            :data:`MAX_QUEUE_AGE_HOURS`). Empty values are ignored.
        actor: when given and the project does not allow self-adjudication, the items this
            user annotated are left out (they could not resolve them).

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


# ---------------------------------------------------------------------------------------------
# Side-by-side view
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


def claim_rows(claims: Iterable[Claim]) -> tuple[ClaimRow, ...]:
    """Return claims as :class:`ClaimRow` rows, by index."""
    return tuple(
        ClaimRow(c.pk, c.index, c.text, c.start, c.end, c.unanchored)
        for c in sorted(claims, key=lambda c: c.index)
    )


def source_rows(question_id: int) -> tuple[SourceRow, ...]:
    """Return the pinned source versions of a question, by retrieval rank. One query.

    Every labelling form reads them: one plain statement (:mod:`labeling.rows`), the rows of
    ``RetrievalLink.objects.filter(question_id=...).select_related("source_version__document")
    .order_by("rank", "pk")``.
    """
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
                    evidence=_prior_evidence(s),
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
        own = _live_votes([item_id], assignment_id=assignment.pk)
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
