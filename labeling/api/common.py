"""Pieces every labelling API module shares: the error body, paging, the project and role.

``certification.api`` uses them too (``labeling`` never imports ``certification``; the other
way round is allowed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from rest_framework import serializers
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from labeling import permissions
from labeling.api.pagination import CappedLimitOffsetPagination
from labeling.api.permissions import CHECKED
from labeling.models import Project
from labeling.selectors import project_get_for_user

T = TypeVar("T")


class ErrorItemSerializer(serializers.Serializer):
    """One input at fault: ``field`` (a dotted path or a parameter; null: the whole request)."""

    field = serializers.CharField(
        allow_null=True, help_text='e.g. "claims[1].evidence[0].quote", "limit"; null: none.'
    )
    reason = serializers.CharField()

    class Meta:
        ref_name = "ErrorItem"


class ErrorSerializer(serializers.Serializer):
    """The body of every error response under /api/ (labeling/api_errors.py).

    ``errors`` lists each input at fault (DRF's field errors, an import's refused records with
    their ``location``); ``field`` names the input a domain error is about, when it names one;
    a domain error may add further keys (e.g. the current version of a stale object).
    """

    detail = serializers.CharField()
    code = serializers.CharField(help_text="Stable and machine-readable: one of the enum.")
    errors = ErrorItemSerializer(many=True)  # type: ignore[assignment]
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


# One bound instance per serializer class, for represent().
_representers: dict[type[serializers.Serializer], serializers.Serializer] = {}


def represent(serializer_class: type[serializers.Serializer], instance: Any) -> dict[str, Any]:
    """Return ``serializer_class(instance).data``, from one instance of the class per process.

    Making a serializer deep-copies every declared field of it and of its nested serializers;
    for the labelling form that is about a millisecond of CPU, more than the rest of the
    serialization. An output serializer without context keeps no state of its own while it
    represents an instance (``to_representation`` only reads its bound fields), so one
    instance serves every request and thread. Only for such serializers: never one that
    validates input or reads ``context``.
    """
    serializer = _representers.get(serializer_class)
    if serializer is None:
        serializer = _representers.setdefault(serializer_class, serializer_class())
    return serializer.to_representation(instance)


def written(write: Callable[[], T], render: Callable[[T], Any]) -> Any:
    """Run a write and build its response body in the same transaction; return the body.

    The body is read before the commit, so a committed write is never answered with an error
    because a read after the commit failed (a database that went away in between): either
    nothing was written and the client gets the error (a 503 for an outage), or it was and
    the client gets the body. ``render`` must return plain data (a serializer's ``.data``),
    not a lazy queryset. The service's own ``transaction.atomic`` becomes a savepoint, and its
    ``on_commit`` callbacks run when this transaction commits.
    """
    with transaction.atomic():
        result = write()
        return render(result)
