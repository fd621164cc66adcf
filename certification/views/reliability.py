"""The per-person reliability page (managers only).

The figures name people and judge them: adjudicators get 403, annotators and non-members 404
(``certification_project(manager_only=True)``). The page reads the stored report; it never
computes (the report is recomputed in the background, its freshness shown at the top).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from certification.selectors import derived_freshness, reliability_report_get
from certification.views.common import certification_project
from labeling.models import DerivedKind
from labeling.views.common import page_context

LEVEL_TITLES = {"answer": "Answer labels", "claim": "Claim labels"}


def _model_rows(model: dict[str, Any] | None, names: dict[str, str]) -> list[dict[str, Any]]:
    """Per rater: the Dawid–Skene probability of each true label being answered correctly."""
    if not model or model.get("reason"):
        return []
    labels = model["labels"]
    return [
        {
            "name": names.get(rater, rater),
            "correct": [(label, matrix[j][j]) for j, label in enumerate(labels)],
        }
        for rater, matrix in model["confusion"].items()
    ]


@login_required
@require_http_methods(["GET", "HEAD"])
def reliability_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Show each annotator's figures and flags, alpha without the flagged, and the model."""
    project, role = certification_project(request, slug, manager_only=True)
    view = reliability_report_get(project=project)
    result = dict(view.result) if view else {}
    names = dict(view.names) if view else {}
    people = [
        {**person, "name": names.get(person["rater"], person["rater"])}
        for person in result.get("people", [])
    ]
    levels = [
        {
            "level": level,
            "title": title,
            "alpha": result.get("alpha", {}).get(level),
            "model": result.get("dawid_skene", {}).get(level),
            "model_rows": _model_rows(result.get("dawid_skene", {}).get(level), names),
            "left_out": [
                names.get(r, r) for r in result.get("alpha", {}).get(level, {}).get("left_out", [])
            ],
        }
        for level, title in LEVEL_TITLES.items()
    ]
    context = {
        "report": view,
        "result": result,
        "people": people,
        "levels": levels,
        "freshness": derived_freshness(project=project)[DerivedKind.RELIABILITY],
    }
    return render(request, "certification/reliability.html", page_context(project, role, **context))
