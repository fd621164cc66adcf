"""Submitting and revising annotations.

An annotation is one annotator's judgement of one item, kept as append-only revisions: the first
submit creates the annotation and revision 1, a later submit with different content appends a
revision (``previous`` links the old one) and moves ``Annotation.current``; a submit with the
same content writes nothing (idempotent). A submit says which revision its labels were made on
(``AnnotationInput.based_on_revision``, 0 before the first submit, also when it says none); when
another session of the annotator saved a revision since, it is refused with ``StaleVersion``
carrying the current labels, so no revision replaces another unseen. Content is compared by the
sha256 of its canonical JSON (labels, reasons, boundary flags, evidence in code points, comment;
not the time spent, which a retried request measures anew).

Labels are checked (:func:`labeling.services.label_checks.labels_check`) against the project's
current labelling policy (its newest frozen version: answer labels, claim labels and unavailable
reasons) plus ``cannot_decide``, and record that version. A submit whose form was loaded under an
older version (``AnnotationInput.policy_version``) is refused with ``StaleVersion`` naming both
versions, never stored under the old one. Evidence is checked against the pinned source versions of
the item's question (:mod:`labeling.offsets`). Errors name the input field, e.g.
``claims[2].evidence[0].quote`` (``InvalidInput.field``).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.db import connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from labeling.derived import derived_mark
from labeling.exceptions import (
    InvalidInput,
    InvalidTransition,
    LeaseExpired,
    NotFound,
    StaleVersion,
)
from labeling.fingerprints import fingerprint
from labeling.importers.record_errors import echo
from labeling.locks import item_lock, project_label_writes_lock
from labeling.models import (
    MAX_ID,
    Annotation,
    AnnotationRevision,
    Assignment,
    AssignmentStatus,
    ClaimLabel,
    DerivedKind,
    EvidenceSpan,
    Item,
    ItemStatus,
    LabelPolicy,
    Project,
)
from labeling.permissions import ANNOTATORS, require_role
from labeling.rows import execute, insert, raw_first, select_rows
from labeling.selectors.review import labelling_policy_get
from labeling.services.claim_labels import claim_labels_json, claim_labels_write
from labeling.services.comparison import items_compare
from labeling.services.label_checks import AnnotationInput, CheckedLabels, labels_check
from labeling.services.vote_tally import vote_tally_refresh

logger = logging.getLogger(__name__)

# Claim labels that must cite at least one evidence span: a verdict on the source needs a quote.
# Client-measured time spent on one submit, in seconds: at most a day.
MAX_TIME_SPENT_SECONDS = 86_400
MAX_COMMENT_LENGTH = 10_000


def _invalid(field: str, reason: str) -> InvalidInput:
    return InvalidInput(reason, field=field)


def _check_extras(data: AnnotationInput) -> tuple[str, float | None]:
    comment = data.comment or ""
    if not isinstance(comment, str):
        raise _invalid("comment", "expected text")
    if len(comment) > MAX_COMMENT_LENGTH:
        raise _invalid("comment", f"at most {MAX_COMMENT_LENGTH} characters")
    if "\x00" in comment:
        raise _invalid("comment", "contains NUL (U+0000)")
    spent = data.time_spent_seconds
    if spent is not None:
        if isinstance(spent, bool) or not isinstance(spent, int | float):
            raise _invalid("time_spent_seconds", "expected a number of seconds")
        if not math.isfinite(spent) or not 0 <= spent <= MAX_TIME_SPENT_SECONDS:
            raise _invalid(
                "time_spent_seconds",
                f"expected 0 to {MAX_TIME_SPENT_SECONDS} seconds, got {echo(spent)}",
            )
        spent = float(spent)
    based_on = data.based_on_revision
    if based_on is not None and (
        isinstance(based_on, bool) or not isinstance(based_on, int) or not 0 <= based_on <= MAX_ID
    ):
        raise _invalid(
            "revision",
            f"expected a revision number (0 before the first submit), got {echo(based_on)}",
        )
    return comment, spent


def _item_touch(item: Item) -> None:
    """Bump the version (a state change) of ``item``, locked by the caller, here and in the row.

    The caller holds the item's lock (:func:`labeling.locks.item_lock`), so the row read with
    the lock is current and the vote count read afterwards is exact.
    """
    execute("UPDATE labeling_item SET version = version + 1 WHERE id = %s", [item.pk])
    item.version += 1


def _write_revision(
    *,
    annotation: Annotation,
    number: int,
    previous: AnnotationRevision | None,
    actor: Any,
    policy: LabelPolicy,
    labels: CheckedLabels,
    comment: str,
    time_spent: float | None,
    content: str,
) -> AnnotationRevision:
    [revision] = insert(
        [
            AnnotationRevision(
                annotation=annotation,
                number=number,
                previous=previous,
                created_by=actor,
                policy=policy,
                answer_label=labels.answer_label,
                answer_reason=labels.answer_reason,
                comment=comment,
                time_spent_seconds=time_spent,
                content_sha256=content,
            )
        ]
    )
    label_ids, evidence_ids = claim_labels_write(
        ClaimLabel,
        ("revision_id", "claim_id", "label", "reason", "boundary_error"),
        [
            ((revision.pk, c.claim_id, c.label, c.reason, c.boundary_error), c.evidence)
            for c in labels.claims
        ],
    )
    _cache_written(revision, labels, label_ids, evidence_ids)
    return revision


def _cache_written(
    revision: AnnotationRevision, labels: CheckedLabels, label_ids: list[int], span_ids: list[int]
) -> None:
    """Give the new revision its rows (ids as written) as prefetched relations.

    As ``prefetch_related`` leaves them (a queryset whose results are filled in), so the
    caller's response (``revision.claim_labels.all()``, ``label.evidence.all()``) is built from
    what was just written without reading it back; any other query on them still runs. The
    rows are in the models' own ordering: ``labels_check`` gives the claims by claim index and
    their spans sorted.
    """
    rows, new_span_id = [], iter(span_ids)
    for pk, c in zip(label_ids, labels.claims, strict=True):
        row = _stored(
            ClaimLabel,
            pk=pk,
            revision=revision,
            claim_id=c.claim_id,
            label=c.label,
            reason=c.reason,
            boundary_error=c.boundary_error,
        )
        spans = [
            _stored(EvidenceSpan, pk=next(new_span_id), claim_label=row, **e._asdict())
            for e in c.evidence
        ]
        row._prefetched_objects_cache = {
            "evidence": _filled(EvidenceSpan.objects.filter(claim_label=row), spans)
        }
        rows.append(row)
    revision._prefetched_objects_cache = {  # type: ignore[attr-defined]
        "claim_labels": _filled(ClaimLabel.objects.filter(revision=revision), rows)
    }


def _stored(model: type[Any], **values: Any) -> Any:
    """An instance of ``model`` as a stored row of the current database (as an insert leaves)."""
    row = model(**values)
    row._state.adding = False
    row._state.db = connection.alias
    return row


def _filled(queryset: QuerySet[Any], rows: list[Any]) -> QuerySet[Any]:
    """``queryset`` with ``rows`` as its results, as Django's prefetching stores a relation."""
    queryset._result_cache = rows
    queryset._prefetch_done = True  # type: ignore[attr-defined]
    return queryset


