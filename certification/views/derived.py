"""A manager's request, from a page, to recompute one kind of derived result."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from certification.services import derived_recompute_request
from certification.views.common import certification_project
from labeling.models import DerivedKind


@login_required
@require_http_methods(["POST"])
def derived_recompute_view(request: HttpRequest, slug: str, kind: str) -> HttpResponse:
    """Ask for a recomputation (managers), then go back to the page the button was on.

    ``next`` (a path on this site) is where to go back; the project dashboard otherwise.
    """
    project, _ = certification_project(request, slug, manager_only=True)
    derived_recompute_request(project=project, kind=kind, actor=request.user)
    messages.success(
        request,
        f"Recomputation of the {DerivedKind(kind).label} requested: the figures are marked "
        "stale until it has run.",
    )
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect("project-detail", slug=project.slug)
    return redirect(target)
