"""The RCCS report page: RCCS of a project's answers, computed now from the resolved labels.

Adjudicators and managers read it; annotators and non-members get 404. A project without
retrieval and confidence scores gets the page with the reason instead of figures.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from certification.exceptions import RCCSNotAvailable
from certification.forms import RCCSPartitionForm
from certification.selectors import rccs_report_get
from certification.views.common import certification_project
from labeling.views.common import page_context


@login_required
@require_GET
def rccs_report_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Show RCCS with its inputs and counts, or why there is none."""
    project, role = certification_project(request, slug)
    form = RCCSPartitionForm(request.GET or None)
    if form.is_bound and not form.is_valid():
        context = page_context(project, role, form=form, report=None, unavailable=None)
        return render(request, "certification/rccs_report.html", context, status=400)
    partition = (form.cleaned_data.get("partition") if form.is_bound else None) or None
    try:
        report, unavailable = rccs_report_get(project=project, partition=partition), None
    except RCCSNotAvailable as exc:
        report, unavailable = None, str(exc)
    context = page_context(project, role, form=form, report=report, unavailable=unavailable)
    return render(request, "certification/rccs_report.html", context)
