"""An item's votes: reading them (live and imported) and comparing them.

Reads never write: nothing here saves, updates or creates a row (tested by capturing the SQL).

An item's votes are the current revisions of its submitted annotations (live votes, ordered by
assignment slot) and the imported prior annotations of its candidate that carry an answer label
(prior votes, in import order). :func:`votes_compare` is the one definition of "the votes
differ", used by the comparison service and by the side-by-side view.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from labeling.models import CANNOT_DECIDE, AnnotationOrigin, AssignmentStatus, PriorSpan
from labeling.rows import aware, in_ids, select_rows
from labeling.vocabulary import EVIDENCE_REQUIRED, EVIDENCE_UNAVAILABLE


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
    so does any label the adjudicator chooses by themself. Claims without a waivable label are
    left out.
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


def prior_evidence(span: PriorSpan) -> Span | None:
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


def live_votes(item_ids: list[int], *, assignment_id: int | None = None) -> list[Vote]:
    """The live votes of the items, by item, assignment slot and assignment. Three statements.

    ``assignment_id`` narrows to that assignment's vote (the labelling form's own). Plain
    statements (:mod:`labeling.rows`): every submit completing an item's overlap reads them.
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
        for vote in live_votes(ids[at : at + VOTE_CHUNK]):
            votes[vote.item_id].append(vote)
    if not prior_ids:
        return votes  # no query (nor its construction) for items counting no prior vote
    for at in range(0, len(prior_ids), VOTE_CHUNK):
        for vote in _prior_votes(prior_ids[at : at + VOTE_CHUNK]):
            votes[vote.item_id].append(vote)
    return votes
