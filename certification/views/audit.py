"""Evaluator audit pages: one audit per evaluator version, against the resolved human labels.

Managers declare an audit and read it; adjudicators read only (403 on writes); annotators never
see evaluator labels, so these pages do not exist for them (404); non-members get 404, and so
does another project's evaluator (``NotFound`` raised through to ``labeling/views/errors.py``).
"""

from __future__ import annotations

import csv
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods

from certification.exceptions import AuditNotConfigured
from certification.forms import AuditDeclarationForm, AuditSampleForm, AuditTargetForm
from certification.models import AuditReport, AuditSample
from certification.selectors import (
    audit_report_get,
    audit_result_for_viewer,
    audit_sample_view,
    derived_freshness,
    evaluator_audit_list,
    evaluator_get,
)
from certification.services import audit_report_configure, audit_sample_draw
from certification.services.audit import audit_target_set
from certification.views.common import certification_project
from labeling.exceptions import LabelingError
from labeling.models import DerivedKind, Evaluator, Project
from labeling.release_format import csv_cell
from labeling.views.common import form_add_domain_error, page_context

METRIC_ROWS = (
    ("accuracy", "Accuracy"),
    ("sensitivity", "Sensitivity TP/(TP+FN)"),
    ("specificity", "Specificity TN/(TN+FP)"),
    ("ppv", "PPV TP/(TP+FP)"),
    ("npv", "NPV TN/(TN+FN)"),
    ("human_positive_rate", "Human positive rate"),
    ("evaluator_positive_rate", "Evaluator positive rate"),
)


def _report_or_none(project: Project, evaluator: Evaluator) -> AuditReport | None:
    try:
        return audit_report_get(project=project, evaluator=evaluator)
    except AuditNotConfigured:
        return None


def heatmap(matrix: dict[str, Any]) -> dict[str, Any]:
    """The confusion matrix as rows of (count, shade) cells.

    The shade is the count's share of the maximum in tenths (0 to 10), drawn by the CSS classes
    ``shade-0`` to ``shade-10`` (the Content-Security-Policy allows no inline style).
    """
    counts = matrix.get("counts") or []
    peak = max((c for row in counts for c in row), default=0) or 1
    return {
        "columns": matrix.get("human_labels") or [],
        "rows": [
            (label, [(c, round(10 * c / peak)) for c in row])
            for label, row in zip(matrix.get("evaluator_labels") or [], counts, strict=True)
        ],
    }


def _metric_rows(metrics: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(title, metrics[key]) for key, title in METRIC_ROWS if key in metrics]


@login_required
@require_http_methods(["GET", "HEAD"])
def audit_list(request: HttpRequest, slug: str) -> HttpResponse:
    """List the project's evaluator versions with their audit's headline figures."""
    project, role = certification_project(request, slug)
    context = page_context(
        project,
        role,
        audits=evaluator_audit_list(project=project),
        freshness=derived_freshness(project=project)[DerivedKind.AUDIT],
    )
    return render(request, "certification/audit_list.html", context)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def audit_detail(request: HttpRequest, slug: str, evaluator_id: int) -> HttpResponse:
    """Show an evaluator's audit; a manager's POST (re)declares it and recomputes."""
    project, role = certification_project(request, slug)
    evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
    report = _report_or_none(project, evaluator)
    initial = {}
    if report is not None:
        initial = {
            "human_positive": ", ".join(report.human_positive),
            "evaluator_positive": ", ".join(report.evaluator_positive),
            "score_threshold": report.score_threshold,
            "flag_when": report.flag_when,
            "confidence": report.confidence.normalize(),
        }
    form = AuditDeclarationForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            audit_report_configure(
                project=project, evaluator=evaluator, actor=request.user, **form.declaration()
            )
        except LabelingError as exc:
            form_add_domain_error(form, exc)
        else:
            messages.success(request, f"Audit of {evaluator} declared and computed.")
            return redirect("audit-detail", slug=project.slug, evaluator_id=evaluator.pk)
    view = audit_result_for_viewer(report=report, role=role) if report is not None else None
    result = view.result if view is not None else {}
    metrics = result.get("metrics") or {}
    context = page_context(
        project,
        role,
        evaluator=evaluator,
        report=report,
        result=result,
        withheld=view.withheld if view is not None else 0,
        form=form,
        heatmap=heatmap(metrics.get("matrix") or {}),
        metric_rows=_metric_rows(metrics),
        slices=result.get("slices") or {},
        error_rate=result.get("error_rate") or {},
        sample_form=AuditSampleForm(),
        target_form=AuditTargetForm(
            initial={"anytime_target": report.anytime_target if report is not None else None}
        ),
        anytime=result.get("anytime") or {},
        samples=[
            audit_sample_view(sample=s, role=role)
            for s in AuditSample.objects.filter(evaluator=evaluator)[:10]
        ],
    )
    status = 400 if request.method == "POST" else 200
    return render(request, "certification/audit_detail.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD"])
