"""Work reports: figures against hand-computed values (numpy percentiles), period filtering,
the CSV downloads, the API and the permissions (an annotator sees their own figures only)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import date, datetime, time, timedelta
from typing import Any
from unittest import mock

import numpy as np
import pytest
from django.test import Client
from django.utils import timezone

from labeling.exceptions import InvalidInput, PermissionDenied
from labeling.models import Project, Role
from labeling.selectors.work_reports import (
    Period,
    percentile,
    work_item_times,
    work_report,
    work_time_histogram,
)
from labeling.services import annotation_submit, assignment_skip, item_claim_next
from tests.labeling.api.conftest import labels_input

TODAY = timezone.localdate()
EARLIER = TODAY - timedelta(days=10)
REPORT = "/api/projects/study/reports/work/"
ITEMS = "/api/projects/study/reports/work/items/"


@contextmanager
def at(day: date, hour: int = 12) -> Iterator[None]:
    """Run with the clock at ``day`` ``hour``:00 (the services read ``timezone.now``)."""
    moment = datetime.combine(day, time(hour), tzinfo=timezone.get_current_timezone())
    with mock.patch("django.utils.timezone.now", return_value=moment):
        yield


def label(project: Project, user: Any, seconds: float | None) -> Any:
    """Claim the next item and submit it with ``seconds`` spent; return the assignment."""
    assignment = item_claim_next(project=project, actor=user)
    data = replace(labels_input(assignment.item), time_spent_seconds=seconds)
    annotation_submit(project=project, assignment_id=assignment.pk, actor=user, data=data)
    return assignment


@pytest.fixture
def team(started: Project, member: Callable[[str], Any]) -> dict[str, Any]:
    """ann labels two items ten days ago (30 s, 90 s) and one today (45 s, revised: +15 s) and
    skips one today; bob labels three today (10 s, no time, 200 s)."""
    ann, bob = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    with at(EARLIER):
        label(started, ann, 30)
        label(started, ann, 90)
    third = label(started, ann, 45)
    revised = replace(
        labels_input(third.item, answer="inadmissible"), time_spent_seconds=15, based_on_revision=1
    )
    annotation_submit(project=started, assignment_id=third.pk, actor=ann, data=revised)
    fourth = item_claim_next(project=started, actor=ann)
    assignment_skip(project=started, assignment_id=fourth.pk, actor=ann, reason="other")
    for seconds in (10, None, 200):
        label(started, bob, seconds)
    return {
        "ann": ann,
        "bob": bob,
        "manager": member(Role.MANAGER),
        "adjudicator": member(Role.ADJUDICATOR),
    }


def rows_by_name(report: Any) -> dict[str, Any]:
    return {row.username: row for row in report.rows}


@pytest.mark.parametrize(
    "values",
    [[7.0], [1.0, 2.0], [3.0, 1.0, 2.0], [5.0, 5.0, 5.0, 9.0], [0.5, 12.0, 3.25, 8.0, 100.0, 41.0]],
)
@pytest.mark.parametrize("q", [0, 10, 50, 90, 100])
def test_percentile_is_numpys_linear_percentile(values, q):
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_of_nothing_is_none():
    assert percentile([], 50) is None


def test_figures_over_the_whole_period_match_hand_computed_values(started, team):
    report = work_report(
        project=started, actor=team["manager"], period=Period.parse(EARLIER, TODAY)
    )
    rows = rows_by_name(report)
    assert set(rows) == {team["ann"].username, team["bob"].username}
    assert report.own is False
    ann = rows[team["ann"].username]
    times = [30.0, 90.0, 60.0]  # the revised item: 45 + 15
    assert (ann.items_labelled, ann.timed_items, ann.active_seconds) == (3, 3, 180.0)
    assert ann.median_seconds == pytest.approx(float(np.percentile(times, 50))) == 60.0
    assert ann.p90_seconds == pytest.approx(float(np.percentile(times, 90))) == 84.0
    assert ann.items_per_hour == pytest.approx(3 * 3600 / 180)
    assert (ann.skipped, ann.skip_rate) == (1, pytest.approx(1 / 4))
    assert (ann.revised, ann.revision_rate) == (1, pytest.approx(1 / 3))
    bob = rows[team["bob"].username]
    assert (bob.items_labelled, bob.timed_items, bob.active_seconds) == (3, 2, 210.0)
    assert bob.median_seconds == pytest.approx(float(np.percentile([10, 200], 50))) == 105.0
    assert bob.p90_seconds == pytest.approx(float(np.percentile([10, 200], 90))) == 181.0
    assert bob.items_per_hour == pytest.approx(2 * 3600 / 210)
    assert (bob.skipped, bob.skip_rate, bob.revised, bob.revision_rate) == (0, 0.0, 0, 0.0)


def test_the_period_filters_by_day(started, team):
    earlier = rows_by_name(
        work_report(project=started, actor=team["manager"], period=Period.parse(EARLIER, EARLIER))
    )
    ann, bob = earlier[team["ann"].username], earlier[team["bob"].username]
    assert (ann.items_labelled, ann.median_seconds, ann.p90_seconds) == (2, 60.0, 84.0)
    assert (ann.skipped, ann.revised) == (0, 0)
    # bob is an annotator of the project: listed, with nothing in the period
    assert (bob.items_labelled, bob.median_seconds, bob.skip_rate, bob.items_per_hour) == (
        0,
        None,
        None,
        None,
    )
    today = rows_by_name(
        work_report(project=started, actor=team["manager"], period=Period.parse(TODAY, TODAY))
    )[team["ann"].username]
    # the item labelled today counts once, with both revisions' time; the skip counts today
    assert (today.items_labelled, today.active_seconds, today.revised) == (1, 60.0, 1)
    assert today.skip_rate == pytest.approx(1 / 2)
    between = work_report(
        project=started,
        actor=team["manager"],
        period=Period.parse(EARLIER + timedelta(days=1), TODAY - timedelta(days=1)),
    )
    assert all(row.items_labelled == row.skipped == 0 for row in between.rows)


def test_the_time_per_item(started, team):
    rows = list(
        work_item_times(project=started, actor=team["manager"], period=Period.parse(EARLIER, TODAY))
    )
    assert [(r["username"], r["seconds"], r["revisions"]) for r in rows] == [
        (team["ann"].username, 30.0, 1),
        (team["ann"].username, 90.0, 1),
        (team["ann"].username, 60.0, 2),
        (team["bob"].username, 10.0, 1),
        (team["bob"].username, None, 1),
        (team["bob"].username, 200.0, 1),
    ]
    assert rows[0]["first_submitted_at"].date() == EARLIER
    assert all(r["question"] in {"q1", "q2"} for r in rows)


def test_the_time_histogram_counts_items_per_bin(started, team):
    period = Period.parse(EARLIER, TODAY)
    # times: ann 30, 90, 60; bob 10, 200 (and one without a time, left out)
    bins = work_time_histogram(project=started, actor=team["manager"], period=period)
    assert bins == [
        (0, 30, 1),
        (30, 60, 1),
        (60, 120, 2),
        (120, 300, 1),
        (300, 600, 0),
        (600, None, 0),
    ]
    own = work_time_histogram(project=started, actor=team["bob"], period=period)
    assert [count for _, _, count in own] == [1, 0, 0, 1, 0, 0]


def test_an_annotator_sees_their_own_figures_only(started, team):
    ann, bob = team["ann"], team["bob"]
    own = work_report(project=started, actor=ann, period=Period.parse(EARLIER, TODAY))
    assert [row.username for row in own.rows] == [ann.username]
    assert own.own is True
    items = work_item_times(project=started, actor=ann, period=Period.parse(EARLIER, TODAY))
    assert {row["annotator_id"] for row in items} == {ann.pk}
    with pytest.raises(PermissionDenied):
        work_item_times(
            project=started, actor=ann, period=Period.parse(None, None), annotator_id=bob.pk
        )
    with pytest.raises(PermissionDenied):
        work_report(project=started, actor=team["adjudicator"], period=Period.parse(None, None))


def test_a_period_must_be_in_order():
    with pytest.raises(InvalidInput):
        Period.parse(TODAY, TODAY - timedelta(days=1))
    default = Period.parse(None, None, today=date(2026, 3, 31))
    assert (default.start, default.end) == (date(2026, 3, 2), date(2026, 3, 31))
    # the first days of the calendar: the default start does not run off it
    assert Period.parse(None, date(1, 1, 5)).start == date.min


# --- API -------------------------------------------------------------------------------------


def test_the_api_gives_the_same_figures(started, team, client_for):
    query = {"from": EARLIER.isoformat(), "to": TODAY.isoformat()}
    response = client_for(team["manager"]).get(REPORT, query)
    assert response.status_code == 200
    body = response.json()
    assert body["period"] == {"from": EARLIER.isoformat(), "to": TODAY.isoformat()}
    ann = next(r for r in body["rows"] if r["username"] == team["ann"].username)
    assert ann == {
        "annotator_id": team["ann"].pk,
        "username": team["ann"].username,
        "items_labelled": 3,
        "timed_items": 3,
        "active_seconds": 180.0,
        "median_seconds": 60.0,
        "p90_seconds": 84.0,
        "items_per_hour": 60.0,
        "skipped": 1,
        "skip_rate": 0.25,
        "revised": 1,
        "revision_rate": pytest.approx(1 / 3),
    }
    items = client_for(team["manager"]).get(ITEMS, {**query, "annotator": team["bob"].pk})
    assert [r["seconds"] for r in items.json()["results"]] == [10.0, None, 200.0]


def test_the_api_scopes_an_annotator_to_themselves(started, team, client_for):
    client = client_for(team["ann"])
    body = client.get(REPORT, {"from": EARLIER.isoformat()}).json()
    assert [r["username"] for r in body["rows"]] == [team["ann"].username]
    assert body["own"] is True
    assert team["bob"].username not in str(client.get(ITEMS).json())
    refused = client.get(ITEMS, {"annotator": team["bob"].pk})
    assert refused.status_code == 403
    assert client_for(team["adjudicator"]).get(REPORT).status_code == 403


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"from": "2026-13-01"}, "from"),
        ({"to": "yesterday"}, "to"),
        ({"from": "20260101"}, "from"),
        ({"from": TODAY.isoformat(), "to": EARLIER.isoformat()}, "from"),
        ({"since": "2026-01-01"}, "since"),
        ({"from": "9999-12-31", "to": "9999-12-31"}, "to"),
        ({"from": "0001-01-01"}, "from"),
    ],
)
def test_the_api_refuses_a_bad_period(started, team, client_for, query, field):
    response = client_for(team["manager"]).get(REPORT, query)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


# --- pages and CSV ---------------------------------------------------------------------------


def page_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_page_shows_the_table_and_the_plots(started, team):
    query = f"?from={EARLIER.isoformat()}&to={TODAY.isoformat()}"
    response = page_client(team["manager"]).get(f"/p/study/reports/work/{query}")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count("<svg") == 3
    assert 'id="chart-work-items"' in html and 'id="chart-work-time"' in html
    assert 'id="chart-work-time-bins"' in html and "2 min–5 min" in html
    assert team["ann"].username in html and team["bob"].username in html
    assert f'data-annotator-id="{team["ann"].pk}"' in html
    assert "84.0" in html  # ann's p90
    assert f"annotators.csv?from={EARLIER.isoformat()}&amp;to={TODAY.isoformat()}" in html
    assert f'name="from" value="{EARLIER.isoformat()}"' in html


def test_the_page_of_an_annotator_holds_their_own_figures(started, team):
    html = page_client(team["ann"]).get("/p/study/reports/work/").content.decode()
    assert "My work" in html
    # no period given: the default one is shown in the form
    assert f'name="to" value="{TODAY.isoformat()}"' in html
    assert team["ann"].username in html
    assert team["bob"].username not in html
    assert page_client(team["adjudicator"]).get("/p/study/reports/work/").status_code == 403


def test_a_bad_period_on_the_page_shows_the_default_period_and_the_error(started, team):
    response = page_client(team["manager"]).get(
        f"/p/study/reports/work/?from={TODAY.isoformat()}&to={EARLIER.isoformat()}"
    )
    assert response.status_code == 200
    assert b"the period starts after it ends" in response.content
    csv_response = page_client(team["manager"]).get(
        "/p/study/reports/work/annotators.csv?from=nonsense"
    )
    assert csv_response.status_code == 400


def read_csv(response: Any) -> list[dict[str, str]]:
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_csv_downloads(started, team):
    query = f"?from={EARLIER.isoformat()}&to={TODAY.isoformat()}"
    client = page_client(team["manager"])
    figures = read_csv(client.get(f"/p/study/reports/work/annotators.csv{query}"))
    ann = next(r for r in figures if r["username"] == team["ann"].username)
    assert ann == {
        "annotator_id": str(team["ann"].pk),
        "username": team["ann"].username,
        "items_labelled": "3",
        "timed_items": "3",
        "active_seconds": "180.0",
        "median_seconds": "60.0",
        "p90_seconds": "84.0",
        "items_per_hour": "60.0",
        "skipped": "1",
        "skip_rate": "0.25",
        "revised": "1",
        "revision_rate": str(1 / 3),
    }
    items = read_csv(client.get(f"/p/study/reports/work/items.csv{query}"))
    assert [(r["username"], r["seconds"]) for r in items] == [
        (team["ann"].username, "30.0"),
        (team["ann"].username, "90.0"),
        (team["ann"].username, "60.0"),
        (team["bob"].username, "10.0"),
        (team["bob"].username, ""),
        (team["bob"].username, "200.0"),
    ]
    own = read_csv(page_client(team["ann"]).get(f"/p/study/reports/work/items.csv{query}"))
    assert {r["username"] for r in own} == {team["ann"].username}


def test_my_account_links_to_my_own_work(started, team):
    html = page_client(team["ann"]).get("/account/").content.decode()
    assert 'href="/p/study/reports/work/">My work in Study</a>' in html
    assert "reports/work" not in page_client(team["adjudicator"]).get("/account/").content.decode()
