"""Annotator pages: next item, the labelling form, skip, and the annotator's own annotations.

The page script keeps the next item ready while the annotator works (``annotate_ahead``, and
the ``reserve`` of each submit's JSON answer): a submit then shows it at once, without waiting
for the server (see ``labeling/static/labeling/annotate.js``, :mod:`labeling.views.workbench` and
"Next item ahead" in :mod:`labeling.services.assignments`).

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
from django.http import HttpRequest, HttpResponse, JsonResponse
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
from labeling.services.assignments import item_claim_ahead, item_claim_next
from labeling.services.skips import assignment_skip, assignment_skip_undo
from labeling.views.common import form_add_domain_error, page_context, project_for, wants_json
from labeling.views.labels import FormErrors, errors_from, state_from_vote
from labeling.views.problems import PageProblem
from labeling.views.workbench import (
    NO_WORK_MESSAGE,
    after_skip_json,
    after_submit_json,
    based_on,
    form_page,
    general_problem,
    problems_json,
    workbench_json,
)

# Shown instead of the service's message when a revision is refused: the reason (the item was
# resolved) would tell the annotator how the other votes went.
CLOSED_MESSAGE = "This item is closed: your labels were not saved."
# Shown when another session of the annotator saved a revision after this form was loaded.
CHANGED_MESSAGE = (
    "Another session changed this annotation since you opened it: your labels were not saved. "
    "The labels saved now are shown below; your input is kept in the form. Save again to "
    "replace them."
)
UNDONE_MESSAGE = "The skip is undone: the item is yours again."


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
        messages.info(request, NO_WORK_MESSAGE)
        return redirect("annotate-next", slug=project.slug)
    return redirect("annotate-form", slug=project.slug, assignment_id=assignment.pk)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def annotate_next(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the annotator's start page. POST: claim the next item and open its form.

    Claiming writes a lease, so it is a POST; an empty queue is a friendly page (200).
    """
    project, role = project_for(request, slug, allowed=permissions.ANNOTATORS)
    if request.method in ("GET", "HEAD"):
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


def _claim_names(view: LabellingFormView) -> list[str]:
    """The claims' names on the page, by position (as their legends say)."""
    return [f"Claim {claim.index + 1}" for claim in view.claims]


def _own_assignment(request: HttpRequest, project: Project, assignment_id: int) -> Assignment:
    # Another annotator's assignment is NotFound: a 404 page (labeling/views/errors.py).
    return assignment_get_for_actor(
        project=project, assignment_id=assignment_id, actor=request.user
    )


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def annotate_form(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """GET: the labelling form (pre-filled from the current revision when revising).

    POST: submit (first time) or revise; success goes to the next item (or, for a revision, back
    to the item the annotator holds, else "My annotations"). A refused submit shows every
    problem next to its field, in the page's words, and keeps the input.

    A POST that accepts ``application/json`` (the page script's) is answered in JSON: on success
    ``{"saved", "message", "next": {"assignment_id", "url", "title", "html"} | null, "url"}``
    (``html``: the next item's workbench, ``url`` without a next item: where to go). A first
    submit whose ``ahead`` field names the reserve the page shows next (fetched ahead) gets
    ``"next": {"assignment_id", "url", "ahead": true}`` without ``html`` when that reserve is
    the item served next, and ``"reserve"``: the item after it, as ``annotate_ahead`` answers
    it; otherwise (the reserve was skipped or ran out meanwhile) the answer is as without
    ``ahead``, and the page shows ``next`` instead. Refused,
    ``{"problems": [{"field", "target", "claim_position", "where", "text", "message"}],
    "status"}`` with the HTML answer's status.
    """
    project, role = project_for(request, slug, allowed=permissions.ANNOTATORS)
    assignment = _own_assignment(request, project, assignment_id)
    view = labelling_form_view(project=project, assignment=assignment)
    claim_ids = [c.id for c in view.claims]
    if request.method in ("GET", "HEAD"):
        state = replace(state_from_vote(view.current), revision=based_on(view))
        return form_page(request, project, role, view, state=state, errors=FormErrors())
    json = wants_json(request)
    state = LabelsState.from_post(request.POST, claim_ids)
    try:
        single_values_check(request.POST, claim_ids)
        annotation = annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=request.user,
            data=state.annotation_input(claim_ids),
        )
    except exceptions.StaleVersion as exc:
        # Another session saved a revision since this form was loaded: show it next to the
        # kept input, and base the form on it, so a second submit replaces it knowingly. A new
        # policy version: the form is shown again under it, the input kept.
        policy_changed = exc.field == "policy_version"
        message = policy_message(exc.data) if policy_changed else CHANGED_MESSAGE
        if json:
            return problems_json(general_problem(message + " Reload the page to see them."), 409)
        fresh = labelling_form_view(project=project, assignment=assignment)
        return form_page(
            request,
            project,
            role,
            fresh,
            state=replace(state, revision=based_on(fresh)),
            errors=FormErrors(general=message),
            status=409,
            conflict=not policy_changed,
        )
    except (exceptions.InvalidInput, exceptions.LeaseExpired, exceptions.InvalidTransition) as exc:
        # Every bad field (400) is shown next to it, a lost lease (409) at the top; a closed
        # item (409) gets CLOSED_MESSAGE, never the service's reason.
        closed = isinstance(exc, exceptions.InvalidTransition)
        if closed:
            errors = FormErrors(
                general=CLOSED_MESSAGE, problems=tuple(general_problem(CLOSED_MESSAGE))
            )
        else:
            errors = errors_from(
                exc, state=state, claim_ids=claim_ids, claim_names=_claim_names(view)
            )
        if json:
            return problems_json(errors.problems, http_status(exc))
        return form_page(
            request, project, role, view, state=state, errors=errors, status=http_status(exc)
        )
    revised = view.current is not None
    if json:
        return after_submit_json(request, project, role, assignment, annotation, revised=revised)
    if revised:
        messages.success(request, "Your annotation is saved (a new revision if anything changed).")
        current = assignment_current_for_actor(project=project, actor=request.user)
        if current is not None:
            return redirect("annotate-form", slug=project.slug, assignment_id=current.pk)
        return redirect("my-annotations", slug=project.slug)
    messages.success(request, "Saved.")
    return _claim_and_go(request, project)