def audit_disagreements_csv(request: HttpRequest, slug: str, evaluator_id: int) -> HttpResponse:
    """Download the disagreement list (item, evaluator label, human label, kind, rationale).

    Cells a spreadsheet would run as a formula are escaped with a leading ``'``
    (``labeling.release_format.csv_cell``).
    """
    project, role = certification_project(request, slug)
    evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
    # No audit declared yet is AuditNotConfigured, a NotFound: 404 (labeling/views/errors.py).
    report = audit_report_get(project=project, evaluator=evaluator)
    result = audit_result_for_viewer(report=report, role=role).result
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    name = slugify(f"{project.slug}-{evaluator.name}-{evaluator.version}") + "-disagreements.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = csv.writer(response)
    writer.writerow(result.get("disagreement_columns") or [])
    # a rationale "=HYPERLINK(...)" must not run in a spreadsheet: csv_cell escapes it
    writer.writerows([csv_cell(cell) for cell in row] for row in result.get("disagreements") or [])
    return response


@login_required
@require_http_methods(["POST"])
def audit_sample_draw_view(request: HttpRequest, slug: str, evaluator_id: int) -> HttpResponse:
    """Draw a seeded stratified audit sample (managers); its open items are served first."""
    project, role = certification_project(request, slug, manager_only=True)
    evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
    form = AuditSampleForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"No sample drawn: {form.errors.as_text()}")
    else:
        try:
            sample = audit_sample_draw(
                project=project, evaluator=evaluator, actor=request.user, **form.cleaned_data
            )
        except LabelingError as exc:
            messages.error(request, f"No sample drawn: {exc.message}")
        else:
            messages.success(
                request,
                f"Audit sample {sample.pk} drawn ({sample.size} items, seed {sample.seed}).",
            )
    return redirect("audit-detail", slug=project.slug, evaluator_id=evaluator.pk)


@login_required
@require_http_methods(["POST"])
def audit_target_view(request: HttpRequest, slug: str, evaluator_id: int) -> HttpResponse:
    """Set or clear the audit's target error rate (managers) and recompute."""
    project, role = certification_project(request, slug, manager_only=True)
    evaluator = evaluator_get(project=project, evaluator_id=evaluator_id)
    form = AuditTargetForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(
            f"{field}: {' '.join(str(e) for e in errors)}" for field, errors in form.errors.items()
        )
        messages.error(request, f"Target not set: {problems}")
    else:
        try:
            audit_target_set(
                project=project,
                evaluator=evaluator,
                actor=request.user,
                target=form.cleaned_data["anytime_target"],
            )
        except LabelingError as exc:
            messages.error(request, f"Target not set: {exc.message}")
        else:
            messages.success(request, "Target saved; the audit is recomputed.")
    return redirect("audit-detail", slug=project.slug, evaluator_id=evaluator.pk)
