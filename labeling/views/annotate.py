"""Annotator pages: next item, the labelling form, skip, and the annotator's own annotations.

The page script keeps the next item ready while the annotator works (``annotate_ahead``, and
the ``reserve`` of each submit's JSON answer): a submit then shows it at once, without waiting
for the server (see ``labeling/static/labeling/annotate.js`` and "Next item ahead" in
:mod:`labeling.services.assignments`).

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
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from labeling import exceptions, permissions
from labeling.api_errors import DATABASE_ERRORS
from labeling.forms import LabelsState, SkipForm, single_values_check
from labeling.http_errors import http_status
from labeling.models import Annotation, Assignment, Project
from labeling.selectors.pages import (
    own_annotation_list,
    own_previous_submission,
    own_progress,
    own_queue,
    own_undoable_skip,
)
from labeling.selectors.review import LabellingFormView, labelling_form_view
from labeling.selectors.work import assignment_current_for_actor, assignment_get_for_actor
from labeling.services.annotations import annotation_submit
from labeling.services.assignments import item_claim_ahead, item_claim_next
from labeling.services.skips import assignment_skip, assignment_skip_undo
from labeling.views.common import (
    form_add_domain_error,
    page_context,
    project_for,
    wants_json,
)
from labeling.views.labels import (
    FormErrors,
    errors_from,
    form_context,
    guideline_context,
    state_from_vote,
)
from labeling.views.problems import PageProblem

# Shown instead of the service's message when a revision is refused: the reason (the item was
# resolved) would tell the annotator how the other votes went.
CLOSED_MESSAGE = "This item is closed: your labels were not saved."
# Shown when another session of the annotator saved a revision after this form was loaded.
CHANGED_MESSAGE = (
    "Another session changed this annotation since you opened it: your labels were not saved. "
    "The labels saved now are shown below; your input is kept in the form. Save again to "
    "replace them."
)
NO_WORK_MESSAGE = "No items are waiting for you right now. Thank you!"
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


def _form_context(
    request: HttpRequest,
    project: Project,
    role: str | None,
    view: LabellingFormView,
    *,
    state: LabelsState,
    errors: FormErrors,
    conflict: bool = False,
    previous: Assignment | None = None,
) -> dict[str, Any]:
    """The labelling page's context: the form, the guideline, progress, undo and revise links.

    ``previous``: the assignment "Revise previous" opens when the page is rendered ahead of its
    submit (else it is read: the latest submission that can still be revised).
    """
    policy = view.policy
    if previous is None or previous.pk == view.assignment_id:
        previous = own_previous_submission(
            project=project, actor=request.user, exclude=view.assignment_id
        )
    undo = own_undoable_skip(project=project, actor=request.user)
    return page_context(
        project,
        role,
        view=view,
        skip_form=SkipForm(),
        revising=view.current is not None,
        # After a conflict: the saved labels another session wrote, beside the kept input.
        saved=_saved_labels(view) if conflict else None,
        queue=own_queue(project=project, actor=request.user),
        previous=previous,
        undo_skip=undo if undo is not None and undo.pk != view.assignment_id else None,
        **form_context(
            question_text=view.question_text,
            candidate_text=view.candidate_text,
            claims=view.claims,
            sources=view.sources,
            state=state,
            errors=errors,
            answer_choices=policy.answer_choices,
            claim_choices=policy.claim_choices,
            reason_choices=policy.reason_choices,
            evidence_labels=policy.evidence_labels,
            cannot_decide=True,
        ),
        **guideline_context(policy),
    )


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
    context = _form_context(
        request, project, role, view, state=state, errors=errors, conflict=conflict
    )
    return render(request, "labeling/annotate.html", context, status=status)


def _workbench_json(
    request: HttpRequest,
    project: Project,
    role: str | None,
    assignment: Assignment,
    *,
    previous: Assignment | None = None,
) -> dict[str, Any]:
    """The next item of a JSON answer: its URL, title and the page's workbench fragment.

    ``previous``: the assignment about to be submitted (the "Revise previous" link of a
    reserve), if any.
    """
    view = labelling_form_view(project=project, assignment=assignment)
    state = replace(state_from_vote(view.current), revision=_based_on(view))
    context = _form_context(
        request, project, role, view, state=state, errors=FormErrors(), previous=previous
    )
    return {
        "assignment_id": assignment.pk,
        "url": reverse("annotate-form", args=[project.slug, assignment.pk]),
        "title": f"{'Revise your annotation' if view.current else 'Label an item'}"
        f" · {project.name} · certlabel",
        "html": render_to_string("labeling/_workbench.html", context, request=request),
        # How long the lease still runs (the page keeps a reserve only while it does).
        "lease_seconds": max(0.0, (assignment.lease_expires_at - timezone.now()).total_seconds()),
    }


def _problems_json(
    problems: list[PageProblem] | tuple[PageProblem, ...], status: int
) -> JsonResponse:
    return JsonResponse(
        {"problems": [p.as_json() for p in problems], "status": status}, status=status
    )


def _general(message: str) -> list[PageProblem]:
    return [PageProblem("", "general", None, "", message)]


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


def _saved_json(project: Project, annotation: Annotation, assignment: Assignment) -> dict[str, Any]:
    """What was just written, from the submit's own result (no query)."""
    current = annotation.current
    return {
        "assignment_id": assignment.pk,
        "annotation_id": annotation.pk,
        "revision": current.number if current is not None else None,
        "answer_label": current.answer_label if current is not None else None,
        "revise_url": reverse("annotate-form", args=[project.slug, assignment.pk]),
    }


