"""Pieces the certification API modules share (``labeling.api.common`` has the rest)."""

from __future__ import annotations

from rest_framework.request import Request

from labeling.models import Project
from labeling.selectors import project_get_for_user
from labeling.selectors.review import require_adjudicator


def viewer(request: Request, slug: str) -> tuple[Project, str]:
    """Return the project ``slug`` and the requesting user's role, an adjudicator's or above.

    Raises:
        ProjectNotFound: no such project, or the user is not a member (HTTP 404).
        PermissionDenied: the user is an annotator (HTTP 403).
    """
    project = project_get_for_user(slug=slug, user=request.user)
    role = require_adjudicator(project=project, actor=request.user)
    return project, role
