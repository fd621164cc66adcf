"""Adjudication: the final label of a disputed item, or ``unresolved`` .

An adjudicator (or manager) resolves an item of the disagreement queue with final answer and
claim labels, evidence and a rationale, or marks it ``unresolved`` with a reason from
:class:`labeling.models.UnresolvedReason`. A decided item can be corrected: the correction is a
new :class:`Resolution` (``number`` + 1) that ``supersedes`` the previous one; consensus items
are not adjudicated.

Optimistic locking: the caller sends the item ``version`` it was shown
(:func:`labeling.selectors.adjudication.adjudication_view`); the decision is written only if the
item still has that version (compare-and-set), so two adjudicators cannot silently overwrite
each other: the second gets :class:`labeling.exceptions.StaleVersion`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from labeling.exceptions import (
    InvalidInput,
    InvalidTransition,
    NotFound,
    PermissionDenied,
    StaleVersion,
)
from labeling.importers.record_errors import echo
from labeling.locks import project_label_writes_lock
from labeling.models import (
    Disagreement,
    Item,
    ItemStatus,
    LabelPolicy,
    Project,
    Resolution,
    ResolutionStatus,
    ResolvedClaimLabel,
    UnresolvedReason,
)
from labeling.permissions import REVIEWERS, require_role
from labeling.selectors.adjudication import annotated_by
from labeling.selectors.review import labelling_policy_get
from labeling.selectors.vote_reads import imported_evidence_waivers, item_votes
from labeling.services.claim_labels import claim_labels_json, claim_labels_write
from labeling.services.label_checks import CheckedLabels, ClaimInput, Problems, labels_check
from labeling.signals import announce_resolutions

logger = logging.getLogger(__name__)

MAX_RATIONALE_LENGTH = 10_000


def _invalid(field: str, reason: str) -> InvalidInput:
    return InvalidInput(reason, field=field)


def _resolution_json(resolution: Resolution | None) -> dict[str, Any] | None:
    """The item's current resolution as a conflict returns it (None: not decided yet)."""
    if resolution is None:
        return None
    claim_labels = ResolvedClaimLabel.objects.filter(resolution=resolution)
    return {
        "resolution_id": resolution.pk,
        "number": resolution.number,
        "status": resolution.status,
        "answer_label": resolution.answer_label,
        "answer_reason": resolution.answer_reason,
        "unresolved_reason": resolution.unresolved_reason,
        "rationale": resolution.rationale,
        "claims": claim_labels_json(claim_labels, "evidence_waived"),
    }


def _item_for_decision(
    *, project: Project, item_id: int, actor: Any, expected_version: int
) -> Item:
    """Return the item if ``actor`` may decide it now, as of ``expected_version``.

    Raises:
        NotFound, PermissionDenied, InvalidTransition, StaleVersion: see the services.
    """
    require_role(project=project, actor=actor, roles=REVIEWERS, action="adjudicate")
    item = (
        Item.objects.filter(project=project, pk=item_id)
        .select_related("candidate", "resolution")
        .first()
    )
    if item is None:
        raise NotFound(f"no item {item_id} in project {project.slug!r}")
    if not project.allow_self_adjudication and annotated_by(item_id=item.pk, actor=actor):
        raise PermissionDenied(
            "you annotated this item; this project does not allow self-adjudication"
        )
    if item.version != expected_version:
        raise StaleVersion(
            f"item {item.pk} changed since you opened it (version {expected_version}, now "
            f"{item.version}); reload it and decide again",
            data={
                "expected_version": expected_version,
                "version": item.version,
                "current": _resolution_json(item.resolution),
            },
        )
    if item.status == ItemStatus.OPEN:
        raise InvalidTransition(f"item {item.pk} is still collecting annotations")
    if item.status == ItemStatus.GOLD:
        # Gold labels are never votes: a gold item has nothing to adjudicate.
        raise InvalidTransition(f"item {item.pk} is a gold item; it is never adjudicated")
    if item.status == ItemStatus.RESOLVED and (
        item.resolution is None or item.resolution.status == ResolutionStatus.CONSENSUS
    ):
        raise InvalidTransition(
            f"item {item.pk} was resolved by consensus of its annotators; it is not adjudicated"
        )
    return item


