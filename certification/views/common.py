"""Role checks shared by the certification pages (calibration, audits, releases).

Certification pages summarise other people's labels (and audits and releases hold evaluator
labels): for annotators they do not exist (404, as for a non-member). Writes are for managers.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404

from labeling import permissions
from labeling.views.common import can_adjudicate


def require_viewer(role: str | None) -> None:
    """Let adjudicators and managers through.

    Raises:
        Http404: any other role (the page does not exist for annotators).
    """
    if not can_adjudicate(role):
        raise Http404("no such page")


def require_manager(role: str | None) -> None:
    """Let managers through.

    Raises:
        PermissionDenied: any other role (HTTP 403).
    """
    if not permissions.can_manage(role):
        raise PermissionDenied("only a project manager may do this")
