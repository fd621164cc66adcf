"""Pieces the certification API modules share (``labeling.api.common`` has the rest)."""

from __future__ import annotations

from rest_framework.request import Request

from labeling import permissions
from labeling.api.common import project_and_role
from labeling.models import Project

#: The ``project_roles`` of a certification endpoint (``labeling.api.permissions.
#: ProjectRolePermission``): the pages summarise other people's labels, so adjudicators and
#: managers read, annotators get 403; writes are for managers.
READ_REVIEWERS_WRITE_MANAGERS: dict[str, frozenset[str]] = {
    "GET": permissions.REVIEWERS,
    "POST": permissions.MANAGERS,
    "PATCH": permissions.MANAGERS,
}


def viewer(request: Request, slug: str) -> tuple[Project, str | None]:
    """Return the project ``slug`` and the requesting user's role, checked by the view's roles.

    Raises:
        ProjectNotFound: no such project, or the user is not a member (HTTP 404).
    """
    return project_and_role(request, slug)