def _ahead_id(request: HttpRequest) -> int | None:
    """The reserve the page shows after this submit (its ``ahead`` field), if it names one."""
    value = request.POST.get("ahead", "")
    return int(value) if value.isdigit() and len(value) < 19 else None


def _reserve_json(
    request: HttpRequest, project: Project, role: str | None, current: Assignment
) -> dict[str, Any] | None:
    """The item reserved after ``current`` (claimed now if none is), rendered; None if none.

    It is rendered as it will be shown once ``current`` is submitted: "Revise previous" opens
    ``current``. Refused or failed (``current`` is no longer the actor's lease, a database
    error), there is no reserve: the page then waits for its submit's answer.
    """
    try:
        reserve = item_claim_ahead(project=project, actor=request.user, assignment_id=current.pk)
    except exceptions.LabelingError:
        return None
    except DATABASE_ERRORS:
        return None
    if reserve is None:
        return None
    return {"for": current.pk, **_workbench_json(request, project, role, reserve, previous=current)}


def _claim_quietly(request: HttpRequest, project: Project) -> Assignment | None:
    """Claim the next item after a write that committed; None when none could be claimed.

    The write's success is the answer; the next-item page (where the answer sends the page
    without a next item) says why there is none.
    """
    try:
        return item_claim_next(project=project, actor=request.user)
    except exceptions.LabelingError:
        return None
    except DATABASE_ERRORS:
        return None


