"""Pages of background jobs: a project's jobs, and one job's progress and outcome (managers)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from labeling import permissions
from labeling.selectors.jobs import job_get, job_list
from labeling.views.common import page_context, project_for, signed_in_user

# A page of a job still pending or running asks for the job's JSON this often and updates its
# progress in place (labeling/static/labeling/work_progress.js: a file, no inline script, so it
# works under a Content-Security-Policy); a reload every time lost the reader's place.
POLL_MS = 2000
JOB_LIST_LENGTH = 50


@login_required
@require_http_methods(["GET", "HEAD"])
def job_detail(request: HttpRequest, slug: str, job_id: int) -> HttpResponse:
    """A job's progress bar (updated in place until it ends), then its result or its errors."""
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    job = job_get(project=project, job_id=job_id, actor=signed_in_user(request))
    errors = (job.error or {}).get("errors", []) if job.error else []
    context = page_context(
        project,
        role,
        job=job,
        errors=errors,
        created=sorted(((job.result or {}).get("created") or {}).items()),
        poll_ms=None if job.finished else POLL_MS,
    )
    return render(request, "labeling/job_detail.html", context)


@login_required
@require_http_methods(["GET", "HEAD"])
def job_list_view(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's latest background jobs."""
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    jobs = list(job_list(project=project, actor=signed_in_user(request))[:JOB_LIST_LENGTH])
    return render(request, "labeling/job_list.html", page_context(project, role, jobs=jobs))