def _skip_problems(form: SkipForm) -> list[PageProblem]:
    """The skip form's problems in the page's words."""
    words = {"reason": "choose why you skip this item", "note": None}
    problems = []
    for name, errors in form.errors.items():
        for error in errors:
            text = words.get(name) or str(error)
            where = "Skip" if name == "__all__" else f"Skip {name}"
            problems.append(PageProblem(name, "skip", None, where, text))
    return problems


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def annotate_skip(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Skip the item of an assignment with a reason (required, none pre-selected), then go on.

    A JSON POST is answered ``{"skipped": {"assignment_id", "undo_url"}, "message", "next"}``
    (``next`` as :func:`annotate_form` answers it) or ``{"problems": [...]}`` with status 400.
    """
    project, role = project_for(request, slug, allowed=permissions.ANNOTATORS)
    assignment = _own_assignment(request, project, assignment_id)
    form = SkipForm(request.POST or None)
    json = wants_json(request)
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
            message = "Skipped; you will not get this item again unless you undo the skip."
            if json:
                return after_skip_json(request, project, role, assignment, message)
            messages.success(request, message)
            return _claim_and_go(request, project)
    status = 400 if request.method == "POST" else 200
    if json and request.method == "POST":
        return problems_json(_skip_problems(form), status)
    context = page_context(project, role, form=form, assignment=assignment)
    return render(request, "labeling/skip.html", context, status=status)


@login_required
@require_http_methods(["POST"])
def annotate_skip_undo(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Undo a skip while the item is still the annotator's; open the item again.

    Refused (the lease ran out, someone took the place, not skipped): the next-item page says
    why (409). JSON: ``{"message", "next"}`` or ``{"problems": [...]}`` with status 409.
    """
    project, role = project_for(request, slug, allowed=permissions.ANNOTATORS)
    json = wants_json(request)
    try:
        assignment = assignment_skip_undo(
            project=project, assignment_id=assignment_id, actor=request.user
        )
    except (exceptions.InvalidTransition, exceptions.Conflict) as exc:
        problem = f"The skip cannot be undone: {exc.reason}."
        if json:
            return problems_json(general_problem(problem), http_status(exc))
        messages.error(request, problem)
        return _next_page(request, project, role, empty=False, status=http_status(exc))
    if json:
        return JsonResponse(
            {
                "message": UNDONE_MESSAGE,
                "next": workbench_json(request, project, role, assignment),
            }
        )
    messages.success(request, UNDONE_MESSAGE)
    return redirect("annotate-form", slug=project.slug, assignment_id=assignment.pk)


@login_required
@require_http_methods(["POST"])
def annotate_ahead(request: HttpRequest, slug: str, assignment_id: int) -> HttpResponse:
    """Reserve the item after ``assignment_id`` (the page's prefetch); answer it rendered.

    JSON only (the page script's): ``{"reserve": {"for", "assignment_id", "url", "title",
    "html", "lease_seconds"} | null}`` (null: no item is left for the annotator), or
    ``{"problems": [...]}`` with status 409 when ``assignment_id`` is no longer the annotator's
    lease (submitted, skipped, run out). The rules are :func:`item_claim_ahead`'s: at most one
    reserve besides the current item, an ordinary lease counted like any other; asked again (or
    from a second tab) it answers the same reserve.
    """
    project, role = project_for(request, slug, allowed=permissions.ANNOTATORS)
    current = _own_assignment(request, project, assignment_id)
    try:
        reserve = item_claim_ahead(project=project, actor=request.user, assignment_id=current.pk)
    except (exceptions.InvalidTransition, exceptions.Conflict) as exc:
        return problems_json(general_problem(exc.message), http_status(exc))
    if reserve is None:
        return JsonResponse({"reserve": None})
    return JsonResponse(
        {
            "reserve": {
                "for": current.pk,
                **workbench_json(request, project, role, reserve, previous=current),
            }
        }
    )


@login_required
@require_http_methods(["GET", "HEAD"])
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
