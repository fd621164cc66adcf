"""Manager pages: labelling settings, starting labelling (members: labeling/views/members.py)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling import permissions
from labeling.exceptions import LabelingError
from labeling.forms import ProjectSettingsForm
from labeling.models import Project
from labeling.selectors.pages import labelling_start_preview
from labeling.services.jobs import labelling_start_in_background, labelling_start_job_start
from labeling.services.labelling_queue import project_labelling_configure, project_labelling_start
from labeling.views.common import form_add_domain_error, page_context, project_for


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def project_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """Show and change the labelling settings; overlap and serving order lock at the start."""
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    locked = project.labelling_started_at is not None
    initial = {
        "overlap": project.overlap,
        "lease_minutes": project.lease_minutes,
        "serving_order": project.serving_order,
        "serving_seed": project.serving_seed,
        "allow_self_adjudication": project.allow_self_adjudication,
    }
    form = ProjectSettingsForm(request.POST or None, initial=initial, locked=locked)
    if request.method == "POST" and form.is_valid():
        try:
            project_labelling_configure(project=project, actor=request.user, **form.changes())
        except LabelingError as exc:
            form_add_domain_error(form, exc)
        else:
            messages.success(request, "Settings saved.")
            return redirect("project-settings", slug=project.slug)
    status = 400 if request.method == "POST" else 200
    return render(
        request,
        "labeling/settings.html",
        page_context(
            project,
            role,
            form=form,
            locked=locked,
            start=None if locked else _start_preview(project),
        ),
        status=status,
    )


def _start_preview(project: Project) -> dict[str, Any]:
    """What starting with the saved overlap would do: items ``open`` to annotators, items
    ``compared`` at once from their imported votes, and for each overlap from 1 to one more
    than the most votes an item has (``by_overlap``, when any item has votes): (overlap, open,
    compared)."""
    histogram = labelling_start_preview(project=project)
    total = sum(histogram.values())

    def open_at(overlap: int) -> int:
        return sum(n for votes, n in histogram.items() if votes < overlap)

    most = max(histogram, default=0)
    return {
        "open": open_at(project.overlap),
        "compared": total - open_at(project.overlap),
        "by_overlap": [(k, open_at(k), total - open_at(k)) for k in range(1, most + 2)]
        if most
        else [],
    }


@login_required
@require_http_methods(["POST"])
def project_labelling_start_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Start labelling: freeze the policy, fix overlap and serving order, open the queue.

    A project with more than ``JOB_START_ITEMS`` items is started by a background job: the
    page redirects to the job's page.
    """
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    if labelling_start_in_background(project):
        # A large project is started by a background job; its page shows the progress.
        job = labelling_start_job_start(project=project, actor=request.user)
        return redirect("job-detail", slug=project.slug, job_id=job.pk)
    try:
        project = project_labelling_start(project=project, actor=request.user)
    except LabelingError as exc:
        messages.error(request, f"Labelling was not started: {exc.message}")
    else:
        messages.success(
            request,
            f"Labelling started at {project.labelling_started_at:%Y-%m-%d %H:%M} UTC; overlap "
            "and serving order are now fixed.",
        )
    return redirect("project-settings", slug=project.slug)
