"""New label policy versions after labelling started, and items returned for labelling.

Version v+1 is checked by :func:`labeling.services.policies.policy_description_check` and frozen
when published: from that commit every new label records v+1; labels made under v keep v (nothing
is rewritten). **Votes are never pooled across versions**: publishing restarts every open item
that holds votes under v (its submitted assignments are retired, its prior votes stop counting,
and a stale form's submit is refused), leaves open items without votes alone, and for items whose
votes are complete does what the manager chose, ``keep`` (their ``version`` is bumped, so a form
opened under v is refused) or ``reopen`` (a restart; the latest resolution stays the item's
``resolution`` until the new round supersedes it). Agreement, release and calibration figures
count each version's votes apart (:func:`labeling.selectors.votes.project_votes_by_version`).
The rules in full: docs/labelling.md ("Label policy versions").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from labeling.derived import derived_mark
from labeling.exceptions import InvalidInput, InvalidTransition, PermissionDenied, StaleVersion
from labeling.importers.record_errors import echo
from labeling.locks import items_lock, project_label_writes_lock, project_lock
from labeling.models import (
    MAX_ID,
    Assignment,
    AssignmentStatus,
    Disagreement,
    Item,
    ItemStatus,
    LabelPolicy,
    Project,
)
from labeling.permissions import MANAGERS, require_role
from labeling.rows import chunks
from labeling.selectors.policies import policy_description_data
from labeling.selectors.review import labelling_policy_get
from labeling.services.policies import policy_description_check

logger = logging.getLogger(__name__)

MAX_CHANGE_NOTE_LENGTH = 10_000
LOCK_CHUNK = 1000


class Resolved:
    """What publishing does with items whose votes are complete under the old version."""

    KEEP = "keep"
    REOPEN = "reopen"
    CHOICES: tuple[str, ...] = (KEEP, REOPEN)


# The fields of a policy description (labeling.services.policies), in the order the diff
# lists them.
CONTENT_FIELDS: tuple[str, ...] = (
    "evidence_relation",
    "answer_labels",
    "claim_labels",
    "answer_scale",
    "claim_scale",
    "unavailable_reasons",
    "guideline",
    "gold_rate",
    "qualification_required",
    "qualification_items",
    "qualification_threshold",
)


@dataclass(frozen=True)
class FieldChange:
    """One changed field of a policy description, with its old and new value.

    For a list of labels or reasons (rows keyed by ``value``): ``added`` / ``removed`` are the
    values only in the new / old list, ``changed`` the values in both whose row differs (display
    text, description, key, evidence rule), each in list order; a list that only changed order
    has all three empty. All empty for a text field.
    """

    field: str
    old: Any
    new: Any
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """Return the change as JSON-able data (the API's and the page's shape)."""
        return {
            "field": self.field,
            "old": self.old,
            "new": self.new,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
        }


def policy_content(policy: LabelPolicy) -> dict[str, Any]:
    """Return the full description of ``policy`` (defaults filled in), as the check returns it.

    The shape of :func:`labeling.selectors.policies.policy_description_data`, normalised by
    :func:`labeling.services.policies.policy_description_check`, so two versions compare field
    by field whatever details they store.
    """
    return policy_description_check(policy_description_data(policy)).data()


def _rows(value: Any) -> dict[str, Any] | None:
    """Rows of a label or reason list by value, or None when ``value`` is not such a list."""
    if not isinstance(value, list) or not all(
        isinstance(row, Mapping) and "value" in row for row in value
    ):
        return None
    return {row["value"]: row for row in value}


def policy_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """Return the fields that differ between two policy descriptions, in field order."""
    changes = []
    for name in CONTENT_FIELDS:
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        old_rows, new_rows = _rows(before), _rows(after)
        if old_rows is None or new_rows is None:
            changes.append(FieldChange(name, before, after))
            continue
        changes.append(
            FieldChange(
                name,
                before,
                after,
                added=tuple(v for v in new_rows if v not in old_rows),
                removed=tuple(v for v in old_rows if v not in new_rows),
                changed=tuple(v for v in new_rows if v in old_rows and new_rows[v] != old_rows[v]),
            )
        )
    return tuple(changes)


@dataclass(frozen=True)
class PolicyPublication:
    """The result (or, with ``dry_run``, the preview) of :func:`policy_version_publish`.

    ``policy`` is the new version (None for a dry run); ``version`` its number. ``restarted``
    counts the open items that held votes under the old version (always returned for
    labelling); ``reopened`` the resolved or disputed items returned by the ``reopen`` choice;
    ``kept`` those left as they are by ``keep``.
    """

    policy: LabelPolicy | None
    previous_version: int
    version: int
    diff: tuple[FieldChange, ...]
    resolved: str
    restarted: int
    reopened: int
    kept: int
    dry_run: bool


def _voted_open_items(project: Project) -> Any:
    """Open items of ``project`` holding votes of their current round (submitted or prior)."""
    submitted = Assignment.objects.filter(item=OuterRef("pk"), status=AssignmentStatus.SUBMITTED)
    return Item.objects.filter(project=project, status=ItemStatus.OPEN).filter(
        Q(prior_votes__gt=0) | Exists(submitted)
    )


def _complete_items(project: Project) -> Any:
    """Items of ``project`` whose votes were compared: resolved or in the disagreement queue."""
    return Item.objects.filter(
        project=project, status__in=[ItemStatus.RESOLVED, ItemStatus.DISAGREEMENT]
    )


def _ids(queryset: Any) -> list[int]:
    return list(queryset.order_by("pk").values_list("pk", flat=True))


def items_return_for_labelling(*, project: Project, item_ids: Sequence[int], now: datetime) -> int:
    """Return items to labelling in a new round; return how many were returned.

    For each item of ``project`` among ``item_ids``: its submitted assignments become
    ``retired`` (the rows, their annotations and revisions are kept as they are; they hold no
    slot and no longer count as votes of the item), its imported prior votes stop counting
    (``prior_votes`` 0), its open disagreement is closed without a decision, and it becomes
    ``open`` with ``assigned_count`` equal to its leases in flight (they keep their slots), its
    ``version`` bumped. Its latest resolution stays ``Item.resolution`` until the new round's
    resolution supersedes it. Marks every derived result of the project stale.

    Not a public entry point: the caller holds the transaction, the project's label-write lock
    and the locks of the items (:func:`labeling.locks.items_lock`, ascending id).
    """
    ids = sorted(set(item_ids))
    if not ids:
        return 0
    Assignment.objects.filter(item_id__in=ids, status=AssignmentStatus.SUBMITTED).update(
        status=AssignmentStatus.RETIRED
    )
    leased = (
        Assignment.objects.filter(item=OuterRef("pk"), status=AssignmentStatus.LEASED)
        .order_by()
        .values("item")
        .annotate(n=Count("pk"))
        .values("n")
    )
    returned = Item.objects.filter(project=project, pk__in=ids).update(
        status=ItemStatus.OPEN,
        assigned_count=Coalesce(Subquery(leased, output_field=IntegerField()), 0),
        prior_votes=0,
        version=F("version") + 1,
    )
    Disagreement.objects.filter(item_id__in=ids, closed_at__isnull=True).update(closed_at=now)
    derived_mark(project_id=project.pk)
    return returned


def _note_check(note: Any) -> str:
    if not isinstance(note, str) or not note.strip():
        raise InvalidInput("say what changed and why: a change note is required", field="note")
    if len(note) > MAX_CHANGE_NOTE_LENGTH:
        raise InvalidInput(f"at most {MAX_CHANGE_NOTE_LENGTH} characters", field="note")
    if "\x00" in note:
        raise InvalidInput("contains NUL (U+0000)", field="note")
    return note.strip()


@transaction.atomic
def policy_version_publish(
    *,
    project: Project,
    actor: Any,
    content: Mapping[str, Any],
    note: Any,
    based_on_version: Any,
    resolved: str = Resolved.KEEP,
    dry_run: bool = False,
) -> PolicyPublication:
    """Publish version v+1 of the project's labelling policy (v: the current, frozen version).

    Args:
        project: the project; labelling must have started.
        actor: a manager of the project.
        content: the new version's full policy description, checked by the rules of every
            policy (:func:`labeling.services.policies.policy_description_check`).
        note: the change note (what changed and why), required.
        based_on_version: the version the manager saw (v); another current version refuses.
        resolved: ``keep`` or ``reopen``: what happens to items whose votes are complete
            (see the module docstring).
        dry_run: check everything and return the diff and counts, writing nothing.

    Returns:
        A :class:`PolicyPublication` (the new policy, or the preview for a dry run).

    Raises:
        NotFound: ``actor`` is not a member of the project.
        PermissionDenied: ``actor`` is not a manager of the project.
        InvalidTransition: labelling has not started (edit the draft policy instead).
        StaleVersion: ``based_on_version`` is not the current version (someone published
            since); ``data`` carries ``based_on_version`` and ``current_policy_version``.
        InvalidInput: no change, a missing note, an unknown ``resolved`` choice or an invalid
            description (the error names the field; ``data["errors"]`` lists every problem).

    Concurrency: opens its own transaction; takes the project's label-write lock, the Project
    row (``FOR NO KEY UPDATE``), then every item of the project in ascending id order (the order of
    ``labeling/locks.py``), so a submit, claim or adjudication of any item either commits before
    the new version or runs after it and sees it (submits and decisions re-read the policy
    under their item's lock). Two publishes run one after the other; the second is refused as
    stale if it was based on the version the first replaced.
    """
    require_role(project=project, actor=actor, roles=MANAGERS, outsider=PermissionDenied)
    if resolved not in Resolved.CHOICES:
        raise InvalidInput(
            f"{echo(resolved)} is not one of {list(Resolved.CHOICES)}", field="resolved"
        )
    text = _note_check(note)
    if (
        isinstance(based_on_version, bool)
        or not isinstance(based_on_version, int)
        or not 1 <= based_on_version <= MAX_ID
    ):
        raise InvalidInput(
            f"expected the policy version the change is based on, got {echo(based_on_version)}",
            field="based_on_version",
        )
    project_label_writes_lock(project.pk)
    # FOR NO KEY UPDATE: two publishes run one after the other, while a submit holding an item's
    # lock may still insert rows pointing at the project (a staleness mark) and finish; FOR
    # UPDATE would make it wait for this transaction, which waits for its item: a deadlock.
    if project_lock(project.pk, no_key=True).labelling_started_at is None:
        raise InvalidTransition(
            f"labelling has not started in project {project.slug!r}: edit its draft policy instead"
        )
    current = labelling_policy_get(project=project)
    if based_on_version != current.version:
        raise StaleVersion(
            f"the label policy of project {project.slug!r} is at v{current.version}, not "
            f"v{based_on_version}: someone published since; review the current version first",
            field="based_on_version",
            data={"based_on_version": based_on_version, "current_policy_version": current.version},
        )
    checked = policy_description_check(content)
    diff = policy_diff(policy_content(current), checked.data())
    if not diff:
        raise InvalidInput(
            f"the content is the same as v{current.version}: nothing to publish", field="content"
        )
    restart_ids = _ids(_voted_open_items(project))
    complete_ids = _ids(_complete_items(project))
    reopen_ids = complete_ids if resolved == Resolved.REOPEN else []
    kept = len(complete_ids) - len(reopen_ids)
    if dry_run:
        return PolicyPublication(
            policy=None,
            previous_version=current.version,
            version=current.version + 1,
            diff=diff,
            resolved=resolved,
            restarted=len(restart_ids),
            reopened=len(reopen_ids),
            kept=kept,
            dry_run=True,
        )
    for chunk in chunks(_ids(Item.objects.filter(project=project)), LOCK_CHUNK):
        items_lock(chunk)
    # Under the item locks the sets are exact: recompute them (a submit may have committed).
    restart_ids = _ids(_voted_open_items(project))
    complete_ids = _ids(_complete_items(project))
    reopen_ids = complete_ids if resolved == Resolved.REOPEN else []
    now = timezone.now()
    newest = project.policies.order_by("-version").first() or current
    policy = LabelPolicy.objects.create(
        project=project,
        version=newest.version + 1,
        previous=newest,
        frozen_at=now,
        change_note=text,
        published_by=actor,
        **checked.model_fields(),
    )
    items_return_for_labelling(project=project, item_ids=restart_ids + reopen_ids, now=now)
    # An adjudication form opened under v carries the item's version: bump the items kept, so a
    # decision made on what v offered is refused as stale and made again under v+1.
    Item.objects.filter(pk__in=[pk for pk in complete_ids if pk not in set(reopen_ids)]).update(
        version=F("version") + 1
    )
    # Every derived result names the versions it includes: all are stale from this commit.
    derived_mark(project_id=project.pk)
    logger.info(
        "policy.version_published",
        extra={
            "project_id": project.pk,
            "actor_id": getattr(actor, "pk", None),
            "policy_version": policy.version,
            "previous_version": current.version,
            "changed_fields": [c.field for c in diff],
            "resolved": resolved,
            "restarted": len(restart_ids),
            "reopened": len(reopen_ids),
        },
    )
    return PolicyPublication(
        policy=policy,
        previous_version=current.version,
        version=policy.version,
        diff=diff,
        resolved=resolved,
        restarted=len(restart_ids),
        reopened=len(reopen_ids),
        kept=len(complete_ids) - len(reopen_ids),
        dry_run=False,
    )
