"""Role checks of the labelling side, shared by the HTML views and the REST API.

A user's role in a project is their active membership's role (a deactivated member has none).
Staff and superusers who are not members act as managers (oversight: they see every project);
a staff user who *is* a member keeps the member's role, so a staff annotator stays blind to
evaluator labels in the application.

The rules here are about *who may see or do what in a project*. Rules about objects (an item's
state, a frozen partition) stay in the services. Every service that needs a role calls
:func:`require_role` itself; the adapters check the same sets before validating a body (a
refused role is 403 before a 400), through ``labeling.api.permissions.ProjectRolePermission`` and
``labeling.views.common.project_for``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser

from labeling.exceptions import LabelingError, NotFound, PermissionDenied
from labeling.models import Membership, Project, Role

# The role sets, each defined here once; every check in the code base names one of them.
ANNOTATORS: frozenset[str] = frozenset({Role.ANNOTATOR})
#: Adjudicators and managers: the disagreement queue, the progress counts, the certification
#: pages (agreement, calibration, audits, releases) and the default dashboard panels.
REVIEWERS: frozenset[str] = frozenset({Role.ADJUDICATOR, Role.MANAGER})
MANAGERS: frozenset[str] = frozenset({Role.MANAGER})

# Who may open the item browser. Annotators label in their own queue only; the browser would show
# them other items of the project, so for them it does not exist (404, not 403).
ITEM_BROWSER_ROLES: frozenset[str] = REVIEWERS
# Who may see evaluator labels and imported prior annotations with their dataset annotator ids and
# notes (never annotators, who see only their own work; adjudicators resolve human disagreements and
# must not be anchored by a machine's verdict). Adjudicators do see imported *human* votes, but only
# inside the side-by-side view, as pseudonymous "Annotator k" columns (no dataset annotator id)
# with the votes' notes beside them: they are votes of the comparison, and an adjudicator cannot
# resolve a vote they cannot see nor weigh a rationale they cannot read.
LABEL_VIEWER_ROLES: frozenset[str] = MANAGERS

_ROLE_NAMES: dict[str, str] = {
    Role.ANNOTATOR: "an annotator of this project",
    Role.ADJUDICATOR: "an adjudicator",
    Role.MANAGER: "a project manager",
}


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
            Membership.objects.filter(project=project, user=user, is_active=True)
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


def can_create_projects(user: Any) -> bool:
    """Return True if ``user`` may create projects (and so become their first manager).

    Staff and superusers may; so may a user holding the ``labeling.add_project`` permission
    (given in the Django admin, to the user or a group), and, when the setting
    ``CERTLABEL_ANYONE_CREATES_PROJECTS`` is true, every signed-in user.
    """
    if user is None or isinstance(user, AnonymousUser) or not user.is_authenticated:
        return False
    if is_overseer(user) or bool(getattr(settings, "CERTLABEL_ANYONE_CREATES_PROJECTS", False)):
        return True
    return bool(user.has_perm("labeling.add_project"))


def can_manage(role: str | None) -> bool:
    """Return True if ``role`` may import workloads and freeze the partition."""
    return role in MANAGERS


def can_review(role: str | None) -> bool:
    """Return True if ``role`` may adjudicate and read the certification pages."""
    return role in REVIEWERS


def can_annotate(role: str | None) -> bool:
    """Return True if ``role`` claims items to label (annotators only)."""
    return role in ANNOTATORS


def require_role(
    *,
    project: Project,
    actor: Any,
    roles: frozenset[str],
    action: str = "do this",
    hidden: bool = False,
    outsider: type[LabelingError] = NotFound,
) -> str | None:
    """Refuse ``actor`` unless their effective role in ``project`` is one of ``roles``.

    The one permission check of the services (and of the adapters' checks before validation,
    which call it too). ``actor=None`` is the command line or another trusted caller of the
    system (a task): it is allowed and there is no role.

    Args:
        project: the project the operation is in.
        actor: the requesting user, or None for the command line.
        roles: the roles allowed (one of the sets above).
        action: what is refused, for the message ("only a project manager may <action>").
        hidden: refuse a member of another role as if the object did not exist (NotFound).
        outsider: the error for an actor who is not a member: NotFound (the default) hides the
            project's existence; the services a caller reaches only through a project already
            resolved for the user say PermissionDenied.

    Returns:
        The actor's role, or None for ``actor=None``.

    Raises:
        NotFound: ``actor`` is not a member (nor staff), unless ``outsider`` says otherwise; or,
            with ``hidden``, their role is not in ``roles``.
        PermissionDenied: ``actor`` is a member whose role is not in ``roles``.
    """
    if actor is None:
        return None
    role = project_role(user=actor, project=project)
    if role in roles:
        return role
    if hidden or (role is None and outsider is NotFound):
        raise NotFound(f"no project {project.slug!r}")
    names = " or ".join(_ROLE_NAMES[r] for r in Role.values if r in roles)
    refused = f"only {names} may {action}"
    raise PermissionDenied(refused) if role is not None else outsider(refused)


def require_item_browser(role: str | None) -> None:
    """Refuse the item browser (its list and item pages) to roles without it.

    Raises:
        PermissionDenied: ``role`` (a member's, e.g. an annotator's) may not browse items, as
            for every other list a member's role does not reach.
    """
    if not can_browse_items(role):
        raise PermissionDenied("browsing the project's items needs the adjudicator or manager role")
