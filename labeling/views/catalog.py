"""Catalogue pages: project list and dashboard, item browser, import, partition."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from labeling import permissions
from labeling.charts import Chart, Series, bar_chart, line_chart
from labeling.exceptions import (
    InvalidInput,
    InvalidTransition,
    LabelingError,
    WorkloadImportFailed,
)
from labeling.forms import (
    ImportForm,
    ItemBulkForm,
    ItemFilterForm,
    PartitionForm,
    format_choices,
)
from labeling.models import ItemStatus
from labeling.selectors import (
    item_annotators,
    item_answer_labels,
    item_generators,
    item_get,
    item_list,
    project_list_for_user,
    project_overview,
)
from labeling.selectors.dashboard import annotator_work, progress_daily
from labeling.selectors.gold import gold_reference_current, qualification_list
from labeling.selectors.members import invitations_for_user
from labeling.selectors.pages import own_progress, resolved_claim_labels
from labeling.selectors.review import project_progress
from labeling.services import (
    items_bulk_prioritise,
    items_return_to_queue,
    partition_freeze,
    workload_import_file,
)
from labeling.services.jobs import workload_import_in_background, workload_import_job_start
from labeling.views.common import (
    can_adjudicate,
    can_annotate,
    form_add_domain_error,
    page_context,
    project_for,
    signed_in_user,
)
from labeling.views.panels import dashboard_panels_render

ITEMS_PER_PAGE = 50


@dataclass(frozen=True)
class Segment:
    """A piece of an answer text and the keys of the claims covering it (empty: none)."""

    text: str
    claims: tuple[int, ...]


def answer_segments(
    text: str, claims: Iterable[Any], *, key: Callable[[Any], int] = attrgetter("index")
) -> list[Segment]:
    """Split ``text`` at the boundaries of its anchored claims.

    Offsets are code points (Python ``str`` indices), so an emoji before a claim counts as one.
    Claims may overlap; a piece covered by several lists the ``key`` of each (the claim index by
    default). Spans outside the text are clipped. The template escapes each piece: nothing here
    is marked safe.
    """
    spans = [
        (key(c), min(c.start, len(text)), min(c.end, len(text)))
        for c in claims
        if not c.unanchored and c.start is not None and c.end is not None
    ]
    cuts = sorted({0, len(text), *(s for _, s, _ in spans), *(e for _, _, e in spans)})
    segments = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        covering = tuple(i for i, s, e in spans if s <= start and end <= e)
        segments.append(Segment(text=text[start:end], claims=covering))
    return segments


@login_required
@require_http_methods(["GET", "HEAD"])
def project_list(request: HttpRequest) -> HttpResponse:
    """List the user's projects with their role and counts, and their pending invitations."""
    projects = project_list_for_user(user=request.user)
    rows = [(p, permissions.project_role(user=request.user, project=p)) for p in projects]
    invitations = invitations_for_user(user=request.user)
    can_create = permissions.can_create_projects(request.user)
    return render(
        request,
        "labeling/project_list.html",
        {"rows": rows, "invitations": invitations, "can_create_projects": can_create},
    )


def manager_charts(*, project: Any) -> list[Chart]:
    """The managers' dashboard plots: labels per day, resolved items, work per annotator.

    Three aggregate queries; the agreement plot comes with the agreement panel.
    """
    daily = progress_daily(project=project)
    days = [day.isoformat() for day in daily.days]
    work = annotator_work(project=project)
    return [
        bar_chart(
            chart_id="labels-per-day",
            title="Annotations submitted per day",
            description=(
                f"{sum(daily.submitted)} annotations over {len(days)} day(s), UTC days; "
                "one bar per day."
            ),
            categories=days,
            series=[Series("annotations submitted", daily.submitted)],
            x_label="day (UTC)",
            y_label="annotations",
        ),
        line_chart(
            chart_id="resolved-cumulative",
            title="Items resolved, cumulative",
            description=(
                f"{daily.resolved_cumulative[-1] if days else 0} items resolved by the last day "
                "shown, counted on the day of their current resolution (unresolved outcomes "
                "included: the item left the queue)."
            ),
            x_labels=days,
            series=[Series("items resolved", daily.resolved_cumulative)],
            step=True,
            x_label="day (UTC)",
            y_label="items",
        ),
        bar_chart(
            chart_id="work-per-annotator",
            title="Items per annotator",
            description=(
                f"{len(work)} annotator(s): items submitted, skipped and currently leased, "
                "stacked; imported votes not included."
            ),
            categories=[w.annotator for w in work],
            series=[
                Series("submitted", [w.submitted for w in work]),
                Series("skipped", [w.skipped for w in work]),
                Series("leased", [w.leased for w in work]),
            ],
            stacked=True,
            x_label="annotator",
            y_label="items",
        ),
    ]