def _revision_json(revision: AnnotationRevision | None) -> dict[str, Any] | None:
    """The actor's own revision as the labelling form's ``current`` shows it (code points)."""
    if revision is None:
        return None
    claim_labels = ClaimLabel.objects.filter(revision=revision)
    return {
        "annotation_id": revision.annotation_id,
        "revision": revision.number,
        "answer_label": revision.answer_label,
        "answer_reason": revision.answer_reason,
        "comment": revision.comment,
        "claims": claim_labels_json(claim_labels, "boundary_error"),
    }


def _changed_elsewhere(based_on: int | None, current: AnnotationRevision | None) -> StaleVersion:
    """The refusal of a submit made on ``based_on`` while ``current`` is the newest revision.

    ``based_on`` None: the submit named no revision (a first submit, as far as it says).
    """
    number = current.number if current is not None else 0
    if based_on is None:
        message = (
            f"this annotation is already saved (revision {number}) and the submit named no "
            "revision: nothing was saved. Check the current labels and submit again with the "
            "revision they replace (If-Match or `revision`)"
        )
    else:
        message = (
            f"another session changed this annotation: your labels were made on revision "
            f"{based_on}, the current one is revision {number}; nothing was saved. Check the "
            "current labels and submit again"
        )
    return StaleVersion(
        message,
        field="revision",
        prefix=False,
        data={
            "based_on_revision": based_on or 0,
            "current_revision": number,
            "current": _revision_json(current),
        },
    )


