"""Gold pages (managers only): an item's reference labels, and the gold and qualification page.

Every other role gets 404: which items are gold, and their references, are managers' secrets.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling import permissions
from labeling.exceptions import InvalidTransition, LabelingError
from labeling.gold_forms import GoldReferenceForm, QualificationDecisionForm
from labeling.models import ItemStatus
from labeling.selectors import item_get
from labeling.selectors.gold import (
    gold_item_list,
    gold_reference_current,
    gold_reference_policy,
    qualification_list,
)
from labeling.services.gold import gold_reference_set, qualification_decide
from labeling.views.common import page_context, project_for, signed_in_user


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def gold_reference_view(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    """Show and set an item's reference labels (making it gold); managers only."""
    project, role = project_for(request, slug, visible_to=permissions.MANAGERS)
    item = item_get(project=project, item_id=item_id, with_labels=False)
    claims = list(item.candidate.claims.all())
    policy = gold_reference_policy(project=project)
    current = gold_reference_current(item=item) if item.status == ItemStatus.GOLD else None
    status = 200
    if request.method == "POST":
        form = GoldReferenceForm(request.POST, item=item, claims=claims, policy=policy)
        status = 400
        if form.is_valid() and (reference := form.reference()) is not None:
            try:
                saved = gold_reference_set(
                    project=project,
                    item_id=item.pk,
                    actor=signed_in_user(request),
                    data=reference,
                )
            except InvalidTransition as exc:
                messages.error(request, exc.message)
                status = 409
            except LabelingError as exc:
                form.add_service_error(exc)
            else:
                messages.success(
                    request, f"Item #{item.pk} is a gold item (reference {saved.number})."
                )
                return redirect("item-detail", slug=project.slug, item_id=item.pk)
    else:
        form = GoldReferenceForm(
            initial=GoldReferenceForm.initial_for(current), item=item, claims=claims, policy=policy
        )
    context = page_context(
        project,
        role,
        item=item,
        candidate=item.candidate,
        reference=current,
        policy=policy,
        form=form,
        retrievals=list(item.candidate.question.retrievals.all()),
    )
    return render(request, "labeling/gold_reference.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def gold_overview(request: HttpRequest, slug: str) -> HttpResponse:
    """The gold items and each annotator's qualification, with the managers' decisions."""
    project, role = project_for(request, slug, visible_to=permissions.MANAGERS)
    status = 200
    if request.method == "POST":
        form = QualificationDecisionForm(request.POST)
        status = 400
        if form.is_valid():
            data = form.cleaned_data
            try:
                qualification_decide(
                    project=project,
                    annotator_id=data["user_id"],
                    actor=signed_in_user(request),
                    admit=data["decision"] == "admit",
                    note=data["note"],
                )
            except LabelingError as exc:
                messages.error(request, exc.message)
                status = 404 if exc.code == "not_found" else 409
            else:
                messages.success(request, "Decision recorded.")
                return redirect("gold-overview", slug=project.slug)
        else:
            messages.error(request, "Choose admit or refuse for an annotator of this project.")
    context = page_context(
        project,
        role,
        gold_items=list(gold_item_list(project=project)),
        qualifications=qualification_list(project=project),
        policy=project.policies.order_by("-version").first(),
    )
    return render(request, "labeling/gold.html", context, status=status)
