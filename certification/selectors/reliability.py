"""Reliability selectors: the inputs of the per-person figures, and the stored report for display.

:func:`reliability_inputs` gathers, as plain data, what ``reliability_recompute`` computes from:
the votes of the newest policy version with votes, the current resolutions of their items and
claims, the disagreement history, the gold items' references and gold work, and the threshold.
:func:`reliability_report_get` shapes the stored report for the manager's page and the API;
:func:`item_posterior_get` gives the Dawid–Skene posterior of one item for the adjudication
page (no rater identity in it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from certification.models import ReliabilityReport
from certification.selectors.agreement import rater_display_names
from labeling.models import (
    Disagreement,
    Item,
    LabelPolicy,
    Project,
    ResolutionStatus,
    ResolvedClaimLabel,
)
from labeling.selectors import ProjectVotes, project_votes
from labeling.selectors.gold import GoldItemData, project_gold
from labeling.selectors.votes import user_rater, vote_value

# Used when the project has no policy with a threshold (never in practice: every policy has one).
DEFAULT_ACCURACY_THRESHOLD = 0.8


@dataclass(frozen=True)
class Reference:
    """The current resolved label of a unit: its status and its vote value."""

    status: str
    label: str


@dataclass(frozen=True)
class ReliabilityInputs:
    """Everything the reliability figures of a project are computed from (plain data).

    ``votes.answer`` and ``votes.claim`` (those of ``votes.policy_version``) are used;
    ``answer_references`` map items to their current consensus or adjudicated resolution made
    under that version, ``claim_references`` claims to its claim label. ``queued_items`` ever
    entered the disagreement queue; ``compared_items`` had their votes compared. ``threshold``
    is the qualification accuracy in [0, 1] (a policy setting; 0.8 unless changed).
    """

    votes: ProjectVotes
    answer_references: Mapping[int, Reference]
    claim_references: Mapping[int, Reference]
    queued_items: frozenset[int]
    compared_items: frozenset[int]
    gold: tuple[GoldItemData, ...]
    threshold: float


def reliability_inputs(*, project: Project) -> ReliabilityInputs:
    """Return the inputs of the project's reliability figures (reads only, fixed query count)."""
    votes = project_votes(project=project)
    version = votes.policy_version
    answers: dict[int, Reference] = {}
    claims: dict[int, Reference] = {}
    resolved = Item.objects.filter(
        project=project,
        resolution__isnull=False,
        resolution__status__in=[ResolutionStatus.CONSENSUS, ResolutionStatus.ADJUDICATED],
        resolution__policy__version=version if version is not None else 0,  # no vote: none
    )
    for item_id, status, label, reason in resolved.values_list(
        "pk", "resolution__status", "resolution__answer_label", "resolution__answer_reason"
    ).order_by("pk"):
        if label is not None:
            answers[item_id] = Reference(status=status, label=vote_value(label, reason))
    for claim_id, status, label, reason in (
        ResolvedClaimLabel.objects.filter(resolution__current_for__in=resolved)
        .values_list("claim_id", "resolution__status", "label", "reason")
        .order_by("claim_id")
    ):
        claims[claim_id] = Reference(status=status, label=vote_value(label, reason))
    queued = frozenset(
        Disagreement.objects.filter(item__project=project).values_list("item_id", flat=True)
    )
    with_resolution = frozenset(
        Item.objects.filter(project=project, resolutions__isnull=False)
        .values_list("pk", flat=True)
        .distinct()
    )
    policy = (
        LabelPolicy.objects.filter(project=project, version=version).first()
        if version is not None
        else LabelPolicy.objects.filter(project=project).order_by("-version").first()
    )
    return ReliabilityInputs(
        votes=votes,
        answer_references=answers,
        claim_references=claims,
        queued_items=queued,
        compared_items=queued | with_resolution,
        gold=project_gold(project=project),
        threshold=policy.qualification_threshold if policy else DEFAULT_ACCURACY_THRESHOLD,
    )


