"""Reads of labelling work: an annotator's own assignments.

Scoped by project and actor: an annotator reads only their own assignments, and an id of
someone else's (or of another project) is reported as not found, never as forbidden.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from labeling.exceptions import NotFound
from labeling.models import Assignment, AssignmentStatus, Project


def _own_assignments(*, project: Project, actor: Any) -> QuerySet[Assignment]:
    user_id = getattr(actor, "pk", None) if getattr(actor, "is_authenticated", False) else None
    if user_id is None:
        return Assignment.objects.none()
    return Assignment.objects.filter(item__project=project, annotator_id=user_id).select_related(
        "item", "item__candidate", "item__candidate__question"
    )


def assignment_get_for_actor(*, project: Project, assignment_id: int, actor: Any) -> Assignment:
    """Return the actor's assignment ``assignment_id`` in ``project`` (any status).

    ``item``, its candidate and question are loaded with it (one query).

    Raises:
        NotFound: no such assignment, or it belongs to another annotator or project.
    """
    assignment = _own_assignments(project=project, actor=actor).filter(pk=assignment_id).first()
    if assignment is None:
        raise NotFound(f"assignment {assignment_id} not found")
    return assignment


def assignment_current_for_actor(*, project: Project, actor: Any) -> Assignment | None:
    """Return the actor's valid lease in ``project`` (the item they are working on), or None.

    A lease past its time is not current, even before the release task has run. Reads only:
    unlike ``item_claim_next`` it never claims or releases anything. One query.
    """
    return (
        _own_assignments(project=project, actor=actor)
        .filter(status=AssignmentStatus.LEASED, lease_expires_at__gt=timezone.now())
        .order_by("leased_at", "pk")
        .first()
    )
