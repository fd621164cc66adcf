"""The role check shared by the certification pages (calibration, audits, releases).

Certification pages summarise other people's labels (and audits and releases hold evaluator
labels): for annotators they do not exist (404, as for a non-member). Writes are for managers.
"""

from __future__ import annotations

from django.http import HttpRequest

from labeling import permissions
from labeling.models import Project
from labeling.views.common import project_for


def certification_project(
    request: HttpRequest, slug: str, *, manager_only: bool = False
) -> tuple[Project, str | None]:
    """Return the project of a certification page and the user's role.

    Adjudicators and managers see the page; a POST (every write) or a ``manager_only`` page is
    for managers.

    Raises:
        Http404: a non-member or an annotator (the page does not exist for them).
        PermissionDenied: an adjudicator on a write or a manager-only page (HTTP 403).
    """
    allowed = permissions.MANAGERS if manager_only or request.method == "POST" else None
    return project_for(request, slug, visible_to=permissions.REVIEWERS, allowed=allowed)