@login_required
@require_http_methods(["GET", "HEAD"])
def project_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """The project dashboard: counts per partition, policy, split, labelling progress, panels.

    Managers and adjudicators see the items' progress and the contributed panels (agreement);
    an annotator sees only their own progress (how many they submitted and skipped), never a
    count that summarises other people's votes. Managers also get the plots of
    :func:`manager_charts`.
    """
    project, role = project_for(request, slug)
    overview = project_overview(project=project, include_batches=permissions.can_manage(role))
    sees_progress = can_adjudicate(role)
    context = page_context(
        project,
        role,
        overview=overview,
        progress=project_progress(project=project) if sees_progress else None,
        own=own_progress(project=project, actor=request.user) if can_annotate(role) else None,
        panels=dashboard_panels_render(request=request, project=project, role=role),
        charts=manager_charts(project=project) if permissions.can_manage(role) else [],
        awaiting_qualification=(
            [q for q in qualification_list(project=project) if q.awaiting_decision]
            if permissions.can_manage(role)
            else []
        ),
    )
    return render(request, "labeling/project_detail.html", context)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def item_browse(request: HttpRequest, slug: str) -> HttpResponse:
    """List a project's items, 50 a page, filtered, searched and sorted; bulk actions on POST.

    GET filters (all optional, kept by the pager): partition, generator, text search over the
    question, answer and claim texts, status, disagreement level, resolved or voted label,
    annotator (managers only: annotators' names are not shown to adjudicators), and the sort.
    Managers also get a checkbox per row and the bulk actions (POST, managers only: others get
    403): prioritise, or return to the queue; the page then redirects to the same filtered list
    with a message. An invalid bulk post re-renders the
    list with its errors and HTTP 400.
    """
    allowed = permissions.MANAGERS if request.method == "POST" else None
    project, role = project_for(
        request, slug, visible_to=permissions.ITEM_BROWSER_ROLES, allowed=allowed
    )
    bulk = ItemBulkForm(request.POST or None)
    if request.method == "POST" and bulk.is_valid():
        try:
            message = _item_bulk_run(request, project, bulk)
        except LabelingError as exc:
            form_add_domain_error(bulk, exc)
        else:
            messages.success(request, message)
            return redirect(request.get_full_path())
    form = ItemFilterForm(
        request.GET or None,
        generators=item_generators(project=project),
        labels=item_answer_labels(project=project),
        # Rater identities are for managers only (adjudicators see "Rater k" elsewhere).
        annotators=item_annotators(project=project) if permissions.can_manage(role) else [],
    )
    items = item_list(
        project=project,
        filters=form.filters(),
        include_prior_votes=permissions.can_see_labels(role),
    )
    page = Paginator(items, ITEMS_PER_PAGE).get_page(request.GET.get("page"))
    context = page_context(project, role, form=form, page=page, bulk=bulk)
    status = 400 if request.method == "POST" else 200
    return render(request, "labeling/item_list.html", context, status=status)


def _item_bulk_run(request: HttpRequest, project: Any, bulk: ItemBulkForm) -> str:
    """Run the bulk action of a valid ``bulk`` form; return the message for the page."""
    ids = bulk.cleaned_data["items"]
    actor = signed_in_user(request)
    if bulk.cleaned_data["action"] == "prioritise":
        result = items_bulk_prioritise(project=project, actor=actor, item_ids=ids)
        done = f"{len(result.changed)} item(s) moved to the front of the queue"
        why = "not open"
    else:
        result = items_return_to_queue(
            project=project,
            actor=actor,
            item_ids=ids,
            extra_votes=bulk.cleaned_data["extra_votes"] or 1,
        )
        done = f"{len(result.changed)} item(s) returned to the queue"
        why = "neither resolved nor in disagreement"
    if result.skipped:
        done += f"; {len(result.skipped)} left alone ({why})"
    return done + "."