def _policy_changed(project: Project, given: int, current: LabelPolicy) -> StaleVersion:
    """The refusal of a submit whose form was loaded under policy ``given`` (not current)."""
    return StaleVersion(
        f"the label policy of project {project.slug!r} changed: your form was loaded under "
        f"policy v{given}, labels are now made under policy v{current.version}; nothing was "
        "saved. Reload the form and label under the current policy",
        field="policy_version",
        prefix=False,
        data={"policy_version": given, "current_policy_version": current.version},
    )


def _policy_check(project: Project, given: Any, current: LabelPolicy) -> None:
    """Refuse ``given`` (the form's policy version) unless it is the current one.

    Raises:
        InvalidInput: ``given`` is not a version number (field ``policy_version``).
        StaleVersion: ``given`` is another version than ``current``.
    """
    if given is None:
        return
    if isinstance(given, bool) or not isinstance(given, int) or not 1 <= given <= MAX_ID:
        raise _invalid("policy_version", f"expected a policy version number, got {echo(given)}")
    if given != current.version:
        raise _policy_changed(project, given, current)


def _lease_over(assignment: Assignment) -> LeaseExpired | InvalidTransition:
    if assignment.status == AssignmentStatus.RETIRED:
        return InvalidTransition(
            "a new label policy version returned this item for labelling; your labels made "
            "under the earlier version are kept, and nothing was saved now. Take the next item "
            "to label it under the current policy",
            data={"assignment_status": assignment.status},
        )
    if assignment.status == AssignmentStatus.SKIPPED:
        return LeaseExpired(
            "you skipped this item and its slot was given back; your labels were not saved",
            data={"assignment_status": assignment.status},
        )
    return LeaseExpired(
        "your lease expired and the slot was given back; your labels were not saved",
        data={"assignment_status": assignment.status},
    )


