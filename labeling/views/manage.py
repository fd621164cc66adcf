"""Manager pages: labelling settings, starting labelling, members."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling import permissions
from labeling.exceptions import LabelingError
from labeling.forms import MembershipChangeForm, MembershipInviteForm, ProjectSettingsForm
from labeling.models import Role
from labeling.selectors.pages import member_list
from labeling.services.assignments import project_labelling_configure, project_labelling_start
from labeling.services.jobs import labelling_start_in_background, labelling_start_job_start
from labeling.services.projects import membership_change, membership_invite
from labeling.views.common import form_add_domain_error, page_context, project_for


@login_required
@require_http_methods(["GET", "POST"])
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
        page_context(project, role, form=form, locked=locked),
        status=status,
    )


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


@login_required
@require_http_methods(["GET", "POST"])
def project_members(request: HttpRequest, slug: str) -> HttpResponse:
    """List members; invite people and change roles (managers only).

    A new account's one-time set-password link is shown once, in a message after the redirect;
    it is not stored.
    """
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    invite_form = MembershipInviteForm(
        request.POST if request.POST.get("action") == "invite" else None
    )
    change_error = None
    if request.method == "POST" and request.POST.get("action") == "change":
        change_form = MembershipChangeForm(request.POST)
        if change_form.is_valid():
            try:
                membership = membership_change(
                    project=project,
                    actor=request.user,
                    user_id=change_form.cleaned_data["user_id"],
                    role=change_form.cleaned_data["role"],
                )
            except LabelingError as exc:
                change_error = exc.message
            else:
                messages.success(request, f"{membership.user} is now {membership.role}.")
                return redirect("project-members", slug=project.slug)
        else:
            change_error = "Choose a valid role."
    elif request.method == "POST" and invite_form.is_valid():
        try:
            invite = membership_invite(
                project=project, actor=request.user, **invite_form.cleaned_data
            )
        except LabelingError as exc:
            form_add_domain_error(invite_form, exc)
        else:
            user = invite.membership.user
            if invite.set_password_path:
                link = request.build_absolute_uri(invite.set_password_path)
                messages.success(
                    request,
                    f"Account {user} created as {invite.membership.role}. Send them this one-time "
                    f"link to set their password (shown only now): {link}",
                    extra_tags="set-password-link",
                )
            else:
                messages.success(request, f"{user} added as {invite.membership.role}.")
            return redirect("project-members", slug=project.slug)
    status = 400 if request.method == "POST" else 200
    context = page_context(
        project,
        role,
        members=member_list(project=project),
        invite_form=invite_form,
        change_error=change_error,
        roles=Role.choices,
    )
    return render(request, "labeling/members.html", context, status=status)