@login_required
@require_http_methods(["GET", "HEAD"])
def item_detail(request: HttpRequest, slug: str, item_id: int) -> HttpResponse:
    """Show one item: question, answer with highlighted claims, sources, sibling candidates.

    Evaluator labels and prior annotations are loaded and rendered for managers only.
    """
    project, role = project_for(request, slug, visible_to=permissions.ITEM_BROWSER_ROLES)
    show_labels = permissions.can_see_labels(role)
    item = item_get(project=project, item_id=item_id, with_labels=show_labels)
    candidate = item.candidate
    claims = list(candidate.claims.all())
    context = page_context(
        project,
        role,
        item=item,
        candidate=candidate,
        question=candidate.question,
        # Pairs, not ``slices.items`` in the template: a slice named "items" would shadow it.
        slices=sorted(candidate.question.slices.items()),
        claims=claims,
        unanchored=[c for c in claims if c.unanchored],
        segments=answer_segments(candidate.text, claims),
        retrievals=list(candidate.question.retrievals.all()),
        siblings=[c for c in candidate.question.candidates.all() if c.pk != candidate.pk],
        resolution=item.resolution,
        resolved_labels=resolved_claim_labels(resolution=item.resolution),
        show_labels=show_labels,
        evaluator_labels=list(candidate.evaluator_labels.all()) if show_labels else [],
        prior_annotations=list(candidate.prior_annotations.all()) if show_labels else [],
        gold_reference=(
            gold_reference_current(item=item)
            if permissions.can_manage(role) and item.status == ItemStatus.GOLD
            else None
        ),
    )
    return render(request, "labeling/item_detail.html", context)


def _created_summary(created: dict[str, int]) -> str:
    return ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in created.items()) or "nothing"


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def import_create(request: HttpRequest, slug: str) -> HttpResponse:
    """Upload a workload file and import it (managers only).

    A file larger than ``JOB_IMPORT_BYTES`` is imported by a background job: the page
    redirects to the job's page (progress, then the same counts or errors). Otherwise success
    redirects to the overview with a message; refused records re-render the form with their
    location, field and reason (never the records themselves) and HTTP 400.
    """
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    form = ImportForm(request.POST or None, request.FILES or None)
    errors: list[Any] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        source = {
            "project": project,
            "stream": upload.file,
            "format_name": form.cleaned_data["format"],
            "filename": upload.name or "upload",
            "actor": signed_in_user(request),
            "claims": form.cleaned_data["claims"] or None,
            "evaluator_version": form.cleaned_data["evaluator_version"] or None,
        }
        if workload_import_in_background(upload.size):
            # A large file is imported by a background job; its page shows the progress.
            job = workload_import_job_start(**source)
            return redirect("job-detail", slug=project.slug, job_id=job.pk)
        try:
            result = workload_import_file(**source)
        except WorkloadImportFailed as exc:
            errors = exc.errors
            form.add_error(
                None, f"Import refused: {len(errors)} error(s) below. Nothing was written."
            )
        except LabelingError as exc:
            form_add_domain_error(form, exc)
        else:
            if result.batch is None:
                messages.info(
                    request, f"{upload.name}: {result.records} records, nothing new to import."
                )
            elif result.already_imported:
                messages.info(
                    request,
                    f"{upload.name}: this file was already imported (batch #{result.batch.pk}); "
                    "nothing changed.",
                )
            else:
                messages.success(
                    request,
                    f"{upload.name}: batch #{result.batch.pk}, {result.records} records; created "
                    f"{_created_summary(result.created)}.",
                )
            return redirect("project-detail", slug=project.slug)
    status = 400 if request.method == "POST" else 200
    context = page_context(project, role, form=form, errors=errors, formats=format_choices())
    return render(request, "labeling/import.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def partition_freeze_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Freeze the grouped dev/calibration/test split with a seed (managers only)."""
    project, role = project_for(request, slug, allowed=permissions.MANAGERS)
    form = PartitionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            result = partition_freeze(
                project=project,
                proportions=form.proportions(),
                seed=form.cleaned_data["seed"],
                actor=signed_in_user(request),
            )
        except (InvalidInput, InvalidTransition) as exc:
            form_add_domain_error(form, exc)
        else:
            counts = ", ".join(f"{p} {n}" for p, n in result.questions.items())
            messages.success(
                request, f"Partition frozen with seed {result.seed}: questions {counts}."
            )
            return redirect("project-detail", slug=project.slug)
    status = 400 if request.method == "POST" else 200
    context = page_context(project, role, form=form)
    return render(request, "labeling/partition.html", context, status=status)