def _check_rationale(rationale: Any, *, required: bool, problems: Problems) -> str:
    """Return the rationale as text; a problem with it goes to ``problems``."""
    if rationale is None:
        rationale = ""
    if not isinstance(rationale, str):
        problems.add("rationale", "expected text")
    elif required and not rationale.strip():
        problems.add("rationale", "give a rationale for the decision")
    elif len(rationale) > MAX_RATIONALE_LENGTH:
        problems.add("rationale", f"at most {MAX_RATIONALE_LENGTH} characters")
    elif "\x00" in rationale:
        problems.add("rationale", "contains NUL (U+0000)")
    else:
        return rationale
    return ""


def _decide(
    *,
    project: Project,
    item: Item,
    expected_version: int,
    actor: Any,
    policy: LabelPolicy,
    status: str,
    labels: CheckedLabels | None,
    rationale: str,
    unresolved_reason: str | None,
) -> Resolution:
    """Write the decision if the item still has ``expected_version``; close the disagreement."""
    project_label_writes_lock(project.pk)  # before the item's row lock (labeling/locks.py)
    swapped = Item.objects.filter(pk=item.pk, version=expected_version).update(
        version=F("version") + 1
    )
    if swapped != 1:
        raise StaleVersion(
            f"item {item.pk} changed while you decided (another adjudication or a revision); "
            "reload it and decide again",
            data={"expected_version": expected_version},
        )
    # Publishing a policy version locks every item: under this item's lock (taken by the
    # compare-and-set) the current policy is the one the decision is stored under.
    current = labelling_policy_get(project=project)
    if current.pk != policy.pk:
        raise StaleVersion(
            f"the label policy of project {project.slug!r} changed to v{current.version} while "
            f"you decided under v{policy.version}; reload the item and decide again",
            data={"policy_version": policy.version, "current_policy_version": current.version},
        )
    number = (Resolution.objects.filter(item=item).aggregate(n=Max("number"))["n"] or 0) + 1
    resolution = Resolution.objects.create(
        item=item,
        number=number,
        supersedes_id=item.resolution_id,
        status=status,
        policy=policy,
        answer_label=labels.answer_label if labels else None,
        answer_reason=labels.answer_reason if labels else None,
        rationale=rationale,
        unresolved_reason=unresolved_reason,
        adjudicator=actor,
    )
    if labels is not None:
        claim_labels_write(
            ResolvedClaimLabel,
            ("resolution_id", "claim_id", "label", "reason", "evidence_waived"),
            [
                ((resolution.pk, c.claim_id, c.label, c.reason, c.evidence_waived), c.evidence)
                for c in labels.claims
            ],
        )
    Item.objects.filter(pk=item.pk).update(status=ItemStatus.RESOLVED, resolution=resolution)
    Disagreement.objects.filter(item=item, closed_at__isnull=True).update(
        closed_at=timezone.now(), closed_by=resolution
    )
    announce_resolutions(project_id=project.pk, resolved=[(item.pk, status)])
    logger.info(
        "adjudication.decided",
        extra={
            "item": item.pk,
            "resolution": resolution.pk,
            "number": number,
            "status": status,
            "correction": item.resolution_id is not None,
        },
    )
    return resolution


