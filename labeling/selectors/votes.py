"""Vote matrices of a project, as plain data for the agreement statistics.

A *vote* is one rater's label of one unit at one label level:

- level ``"answer"``: the unit is an item; the label is the answer label.
- level ``"claim"``: the unit is a claim of an item's candidate; the label is the claim label.

Raters are the annotators of submitted annotations (their *current* revision; earlier revisions
are history, not votes; gold work, ``Assignment.gold``, is never a vote) and the imported prior
annotators of the item's candidate (a prior annotation votes at a level when it carries a label
there: ExpertQA's carry claim labels only).
``cannot_decide`` and ``evidence_unavailable`` are labels like any other. A label with a reason
(``evidence_unavailable`` + ``not_found``) is the value ``"evidence_unavailable:not_found"``, as
comparison treats two different reasons as a disagreement.

Rater ids: ``user:<user id>`` for an account, ``prior:<pseudonym>`` for an imported annotator.
They identify people; whoever shows them decides who may see them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.db.models import F, Subquery
from django.db.models.functions import Coalesce

from labeling.models import (
    AnnotationRevision,
    ClaimLabel,
    Item,
    LabelPolicy,
    PriorAnnotation,
    PriorClaimLabel,
    Project,
)
from labeling.tally import VoteRow, rater_sort_key

ANSWER_LEVEL = "answer"
CLAIM_LEVEL = "claim"
LEVELS: tuple[str, ...] = (ANSWER_LEVEL, CLAIM_LEVEL)


@dataclass(frozen=True)
class VoteMatrix:
    """The votes of one label level: units × raters, ``None`` where a rater did not vote.

    Attributes:
        level: ``"answer"`` or ``"claim"``.
        units: unit ids in ascending order (item ids, or claim ids); only units with a vote.
        raters: rater ids, sorted (``prior:…`` before ``user:…``, users by numeric id).
        ratings: ``len(units)`` rows of ``len(raters)`` labels or ``None``.
    """

    level: str
    units: tuple[int, ...]
    raters: tuple[str, ...]
    ratings: tuple[tuple[str | None, ...], ...]

    @property
    def n_votes(self) -> int:
        """The number of votes (non-missing ratings)."""
        return sum(value is not None for row in self.ratings for value in row)


@dataclass(frozen=True)
class VersionVotes:
    """The vote matrices of one label policy version (votes made under it)."""

    policy_version: int
    answer: VoteMatrix
    claim: VoteMatrix

    def levels(self) -> tuple[VoteMatrix, ...]:
        """The matrices in ``LEVELS`` order."""
        return (self.answer, self.claim)


@dataclass(frozen=True)
class ProjectVotes:
    """A project's vote matrices, one per label level, per policy version.

    Votes made under different policy versions are never pooled: ``versions`` holds each
    version's matrices apart (oldest first, only versions with a vote); ``answer`` and ``claim``
    are those of ``policy_version``, the newest version with a vote (empty matrices and None
    when there is no vote).
    """

    project_id: int
    answer: VoteMatrix
    claim: VoteMatrix
    policy_version: int | None = None
    versions: tuple[VersionVotes, ...] = ()

    def levels(self) -> tuple[VoteMatrix, ...]:
        """The matrices of ``policy_version`` in ``LEVELS`` order."""
        return (self.answer, self.claim)


def vote_value(label: str, reason: str | None) -> str:
    """The value a vote counts as: the label, or ``label:reason`` when it carries a reason."""
    return f"{label}:{reason}" if reason else label


def _imported_label(label: str | None) -> str:
    """A prior label read through a ``label__isnull=False`` filter (so never None)."""
    if label is None:
        raise RuntimeError("an imported label without a value passed the not-null filter")
    return label


def user_rater(user_id: int) -> str:
    """The rater id of an account."""
    return f"user:{user_id}"


def prior_rater(annotator: str) -> str:
    """The rater id of an imported (pseudonymous) annotator."""
    return f"prior:{annotator}"


def _matrix(level: str, votes: Iterable[tuple[int, str, str]]) -> VoteMatrix:
    by_unit: dict[int, dict[str, str]] = defaultdict(dict)
    for unit, rater, value in votes:
        by_unit[unit][rater] = value
    units = tuple(sorted(by_unit))
    raters = tuple(sorted({r for row in by_unit.values() for r in row}, key=rater_sort_key))
    ratings = tuple(tuple(by_unit[unit].get(rater) for rater in raters) for unit in units)
    return VoteMatrix(level=level, units=units, raters=raters, ratings=ratings)


def vote_rows(*, project: Project, item_ids: Iterable[int] | None = None) -> Iterator[VoteRow]:
    """Yield the current votes of ``project`` (of ``item_ids`` only, when given), one row each.

    Reads only, four queries whatever the project's size. A row is ``(item id, policy version,
    level, unit id, rater id, value)``; the unit is the item at the answer level and the claim at
    the claim level. A vote counts under the policy version it was made under: a revision's
    ``policy``, an imported prior annotation's recorded ``policy``, else the version labelling
    started under (the one prior votes are first compared under; before the start, the draft
    version); a vote with no version at all (a project without a policy) is left out. Votes of
    an earlier labelling round of an item (retired by a new policy version) stay votes of their
    version. Gold work is never a vote.
    """
    # The version labelling started under (before the start, the draft's): the version of a
    # prior vote that records none. A subquery of the prior votes' own queries.
    first = Subquery(
        LabelPolicy.objects.filter(project=project)
        .order_by(F("frozen_at").asc(nulls_last=True), "version")
        .values("version")[:1]
    )
    only = {} if item_ids is None else {"pk__in": list(item_ids)}
    items = Item.objects.filter(project=project, **only).values("pk")
    for item_id, user_id, label, answer_reason, version in AnnotationRevision.objects.filter(
        current_of__item__in=items, current_of__assignment__gold=False
    ).values_list(
        "annotation__item_id",
        "annotation__annotator_id",
        "answer_label",
        "answer_reason",
        "policy__version",
    ):
        if version is not None:
            yield (
                item_id,
                version,
                ANSWER_LEVEL,
                item_id,
                user_rater(user_id),
                vote_value(label, answer_reason),
            )
    for item_id, annotator, prior_label, reason, version in PriorAnnotation.objects.filter(
        candidate__item__in=items, answer_label__isnull=False
    ).values_list(
        "candidate__item__id",
        "annotator",
        "answer_label",
        "answer_reason",
        Coalesce("policy__version", first),
    ):
        if version is not None:
            yield (
                item_id,
                version,
                ANSWER_LEVEL,
                item_id,
                prior_rater(annotator),
                vote_value(_imported_label(prior_label), reason),
            )
    for claim_id, item_id, user_id, label, reason, version in ClaimLabel.objects.filter(
        revision__current_of__item__in=items,
        revision__current_of__assignment__gold=False,
    ).values_list(
        "claim_id",
        "revision__annotation__item_id",
        "revision__annotation__annotator_id",
        "label",
        "reason",
        "revision__policy__version",
    ):
        if version is not None:
            yield (
                item_id,
                version,
                CLAIM_LEVEL,
                claim_id,
                user_rater(user_id),
                vote_value(label, reason),
            )
    for (
        claim_id,
        item_id,
        annotator,
        prior_claim_label,
        reason,
        version,
    ) in PriorClaimLabel.objects.filter(
        prior_annotation__candidate__item__in=items, label__isnull=False
    ).values_list(
        "claim_id",
        "prior_annotation__candidate__item__id",
        "prior_annotation__annotator",
        "label",
        "reason",
        Coalesce("prior_annotation__policy__version", first),
    ):
        if version is not None:
            yield (
                item_id,
                version,
                CLAIM_LEVEL,
                claim_id,
                prior_rater(annotator),
                vote_value(_imported_label(prior_claim_label), reason),
            )


def project_votes(*, project: Project) -> ProjectVotes:
    """Return the current votes of every item of ``project``, per label level and policy version.

    Reads the rows of :func:`vote_rows` (four queries, whatever the project's size). Items of
    every status count: an open item's single vote drops out of the agreement statistics by
    itself.

    Args:
        project: the project.

    Returns:
        A :class:`ProjectVotes` with deterministic ordering, so equal votes give equal data.
    """
    answer_votes: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    claim_votes: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    for _item, version, level, unit, rater, value in vote_rows(project=project):
        target = answer_votes if level == ANSWER_LEVEL else claim_votes
        target[version].append((unit, rater, value))
    numbers = sorted(set(answer_votes) | set(claim_votes))
    versions = tuple(
        VersionVotes(
            policy_version=v,
            answer=_matrix(ANSWER_LEVEL, answer_votes.get(v, [])),
            claim=_matrix(CLAIM_LEVEL, claim_votes.get(v, [])),
        )
        for v in numbers
    )
    newest = versions[-1] if versions else None
    return ProjectVotes(
        project_id=project.pk,
        answer=newest.answer if newest else _matrix(ANSWER_LEVEL, []),
        claim=newest.claim if newest else _matrix(CLAIM_LEVEL, []),
        policy_version=newest.policy_version if newest else None,
        versions=versions,
    )
