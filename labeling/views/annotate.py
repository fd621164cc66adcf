"""Annotator pages: next item, the labelling form, skip, and the annotator's own annotations.

Blindness (an annotator sees only their own work): these pages render only the question text, the
candidate, its claims, the pinned sources and the actor's own labels. No question metadata,
evaluator or prior label, other annotator, vote count or item status reaches them
(``labelling_form_view`` reads nothing else, and the templates get nothing else).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling import exceptions, permissions
from labeling.api_errors import DATABASE_ERRORS
from labeling.forms import LabelsState, SkipForm, single_values_check
from labeling.http_errors import http_status
from labeling.models import Assignment, Project
from labeling.selectors.pages import own_annotation_list, own_progress
from labeling.selectors.review import LabellingFormView, labelling_form_view
from labeling.selectors.work import assignment_current_for_actor, assignment_get_for_actor
from labeling.services.annotations import annotation_submit
from labeling.services.assignments import assignment_skip, item_claim_next
from labeling.views.common import (
    form_add_domain_error,
    page_context,
    project_for,
)
from labeling.views.labels import FormErrors, errors_from, form_context, state_from_vote

# Shown instead of the service's message when a revision is refused: the reason (the item was
# resolved) would tell the annotator how the other votes went.
CLOSED_MESSAGE = "This item is closed: your labels were not saved."
# Shown when another session of the annotator saved a revision after this form was loaded.
CHANGED_MESSAGE = (
    "Another session changed this annotation since you opened it: your labels were not saved. "
    "The labels saved now are shown below; your input is kept in the form. Save again to "
    "replace them."
)


def policy_message(data: dict[str, Any]) -> str:
    """The form's message when a new label policy version was published since it was loaded."""
    return (
        f"The label policy changed from v{data['policy_version']} to "
        f"v{data['current_policy_version']} since you opened this item: your labels were not "
        "saved. The form now shows the current policy (check the guideline and labels); your "
        "input is kept. Save again to label under it."
    )


def _next_page(
    request: HttpRequest, project: Project, role: str | None, *, empty: bool, status: int = 200
) -> HttpResponse:
    context = page_context(
        project,
        role,
        progress=own_progress(project=project, actor=request.user),
        current=assignment_current_for_actor(project=project, actor=request.user),
        empty=empty,
        started=project.labelling_started_at is not None,
    )
    return render(request, "labeling/annotate_next.html", context, status=status)


def _claim_and_go(request: HttpRequest, project: Project) -> HttpResponse:
    """Claim the next item and open its form; with no work left, say so on the next-item page."""
    try:
        assignment = item_claim_next(project=project, actor=request.user)
    except exceptions.LabelingError as exc:
        messages.error(request, exc.message)
        return redirect("annotate-next", slug=project.slug)
    except DATABASE_ERRORS:
        # The submit before this claim has committed: say so, never a 503 page claiming that
        # nothing was saved (messages live in a cookie, not the database).
        messages.warning(request, "The next item could not be claimed just now: try again.")
        return redirect("annotate-next", slug=project.slug)
    if assignment is None:
        messages.info(request, "No items are waiting for you right now. Thank you!")
        return redirect("annotate-next", slug=project.slug)
    return redirect("annotate-form", slug=project.slug, assignment_id=assignment.pk)


