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

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from labeling.models import Project
from labeling.rows import placeholders, select_rows
from labeling.tally import VoteRow, rater_sort_key

ANSWER_LEVEL = "answer"
CLAIM_LEVEL = "claim"
LEVELS: tuple[str, ...] = (ANSWER_LEVEL, CLAIM_LEVEL)


@dataclass(frozen=True)
class VoteMatrix:
    """The votes of one label level: units × raters, ``None`` where a rater did not vote.

    ``units`` are ascending ids (items or claims) with a vote; ``raters`` sorted (``prior:…``
    before ``user:…``, users by numeric id); ``ratings`` is ``len(units)`` rows of
    ``len(raters)`` labels.
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


# Every current vote of a project's items, one statement: the four kinds of vote (an account's
# answer label and claim labels, from the current revision of its submitted, non-gold
# annotation; an imported prior annotation's answer and claim labels), and, on request, the
# items' votes as last counted into the vote tally. A prior vote without a recorded version
# counts under the version labelling started under (before the start, the lowest draft's).
# ``{items}`` is the item filter, repeated in every branch; ``{default}`` that version.
_DEFAULT_VERSION_SQL = (
    "SELECT version FROM labeling_labelpolicy WHERE project_id = %s "
    "ORDER BY (frozen_at IS NULL), frozen_at, version LIMIT 1"
)
_DEFAULT_VERSION = f"({_DEFAULT_VERSION_SQL})"
_VOTES_SQL = (
    "SELECT 'a', 'answer', n.item_id, lp.version, n.item_id, CAST(n.annotator_id AS TEXT), "
    "r.answer_label, r.answer_reason "
    "FROM labeling_annotation n JOIN labeling_item i ON i.id = n.item_id "
    "JOIN labeling_annotationrevision r ON r.id = n.current_id "
    "JOIN labeling_assignment a ON a.id = n.assignment_id "
    "LEFT JOIN labeling_labelpolicy lp ON lp.id = r.policy_id "
    "WHERE {items} AND NOT a.gold "
    "UNION ALL "
    "SELECT 'p', 'answer', i.id, COALESCE(lp.version, {default}), i.id, p.annotator, "
    "p.answer_label, p.answer_reason "
    "FROM labeling_priorannotation p JOIN labeling_item i ON i.candidate_id = p.candidate_id "
    "LEFT JOIN labeling_labelpolicy lp ON lp.id = p.policy_id "
    "WHERE {items} AND p.answer_label IS NOT NULL "
    "UNION ALL "
    "SELECT 'a', 'claim', n.item_id, lp.version, cl.claim_id, CAST(n.annotator_id AS TEXT), "
    "cl.label, cl.reason "
    "FROM labeling_claimlabel cl JOIN labeling_annotation n ON n.current_id = cl.revision_id "
    "JOIN labeling_item i ON i.id = n.item_id "
    "JOIN labeling_assignment a ON a.id = n.assignment_id "
    "JOIN labeling_annotationrevision r ON r.id = cl.revision_id "
    "LEFT JOIN labeling_labelpolicy lp ON lp.id = r.policy_id "
    "WHERE {items} AND NOT a.gold "
    "UNION ALL "
    "SELECT 'p', 'claim', i.id, COALESCE(lp.version, {default}), pcl.claim_id, "
    "p.annotator, pcl.label, pcl.reason "
    "FROM labeling_priorclaimlabel pcl "
    "JOIN labeling_priorannotation p ON p.id = pcl.prior_annotation_id "
    "JOIN labeling_item i ON i.candidate_id = p.candidate_id "
    "LEFT JOIN labeling_labelpolicy lp ON lp.id = p.policy_id "
    "WHERE {items} AND pcl.label IS NOT NULL"
)
_COUNTED_SQL = (
    " UNION ALL SELECT 's', NULL, v.item_id, NULL, NULL, NULL, CAST(v.votes AS TEXT), NULL "
    "FROM labeling_itemvotes v JOIN labeling_item i ON i.id = v.item_id WHERE {items} "
    "UNION ALL SELECT 't', NULL, NULL, NULL, NULL, NULL, NULL, NULL "
    "FROM labeling_votetally WHERE project_id = %s"
)


def _votes_statement(
    project: Project, item_ids: Sequence[int] | None, *, counted: bool
) -> tuple[str, list[Any]]:
    if item_ids is None:
        items, item_params = "i.project_id = %s", [project.pk]
    else:
        items = f"i.project_id = %s AND i.id IN ({placeholders(item_ids)})"
        item_params = [project.pk, *item_ids]
    sql = _VOTES_SQL + (_COUNTED_SQL if counted else "")
    params: list[Any] = [
        *item_params,
        project.pk,
        *item_params,
        *item_params,
        project.pk,
        *item_params,
    ]
    if counted:
        params += [*item_params, project.pk]
    return sql.replace("{items}", items).replace("{default}", _DEFAULT_VERSION), params


def _vote_row(row: tuple[Any, ...]) -> VoteRow:
    kind, level, item_id, version, unit, who, label, reason = row
    rater = user_rater(int(who)) if kind == "a" else prior_rater(who)
    return (item_id, version, level, unit, rater, vote_value(label, reason))


def _rows(
    project: Project, item_ids: Sequence[int] | None, *, counted: bool
) -> tuple[list[VoteRow], dict[int, list[list[Any]]], bool]:
    sql, params = _votes_statement(project, item_ids, counted=counted)
    votes: list[VoteRow] = []
    stored: dict[int, list[list[Any]]] = {}
    tallied = False
    for row in select_rows(sql, params):
        if row[0] == "s":
            stored[row[2]] = json.loads(row[6])
        elif row[0] == "t":
            tallied = True
        elif row[3] is not None:  # a vote without any version is left out
            votes.append(_vote_row(row))
    return votes, stored, tallied


def default_vote_version(project: Project) -> int | None:
    """The version an imported vote that records none counts under (see :func:`vote_rows`)."""
    rows = select_rows(_DEFAULT_VERSION_SQL, [project.pk])
    return rows[0][0] if rows else None


def vote_rows(*, project: Project, item_ids: Sequence[int] | None = None) -> list[VoteRow]:
    """Return the current votes of ``project`` (of ``item_ids`` only, when given), one row each.

    Reads only, one statement whatever the project's size. A row is ``(item id, policy
    version, level, unit id, rater id, value)``; the unit is the item at the answer level and
    the claim at the claim level. A vote counts under the policy version it was made under: a
    revision's ``policy``, an imported prior annotation's recorded ``policy``, else the version
    labelling started under (the one prior votes are first compared under; before the start,
    the draft version); a vote with no version at all (a project without a policy) is left out.
    Votes of an earlier labelling round of an item (retired by a new policy version) stay votes
    of their version. Gold work is never a vote.
    """
    return _rows(project, item_ids, counted=False)[0]


def items_votes_and_counted(
    *, project: Project, item_ids: Sequence[int]
) -> tuple[list[VoteRow], dict[int, list[list[Any]]], bool]:
    """Return :func:`vote_rows` of ``item_ids`` and their votes as last counted, in one statement.

    Items without an :class:`~labeling.models.ItemVotes` row are absent from the mapping; the
    flag says whether the project has a :class:`~labeling.models.VoteTally` (is counted at all).
    """
    return _rows(project, item_ids, counted=True)


def project_votes(*, project: Project) -> ProjectVotes:
    """Return the current votes of every item of ``project``, per label level and policy version.

    Reads the rows of :func:`vote_rows` (one statement, whatever the project's size). Items of
    every status count: an open item's single vote drops out of the agreement statistics by
    itself. Ordering is deterministic, so equal votes give equal data.
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