def _after_submit_json(
    request: HttpRequest,
    project: Project,
    role: str | None,
    assignment: Assignment,
    annotation: Annotation,
    *,
    revised: bool,
) -> JsonResponse:
    """The JSON answer of a saved submit: what was saved, and the next item rendered.

    After a first submit the next item is claimed (as the HTML flow does); after a revision the
    item the annotator holds now, if any, comes back. Without a next item the answer names the
    page to go to.
    """
    body: dict[str, Any] = {
        "saved": _saved_json(project, annotation, assignment),
        "message": "Your annotation is saved (a new revision if anything changed)."
        if revised
        else "Saved.",
        "next": None,
    }
    ahead = None if revised else _ahead_id(request)
    if ahead is not None:
        # The page shows the reserve it fetched ahead already: confirm it (when it is the item
        # "next" serves now), and send the reserve after it instead of the next item's page.
        following = assignment_current_for_actor(project=project, actor=request.user)
        if following is not None and following.pk == ahead:
            # The reserve was rendered before this submit: its "Revise previous" opens the item
            # just saved, which this vote may have closed; the page follows ``previous_url``.
            previous = own_previous_submission(
                project=project, actor=request.user, exclude=following.pk
            )
            body["next"] = {
                "assignment_id": following.pk,
                "url": reverse("annotate-form", args=[project.slug, following.pk]),
                "ahead": True,
                "previous_url": reverse("annotate-form", args=[project.slug, previous.pk])
                if previous is not None
                else None,
            }
            body["reserve"] = _reserve_json(request, project, role, following)
            return JsonResponse(body)
    if revised:
        following = assignment_current_for_actor(project=project, actor=request.user)
    else:
        following = _claim_quietly(request, project)
    if following is not None:
        # "Revise previous" is read: this vote may have closed the item just saved.
        body["next"] = _workbench_json(request, project, role, following)
    else:
        # The page goes to ``url`` with a full load: the message is shown there.
        body["url"] = reverse("my-annotations" if revised else "annotate-next", args=[project.slug])
        messages.success(request, body["message"])
        if not revised:
            messages.info(request, NO_WORK_MESSAGE)
    return JsonResponse(body)


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
        state = replace(state_from_vote(view.current), revision=_based_on(view))
        return _form_page(request, project, role, view, state=state, errors=FormErrors())
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
            return _problems_json(_general(message + " Reload the page to see them."), 409)
        fresh = labelling_form_view(project=project, assignment=assignment)
        return _form_page(
            request,
            project,
            role,
            fresh,
            state=replace(state, revision=_based_on(fresh)),
            errors=FormErrors(general=message),
            status=409,
            conflict=not policy_changed,
        )
    except (exceptions.InvalidInput, exceptions.LeaseExpired, exceptions.InvalidTransition) as exc:
        # Every bad field (400) is shown next to it, a lost lease (409) at the top; a closed
        # item (409) gets CLOSED_MESSAGE, never the service's reason.
        closed = isinstance(exc, exceptions.InvalidTransition)
        if closed:
            errors = FormErrors(general=CLOSED_MESSAGE, problems=tuple(_general(CLOSED_MESSAGE)))
        else:
            errors = errors_from(
                exc, state=state, claim_ids=claim_ids, claim_names=_claim_names(view)
            )
        if json:
            return _problems_json(errors.problems, http_status(exc))
        return _form_page(
            request, project, role, view, state=state, errors=errors, status=http_status(exc)
        )
    revised = view.current is not None
    if json:
        return _after_submit_json(request, project, role, assignment, annotation, revised=revised)
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
                return _after_skip_json(request, project, role, assignment, message)
            messages.success(request, message)
            return _claim_and_go(request, project)
    status = 400 if request.method == "POST" else 200
    if json and request.method == "POST":
        return _problems_json(_skip_problems(form), status)
    context = page_context(project, role, form=form, assignment=assignment)
    return render(request, "labeling/skip.html", context, status=status)


def _after_skip_json(
    request: HttpRequest, project: Project, role: str | None, assignment: Assignment, message: str
) -> JsonResponse:
    body: dict[str, Any] = {
        "skipped": {
            "assignment_id": assignment.pk,
            "undo_url": reverse("annotate-skip-undo", args=[project.slug, assignment.pk]),
        },
        "message": message,
        "next": None,
    }
    following = _claim_quietly(request, project)
    if following is not None:
        body["next"] = _workbench_json(request, project, role, following)
    else:
        body["url"] = reverse("annotate-next", args=[project.slug])
        messages.success(request, message)
        messages.info(request, NO_WORK_MESSAGE)
    return JsonResponse(body)


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
            return _problems_json(_general(problem), http_status(exc))
        messages.error(request, problem)
        return _next_page(request, project, role, empty=False, status=http_status(exc))
    if json:
        return JsonResponse(
            {
                "message": UNDONE_MESSAGE,
                "next": _workbench_json(request, project, role, assignment),
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
        return _problems_json(_general(exc.message), http_status(exc))
    if reserve is None:
        return JsonResponse({"reserve": None})
    return JsonResponse(
        {
            "reserve": {
                "for": current.pk,
                **_workbench_json(request, project, role, reserve, previous=current),
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
