"""The one role check of the API before a handler runs: :class:`ProjectRolePermission`.

Its own module, importing no view: DRF reads ``DEFAULT_PERMISSION_CLASSES`` while
``rest_framework.views`` is being imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from labeling import permissions
from labeling.selectors import project_get_for_user

if TYPE_CHECKING:
    from rest_framework.views import APIView

# Where ProjectRolePermission leaves the slug, project and role it checked, for
# ``labeling.api.common.project_and_role``.
CHECKED = "_certlabel_project_and_role"


class ProjectRolePermission(BasePermission):
    """The roles each method of a project endpoint needs, checked before the handler runs.

    A view declares them as ``project_roles``, e.g. ``{"POST": permissions.MANAGERS}`` (the
    sets of ``labeling.permissions``); a method it does not list is not checked here (its
    service or selector checks). The check is :func:`labeling.permissions.require_role`, the
    one the services call, run before the body is validated: a refused role answers 403 before
    a 400 would. A non-member gets 404 (``project_get_for_user``). Installed for every API view
    by ``DEFAULT_PERMISSION_CLASSES`` (after ``IsAuthenticated``: anonymous is 401 first).
    """

    def has_permission(self, request: Request, view: APIView) -> bool:
        """Resolve the project and check the role the method needs (raises when refused)."""
        wanted: Mapping[str, frozenset[str]] = getattr(view, "project_roles", {})
        # HEAD runs the GET handler (without its body): it needs the GET roles.
        method = "GET" if request.method == "HEAD" else request.method or ""
        roles = wanted.get(method)
        if roles is None:
            return True
        slug = view.kwargs["slug"]
        project = project_get_for_user(slug=slug, user=request.user)
        role = permissions.require_role(project=project, actor=request.user, roles=roles)
        setattr(request, CHECKED, (slug, project, role))
        return True
