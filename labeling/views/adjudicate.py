"""Adjudicator pages: the disagreement queue and the side-by-side view with the decision form.

Annotators appear as "Annotator 1..N" only (``adjudication_view`` carries no identity), and no
evaluator label is read. The decision carries the item ``version`` the page was rendered with
(optimistic locking): if someone decided or revised meanwhile, the service raises StaleVersion
and the page reloads the current state with a conflict message, keeping the adjudicator's input.

A new decision starts from what every vote agrees on (pre-filled, marked as such). After a
decision the next item of the queue opens (the queue's filters travel in the query string); a
request that accepts JSON (the page script) gets ``{"message", "next_url"}`` instead of the
redirect, and a refused decision lists every problem in the page's words as the labelling page
does (``{"field", "target", "claim_position", "where", "text", "message"}``). The policy's
guideline is shown beside the task.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
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
from labeling.selectors.adjudication import (
    AdjudicationView,
    PriorFlag,
    adjudication_view,
    disagreement_queue,
    queue_next,
)
from labeling.selectors.pages import resolution_vote, resolution_waived_claims
from labeling.selectors.policies import (
    policy_evidence_labels,
    policy_label_choices,
    policy_reason_choices,
)
from labeling.selectors.review import ClaimRow
from labeling.services.adjudication import adjudication_mark_unresolved, adjudication_resolve
from labeling.views.common import page_context, project_for
from labeling.views.labels import FormErrors, form_context, label_texts, state_from_vote
from labeling.views.panels import adjudication_panels_render
from labeling.views.problems import PageProblem, problems_of

QUEUE_PAGE_SIZE = 50


@login_required
@require_http_methods(["GET", "HEAD"])
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
    context = page_context(
        project, role, form=form, page=page, waiting=waiting, queue_query=_queue_query(form)
    )
    return render(request, "labeling/adjudication_queue.html", context)


def _queue_query(form: QueueFilterForm) -> str:
    """The queue's valid filters as a query string ("" when none), carried from item to item."""
    return urlencode(form.filters())


def _item_url(project: Project, item_id: int, query: str) -> str:
    url = reverse("adjudication-item", args=[project.slug, item_id])
    return f"{url}?{query}" if query else url


