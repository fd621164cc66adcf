"""Dashboard panels that other apps contribute to the project dashboard.

``labeling`` never imports ``certification``, yet the dashboard shows the agreement figures that
``certification`` computes. So, as with the ``items_resolved`` signal, the dependency points the
other way: ``certification`` registers a panel in its ``AppConfig.ready``::

    from labeling.views.panels import dashboard_panel_register

    dashboard_panel_register(
        name="agreement",
        template="certification/_agreement.html",
        context=lambda *, project, actor: {
            "agreement": agreement_report_get(project=project, actor=actor)
        },
    )

A panel is rendered for managers and adjudicators only by default (agreement figures summarise
other people's votes; annotators never see them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from labeling import permissions
from labeling.models import Project

# Roles that see a panel unless its registration says otherwise.
DEFAULT_PANEL_ROLES: frozenset[str] = permissions.REVIEWERS


@dataclass(frozen=True)
class DashboardPanel:
    """A template fragment with its context function and the roles that see it.

    ``context`` is called with keyword arguments ``project`` and ``actor`` (the viewing user).
    """

    name: str
    template: str
    context: Callable[..., Mapping[str, Any]]
    roles: frozenset[str]


_PANELS: dict[str, DashboardPanel] = {}


def dashboard_panel_register(
    *,
    name: str,
    template: str,
    context: Callable[..., Mapping[str, Any]],
    roles: Iterable[str] = DEFAULT_PANEL_ROLES,
) -> None:
    """Register (or replace, by ``name``) a dashboard panel; call it from ``AppConfig.ready``."""
    _PANELS[name] = DashboardPanel(
        name=name, template=template, context=context, roles=frozenset(roles)
    )


def dashboard_panels_render(
    *, request: HttpRequest, project: Project, role: str | None
) -> list[tuple[str, SafeString]]:
    """Render the panels ``role`` may see, in registration order, as (name, html) pairs."""
    return [
        (
            panel.name,
            render_to_string(
                panel.template,
                {
                    "project": project,
                    "role": role,
                    **panel.context(project=project, actor=request.user),
                },
                request=request,
            ),
        )
        for panel in _PANELS.values()
        if role in panel.roles
    ]
