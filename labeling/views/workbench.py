"""The labelling page's workbench: its context, and the JSON answers its script asks for.

A submit or skip made by the page script (``labeling/static/labeling/annotate.js``) is answered
with JSON: what was saved, and the next item rendered as the page's workbench fragment (or the
page to go to). The reserve of "Next item ahead" (:mod:`labeling.services.assignments`) comes
rendered as it will be shown.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from labeling import exceptions
from labeling.api_errors import DATABASE_ERRORS
from labeling.forms import LabelsState, SkipForm
from labeling.models import Annotation, Assignment, Project
from labeling.selectors.pages import own_previous_submission, own_queue, own_undoable_skip
from labeling.selectors.review import LabellingFormView, labelling_form_view
from labeling.selectors.work import assignment_current_for_actor
from labeling.services.assignments import item_claim_ahead, item_claim_next
from labeling.views.common import page_context
from labeling.views.labels import FormErrors, form_context, guideline_context, state_from_vote
from labeling.views.problems import PageProblem

NO_WORK_MESSAGE = "No items are waiting for you right now. Thank you!"


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


def form_page(
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


def workbench_json(
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
    state = replace(state_from_vote(view.current), revision=based_on(view))
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


def problems_json(
    problems: list[PageProblem] | tuple[PageProblem, ...], status: int
) -> JsonResponse:
    return JsonResponse(
        {"problems": [p.as_json() for p in problems], "status": status}, status=status
    )


def general_problem(message: str) -> list[PageProblem]:
    return [PageProblem("", "general", None, "", message)]


def based_on(view: LabellingFormView) -> str:
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
    return {"for": current.pk, **workbench_json(request, project, role, reserve, previous=current)}


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


def after_submit_json(
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
        body["next"] = workbench_json(request, project, role, following)
    else:
        # The page goes to ``url`` with a full load: the message is shown there.
        body["url"] = reverse("my-annotations" if revised else "annotate-next", args=[project.slug])
        messages.success(request, body["message"])
        if not revised:
            messages.info(request, NO_WORK_MESSAGE)
    return JsonResponse(body)


def after_skip_json(
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
        body["next"] = workbench_json(request, project, role, following)
    else:
        body["url"] = reverse("annotate-next", args=[project.slug])
        messages.success(request, message)
        messages.info(request, NO_WORK_MESSAGE)
    return JsonResponse(body)