@transaction.atomic
def annotation_submit(
    *, project: Project, assignment_id: int, actor: Any, data: AnnotationInput
) -> Annotation:
    """Submit (first time) or revise (later) the actor's annotation of an assigned item.

    The first submit of a leased assignment — even one past its expiry time that still holds
    its slot — creates the annotation and revision 1 and marks the assignment submitted. A
    later submit appends a revision when the content differs and returns the annotation
    unchanged when it is the same. When the item's submitted annotations plus its prior votes
    reach its overlap, the item is compared (:func:`labeling.services.comparison.items_compare`)
    in the same transaction. Once compared (consensus or disagreement alike) the item is closed:
    a revision is refused with ``InvalidTransition`` and nothing is compared again.

    Returns:
        The annotation (``current`` is its newest revision).

    Raises:
        NotFound: the actor is not a member, or the assignment is not theirs in this project.
        PermissionDenied: the actor is not an annotator of the project.
        InvalidTransition: labelling has not started, or the item's votes were already
            compared (a revision is possible only while the item is open), or the assignment
            was retired (a new policy version returned the item for labelling).
        LeaseExpired: the lease expired (or the item was skipped) and the slot was given back;
            nothing is saved.
        StaleVersion: ``data.based_on_revision`` (None: 0) is not the current revision
            (another session of the annotator saved one since); nothing is saved, and the
            error's ``data`` carries ``current_revision`` and the ``current`` labels. The same
            content as the current revision is not refused (a retry of a submit that was
            saved). Also (field
            ``policy_version``, ``data`` with ``policy_version`` and
            ``current_policy_version``) when ``data.policy_version`` is not the current
            labelling policy's version.
        InvalidInput: a label, reason, claim, evidence span, comment, time or revision number
            is invalid; the message and ``field`` name the field.

    Concurrency: opens its own transaction and first locks the Item row (the lock order of
    ``labeling/locks.py``: item, then its assignments), so a lease release, a skip, another
    submit of the item or a policy publication waits or has finished: the N-th submit sees
    every other one, a lease released before the lock is refused, and the labels are checked
    against the policy they are stored under. A submit of a live lease flips it by
    compare-and-set (no second read of the assignment).
    """
    # The assignment first: a member of another role holds none, so it is not found (404) for
    # them; a former annotator with an assignment is refused by role.
    # One plain statement (labeling/rows.py): every submit starts with it.
    assignment = raw_first(
        Assignment,
        "SELECT a.* FROM labeling_assignment a JOIN labeling_item i ON i.id = a.item_id "
        "WHERE a.id = %s AND i.project_id = %s",
        [assignment_id, project.pk],
    )
    if assignment is None or actor is None or assignment.annotator_id != actor.pk:
        raise NotFound(f"no assignment {assignment_id} of yours in project {project.slug!r}")
    require_role(project=project, actor=actor, roles=ANNOTATORS, action="submit annotations")
    # Lock order (labeling/locks.py): the project's label-write lock (a release freeze waits
    # for us, or we for it), the item, then its assignments. Under the item's lock no claim,
    # skip, lease release or other submit of this item runs, and no policy version is
    # published (publishing locks every item of the project): the policy read now is the one
    # the labels are checked and stored under.
    project_label_writes_lock(project.pk)
    item = item_lock(assignment.item_id)
    policy = labelling_policy_get(project=project)
    _policy_check(project, data.policy_version, policy)
    labels = labels_check(
        item=item,
        policy=policy,
        answer_label=data.answer_label,
        answer_reason=data.answer_reason,
        claims=data.claims,
        allow_cannot_decide=True,
    )
    comment, time_spent = _check_extras(data)
    content = fingerprint({**labels.canonical(), "comment": comment})
    write_args = {
        "project": project,
        "item": item,
        "actor": actor,
        "policy": policy,
        "labels": labels,
        "comment": comment,
        "time_spent": time_spent,
        "content": content,
        "based_on": data.based_on_revision,
    }
    # Compare-and-set on the status read before the lock: the first submit of a live lease
    # flips it here; one that changed meanwhile (released, skipped, submitted by another tab)
    # is read again and decided below.
    flipped = assignment.status == AssignmentStatus.LEASED and _submitted_flip(assignment)
    if not flipped:
        # Read under the lock: it may have been leased again (revived by a new claim) too.
        assignment.refresh_from_db(fields=["status", "submitted_at"])
        flipped = assignment.status == AssignmentStatus.LEASED and _submitted_flip(assignment)
    if flipped:
        return _first_submit(assignment=assignment, **write_args)
    if assignment.status == AssignmentStatus.SUBMITTED:
        return _revise(assignment=assignment, **write_args)
    logger.info(
        "annotation.submit_refused_lease_over",
        extra={"assignment": assignment.pk, "status": assignment.status},
    )
    raise _lease_over(assignment)


def _submitted_flip(assignment: Assignment) -> bool:
    """Mark a leased assignment submitted (compare-and-set on the status); return whether it was.

    The caller holds the item's lock; on SQLite, which locks no row, writers are serialised.
    """
    now = timezone.now()
    # Every first submit runs it: one plain statement (labeling/rows.py).
    flipped = execute(
        "UPDATE labeling_assignment SET status = %s, submitted_at = %s "
        "WHERE id = %s AND status = %s",
        [AssignmentStatus.SUBMITTED, now, assignment.pk, AssignmentStatus.LEASED],
    )
    if flipped:
        assignment.status, assignment.submitted_at = AssignmentStatus.SUBMITTED, now
    return bool(flipped)


def _collecting(assignment: Assignment) -> str:
    """The item status under which ``assignment`` may be submitted or revised.

    Gold work labels a gold item, which collects labels as long as it is gold; a vote labels
    an open item, until its votes are compared.
    """
    return ItemStatus.GOLD if assignment.gold else ItemStatus.OPEN


