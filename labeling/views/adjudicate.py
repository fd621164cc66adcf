"""Adjudicator pages: the disagreement queue and the side-by-side view with the decision form.

Annotators appear as "Annotator 1..N" only (``adjudication_view`` carries no identity), and no
evaluator label is read. The decision carries the item ``version`` the page was rendered with
(optimistic locking): if someone decided or revised meanwhile, the service raises StaleVersion
and the page reloads the current state with a conflict message, keeping the adjudicator's input.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling import exceptions, permissions
from labeling.forms import (
    DECISION_FIELDS,
    LABELS_FIELDS,
    LabelsState,
    QueueFilterForm,
    single_values_check,
)
from labeling.http_errors import http_status
from labeling.models import Project, UnresolvedReason
from labeling.selectors.pages import resolution_vote
from labeling.selectors.review import AdjudicationView, adjudication_view, disagreement_queue
from labeling.services.adjudication import adjudication_mark_unresolved, adjudication_resolve
from labeling.views.common import page_context, project_for
from labeling.views.labels import FormErrors, errors_from, form_context, state_from_vote

QUEUE_PAGE_SIZE = 50


@login_required
@require_http_methods(["GET"])
def adjudication_queue(request: HttpRequest, slug: str) -> HttpResponse:
    """List the items waiting for adjudication, oldest first, filtered, 50 a page.

    Items the adjudicator annotated are left out unless the project allows self-adjudication.
    """
    # As with the item browser: for annotators the queue does not exist.
    project, role = project_for(request, slug, visible_to=permissions.REVIEWERS)
    form = QueueFilterForm(request.GET or None)
    items = disagreement_queue(project=project, filters=form.filters(), actor=request.user)
    page = Paginator(items, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    waiting = disagreement_queue(project=project, actor=request.user).count()
    context = page_context(project, role, form=form, page=page, waiting=waiting)
    return render(request, "labeling/adjudication_queue.html", context)


def _columns_data(view: AdjudicationView) -> list[dict[str, Any]]:
    """The columns' votes for the "copy" buttons (code-point offsets, as stored)."""
    return [
        {
            "pseudonym": column.pseudonym,
            "answer_label": column.vote.answer_label,
            "answer_reason": column.vote.answer_reason,
            "claims": {
                str(claim_id): {
                    "label": vote.label,
                    "reason": vote.reason,
                    "evidence": [
                        {
                            "source_version_id": s.source_version_id,
                            "start": s.start,
                            "end": s.end,
                            "quote": s.quote,
                        }
                        for s in vote.evidence
                    ],
                }
                for claim_id, vote in column.vote.claims.items()
            },
        }
        for column in view.annotators
    ]


def _cells(view: AdjudicationView) -> list[dict[str, Any]]:
    """Per claim, each column's vote (or None), for the side-by-side table."""
    return [
        {
            "claim": claim,
            "differs": claim.id in view.differing_claim_ids,
            "votes": [column.vote.claims.get(claim.id) for column in view.annotators],
        }
        for claim in view.claims
    ]


def _page(
    request: HttpRequest,
    project: Project,
    role: str | None,
    view: AdjudicationView,
    *,
    state: LabelsState,
    errors: FormErrors,
    unresolved_reason: str = "",
    rationale: str = "",
    conflict: str | None = None,
    status: int = 200,
) -> HttpResponse:
    policy = view.policy
    context = page_context(
        project,
        role,
        view=view,
        columns=list(view.annotators),
        columns_data=_columns_data(view),
        cells=_cells(view),
        unresolved_reasons=UnresolvedReason.choices,
        unresolved_reason=unresolved_reason,
        rationale=rationale,
        conflict=conflict,
        **form_context(
            question_text=view.question.text,
            candidate_text=view.candidate.text,
            claims=view.claims,
            sources=view.sources,
            state=state,
            errors=errors,
            answer_labels=policy.answer_labels if policy else (),
            claim_labels=policy.claim_labels if policy else (),
            reasons=policy.unavailable_reasons if policy else (),
            # The final label is a label: "can't decide" is what "Mark unresolved" is for.
            cannot_decide=False,
            differing_claim_ids=view.differing_claim_ids,
        ),
    )
    return render(request, "labeling/adjudicate.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def adjudication_item(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    """GET: the side-by-side view. POST ``action=resolve`` or ``action=unresolved``.

    Success goes back to the queue. A refused decision keeps the input: an invalid field is
    shown next to it (400); a conflict (another decision or a revision since the page was
    loaded) reloads the current state with a message (409).
    """
    # As with the item browser: for annotators the queue does not exist.
    project, role = project_for(request, slug, visible_to=permissions.REVIEWERS)
    # An item not in the queue is NotFound (404), one the adjudicator annotated (without
    # self-adjudication) PermissionDenied (403): pages of labeling/views/errors.py.
    view = adjudication_view(project=project, item_id=item_id, actor=request.user)
    if request.method == "GET":
        # A correction starts from the current adjudicated labels; a new decision from nothing.
        state = state_from_vote(resolution_vote(resolution=view.resolution))
        return _page(
            request,
            project,
            role,
            view,
            state=state,
            errors=FormErrors(),
            rationale=view.resolution.rationale if view.resolution else "",
        )
    claim_ids = [c.id for c in view.claims]
    state = LabelsState.from_post(request.POST, claim_ids)
    action = request.POST.get("action", "resolve")
    if action not in ("resolve", "unresolved"):
        return HttpResponseBadRequest("action must be resolve or unresolved")
    unresolved_reason = request.POST.get("unresolved_reason", "")
    rationale = request.POST.get("rationale", "")
    try:
        expected_version = int(request.POST.get("expected_version", ""))
    except ValueError:
        expected_version = -1
    try:
        single_values_check(request.POST, claim_ids, (*LABELS_FIELDS, *DECISION_FIELDS))
        if action == "unresolved":
            adjudication_mark_unresolved(
                project=project,
                item_id=view.item.pk,
                actor=request.user,
                expected_version=expected_version,
                reason=unresolved_reason,
                rationale=rationale,
            )
        else:
            adjudication_resolve(
                project=project,
                item_id=view.item.pk,
                actor=request.user,
                expected_version=expected_version,
                answer_label=state.answer_label,
                answer_reason=state.answer_reason or None,
                claims=state.claim_inputs(claim_ids),
                rationale=rationale,
            )
    except exceptions.StaleVersion:
        fresh = adjudication_view(project=project, item_id=item_id, actor=request.user)
        conflict = (
            "Someone else changed this item since you opened it (another adjudication or a "
            "revised annotation). The page now shows its current state; your input is kept "
            "below. Check it and decide again."
        )
        return _page(
            request,
            project,
            role,
            fresh,
            state=state,
            errors=FormErrors(),
            unresolved_reason=unresolved_reason,
            rationale=rationale,
            conflict=conflict,
            status=409,
        )
    except (exceptions.InvalidInput, exceptions.InvalidTransition) as exc:
        return _page(
            request,
            project,
            role,
            view,
            state=state,
            errors=errors_from(exc),
            unresolved_reason=unresolved_reason,
            rationale=rationale,
            status=http_status(exc),
        )
    if action == "unresolved":
        messages.success(request, f"Item #{view.item.pk} marked unresolved.")
    else:
        messages.success(request, f"Item #{view.item.pk} adjudicated.")
    return redirect("adjudication-queue", slug=project.slug)
