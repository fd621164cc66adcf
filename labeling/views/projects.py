"""Pages to create a project and to read or edit its label policy."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling import permissions
from labeling.exceptions import InvalidTransition, LabelingError, PermissionDenied
from labeling.project_forms import PolicyForm, ProjectCreateForm
from labeling.selectors.policies import policy_label_choices, policy_reason_choices
from labeling.services.policies import PolicyDescription, policy_description_check, policy_update
from labeling.services.projects import project_create
from labeling.views.common import form_add_domain_error, page_context, project_for


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def project_create_view(request: HttpRequest) -> HttpResponse:
    """The "New project" form; the creator becomes the project's manager.

    Open to the users :func:`labeling.permissions.can_create_projects` allows (else 403).
    """
    if not permissions.can_create_projects(request.user):
        raise PermissionDenied(
            "you may not create projects: ask an administrator (staff, or the "
            "labeling.add_project permission)"
        )
    form = ProjectCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            project = project_create(actor=request.user, **form.cleaned_data)
        except LabelingError as exc:
            form_add_domain_error(form, exc)
        else:
            messages.success(
                request,
                f"Project {project.name} created; you are its manager. Review its label policy "
                "and guideline, then import data.",
            )
            return redirect("project-policy", slug=project.slug)
    status = 400 if request.method == "POST" else 200
    return render(request, "labeling/project_new.html", {"form": form}, status=status)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def project_policy(request: HttpRequest, slug: str) -> HttpResponse:
    """Read the label policy (members); preview or save the draft's description (managers).

    ``action=preview`` (the Preview button) checks the posted description and shows the
    guideline and labels as annotators will see them, without saving; ``action=save`` saves.
    A frozen policy is shown read-only; a save of it answers 409 with the reason.
    """
    allowed = permissions.MANAGERS if request.method == "POST" else None
    project, role = project_for(request, slug, allowed=allowed)
    policy = project.policies.order_by("-version").first()
    if policy is None:
        raise InvalidTransition(f"project {project.slug!r} has no label policy")
    editable = permissions.can_manage(role) and policy.frozen_at is None
    form = None
    preview: PolicyDescription | None = None
    status = 200
    if request.method == "POST" and policy.frozen_at is not None:
        messages.error(
            request,
            f"Label policy v{policy.version} is frozen since labelling started: it can no "
            "longer be edited; publish a new version instead.",
        )
        status = 409
    elif request.method == "POST":
        form = PolicyForm(request.POST)
        status = 400
        if form.is_valid():
            description = form.description()
            try:
                if request.POST.get("action") == "preview":
                    preview = policy_description_check(description)
                    status = 200
                else:
                    policy_update(project=project, actor=request.user, description=description)
                    messages.success(request, f"Label policy v{policy.version} saved.")
                    return redirect("project-policy", slug=project.slug)
            except InvalidTransition as exc:
                messages.error(request, exc.message)
                editable, status = False, 409
            except LabelingError as exc:
                form.add_service_error(exc)
    elif editable:
        form = PolicyForm(initial=PolicyForm.initial_for(policy))
    context = page_context(
        project,
        role,
        policy=policy,
        editable=editable,
        form=form if editable else None,
        preview=preview,
        answer_choices=policy_label_choices(policy, "answer"),
        claim_choices=policy_label_choices(policy, "claim"),
        reason_choices=policy_reason_choices(policy),
    )
    return render(request, "labeling/policy.html", context, status=status)
