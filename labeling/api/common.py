"""Pieces every labelling API module shares: the error body, paging, the project and role.

``certification.api`` uses them too (``labeling`` never imports ``certification``; the other
way round is allowed).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from rest_framework import serializers
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from labeling import permissions
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.api.permissions import CHECKED
from labeling.models import Project
from labeling.selectors import project_get_for_user


class ErrorSerializer(serializers.Serializer):
    """The body of every error response: ``{"detail", "code"}`` (labeling/api_errors.py).

    ``field`` names the input the error is about, when it names one.
    """

    detail = serializers.CharField()
    code = serializers.CharField()
    field = serializers.CharField(required=False)

    class Meta:
        ref_name = "Error"


def project_and_role(request: Request, slug: str) -> tuple[Project, str | None]:
    """Return the project ``slug`` as the requesting user sees it, and the user's role in it.

    The project that ``labeling.api.permissions.ProjectRolePermission`` resolved for the
    request is reused (no second query).

    Raises:
        ProjectNotFound: no such project, or the user is not a member (HTTP 404).
    """
    checked = getattr(request, CHECKED, None)
    if checked is not None and checked[0] == slug:
        return checked[1], checked[2]
    project = project_get_for_user(slug=slug, user=request.user)
    return project, permissions.project_role(user=request.user, project=project)


def paginated(
    request: Request,
    queryset: Any,
    serializer_class: type[serializers.Serializer],
    context: dict[str, Any] | None = None,
) -> Response:
    """Return one page (limit/offset, 50 by default) of ``queryset``, serialized."""
    paginator = CappedLimitOffsetPagination()
    page: list[Any] | None = paginator.paginate_queryset(queryset, request)
    data = serializer_class(page, many=True, context=context or {}).data
    return paginator.get_paginated_response(data)


def request_actor(request: Request) -> AbstractBaseUser:
    """Return the authenticated user of ``request``, the actor the services record.

    Raises:
        NotAuthenticated: an anonymous request (HTTP 401; every endpoint needs a login, so the
            permission classes have refused it already).
    """
    user = request.user
    if not isinstance(user, AbstractBaseUser):
        raise NotAuthenticated()
    return user
