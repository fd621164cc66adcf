"""Manager page: the label policy's versions, and publishing a new one after labelling started.

The form (the label policy page's :class:`labeling.project_forms.PolicyForm`) shows the current
version's description; "Preview changes" shows the diff and what happens to the items, with a
"Publish" button that publishes exactly the previewed content
(``labeling.services.policy_versions``).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling import permissions
from labeling.exceptions import LabelingError
from labeling.http_errors import http_status
from labeling.project_forms import PolicyForm
from labeling.selectors.catalog import policy_version_list
from labeling.selectors.review import labelling_policy_get
from labeling.services.policy_versions import PolicyPublication, Resolved, policy_version_publish
from labeling.views.common import page_context, project_for


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def policy_versions(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the versions and the form of the next one. POST: preview, or publish (managers)."""
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    started = project.labelling_started_at is not None
    current = labelling_policy_get(project=project) if started else None
    form: PolicyForm | None = None
    preview: PolicyPublication | None = None
    error: LabelingError | None = None
    status = 200
    if current is not None:
        initial = PolicyForm.initial_for(current)
        form = PolicyForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST" and form is not None:
        status = 400
        if form.is_valid():
            publish = request.POST.get("action") == "publish"
            try:
                result = policy_version_publish(
                    project=project,
                    actor=request.user,
                    content=form.description(),
                    note=request.POST.get("note", ""),
                    based_on_version=_number(request.POST.get("based_on_version", "")),
                    resolved=request.POST.get("resolved", Resolved.KEEP),
                    dry_run=not publish,
                )
            except LabelingError as exc:
                error, status = exc, http_status(exc)
                form.add_service_error(exc)
            else:
                if publish:
                    messages.success(
                        request,
                        f"Label policy v{result.version} is published: new labels record it. "
                        f"{result.restarted} open item(s) with earlier votes and "
                        f"{result.reopened} resolved or disputed item(s) were returned for "
                        f"labelling; {result.kept} were kept as they are.",
                    )
                    return redirect("policy-versions", slug=project.slug)
                preview, status = result, 200
    context = page_context(
        project,
        role,
        started=started,
        current=current,
        versions=policy_version_list(project=project),
        form=form,
        note=request.POST.get("note", ""),
        resolved=request.POST.get("resolved", Resolved.KEEP),
        preview=preview,
        diff=[change.as_json() for change in preview.diff] if preview else [],
        error=error,
    )
    return render(request, "labeling/policy_versions.html", context, status=status)


def _number(raw: str) -> int | str:
    """A posted version number as an int, or as given (the service refuses it, naming it)."""
    try:
        return int(raw)
    except ValueError:
        return raw
