"""Calibration pages: specs, their editor, runs with charts, ledger and report.

Managers write specs and start runs; adjudicators may read every page; annotators never see
certification (the pages do not exist for them: 404, like the adjudication pages), and
non-members get 404 for the whole project. A done run's charts are SVG drawn on the server from
its stored result on each request (``certification.charts.run_charts``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from certification.charts import run_charts
from certification.forms import CalibrationSpecForm, PlanForm
from certification.models import CalibrationSpec, RunTrigger
from certification.selectors import (
    calibration_run_get,
    calibration_run_list,
    calibration_run_report,
    calibration_spec_get,
    calibration_spec_history,
    calibration_spec_json,
    calibration_spec_list,
    calibration_spec_plan,
    derived_freshness,
    drift_watch_get,
)
from certification.services import (
    calibration_run_start,
    calibration_spec_create,
    calibration_spec_revise,
)
from certification.views.common import certification_project
from labeling.exceptions import LabelingError
from labeling.models import DerivedKind, Evaluator, Project
from labeling.views.common import form_add_domain_error, page_context

#: How often a pending or running run's page asks for the run's JSON, in milliseconds (it
#: updates the status in place and loads the page once the run ends: labeling's
#: work_progress.js, a file, so it runs under the Content-Security-Policy).
POLL_MS = 3000


def _evaluators(project: Project) -> list[tuple[str, str]]:
    return list(
        Evaluator.objects.filter(project=project)
        .order_by("name", "version")
        .values_list("name", "version")
    )


@login_required
@require_http_methods(["GET", "HEAD"])
def calibration_home(request: HttpRequest, slug: str) -> HttpResponse:
    """List the project's calibration specs (every version) with their latest run."""
    project, role = certification_project(request, slug)
    specs = calibration_spec_list(project=project)
    runs = calibration_run_list(project=project)[:20]
    freshness = derived_freshness(project=project)[DerivedKind.CALIBRATION]
    context = page_context(project, role, specs=specs, runs=runs, freshness=freshness)
    return render(request, "certification/calibration_list.html", context)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def calibration_spec_new(request: HttpRequest, slug: str) -> HttpResponse:
    """Write a new calibration spec (managers)."""
    project, role = certification_project(request, slug, manager_only=True)
    form = CalibrationSpecForm(request.POST or None, evaluators=_evaluators(project))
    if request.method == "POST" and form.is_valid():
        try:
            spec = calibration_spec_create(
                project=project,
                actor=request.user,
                name=form.cleaned_data["name"],
                **form.contract(),
            )
        except LabelingError as exc:
            form_add_domain_error(form, exc)
        else:
            messages.success(request, f"Spec {spec} saved ({spec.content_sha256[:12]}).")
            return redirect("calibration-spec-detail", slug=project.slug, spec_id=spec.pk)
    status = 400 if request.method == "POST" else 200
    context = page_context(project, role, form=form, spec=None)
    return render(request, "certification/spec_form.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def calibration_spec_revise_view(request: HttpRequest, slug: str, spec_id: int) -> HttpResponse:
    """Revise a spec (managers): the new version links to this one, which stays frozen."""
    project, role = certification_project(request, slug, manager_only=True)
    spec = calibration_spec_get(project=project, spec_id=spec_id)
    form = CalibrationSpecForm(
        request.POST or None,
        initial=CalibrationSpecForm.initial_from(spec),
        evaluators=_evaluators(project),
    )
    form.fields["name"].disabled = True
    if request.method == "POST" and form.is_valid():
        try:
            new = calibration_spec_revise(spec=spec, actor=request.user, **form.contract())
        except LabelingError as exc:
            form_add_domain_error(form, exc)
        else:
            messages.success(request, f"Spec {new} saved; {spec} stays as it was.")
            return redirect("calibration-spec-detail", slug=project.slug, spec_id=new.pk)
    status = 400 if request.method == "POST" else 200
    context = page_context(project, role, form=form, spec=spec)
    return render(request, "certification/spec_form.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD"])
def calibration_spec_detail(request: HttpRequest, slug: str, spec_id: int) -> HttpResponse:
    """Show a spec's contract, its label budget plan, its versions and its runs.

    ``?n_more=`` asks the plan for the chance of certifying with that many more calibration
    units; a malformed value is shown on the form (400) and the plan is given without it.
    """
    project, role = certification_project(request, slug)
    spec = calibration_spec_get(project=project, spec_id=spec_id)
    plan_form = PlanForm(request.GET or None)
    n_more = plan_form.cleaned_data["n_more"] if plan_form.is_valid() else None
    try:
        plan: dict[str, Any] | None = calibration_spec_plan(spec=spec, n_more=n_more)
        plan_error = None
    except LabelingError as exc:
        plan, plan_error = None, exc.message
    context = page_context(
        project,
        role,
        spec=spec,
        contract=_contract_rows(spec),
        plan=plan,
        plan_error=plan_error,
        plan_form=plan_form,
        history=calibration_spec_history(spec=spec),
        runs=calibration_run_list(project=project, filters={"spec": spec}),
        has_next=CalibrationSpec.objects.filter(previous=spec).first(),
    )
    status = 400 if plan_form.errors else 200
    return render(request, "certification/spec_detail.html", context, status=status)


def _contract_rows(spec: CalibrationSpec) -> list[tuple[str, Any]]:
    """The spec's contract as (field, value) rows for the page."""
    data = calibration_spec_json(spec)
    loss = data["loss"]
    if isinstance(loss, dict):
        field = f" ({loss['field']})" if "field" in loss else ""
        data["loss"] = f"bounded in [0, 1]: {loss['source']}{field} · Hoeffding–Bentkus test"
    else:
        data["loss"] = f"{loss} (0/1) · exact binomial test"
    hidden = {"id", "name", "version", "previous", "created_at", "created_by"}
    return [(key, value) for key, value in data.items() if key not in hidden]


@login_required
@require_http_methods(["POST"])
def calibration_run_start_view(request: HttpRequest, slug: str, spec_id: int) -> HttpResponse:
    """Start a run of the spec (managers); a run on unchanged labels is the existing one."""
    project, role = certification_project(request, slug, manager_only=True)
    spec = calibration_spec_get(project=project, spec_id=spec_id)
    try:
        run = calibration_run_start(spec=spec, actor=request.user)
    except LabelingError as exc:
        messages.error(request, f"The run was not started: {exc.message}")
        return redirect("calibration-spec-detail", slug=project.slug, spec_id=spec.pk)
    if run.trigger == RunTrigger.MANUAL and run.requested_by_id == request.user.pk:
        messages.success(request, f"Run {run.pk}: {run.status}.")
    else:
        messages.info(
            request,
            f"No new run: the inputs are unchanged since run {run.pk} ({run.status}), which "
            "was started earlier and covers them.",
        )
    return redirect("calibration-run-detail", slug=project.slug, run_id=run.pk)


@login_required
@require_http_methods(["GET", "HEAD"])
def calibration_run_detail(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    """Show a run: status (updated in place until it finishes), certificate, charts, ledger, report.

    Also the drift watch of its applied certificate (``drift_watch_get``).
    """
    project, role = certification_project(request, slug)
    run = calibration_run_get(project=project, run_id=run_id)
    report = calibration_run_report(run=run)
    result = report["result"] or {}
    context = page_context(
        project,
        role,
        run=run,
        spec=run.spec,
        report=report,
        result=result,
        charts=run_charts(result),
        poll_ms=None if run.is_finished else POLL_MS,
        drift=drift_watch_get(run=run),
    )
    return render(request, "certification/run_detail.html", context)
