"""Serving gold work through "next item", and recording qualifications when they are due.

See :mod:`labeling.services.gold` for the rules. The claim
(:func:`labeling.services.assignments.item_claim_next`) calls :func:`gold_turn` and
:func:`gold_claim` under the annotator's Membership lock.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Max

from labeling.locks import items_lock
from labeling.models import (
    QUALIFIED_STATUSES,
    Assignment,
    AssignmentStatus,
    Item,
    LabelPolicy,
    Membership,
    Project,
    Qualification,
    QualificationStatus,
)
from labeling.rows import raw_first
from labeling.selectors.gold import gold_unseen_ids, qualification_agreement

logger = logging.getLogger(__name__)


def gold_draw(*, project: Project, user_id: int, n: int) -> float:
    """Return the ``n``-th gold draw of a user in a project, a number in [0, 1).

    ``HMAC-SHA256(project.pseudonym_key, "gold:<user_id>:<n>")``, its first 8 bytes read as an
    unsigned big-endian integer over 2**64. Deterministic for a given key; unpredictable
    without it.
    """
    digest = hmac.new(
        project.pseudonym_key.encode(), f"gold:{user_id}:{n}".encode(), hashlib.sha256
    ).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class GoldTurn:
    """What the next claim of an annotator may serve.

    ``gold``: serve a gold item first (if one is left for them). ``regular``: regular work is
    allowed. Neither: nothing is served (qualification pending a decision, or refused).
    """

    gold: bool
    regular: bool


def gold_turn(
    *, membership: Membership, actor: Any, policy: LabelPolicy, now: datetime
) -> GoldTurn:
    """Decide what the next claim of ``actor`` serves (gold first, regular work, or nothing).

    Evaluates the actor's qualification when it is due (:func:`qualification_evaluate`). A
    recorded ``failed`` or ``refused`` stands even when the rule is switched off later (a
    manager admits them to undo it). Two queries when the policy serves no gold.

    Concurrency: the caller (the claim) holds the actor's Membership lock, so one annotator's
    claims and a manager's decision about them are serialised; the qualification read here is
    committed state, so regular work is never served before the qualification is recorded.
    """
    project = membership.project
    # One row at most (unique per project and annotator); every claim reads it: a plain
    # statement (labeling/rows.py).
    qualification = raw_first(
        Qualification,
        "SELECT * FROM labeling_qualification WHERE project_id = %s AND annotator_id = %s",
        [project.pk, actor.pk],
    )
    if policy.qualification_required and qualification is None:
        qualification = qualification_evaluate(project=project, actor=actor, policy=policy, now=now)
        if qualification is None:
            return GoldTurn(gold=True, regular=False)
    if qualification is not None and qualification.status not in QUALIFIED_STATUSES:
        return GoldTurn(gold=False, regular=False)
    if policy.gold_rate <= 0:
        return GoldTurn(gold=False, regular=True)
    n = Assignment.objects.filter(item__project=project, annotator=actor).count()
    draw = gold_draw(project=project, user_id=actor.pk, n=n)
    return GoldTurn(gold=draw < policy.gold_rate, regular=True)


def gold_claim(
    *, project: Project, actor: Any, now: datetime, lease: timedelta
) -> Assignment | None:
    """Lease ``actor`` one gold item they have not labelled nor skipped (None if none is left).

    The item is drawn among those left with :func:`gold_draw` (so annotators meet gold items
    in different orders). The assignment is flagged ``gold``, holds no overlap slot and leaves
    ``Item.assigned_count`` alone; its ``slot`` numbers the item's gold annotators 1, 2, ...

    Concurrency: the caller holds the actor's Membership lock (their claims are serialised).
    The gold Item row is locked with SKIP LOCKED, as claims take items, so the numbering is
    exact and the claim never waits for an item another transaction holds (which may wait for
    an item this claim holds): a held gold item is passed over for the next one in the draw's
    order; when every one is held at that moment, None.
    """
    unseen = gold_unseen_ids(project=project, actor=actor)
    if not unseen:
        return None
    n = Assignment.objects.filter(item__project=project, annotator=actor).count()
    first = int(gold_draw(project=project, user_id=actor.pk, n=-1 - n) * len(unseen))
    pick = next(
        (pk for pk in unseen[first:] + unseen[:first] if items_lock([pk], skip_locked=True)),
        None,
    )
    if pick is None:
        return None
    Item.objects.filter(pk=pick).update(version=F("version") + 1)
    lease_fields = {
        "status": AssignmentStatus.LEASED,
        "leased_at": now,
        "lease_expires_at": now + lease,
        "submitted_at": None,
        "ended_at": None,
    }
    own = Assignment.objects.filter(item_id=pick, annotator=actor).first()
    if own is not None:
        # Their own lease of it ran out (gold_unseen_ids): revive that row, as a claim does.
        if not Assignment.objects.filter(pk=own.pk, status=AssignmentStatus.EXPIRED).update(
            **lease_fields
        ):  # pragma: no cover - the actor's rows change only under their Membership lock
            return None
        assignment = Assignment.objects.get(pk=own.pk)
    else:
        last = Assignment.objects.filter(item_id=pick).aggregate(last=Max("slot"))["last"] or 0
        assignment = Assignment.objects.create(
            item_id=pick, annotator=actor, slot=last + 1, gold=True, **lease_fields
        )
    logger.info(
        "assignment.claimed",
        extra={
            "assignment_id": assignment.pk,
            "item_id": pick,
            "project_id": project.pk,
            "annotator_id": actor.pk,
            "gold": True,
        },
    )
    return assignment


def qualification_evaluate(
    *, project: Project, actor: Any, policy: LabelPolicy, now: datetime
) -> Qualification | None:
    """Record ``actor``'s qualification once it is due; None while they are still qualifying.

    Due when ``k`` (``policy.qualification_items``) gold labels are submitted — then
    ``passed`` when agreed / compared reaches ``policy.qualification_threshold``, else
    ``failed`` — or when fewer than k are submitted, none of their gold leases is live and no
    gold item is left for them (``failed``: a manager decides). ``evaluated_at`` is ``now``, the
    claim's time, so the claim's lease is never earlier than the qualification it rests on.
    Logged as ``qualification.evaluated``.

    Concurrency: the caller holds the actor's Membership lock.
    """
    k = policy.qualification_items
    mine = Assignment.objects.filter(item__project=project, annotator=actor, gold=True)
    submitted = mine.filter(status=AssignmentStatus.SUBMITTED).count()
    if submitted < k:
        if mine.filter(status=AssignmentStatus.LEASED).exists():
            return None
        if gold_unseen_ids(project=project, actor=actor):
            return None
    result = qualification_agreement(project=project, actor=actor, k=k)
    passed = (
        result.items >= k
        and result.compared > 0
        and result.agreed >= policy.qualification_threshold * result.compared
    )
    qualification = Qualification.objects.create(
        project=project,
        annotator=actor,
        status=QualificationStatus.PASSED if passed else QualificationStatus.FAILED,
        policy=policy,
        items=result.items,
        agreed=result.agreed,
        compared=result.compared,
        evaluated_at=now,
    )
    logger.info(
        "qualification.evaluated",
        extra={
            "project_id": project.pk,
            "annotator_id": actor.pk,
            "status": qualification.status,
            "items": result.items,
            "agreed": result.agreed,
            "compared": result.compared,
        },
    )
    return qualification