def _first_submit(
    *,
    project: Project,
    assignment: Assignment,
    actor: Any,
    policy: LabelPolicy,
    labels: CheckedLabels,
    comment: str,
    time_spent: float | None,
    content: str,
    based_on: int | None,
    item: Item,
) -> Annotation:
    """Write the first annotation of ``assignment``, which the caller has just flipped submitted."""
    if based_on is not None and based_on != 0:
        # Made on a revision that does not exist (yet): nothing of this assignment is stored.
        raise _changed_elsewhere(based_on, None)
    _item_touch(item)
    if item.status != _collecting(assignment):
        raise InvalidTransition(f"item {item.pk} is no longer collecting annotations")
    [annotation] = insert(
        [Annotation(item=item, annotator=actor, assignment=assignment, revision_count=0)]
    )
    revision = _write_revision(
        annotation=annotation,
        number=1,
        previous=None,
        actor=actor,
        policy=policy,
        labels=labels,
        comment=comment,
        time_spent=time_spent,
        content=content,
    )
    execute(
        "UPDATE labeling_annotation SET current_id = %s, revision_count = 1 WHERE id = %s",
        [revision.pk, annotation.pk],
    )
    annotation.current = revision
    annotation.revision_count = 1
    logger.info(
        "annotation.submitted",
        extra={"item": item.pk, "annotation": annotation.pk, "assignment": assignment.pk},
    )
    if assignment.gold:
        # Gold work is never a vote (nothing to compare, no agreement input), but it is an
        # input of the per-person accuracy on gold items.
        derived_mark(project_id=project.pk, kinds=[DerivedKind.RELIABILITY])
        return annotation
    # A new vote: the agreement and reliability figures are stale from this commit on.
    derived_mark(project_id=project.pk, kinds=[DerivedKind.AGREEMENT, DerivedKind.RELIABILITY])
    vote_tally_refresh(project=project, item_ids=[item.pk])
    # One plain statement (labeling/rows.py): every first submit counts the item's votes.
    [(submitted,)] = select_rows(
        "SELECT COUNT(*) FROM labeling_annotation n JOIN labeling_assignment a "
        "ON a.id = n.assignment_id WHERE n.item_id = %s AND a.status = %s",
        [item.pk, AssignmentStatus.SUBMITTED],
    )
    if submitted + item.prior_votes >= item.overlap:
        items_compare(project=project, item_ids=[item.pk], policy=policy)
    return annotation


def _revise(
    *,
    project: Project,
    assignment: Assignment,
    actor: Any,
    policy: LabelPolicy,
    labels: CheckedLabels,
    comment: str,
    time_spent: float | None,
    content: str,
    based_on: int | None,
    item: Item,
) -> Annotation:
    annotation = Annotation.objects.select_related("current").filter(assignment=assignment).first()
    if annotation is None or annotation.current is None:  # pragma: no cover - model invariant
        raise InvalidTransition(f"assignment {assignment.pk} is submitted but has no annotation")
    if annotation.current.content_sha256 == content:
        # The same content arrived twice at once; the other request wrote it.
        return annotation
    if (based_on or 0) != annotation.current.number:
        # Another session saved a revision since these labels were loaded: never replace it
        # unseen (checked under the item's lock, so two submits on one revision: one wins).
        raise _changed_elsewhere(based_on, annotation.current)
    _item_touch(item)
    if item.status != _collecting(assignment):
        # Closed for every annotator alike once the votes were compared, whether they agreed or
        # not: a rule that depended on the outcome would tell an annotator how the others voted.
        raise InvalidTransition(
            f"item {item.pk} is closed: its votes were compared, so annotations can no longer "
            "be revised"
        )
    previous = annotation.current
    revision = _write_revision(
        annotation=annotation,
        number=annotation.revision_count + 1,
        previous=previous,
        actor=actor,
        policy=policy,
        labels=labels,
        comment=comment,
        time_spent=time_spent,
        content=content,
    )
    Annotation.objects.filter(pk=annotation.pk).update(
        current=revision, revision_count=F("revision_count") + 1
    )
    annotation.refresh_from_db()
    if assignment.gold:
        derived_mark(project_id=project.pk, kinds=[DerivedKind.RELIABILITY])
    else:
        derived_mark(project_id=project.pk, kinds=[DerivedKind.AGREEMENT, DerivedKind.RELIABILITY])
        vote_tally_refresh(project=project, item_ids=[item.pk])
    logger.info(
        "annotation.revised",
        extra={"item": item.pk, "annotation": annotation.pk, "revision": revision.number},
    )
    return annotation