def gold_matrices(
    gold: tuple[GoldItemData, ...],
) -> dict[str, tuple[tuple[int, ...], tuple[str, ...], list[list[str | None]], list[str | None]]]:
    """The gold work as (units, raters, ratings, references) per level (``answer``, ``claim``).

    Raters are ``user:<id>``; a unit is a gold item (answer) or one of its claims (claim).
    """
    raters = tuple(sorted({a.annotator_id for g in gold for a in g.annotations}))
    column = {r: i for i, r in enumerate(raters)}
    ids = tuple(user_rater(r) for r in raters)
    answer_rows: list[list[str | None]] = []
    answer_refs: list[str | None] = []
    answer_units: list[int] = []
    claim_rows: list[list[str | None]] = []
    claim_refs: list[str | None] = []
    claim_units: list[int] = []
    for item in gold:
        row: list[str | None] = [None] * len(raters)
        for a in item.annotations:
            row[column[a.annotator_id]] = a.labels.answer
        answer_units.append(item.item_id)
        answer_rows.append(row)
        answer_refs.append(item.reference.answer)
        for claim_id in item.claim_ids:
            claim_row: list[str | None] = [None] * len(raters)
            for a in item.annotations:
                claim_row[column[a.annotator_id]] = a.labels.claims.get(claim_id)
            claim_units.append(claim_id)
            claim_rows.append(claim_row)
            claim_refs.append(item.reference.claims.get(claim_id))
    return {
        "answer": (tuple(answer_units), ids, answer_rows, answer_refs),
        "claim": (tuple(claim_units), ids, claim_rows, claim_refs),
    }


@dataclass(frozen=True)
class ReliabilityView:
    """A project's stored reliability report, ready to render or serialise.

    ``result`` is the stored JSON (``certification.services.reliability``); ``names`` map rater
    ids to display names (username, or pseudonym + " (imported)").
    """

    computed_at: datetime
    input_sha256: str
    policy_version: int | None
    result: Mapping[str, Any]
    names: Mapping[str, str]


def reliability_report_get(*, project: Project) -> ReliabilityView | None:
    """Return the project's reliability report with rater names, or None before the first run.

    Rater names identify people: the caller must have checked that the viewer is a manager.
    Queries: two (the report, the usernames).
    """
    report = ReliabilityReport.objects.filter(project=project).first()
    if report is None:
        return None
    raters = [p["rater"] for p in report.result.get("people", [])]
    return ReliabilityView(
        computed_at=report.computed_at,
        input_sha256=report.input_sha256,
        policy_version=report.policy_version,
        result=report.result,
        names=rater_display_names(raters),
    )


@dataclass(frozen=True)
class ItemPosterior:
    """The Dawid–Skene posterior of one item's labels (a model estimate; no rater in it).

    ``answer`` and each of ``claims`` hold (label, probability) pairs, most probable first
    (empty when not estimated).
    """

    answer: tuple[tuple[str, float], ...]
    claims: Mapping[int, tuple[tuple[str, float], ...]]
    assumptions: tuple[str, ...]
    computed_at: datetime
    policy_version: int | None


def _posterior(level: Mapping[str, Any], unit: int) -> tuple[tuple[str, float], ...]:
    probabilities = level.get("posteriors", {}).get(str(unit))
    if probabilities is None:
        return ()
    pairs = zip(level["labels"], probabilities, strict=True)
    return tuple(sorted(pairs, key=lambda pair: (-pair[1], pair[0])))


def item_posterior_get(
    *, project: Project, item_id: int, claim_ids: tuple[int, ...]
) -> ItemPosterior | None:
    """Return the stored Dawid–Skene posterior of an item and its claims, or None.

    For the adjudication page, which exists only once the item's blind votes are in; the
    caller is that page (adjudicators and managers). None before the first computation or when
    the model had no label of the item.
    """
    report = ReliabilityReport.objects.filter(project=project).only(
        "result", "computed_at", "policy_version"
    )
    stored = report.first()
    if stored is None:
        return None
    model = stored.result.get("dawid_skene", {})
    answer = _posterior(model.get("answer", {}), item_id)
    claims = {c: _posterior(model.get("claim", {}), c) for c in claim_ids}
    if not answer and not any(claims.values()):
        return None
    return ItemPosterior(
        answer=answer,
        claims={c: pairs for c, pairs in claims.items() if pairs},
        assumptions=tuple(stored.result.get("assumptions", ())),
        computed_at=stored.computed_at,
        policy_version=stored.policy_version,
    )