@transaction.atomic
def adjudication_resolve(
    *,
    project: Project,
    item_id: int,
    actor: Any,
    expected_version: int,
    answer_label: str,
    answer_reason: str | None = None,
    claims: Sequence[ClaimInput],
    rationale: str,
) -> Resolution:
    """Resolve a disputed item with final labels and a rationale (status ``adjudicated``).

    The labels follow the annotation rules (:func:`labeling.services.label_checks.labels_check`)
    without ``cannot_decide``: an adjudicator who cannot decide marks the item unresolved.
    Evidence rule for imported votes
    (:func:`labeling.selectors.vote_reads.imported_evidence_waivers`): a claim label that adopts
    the label only imported votes without evidence gave that claim is accepted without evidence
    and stored with ``evidence_waived``; any other ``supported`` or ``contradicted`` needs
    evidence. Every problem (labels, evidence, rationale) is reported at once. Evidence offsets
    may be ``utf16`` (a fresh selection) or ``codepoint`` (copied from an annotation). On an
    item already adjudicated or unresolved, the decision is a correction: a new resolution
    superseding the current one.

    Returns:
        The new resolution, now the item's current one.

    Raises:
        NotFound: the actor is not a member, or no such item in the project.
        PermissionDenied: the actor is not an adjudicator or manager, or annotated the item and
            the project does not allow self-adjudication.
        InvalidTransition: the item is still open, or was resolved by consensus; or labelling
            has not started.
        StaleVersion: the item's version is not ``expected_version`` (someone else decided, or
            an annotation was revised); nothing is written. Its ``data`` carries the item's
            ``version`` and the ``current`` resolution (None while undecided).
        InvalidInput: a label, reason, claim, evidence span or the rationale is invalid,
            naming the first field; ``data["errors"]`` lists every problem as
            ``{"field", "reason"}``.

    Concurrency: opens its own transaction; the compare-and-set on the item's version takes
    its row lock and lets exactly one of two concurrent decisions through.
    """
    item = _item_for_decision(
        project=project, item_id=item_id, actor=actor, expected_version=expected_version
    )
    policy = labelling_policy_get(project=project)
    waivers = imported_evidence_waivers(item_votes(item_ids=[item.pk])[item.pk])
    problems = Problems()
    labels: CheckedLabels | None = None
    try:
        labels = labels_check(
            item=item,
            policy=policy,
            answer_label=answer_label,
            answer_reason=answer_reason,
            claims=claims,
            allow_cannot_decide=False,
            waivers=waivers,
        )
    except InvalidInput as exc:
        for problem in (exc.data or {}).get("errors") or [
            {"field": exc.field, "reason": exc.reason}
        ]:
            problems.add(problem["field"] or "", problem["reason"])
    text = _check_rationale(rationale, required=True, problems=problems)
    problems.raise_any()
    assert labels is not None  # no problem was recorded, so the labels passed
    return _decide(
        project=project,
        item=item,
        expected_version=expected_version,
        actor=actor,
        policy=policy,
        status=ResolutionStatus.ADJUDICATED,
        labels=labels,
        rationale=text,
        unresolved_reason=None,
    )


@transaction.atomic
def adjudication_mark_unresolved(
    *,
    project: Project,
    item_id: int,
    actor: Any,
    expected_version: int,
    reason: str,
    rationale: str = "",
) -> Resolution:
    """Mark a disputed item ``unresolved`` with a reason (and a rationale, required for "other").

    Unresolved is an outcome of its own, counted and reported, never turned into a label. Same
    states, corrections and locking as :func:`adjudication_resolve`.

    Raises:
        NotFound, PermissionDenied, InvalidTransition, StaleVersion: as
            :func:`adjudication_resolve`.
        InvalidInput: ``reason`` is not one of ``UnresolvedReason`` values, or the reason is
            ``other`` without a rationale; ``data["errors"]`` lists every problem.

    Concurrency: as :func:`adjudication_resolve`.
    """
    item = _item_for_decision(
        project=project, item_id=item_id, actor=actor, expected_version=expected_version
    )
    policy = labelling_policy_get(project=project)
    problems = Problems()
    if reason not in UnresolvedReason.values:
        problems.add("reason", f"{echo(reason)} is not one of {UnresolvedReason.values}")
    text = _check_rationale(rationale, required=reason == UnresolvedReason.OTHER, problems=problems)
    problems.raise_any()
    return _decide(
        project=project,
        item=item,
        expected_version=expected_version,
        actor=actor,
        policy=policy,
        status=ResolutionStatus.UNRESOLVED,
        labels=None,
        rationale=text,
        unresolved_reason=reason,
    )
