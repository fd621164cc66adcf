"""Managers' dashboard plots: the series (hand-computed) and who sees them."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from labeling.models import Role
from labeling.selectors import dashboard
from labeling.selectors.dashboard import AnnotatorWork, annotator_work, progress_daily
from labeling.services import annotation_submit, assignment_skip, item_claim_next
from tests.labeling.views.conftest import claim_next
from tests.worlds import own_labels

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("project-detail", args=["study"])
DAY1 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
DAY3 = DAY1 + timedelta(days=2)


@contextmanager
def at(moment):
    """Every ``timezone.now()`` (services and auto_now_add fields) returns ``moment``."""
    with mock.patch("django.utils.timezone.now", return_value=moment):
        yield


def submit(project, user):
    assignment = claim_next(project, user)
    annotation_submit(
        project=project, assignment_id=assignment.pk, actor=user, data=own_labels(assignment.item)
    )
    return assignment


@pytest.fixture
def history(started, member):
    """Day 1: ann_a and ann_b submit the first item (consensus: resolved on day 1).
    Day 3: ann_a and ann_b submit the second item (resolved on day 3), ann_a submits a third;
    ann_c claims one item and skips another. Nothing on day 2."""
    users = {}
    for name in ("ann_a", "ann_b", "ann_c"):
        users[name] = member(Role.ANNOTATOR)
        users[name].username = name
        users[name].save()
    with at(DAY1):
        submit(started, users["ann_a"])
        submit(started, users["ann_b"])
    with at(DAY3):
        submit(started, users["ann_a"])
        submit(started, users["ann_b"])
        submit(started, users["ann_a"])
        skipped = item_claim_next(project=started, actor=users["ann_c"])
        assignment_skip(
            project=started,
            assignment_id=skipped.pk,
            actor=users["ann_c"],
            reason="unclear_question",
        )
        item_claim_next(project=started, actor=users["ann_c"])
    return started


def test_progress_series_by_day(history):
    daily = progress_daily(project=history)
    assert daily.days == (date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 4))
    assert daily.submitted == (2, 0, 3)
    assert daily.resolved_cumulative == (1, 1, 2)


def test_work_per_annotator(history):
    assert annotator_work(project=history) == [
        AnnotatorWork(annotator="ann_a", submitted=3, skipped=0, leased=0),
        AnnotatorWork(annotator="ann_b", submitted=2, skipped=0, leased=0),
        AnnotatorWork(annotator="ann_c", submitted=0, skipped=1, leased=1),
    ]


def test_series_take_a_fixed_number_of_queries(history):
    with CaptureQueriesContext(connection) as queries:
        progress_daily(project=history)
        annotator_work(project=history)
    assert len(queries) == 3


def test_long_histories_are_cut_and_earlier_resolutions_still_count():
    first = date(2026, 1, 1)
    last = first + timedelta(days=dashboard.MAX_PROGRESS_DAYS + 9)
    daily = dashboard._daily({last: 4}, {first: 5, last: 1})
    assert len(daily.days) == dashboard.MAX_PROGRESS_DAYS
    assert daily.days[-1] == last
    assert daily.resolved_cumulative[0] == 5  # the day-1 resolutions, before the window
    assert daily.resolved_cumulative[-1] == 6
    assert daily.submitted[-1] == 4 and sum(daily.submitted) == 4


def test_no_activity_gives_empty_series(started):
    daily = progress_daily(project=started)
    assert daily.days == () and daily.resolved_cumulative == ()


def test_manager_sees_the_three_charts_with_text_alternatives(login, history):
    response = login(Role.MANAGER).get(DASHBOARD)
    html = response.content.decode()
    for chart_id in ("labels-per-day", "resolved-cumulative", "work-per-annotator"):
        assert f'id="chart-{chart_id}"' in html
        assert f'aria-labelledby="chart-{chart_id}-title chart-{chart_id}-desc"' in html
    # the data table of the work chart: submitted, skipped, leased, total
    assert (
        '<th scope="row">ann_c</th><td class="num">0</td><td class="num">1</td>'
        '<td class="num">1</td><td class="num">2</td>'
    ) in html
    assert '<th scope="row">2026-11-03</th><td class="num">0</td>' in html


@pytest.mark.parametrize("role", [Role.ADJUDICATOR, Role.ANNOTATOR])
def test_only_managers_see_the_work_charts(login, history, role):
    html = login(role).get(DASHBOARD).content.decode()
    assert 'id="manager-charts"' not in html
    assert "ann_c" not in html
