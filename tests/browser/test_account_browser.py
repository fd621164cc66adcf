"""In the browser: a token made on "My account" works in the API until revoked there; the
work report draws its plots for a manager and shows an annotator their own figures only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from labeling.models import Role
from labeling.services import annotation_submit, item_claim_next, membership_set
from tests.factories import UserFactory, start_labelling, work_record
from tests.labeling.api.conftest import labels_input

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-secret"  # UserFactory's


def log_in(page: Any, base: str, username: str, shot: Callable) -> None:
    page.goto(f"{base}/accounts/login/?next=/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base}/")
    shot(page, f"projects-{username}")


def api_status(base: str, secret: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"{base}/api/account/tokens/", headers={"Authorization": f"Token {secret}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (local)
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_tokens_and_work_reports_in_the_browser(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable, screenshot
):
    import_records([work_record("q1"), work_record("q2")])
    start_labelling(project, overlap=2)
    people = {}
    for username, role in [
        ("manager-mia", Role.MANAGER),
        ("annotator-amber", Role.ANNOTATOR),
        ("annotator-basil", Role.ANNOTATOR),
    ]:
        people[username] = UserFactory(username=username)
        membership_set(project=project, user=people[username], role=role)
    for username, seconds in [("annotator-amber", (20, 40)), ("annotator-basil", (35, 95))]:
        for spent in seconds:
            user = people[username]
            assignment = item_claim_next(project=project, actor=user)
            data = replace(labels_input(assignment.item), time_spent_seconds=spent)
            annotation_submit(project=project, assignment_id=assignment.pk, actor=user, data=data)
    base = live_server.url

    # a manager opens "My account" from the header and makes a token
    mia = new_page()
    log_in(mia, base, "manager-mia", screenshot)
    mia.click("#nav-account")
    mia.wait_for_url(f"{base}/account/")
    mia.fill("#id_name", "laptop script")
    mia.select_option("#id_expires_in_days", "7")
    mia.click("#token-create")
    secret = mia.locator("#token-secret").inner_text().strip()
    screenshot(mia, "token-created")
    assert api_status(base, secret)[0] == 200
    # the secret is shown once; the list shows the token, active
    mia.goto(f"{base}/account/")
    assert secret not in mia.content()
    row = mia.locator("#tokens tbody tr").first
    assert "laptop script" in row.inner_text() and "active" in row.inner_text()
    # revoked on the page, it no longer authenticates
    row.locator("button", has_text="Revoke").click()
    mia.wait_for_url(f"{base}/account/")
    assert "revoked" in mia.locator("#tokens tbody tr").first.inner_text()
    status, body = api_status(base, secret)
    assert (status, body["code"]) == (401, "token_revoked")
    screenshot(mia, "token-revoked")

    # the work report: both annotators, two plots
    mia.goto(f"{base}/p/{project.slug}/")
    mia.click("#nav-work-report")
    mia.wait_for_url(f"{base}/p/{project.slug}/reports/work/")
    table = mia.locator("#work-figures").inner_text()
    assert "annotator-amber" in table and "annotator-basil" in table
    assert mia.locator("figure.chart svg").count() == 3
    screenshot(mia, "work-report")

    # an annotator's "My work": their own row only
    amber = new_page()
    log_in(amber, base, "annotator-amber", screenshot)
    amber.goto(f"{base}/p/{project.slug}/")
    amber.click("#nav-work-report")
    assert amber.locator("h1").inner_text() == "My work"
    text = amber.locator("main").inner_text()
    assert "annotator-amber" in text and "annotator-basil" not in text
    screenshot(amber, "my-work")
    for page in (mia, amber):
        assert page.js_errors == [] and page.csp_violations == []
