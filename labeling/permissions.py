"""Role checks of the labelling side, shared by the HTML views and the REST API.

A user's role in a project is their membership's role. Staff and superusers who are not members
act as managers (oversight: they see every project); a staff user who *is* a member keeps the
member's role, so a staff annotator stays blind to evaluator labels in the application.

The rules here are about *who may see or do what in a project*. Rules about objects (an item's
state, a frozen partition) stay in the services.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser

from labeling.exceptions import NotFound, PermissionDenied
from labeling.models import Membership, Project, Role

# Who may open the item browser. Annotators label in their own queue only; the browser would show
# them other items of the project, so for them it does not exist (404, not 403).
ITEM_BROWSER_ROLES: frozenset[str] = frozenset({Role.MANAGER, Role.ADJUDICATOR})
# Who may see evaluator labels and imported prior annotations with their dataset annotator ids and
# notes (never annotators, who see only their own work; adjudicators resolve human disagreements and
# must not be anchored by a machine's verdict). Adjudicators do see imported *human* votes, but only
# inside the side-by-side view, as pseudonymous "Annotator k" columns without notes: they are votes
# of the comparison, and an adjudicator cannot resolve a vote they cannot see.
LABEL_VIEWER_ROLES: frozenset[str] = frozenset({Role.MANAGER})
MANAGER_ROLES: frozenset[str] = frozenset({Role.MANAGER})


def is_overseer(user: Any) -> bool:
    """Return True for staff and superusers, who see every project."""
    return bool(getattr(user, "is_staff", False) or getattr(user, "is_superuser", False))


def project_role(*, user: Any, project: Project) -> str | None:
    """Return ``user``'s effective role in ``project``, or None when they have none.

    Uses the ``member_role`` annotation of ``labeling.selectors.project_get_for_user`` when present
    (no query); otherwise reads the membership.
    """
    if user is None or isinstance(user, AnonymousUser) or not user.is_authenticated:
        return None
    if hasattr(project, "member_role"):
        role = project.member_role
    else:
        role = (
            Membership.objects.filter(project=project, user=user)
            .values_list("role", flat=True)
            .first()
        )
    if role is None and is_overseer(user):
        return Role.MANAGER
    return role


def can_browse_items(role: str | None) -> bool:
    """Return True if ``role`` may open the item browser and item detail."""
    return role in ITEM_BROWSER_ROLES


def can_see_labels(role: str | None) -> bool:
    """Return True if ``role`` may see evaluator labels and prior annotations."""
    return role in LABEL_VIEWER_ROLES


def can_manage(role: str | None) -> bool:
    """Return True if ``role`` may import workloads and freeze the partition."""
    return role in MANAGER_ROLES


def require_item_browser(role: str | None) -> None:
    """Refuse the item browser to roles without it, as if the items did not exist.

    Raises:
        NotFound: ``role`` may not browse items.
    """
    if not can_browse_items(role):
        raise NotFound("not found")


def require_manager(role: str | None) -> None:
    """Refuse a manager-only operation to a member without the manager role.

    Raises:
        PermissionDenied: ``role`` is not manager.
    """
    if not can_manage(role):
        raise PermissionDenied("only a project manager may do this")
