"""Panels that other apps contribute to the project dashboard and the adjudication page.

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

Adjudication panels (:func:`adjudication_panel_register`) work the same way on the adjudication
page, which only adjudicators and managers reach and only once an item's blind votes are in:
``certification`` shows the Dawid–Skene posterior of the item there.
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


# ---------------------------------------------------------------------------------------------
# Adjudication panels: fragments shown beside the votes of a disagreement
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdjudicationPanel:
    """A template fragment shown on the adjudication page, below the votes side by side.

    ``context`` is called with keyword arguments ``project``, ``item_id`` and ``claim_ids``
    (the item's claims in order). The adjudication page exists only for an item whose blind
    votes are all in (it is in, or was decided out of, the disagreement queue) and only for
    adjudicators and managers, so a panel shows there what must never reach an annotator or be
    seen before the votes, such as a model's estimate of the item's label.
    """

    name: str
    template: str
    context: Callable[..., Mapping[str, Any]]


_ADJUDICATION_PANELS: dict[str, AdjudicationPanel] = {}


def adjudication_panel_register(
    *, name: str, template: str, context: Callable[..., Mapping[str, Any]]
) -> None:
    """Register (or replace, by ``name``) an adjudication panel (from ``AppConfig.ready``)."""
    _ADJUDICATION_PANELS[name] = AdjudicationPanel(name=name, template=template, context=context)


def adjudication_panels_render(
    *,
    request: HttpRequest,
    project: Project,
    item_id: int,
    claim_ids: tuple[int, ...],
    shared: Mapping[str, Any],
) -> list[tuple[str, SafeString]]:
    """Render every adjudication panel for one item, in registration order, as (name, html).

    ``shared``: what the page tells every panel besides its own context: ``label_texts`` (the
    policy's display text by label token) and ``voters_by_label`` (``{"answer" | claim id:
    {label: [pseudonym, ...]}}``, the side-by-side votes).
    """
    return [
        (
            panel.name,
            render_to_string(
                panel.template,
                {
                    "project": project,
                    **shared,
                    **panel.context(project=project, item_id=item_id, claim_ids=claim_ids),
                },
                request=request,
            ),
        )
        for panel in _ADJUDICATION_PANELS.values()
    ]