def _columns_data(view: AdjudicationView) -> list[dict[str, Any]]:
    """The columns' votes for the "Use" buttons (code-point offsets, as stored)."""
    return [
        {
            "pseudonym": column.pseudonym,
            "imported": column.imported,
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


def _flags_of(claim: ClaimRow, flags: tuple[PriorFlag, ...]) -> list[PriorFlag]:
    """An imported vote's flagged spans that belong to ``claim`` (same rule as the importer).

    A span belongs to a claim when they share a code point; an empty span belongs to the claim
    holding its start. A claim without offsets gets none.
    """
    if claim.start is None or claim.end is None:
        return []
    start, end = claim.start, claim.end
    return [
        f
        for f in flags
        if (start <= f.start < end if f.start == f.end else max(f.start, start) < min(f.end, end))
    ]


def _cells(view: AdjudicationView) -> list[dict[str, Any]]:
    """Per claim, each column's vote (or None), its flags with notes, and ``waived``.

    ``waived``: a decision adopting this vote's label may go without evidence (imported votes
    that cited no span).
    """
    rows = []
    for claim in view.claims:
        waivable = view.evidence_waivers.get(claim.id, frozenset())
        votes = []
        for column in view.annotators:
            vote = column.vote.claims.get(claim.id)
            votes.append(
                {
                    "vote": vote,
                    "flags": _flags_of(claim, column.flags),
                    "waived": vote is not None and vote.label in waivable,
                }
            )
        rows.append(
            {"claim": claim, "differs": claim.id in view.differing_claim_ids, "votes": votes}
        )
    return rows


def _voters_by_label(view: AdjudicationView) -> dict[str | int, dict[str, list[str]]]:
    """Who voted what, by level: ``{"answer" | claim id: {label: [pseudonym, ...]}}``.

    The adjudication panels say which annotators a model estimate sides with.
    """
    voters: dict[str | int, dict[str, list[str]]] = {"answer": {}}
    for column in view.annotators:
        if column.vote.answer_label:
            voters["answer"].setdefault(column.vote.answer_label, []).append(column.pseudonym)
        for claim_id, vote in column.vote.claims.items():
            if vote.label:
                level = voters.setdefault(claim_id, {})
                level.setdefault(vote.label, []).append(column.pseudonym)
    return voters


#: The decision's own fields, as :func:`labeling.views.problems.problems_of` places them.
DECISION_PAGE_FIELDS = {"reason": ("decision", ""), "rationale": ("decision", "Rationale")}


def _decision_words(problem: PageProblem, unresolved_reason: str) -> PageProblem:
    """Word a problem of the decision's own fields as the page says it (labels are worded)."""
    if problem.field == "reason":
        text = (
            "Choose one of the reasons listed"
            if unresolved_reason
            else "Choose why it stays unresolved"
        )
        return replace(problem, where="", text=text)
    if problem.field == "rationale" and problem.text == "give a rationale for the decision":
        return replace(
            problem, text="write why you decided this (required to resolve, and for “other”)"
        )
    return problem


def decision_problems(
    exc: exceptions.LabelingError,
    *,
    state: LabelsState,
    claims: tuple[ClaimRow, ...],
    unresolved_reason: str,
) -> list[PageProblem]:
    """Return every problem of a refused decision in the adjudication page's words.

    Label, reason and evidence problems are worded as on the labelling page
    (:func:`labeling.views.problems.problems_of`); the unresolved reason and the rationale as
    this page says them ("Choose why it stays unresolved"). Problems not tied to a field go to
    the top (target ``general``).
    """
    problems = problems_of(
        exc,
        state=state,
        claim_ids=[c.id for c in claims],
        claim_names=[f"Claim {c.index + 1}" for c in claims],
        field_names=DECISION_PAGE_FIELDS,
    )
    return [_decision_words(p, unresolved_reason) for p in problems]


def _form_errors(problems: list[PageProblem]) -> FormErrors:
    """Place each problem next to its claim or the answer; all of them go in the summary."""
    claims: dict[int, list[str]] = {}
    for p in problems:
        if p.target == "claim" and p.claim_position is not None:
            claims.setdefault(p.claim_position, []).append(p.text)
    return FormErrors(
        general=None,
        answer=" ".join(p.text for p in problems if p.target == "answer") or None,
        claims={k: " ".join(v) for k, v in claims.items()},
        problems=tuple(problems),
    )


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _page(
    request: HttpRequest,
    project: Project,
    role: str | None,
    view: AdjudicationView,
    *,
    state: LabelsState,
    problems: list[PageProblem] | None = None,
    prefilled: bool = False,
    unresolved_reason: str = "",
    rationale: str = "",
    conflict: str | None = None,
    status: int = 200,
) -> HttpResponse:
    policy = view.policy
    problems = problems or []
    query = _queue_query(QueueFilterForm(request.GET or None))
    following = queue_next(project=project, actor=request.user, after=view.item.pk)
    agreed = view.agreed
    prefilled_answer = prefilled and agreed is not None and agreed.answer
    prefilled_claims = agreed.claims if prefilled and agreed is not None else frozenset()
    answer_choices = policy_label_choices(policy, "answer") if policy else ()
    claim_choices = policy_label_choices(policy, "claim") if policy else ()
    reason_choices = policy_reason_choices(policy) if policy else ()
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
        problems=problems,
        decision_problems={p.field: p.text for p in problems if p.target == "decision"},
        prefilled_answer=prefilled_answer,
        prefilled_claims=prefilled_claims,
        prefill_summary=", ".join(
            (["the answer"] if prefilled_answer else [])
            + [f"claim {c.index + 1}" for c in view.claims if c.id in prefilled_claims]
        ),
        resolution_waived=resolution_waived_claims(resolution=view.resolution),
        keyboard=True,  # keyboard citing (the sources' caret and find field)
        guideline=policy.guideline if policy else "",
        guideline_version=policy.version if policy else None,
        waivers={cid: sorted(labels) for cid, labels in view.evidence_waivers.items()},
        form_action=_item_url(project, view.item.pk, query),
        next_url=_item_url(project, following, query) if following is not None else None,
        # Shown only here, after the blind votes are in (e.g. the model's estimate).
        panels=adjudication_panels_render(
            request=request,
            project=project,
            item_id=view.item.pk,
            claim_ids=tuple(c.id for c in view.claims),
            shared={
                "label_texts": label_texts(answer_choices, claim_choices, reason_choices),
                "voters_by_label": _voters_by_label(view),
            },
        ),
        queue_url=reverse("adjudication-queue", args=[project.slug])
        + (f"?{query}" if query else ""),
        **form_context(
            question_text=view.question.text,
            candidate_text=view.candidate.text,
            claims=view.claims,
            sources=view.sources,
            state=state,
            errors=_form_errors(problems),
            answer_choices=answer_choices,
            claim_choices=claim_choices,
            reason_choices=reason_choices,
            evidence_labels=policy_evidence_labels(policy) if policy else (),
            # The final label is a label: "can't decide" is what "Mark unresolved" is for.
            cannot_decide=False,
            differing_claim_ids=view.differing_claim_ids,
        ),
    )
    return render(request, "labeling/adjudicate.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def adjudication_item(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    """GET: the side-by-side view. POST ``action=resolve`` or ``action=unresolved``.

    Success opens the next item of the queue (or the queue when it is empty); with
    ``Accept: application/json``, ``{"message", "next_url"}`` (200). A refused decision keeps the
    input and shows every problem at once next to its field (400; JSON: the error body with
    ``errors`` in page words); a conflict (another decision or a revision since the page was
    loaded) reloads the current state with a message (409).
    """
    # As with the item browser: for annotators the queue does not exist.
    project, role = project_for(request, slug, visible_to=permissions.REVIEWERS)
    # An item not in the queue is NotFound (404), one the adjudicator annotated (without
    # self-adjudication) PermissionDenied (403): pages of labeling/views/errors.py.
    view = adjudication_view(project=project, item_id=item_id, actor=request.user)
    if request.method in ("GET", "HEAD"):
        # A correction starts from the current adjudicated labels; a new decision from what
        # every vote agrees on.
        if view.resolution is not None:
            state = state_from_vote(resolution_vote(resolution=view.resolution))
        else:
            state = state_from_vote(view.agreed.vote if view.agreed else None)
        return _page(
            request,
            project,
            role,
            view,
            state=state,
            prefilled=view.resolution is None,
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
    except exceptions.StaleVersion as exc:
        if _wants_json(request):
            return JsonResponse(exc.body(), status=409)
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
            unresolved_reason=unresolved_reason,
            rationale=rationale,
            conflict=conflict,
            status=409,
        )
    except (exceptions.InvalidInput, exceptions.InvalidTransition) as exc:
        problems = decision_problems(
            exc, state=state, claims=view.claims, unresolved_reason=unresolved_reason
        )
        if _wants_json(request):
            body = {**exc.body(), "errors": [p.as_json() for p in problems]}
            return JsonResponse(body, status=http_status(exc))
        return _page(
            request,
            project,
            role,
            view,
            state=state,
            problems=problems,
            unresolved_reason=unresolved_reason,
            rationale=rationale,
            status=http_status(exc),
        )
    word = "marked unresolved" if action == "unresolved" else "adjudicated"
    message = f"Item #{view.item.pk} {word}."
    form = QueueFilterForm(request.GET or None)
    following = queue_next(project=project, actor=request.user, filters=form.filters())
    query = _queue_query(form)
    if following is None:
        message += " The queue is empty."
        target = reverse("adjudication-queue", args=[project.slug]) + (f"?{query}" if query else "")
    else:
        target = _item_url(project, following, query)
    if _wants_json(request):
        return JsonResponse({"message": message, "next_url": target})
    messages.success(request, message)
    return redirect(target)
