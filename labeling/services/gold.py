"""Gold items: setting reference labels, serving gold work, and qualifying annotators.

Only an item nobody has voted on (open, no assignment, prior vote or resolution) can become gold;
from then on it is never compared, resolved, released or certified. References are append-only
revisions; the same reference again writes nothing. Gold work is an ordinary assignment flagged
``gold`` (never shown to the annotator), served at most once per annotator, and never when no
regular work is left (a gold item alone would give itself away). The draw is
``HMAC-SHA256(project.pseudonym_key, "gold:<user id>:<n>")`` read as a number in [0, 1), ``n``
the annotator's assignments in the project: deterministic, unpredictable without the secret key.
Agreement with the references compares answer and claim labels (``label:reason``, as the vote
comparison does), not evidence spans. Serving and qualification rules: docs/quality.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from labeling.derived import derived_mark, derived_mark_touched
from labeling.exceptions import InvalidInput, InvalidTransition, NotFound, PermissionDenied
from labeling.locks import item_lock, membership_lock, project_label_writes_lock
from labeling.models import (
    MAX_ID,
    Assignment,
    DerivedKind,
    GoldClaimLabel,
    GoldReference,
    ImportBatch,
    Item,
    ItemStatus,
    PriorAnnotation,
    Project,
    Qualification,
    QualificationStatus,
)
from labeling.permissions import ANNOTATORS, MANAGERS, require_role
from labeling.selectors.gold import gold_reference_policy, qualification_agreement
from labeling.services.claim_labels import claim_labels_write
from labeling.services.imports.common import fingerprint
from labeling.services.label_checks import ClaimInput, labels_check

logger = logging.getLogger(__name__)

MAX_RATIONALE_LENGTH = 10_000
MAX_DECISION_NOTE_LENGTH = 2_000


@dataclass(frozen=True)
class GoldReferenceInput:
    """The reference labels of a gold item (evidence offsets in each span's ``unit``)."""

    answer_label: str
    answer_reason: str | None = None
    claims: tuple[ClaimInput, ...] = ()
    rationale: str = ""


@transaction.atomic
def gold_reference_set(
    *,
    project: Project,
    item_id: int,
    actor: Any,
    data: GoldReferenceInput,
    import_batch: ImportBatch | None = None,
) -> GoldReference:
    """Make an item gold with these reference labels, or give a gold item a new reference.

    The labels are checked against the labelling policy (before labelling starts, the newest
    draft) and the item's pinned sources, as an annotation is, except that ``cannot_decide``
    is refused. The first reference turns the item's status to ``gold``; a later one is a new
    revision (``number`` + 1, ``supersedes`` the old); the same labels and rationale as the
    current reference write nothing and return it.

    Args:
        project: the item's project.
        item_id: the item.
        actor: a manager (None: a trusted caller, e.g. an import run from the command line;
            ``import_batch`` then says where the reference came from).
        data: the reference labels and rationale.
        import_batch: the import that brings the reference, if any.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project.
        NotFound: no such item in the project.
        InvalidInput: a label, reason, claim, span or the rationale is invalid (names the
            field; ``data["errors"]`` lists every problem).
        InvalidTransition: the item already has votes (an assignment, an imported prior vote
            or a resolution), or the project has no label policy.

    Concurrency: joins the caller's transaction or opens one; takes the project's label-write
    lock (a release freeze sees all of it or none), then the Item row.
    """
    require_role(project=project, actor=actor, roles=MANAGERS, outsider=PermissionDenied)
    if isinstance(item_id, bool) or not isinstance(item_id, int) or not 0 < item_id <= MAX_ID:
        raise NotFound(f"no item {item_id!r} in project {project.slug!r}")
    if not isinstance(data.rationale, str) or len(data.rationale) > MAX_RATIONALE_LENGTH:
        raise InvalidInput(f"text of at most {MAX_RATIONALE_LENGTH} characters", field="rationale")
    project_label_writes_lock(project.pk)
    if not Item.objects.filter(pk=item_id, project=project).exists():
        raise NotFound(f"no item {item_id} in project {project.slug!r}")
    item_lock(item_id)
    item = Item.objects.select_related("candidate").get(pk=item_id)
    policy = gold_reference_policy(project=project)
    labels = labels_check(
        item=item,
        policy=policy,
        answer_label=data.answer_label,
        answer_reason=data.answer_reason,
        claims=data.claims,
        allow_cannot_decide=False,
    )
    content = fingerprint({**labels.canonical(), "rationale": data.rationale})
    current = GoldReference.objects.filter(item=item).order_by("-number").first()
    if item.status == ItemStatus.GOLD:
        if current is not None and current.content_sha256 == content:
            return current
    else:
        _check_no_votes(item)
    actor_id = actor.pk if actor is not None else getattr(import_batch, "created_by_id", None)
    reference = GoldReference.objects.create(
        item=item,
        number=(current.number + 1) if current is not None else 1,
        supersedes=current,
        policy=policy,
        answer_label=labels.answer_label,
        answer_reason=labels.answer_reason,
        rationale=data.rationale,
        created_by_id=actor_id,
        import_batch=import_batch,
        content_sha256=content,
    )
    claim_labels_write(
        GoldClaimLabel,
        ("reference_id", "claim_id", "label", "reason"),
        [((reference.pk, c.claim_id, c.label, c.reason), c.evidence) for c in labels.claims],
    )
    # A new reference changes the per-person accuracy on gold items.
    derived_mark(project_id=project.pk, kinds=[DerivedKind.RELIABILITY])
    if item.status != ItemStatus.GOLD:
        Item.objects.filter(pk=item.pk, status=ItemStatus.OPEN).update(
            status=ItemStatus.GOLD, version=F("version") + 1
        )
        # The item leaves the calibration and audit inputs (it was a pending candidate): stale
        # are the calibration runs whose partitions hold it and the audits of its evaluators.
        derived_mark_touched(
            project_id=project.pk,
            kinds=[DerivedKind.CALIBRATION, DerivedKind.AUDIT],
            item_ids=[item.pk],
        )
    logger.info(
        "gold.reference_set",
        extra={
            "project_id": project.pk,
            "item_id": item.pk,
            "reference": reference.number,
            "actor_id": actor_id,
        },
    )
    return reference


def _check_no_votes(item: Item) -> None:
    """Refuse to make an item gold once anyone has voted on it (or could be voting)."""
    if item.status != ItemStatus.OPEN or item.resolution_id is not None:
        raise InvalidTransition(
            f"item {item.pk} is {item.status}: only an item nobody has labelled can become gold"
        )
    if Assignment.objects.filter(item=item).exists():
        raise InvalidTransition(
            f"item {item.pk} has been given to an annotator: only an item nobody has labelled "
            "can become gold"
        )
    if PriorAnnotation.objects.filter(candidate_id=item.candidate_id).exists():
        raise InvalidTransition(
            f"item {item.pk} has imported prior votes: only an item nobody has labelled can "
            "become gold"
        )


@transaction.atomic
def qualification_decide(
    *, project: Project, annotator_id: int, actor: Any, admit: bool, note: str = ""
) -> Qualification:
    """Record a manager's decision on an annotator's qualification: admit or refuse.

    Any recorded qualification may be decided (a manager may also refuse someone who passed,
    or admit someone refused before); an annotator who has none yet is admitted or refused
    outright (their figures so far are recorded with it). ``admit`` lets them take regular
    work from their next claim; a refusal serves them nothing.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project (or None: a decision
            names its manager).
        NotFound: ``annotator_id`` is not an annotator of the project.
        InvalidInput: ``note`` too long.
        InvalidTransition: labelling has not started (there is no policy rule to record).

    Concurrency: opens its own transaction; locks the annotator's Membership row (the lock
    their claims hold), so a decision and a claim never interleave.
    """
    require_role(project=project, actor=actor, roles=MANAGERS, outsider=PermissionDenied)
    if actor is None:
        raise PermissionDenied("a qualification decision names the manager who takes it")
    if not isinstance(note, str) or len(note) > MAX_DECISION_NOTE_LENGTH:
        raise InvalidInput(f"text of at most {MAX_DECISION_NOTE_LENGTH} characters", field="note")
    if (
        isinstance(annotator_id, bool)
        or not isinstance(annotator_id, int)
        or not 0 < annotator_id <= MAX_ID
    ):
        raise NotFound(f"no annotator {annotator_id!r} in project {project.slug!r}")
    membership = membership_lock(project_id=project.pk, user_id=annotator_id)
    if membership is None or membership.role not in ANNOTATORS:
        raise NotFound(f"no annotator {annotator_id} in project {project.slug!r}")
    if project.labelling_started_at is None:
        raise InvalidTransition("labelling has not started in this project")
    status = QualificationStatus.ADMITTED if admit else QualificationStatus.REFUSED
    now = timezone.now()
    qualification = Qualification.objects.filter(project=project, annotator_id=annotator_id).first()
    if qualification is None:
        policy = gold_reference_policy(project=project)
        result = qualification_agreement(
            project=project, actor=membership.user, k=policy.qualification_items
        )
        qualification = Qualification(
            project=project,
            annotator_id=annotator_id,
            policy=policy,
            items=result.items,
            agreed=result.agreed,
            compared=result.compared,
            evaluated_at=now,
        )
    qualification.status = status
    qualification.decided_by = actor
    qualification.decided_at = now
    qualification.decision_note = note
    qualification.full_clean(validate_unique=False, validate_constraints=False)
    qualification.save()
    logger.info(
        "qualification.decided",
        extra={
            "project_id": project.pk,
            "annotator_id": annotator_id,
            "actor_id": actor.pk if actor is not None else None,
            "status": status,
        },
    )
    return qualification
