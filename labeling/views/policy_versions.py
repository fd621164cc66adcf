"""Manager page: the label policy's versions, and publishing a new one after labelling started.

The form shows the current version's description; "Preview changes" shows the diff and what
happens to the items, with a "Publish" button that publishes exactly the previewed content
(``labeling.services.policy_versions``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling import permissions
from labeling.exceptions import LabelingError
from labeling.forms import policy_description_from_post
from labeling.http_errors import http_status
from labeling.models import EvidenceRelation
from labeling.selectors.catalog import policy_version_list
from labeling.selectors.policies import REASONS, SCHEMA, policy_description_data
from labeling.selectors.review import labelling_policy_get
from labeling.services.policy_versions import PolicyPublication, Resolved, policy_version_publish
from labeling.views.common import page_context, project_for


def _label_rows(description: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every schema label of each level as a form row: offered or not, with its details."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for level, values in SCHEMA.items():
        offered = {row["value"]: (n, row) for n, row in enumerate(description[f"{level}_labels"])}
        rows[level] = []
        for order, value in enumerate(values):
            n, row = offered.get(value, (len(values) + order, {}))
            rows[level].append(
                {
                    "value": value,
                    "offered": value in offered,
                    "position": n + 1,
                    "text": row.get("text", ""),
                    "description": row.get("description", ""),
                    "key": row.get("key", ""),
                    "requires_evidence": row.get("requires_evidence", False),
                }
            )
        rows[level].sort(key=lambda r: r["position"])
    reasons = {row["value"]: (n, row) for n, row in enumerate(description["unavailable_reasons"])}
    rows["reason"] = sorted(
        (
            {
                "value": value,
                "offered": value in reasons,
                "position": reasons.get(value, (len(REASONS) + order, {}))[0] + 1,
                "text": reasons.get(value, (0, {}))[1].get("text", ""),
            }
            for order, value in enumerate(REASONS)
        ),
        key=lambda r: r["position"],
    )
    return rows


@login_required
@require_http_methods(["GET", "POST"])
def policy_versions(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the versions and the form of the next one. POST: preview, or publish (managers)."""
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    started = project.labelling_started_at is not None
    current = labelling_policy_get(project=project) if started else None
    description = policy_description_data(current) if current is not None else None
    preview: PolicyPublication | None = None
    error: LabelingError | None = None
    post: QueryDict | dict[str, str] = {}
    if request.method == "POST" and current is not None:
        post = request.POST
        description = policy_description_from_post(request.POST, SCHEMA, REASONS)
        publish = request.POST.get("action") == "publish"
        try:
            based_on = int(request.POST.get("based_on_version", ""))
        except ValueError:
            based_on = 0
        try:
            result = policy_version_publish(
                project=project,
                actor=request.user,
                content=description,
                note=request.POST.get("note", ""),
                based_on_version=based_on,
                resolved=request.POST.get("resolved", Resolved.KEEP),
                dry_run=not publish,
            )
        except LabelingError as exc:
            error = exc
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
            preview = result
    context = page_context(
        project,
        role,
        started=started,
        current=current,
        versions=policy_version_list(project=project),
        rows=_label_rows(description) if description is not None else None,
        description=description,
        relations=EvidenceRelation.choices,
        note=post.get("note", ""),
        resolved=post.get("resolved", Resolved.KEEP),
        preview=preview,
        diff=[change.as_json() for change in preview.diff] if preview else [],
        error=error,
        errors=(error.data or {}).get("errors", []) if error is not None else [],
    )
    status = http_status(error) if error is not None else 200
    return render(request, "labeling/policy_versions.html", context, status=status)