@login_required
@require_http_methods(["GET", "POST"])
def annotate_next(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the annotator's start page. POST: claim the next item and open its form.

    Claiming writes a lease, so it is a POST; an empty queue is a friendly page (200).
    """
    project, role = project_for(request, slug, allowed=permissions.ANNOTATORS)
    if request.method == "GET":
        return _next_page(request, project, role, empty=False)
    try:
        assignment = item_claim_next(project=project, actor=request.user)
    except (exceptions.InvalidTransition, exceptions.Conflict) as exc:
        # Not started yet, or (practically never) every candidate lost to concurrent claims.
        messages.error(request, exc.message)
        return _next_page(request, project, role, empty=False, status=409)
    if assignment is None:
        return _next_page(request, project, role, empty=True)
    return redirect("annotate-form", slug=project.slug, assignment_id=assignment.pk)


def _form_page(
    request: HttpRequest,
    project: Project,
    role: str | None,
    view: LabellingFormView,
    *,
    state: LabelsState,
    errors: FormErrors,
    status: int = 200,
    conflict: bool = False,
) -> HttpResponse:
    policy = view.policy
    context = page_context(
        project,
        role,
        view=view,
        skip_form=SkipForm(),
        revising=view.current is not None,
        # After a conflict: the saved labels another session wrote, beside the kept input.
        saved=_saved_labels(view) if conflict else None,
        **form_context(
            question_text=view.question_text,
            candidate_text=view.candidate_text,
            claims=view.claims,
            sources=view.sources,
            state=state,
            errors=errors,
            answer_labels=policy.answer_labels,
            claim_labels=policy.claim_labels,
            reasons=policy.unavailable_reasons,
            cannot_decide=True,
        ),
    )
    return render(request, "labeling/annotate.html", context, status=status)


def _based_on(view: LabellingFormView) -> str:
    """The revision the form's labels are made on: the current one, 0 before the first submit."""
    return str((view.current.revision or 0) if view.current else 0)


def _saved_labels(view: LabellingFormView) -> dict[str, object] | None:
    """The current revision's labels, by claim in page order, for the conflict panel."""
    current = view.current
    if current is None:
        return None
    return {
        "revision": current.revision,
        "answer_label": current.answer_label,
        "answer_reason": current.answer_reason,
        "comment": current.comment,
        "claims": [
            (position, current.claims.get(claim.id)) for position, claim in enumerate(view.claims)
        ],
    }


def _own_assignment(request: HttpRequest, project: Project, assignment_id: int) -> Assignment:
    # Another annotator's assignment is NotFound: a 404 page (labeling/views/errors.py).
    return assignment_get_for_actor(
        project=project, assignment_id=assignment_id, actor=request.user
    )


@login_required
@require_http_methods(["GET", "POST"])
def annotate_form(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """GET: the labelling form (pre-filled from the current revision when revising).

    POST: submit (first time) or revise; success goes to the next item (or, for a revision, back
    to "My annotations"). A refused submit shows the error next to its field and keeps the input.
    """
    project, role = project_for(request, slug, allowed=permissions.ANNOTATORS)
    assignment = _own_assignment(request, project, assignment_id)
    view = labelling_form_view(project=project, assignment=assignment)
    claim_ids = [c.id for c in view.claims]
    if request.method == "GET":
        state = replace(state_from_vote(view.current), revision=_based_on(view))
        return _form_page(request, project, role, view, state=state, errors=FormErrors())
    state = LabelsState.from_post(request.POST, claim_ids)
    try:
        single_values_check(request.POST, claim_ids)
        annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=request.user,
            data=state.annotation_input(claim_ids),
        )
    except exceptions.StaleVersion as exc:
        # Another session saved a revision since this form was loaded: show it next to the
        # kept input, and base the form on it, so a second submit replaces it knowingly. A new
        # policy version: the form is shown again under it, the input kept.
        fresh = labelling_form_view(project=project, assignment=assignment)
        policy_changed = exc.field == "policy_version"
        return _form_page(
            request,
            project,
            role,
            fresh,
            state=replace(state, revision=_based_on(fresh)),
            errors=FormErrors(
                general=policy_message(exc.data) if policy_changed else CHANGED_MESSAGE
            ),
            status=409,
            conflict=not policy_changed,
        )
    except (exceptions.InvalidInput, exceptions.LeaseExpired, exceptions.InvalidTransition) as exc:
        # A bad field (400) is shown next to it, a lost lease (409) at the top; a closed item
        # (409) gets CLOSED_MESSAGE, never the service's reason.
        closed = isinstance(exc, exceptions.InvalidTransition)
        errors = FormErrors(general=CLOSED_MESSAGE) if closed else errors_from(exc)
        return _form_page(
            request, project, role, view, state=state, errors=errors, status=http_status(exc)
        )
    if view.current is not None:
        messages.success(request, "Your annotation is saved (a new revision if anything changed).")
        return redirect("my-annotations", slug=project.slug)
    messages.success(request, "Saved.")
    return _claim_and_go(request, project)


@login_required
@require_http_methods(["GET", "POST"])
def annotate_skip(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Skip the item of an assignment with a reason, then go to the next item."""
    project, role = project_for(request, slug, allowed=permissions.ANNOTATORS)
    assignment = _own_assignment(request, project, assignment_id)
    form = SkipForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            assignment_skip(
                project=project,
                assignment_id=assignment.pk,
                actor=request.user,
                reason=form.cleaned_data["reason"],
                note=form.cleaned_data["note"],
            )
        except exceptions.LabelingError as exc:
            form_add_domain_error(form, exc)
        else:
            messages.success(request, "Skipped; you will not get this item again.")
            return _claim_and_go(request, project)
    status = 400 if request.method == "POST" else 200
    context = page_context(project, role, form=form, assignment=assignment)
    return render(request, "labeling/skip.html", context, status=status)


@login_required
@require_http_methods(["GET"])
def my_annotations(request: HttpRequest, slug: str) -> HttpResponse:
    """List the actor's own annotations with a link to revise each (any member; own rows only)."""
    project, role = project_for(request, slug)
    context = page_context(
        project,
        role,
        annotations=own_annotation_list(project=project, actor=request.user),
        progress=own_progress(project=project, actor=request.user),
    )
    return render(request, "labeling/my_annotations.html", context)
