"""Helpers shared by the HTML views: project and role resolution, page context, form errors."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from labeling import permissions
from labeling.exceptions import LabelingError
from labeling.models import Project
from labeling.selectors import project_get_for_user

# The form field of a nested input name: ``thresholds[3]`` and ``runs[0]`` are the fields
# ``thresholds`` and ``runs``; ``claims[2].evidence[0].quote`` is ``claims``.
_FIELD_ROOT = re.compile(r"^[^[.]+")


def project_for(
    request: HttpRequest,
    slug: str,
    *,
    visible_to: frozenset[str] | None = None,
    allowed: frozenset[str] | None = None,
) -> tuple[Project, str | None]:
    """Return the project ``slug`` visible to the user and the user's role.

    The one role check of the pages, before a form is read (a refused role is 403 before a
    400), with :func:`labeling.permissions.require_role`, the services' own check. A non-member
    gets 404 (not 403): they learn nothing about the project's existence.

    Args:
        request: the request.
        slug: the project's slug.
        visible_to: the roles for whom the page exists; any other member gets 404.
        allowed: the roles who may use it; any other member gets 403.

    Raises:
        NotFound: no such project, the user is not a member, or not one of ``visible_to``: a
            404 page (``labeling/views/errors.py``), so they learn nothing of its existence.
        PermissionDenied: a member not among ``allowed``: a 403 page.
    """
    project = project_get_for_user(slug=slug, user=request.user)
    if visible_to is not None:
        permissions.require_role(project=project, actor=request.user, roles=visible_to, hidden=True)
    if allowed is not None:
        permissions.require_role(project=project, actor=request.user, roles=allowed)
    return project, permissions.project_role(user=request.user, project=project)


def signed_in_user(request: HttpRequest) -> AbstractBaseUser:
    """Return the request's user, who must be signed in (the views are ``login_required``)."""
    user = request.user
    if not isinstance(user, AbstractBaseUser) or not user.is_authenticated:
        raise PermissionDenied("sign in first")
    return user


def can_adjudicate(role: str | None) -> bool:
    """Return True if ``role`` may open the disagreement queue (adjudicators and managers)."""
    return permissions.can_review(role)


def can_annotate(role: str | None) -> bool:
    """Return True if ``role`` claims items to label (annotators only, as ``item_claim_next``)."""
    return permissions.can_annotate(role)


def wants_json(request: HttpRequest) -> bool:
    """Return True if the request asks for a JSON answer (``Accept: application/json``).

    Page scripts submit forms with ``fetch`` and that header; a plain form post (no script)
    gets the HTML answer.
    """
    return "application/json" in request.headers.get("Accept", "")


def page_context(project: Project, role: str | None, **extra: Any) -> dict[str, Any]:
    """Return the context every project page needs (the navigation reads the role flags)."""
    return {
        "project": project,
        "role": role,
        "can_manage": permissions.can_manage(role),
        "can_browse_items": permissions.can_browse_items(role),
        "can_adjudicate": can_adjudicate(role),
        "can_annotate": can_annotate(role),
        **extra,
    }


def form_field_of(form: forms.Form, error: LabelingError) -> str | None:
    """Return the form field ``error`` is about: its ``field``, or that name's root, or None.

    A dotted name may be one form field written with an underscore (``loss.field`` is the
    input ``loss_field``). None (the whole form) when the error names no field or one the form
    does not have.
    """
    if not error.field:
        return None
    for name in (error.field, error.field.replace(".", "_")):
        if name in form.fields:
            return name
    root = _FIELD_ROOT.match(error.field)
    return root.group(0) if root and root.group(0) in form.fields else None


def form_add_domain_error(form: forms.Form, error: LabelingError) -> None:
    """Attach a service error to the form field it names (``error.field``), or to the form."""
    form.add_error(form_field_of(form, error), error.message)
