"""Release pages: freeze, build progress, files, tags, rebuild and compare.

Managers freeze releases, rebuild them, move tags and download the files; adjudicators read
every page (403 on writes and downloads: the files hold pending items' evaluator labels and
votes); annotators never see certification (the pages do not exist for them:
404, like the calibration pages); non-members get 404 for the whole project. Another project's
release id, or a file name the release's build does not list, is 404.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from certification.downloads import release_file_response
from certification.forms import ReleaseFreezeForm, ReleaseTagForm
from certification.models import Release, release_version_key
from certification.selectors import (
    manifest_count_rows,
    release_children,
    release_content_build,
    release_default_run_ids,
    release_file_get,
    release_files,
    release_freezable_runs,
    release_get,
    release_is_building,
    release_list,
    release_manifest,
    release_next_version,
    release_rebuilds,
    release_tag_list,
    release_tag_moves,
)
from certification.services.releases import (
    release_freeze,
    release_rebuild,
    release_tag_move,
)
from certification.views.common import certification_project
from labeling import permissions
from labeling.exceptions import LabelingError
from labeling.models import Project
from labeling.release_format import ARCHIVE
from labeling.views.common import form_add_domain_error, page_context

#: How often a page with a pending or running build asks for the builds' JSON, in
#: milliseconds (labeling's work_progress.js updates them in place and loads the page once
#: they end).
POLL_MS = 3000


def _freeze_form(project: Project, releases: list[Release], data: Any) -> ReleaseFreezeForm:
    latest = max(releases, key=lambda r: release_version_key(r.version), default=None)
    initial = {
        "version": release_next_version(project=project),
        "parent": latest.pk if latest is not None else "",
        "runs": release_default_run_ids(project=project),
    }
    return ReleaseFreezeForm(
        data,
        initial=initial,
        releases=releases,
        runs=release_freezable_runs(project=project),
    )


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def release_list_view(request: HttpRequest, slug: str) -> HttpResponse:
    """List the project's releases with their build progress and tags.

    A manager's POST freezes a new release (its files are then built in the background).
    """
    project, role = certification_project(request, slug)
    releases = list(release_list(project=project))
    form = None
    if permissions.can_manage(role):
        form = _freeze_form(project, releases, request.POST or None)
    if request.method == "POST" and form is not None and form.is_valid():
        try:
            release = release_freeze(
                project=project,
                actor=request.user,
                version=form.cleaned_data["version"],
                parent=form.parent_release(),
                run_ids=form.cleaned_data["runs"],
                notes=form.cleaned_data["notes"],
            )
        except LabelingError as exc:
            form_add_domain_error(form, exc)
        else:
            messages.success(
                request,
                f"Release {release.version} frozen; its build status is shown below.",
            )
            return redirect("release-detail", slug=project.slug, release_id=release.pk)
    shown = [(release, release_content_build(release)) for release in releases]
    context = page_context(
        project,
        role,
        releases=shown,
        tags=release_tag_list(project=project),
        form=form,
        poll_ms=POLL_MS if release_is_building(build for _, build in shown) else None,
    )
    status = 400 if request.method == "POST" else 200
    return render(request, "certification/releases/release_list.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD"])
def release_detail(request: HttpRequest, slug: str, release_id: int) -> HttpResponse:
    """Show a release: files with hashes, counts, what it certifies, tags, rebuilds, family."""
    project, role = certification_project(request, slug)
    release = release_get(project=project, release_id=release_id)
    build = release_content_build(release)
    context = page_context(
        project,
        role,
        release=release,
        build=build,
        files=[file for file in release_files(build) if file.name != ARCHIVE],
        archive=next((file for file in release_files(build) if file.name == ARCHIVE), None),
        counts=manifest_count_rows(release_manifest(build)),
        rebuilds=release_rebuilds(release),
        children=release_children(release=release),
        tags=list(release.tags.all()),
        tag_moves=release_tag_moves(release=release),
        tag_form=ReleaseTagForm() if permissions.can_manage(role) else None,
        poll_ms=POLL_MS if release_is_building(release.builds.all()) else None,
    )
    return render(request, "certification/releases/release_detail.html", context)


@login_required
@require_http_methods(["GET", "HEAD"])
def release_file_download(
    request: HttpRequest, slug: str, release_id: int, name: str
) -> HttpResponseBase:
    """Download one file of a release's build (or its zip archive) as an attachment.

    Streamed, or redirected to the object store (``certification.downloads``).
    """
    # Files hold pending items' evaluator labels and votes, which adjudicators must not see
    # before they decide (labeling/permissions.py): downloads are for managers.
    project, role = certification_project(request, slug, manager_only=True)
    release = release_get(project=project, release_id=release_id)
    file, build = release_file_get(release=release, name=name)
    return release_file_response(project, release, build, file, method=request.method or "GET")


@login_required
@require_http_methods(["POST"])
def release_rebuild_view(request: HttpRequest, slug: str, release_id: int) -> HttpResponse:
    """Rebuild a release and compare it byte by byte with its first build (managers)."""
    project, role = certification_project(request, slug, manager_only=True)
    release = release_get(project=project, release_id=release_id)
    try:
        build = release_rebuild(release=release, actor=request.user)
    except LabelingError as exc:
        messages.error(request, f"No rebuild: {exc.message}")
    else:
        messages.success(request, f"Rebuild {build.pk} requested; it is compared when done.")
    return redirect("release-detail", slug=project.slug, release_id=release.pk)


@login_required
@require_http_methods(["POST"])
def release_tag_move_view(request: HttpRequest, slug: str, release_id: int) -> HttpResponse:
    """Point a tag at this release, creating it or moving it from another (managers)."""
    project, role = certification_project(request, slug, manager_only=True)
    release = release_get(project=project, release_id=release_id)
    form = ReleaseTagForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"No tag moved: {form.errors.as_text()}")
    else:
        try:
            tag = release_tag_move(
                project=project, actor=request.user, name=form.cleaned_data["name"], release=release
            )
        except LabelingError as exc:
            messages.error(request, f"No tag moved: {exc.message}")
        else:
            messages.success(request, f"Tag {tag.name} now points at release {release.version}.")
    return redirect("release-detail", slug=project.slug, release_id=release.pk)
