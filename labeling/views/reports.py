"""Work report pages: per-annotator figures with three small plots, and their CSV downloads.

``/p/<slug>/reports/work/`` (managers: every annotator; annotators: their own figures only;
other roles 403), ``.../annotators.csv`` (the same table) and ``.../items.csv`` (the time per
item). The period is the ``from`` and ``to`` query parameters (dates, both days included; by
default the last 30 days). Definitions: ``labeling.selectors.work_reports``.
"""

from __future__ import annotations

import csv
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from labeling.charts import Chart, Series, bar_chart
from labeling.exceptions import InvalidInput, LabelingError
from labeling.forms import WorkPeriodForm
from labeling.release_format import csv_cell
from labeling.selectors.work_reports import (
    WORK_REPORT_ROLES,
    Period,
    WorkReport,
    work_item_times,
    work_report,
    work_time_histogram,
)
from labeling.views.common import page_context, project_for

#: The columns of the annotator table and its CSV, in order.
FIGURE_COLUMNS = (
    "annotator_id",
    "username",
    "items_labelled",
    "timed_items",
    "active_seconds",
    "median_seconds",
    "p90_seconds",
    "items_per_hour",
    "skipped",
    "skip_rate",
    "revised",
    "revision_rate",
)
ITEM_COLUMNS = (
    "annotator_id",
    "username",
    "item_id",
    "question",
    "first_submitted_at",
    "revisions",
    "seconds",
)


def _period(request: HttpRequest) -> tuple[WorkPeriodForm, Period]:
    """Return the bound period form and its period (the default one when it is invalid)."""
    form = WorkPeriodForm(request.GET)
    if not form.is_valid():
        return form, Period.parse(None, None)
    try:
        return form, Period.parse(form.cleaned_data["from"], form.cleaned_data["to"])
    except LabelingError as exc:
        form.add_error(None, exc.message)
        return form, Period.parse(None, None)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def _bin_label(low: float, high: float | None) -> str:
    return f"≥ {_duration(low)}" if high is None else f"{_duration(low)}–{_duration(high)}"


def work_charts(
    report: WorkReport, histogram: list[tuple[float, float | None, int]]
) -> list[Chart]:
    """Return the page's three plots (items, time per item, items by time spent).

    ``histogram`` is :func:`labeling.selectors.work_reports.work_time_histogram`'s answer.
    """
    names = [row.username for row in report.rows]
    return [
        bar_chart(
            chart_id="work-items",
            title="Items labelled and skipped",
            description="Per annotator, the items first labelled and the items skipped in "
            "the period.",
            categories=names,
            series=[
                Series("labelled", [row.items_labelled for row in report.rows]),
                Series("skipped", [row.skipped for row in report.rows]),
            ],
            x_label="annotator",
            y_label="items",
        ),
        bar_chart(
            chart_id="work-time",
            title="Time per item",
            description="Per annotator, the median and the 90th percentile of the time spent "
            "on an item, in seconds.",
            categories=names,
            series=[
                Series("median", [row.median_seconds for row in report.rows]),
                Series("p90", [row.p90_seconds for row in report.rows]),
            ],
            x_label="annotator",
            y_label="seconds",
        ),
        bar_chart(
            chart_id="work-time-bins",
            title="Items by time spent",
            description="How many items took each span of time (items without a recorded "
            "time are left out).",
            categories=[_bin_label(low, high) for low, high, _ in histogram],
            series=[Series("items", [count for _, _, count in histogram])],
            x_label="time per item",
            y_label="items",
        ),
    ]


@login_required
@require_http_methods(["GET", "HEAD"])
def work_report_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Show the period's figures, plots and download links."""
    project, role = project_for(request, slug, allowed=WORK_REPORT_ROLES)
    form, period = _period(request)
    if not form.errors:  # show the period in effect (the default one when none was given)
        form = WorkPeriodForm(initial={"from": period.start, "to": period.end})
    report = work_report(project=project, actor=request.user, period=period)
    histogram = work_time_histogram(project=project, actor=request.user, period=period)
    query = f"from={period.start.isoformat()}&to={period.end.isoformat()}"
    return render(
        request,
        "labeling/work_report.html",
        page_context(
            project,
            role,
            form=form,
            report=report,
            charts=work_charts(report, histogram),
            query=query,
            time_zone=timezone.get_current_timezone_name(),
        ),
    )


def _csv_response(name: str, header: tuple[str, ...], rows: Any) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = csv.writer(response)
    writer.writerow(header)
    writer.writerows([csv_cell(value) for value in row] for row in rows)
    return response


def _csv_period(request: HttpRequest) -> Period:
    form, period = _period(request)
    if not form.is_valid():
        raise InvalidInput(form.errors.as_text())
    return period


@login_required
@require_http_methods(["GET", "HEAD"])
def work_report_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """Download the annotator table of the period (one row per annotator; empty cell: none).

    Raises:
        InvalidInput: a malformed or reversed period (a 400 page).
    """
    project, _ = project_for(request, slug, allowed=WORK_REPORT_ROLES)
    period = _csv_period(request)
    report = work_report(project=project, actor=request.user, period=period)
    rows = (
        ["" if getattr(row, c) is None else getattr(row, c) for c in FIGURE_COLUMNS]
        for row in report.rows
    )
    name = f"{project.slug}-work-{period.start.isoformat()}-{period.end.isoformat()}.csv"
    return _csv_response(name, FIGURE_COLUMNS, rows)


@login_required
@require_http_methods(["GET", "HEAD"])
def work_items_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """Download the time per item of the period (oldest first; empty seconds: none recorded).

    Raises:
        InvalidInput: a malformed or reversed period (a 400 page).
    """
    project, _ = project_for(request, slug, allowed=WORK_REPORT_ROLES)
    period = _csv_period(request)
    items = work_item_times(project=project, actor=request.user, period=period)
    rows = (
        [
            row["first_submitted_at"].isoformat()
            if c == "first_submitted_at"
            else ("" if row[c] is None else row[c])
            for c in ITEM_COLUMNS
        ]
        for row in items.iterator()
    )
    name = f"{project.slug}-work-items-{period.start.isoformat()}-{period.end.isoformat()}.csv"
    return _csv_response(name, ITEM_COLUMNS, rows)
