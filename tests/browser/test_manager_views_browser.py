"""In a real browser: the manager's dashboard plots, and select-all and a bulk action on items."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from labeling.models import Item, ItemStatus, Role
from labeling.services import membership_set
from tests.browser.test_annotate_adjudicate_browser import log_in
from tests.factories import UserFactory
from tests.labeling.views.test_item_browser import flow  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLUG = "study"


def test_dashboard_plots_and_bulk_return_to_the_queue(
    live_server: Any,
    project: Any,
    flow: dict[str, Any],  # noqa: F811
    new_page: Callable,
    screenshot: Callable,
):
    manager = UserFactory(username="manager-ui")
    membership_set(project=project, user=manager, role=Role.MANAGER)
    page = new_page()
    base = live_server.url
    log_in(page, base, "manager-ui", f"/p/{SLUG}/", screenshot)
    # the three plots, each an SVG labelled by its title and description
    for chart in ("labels-per-day", "resolved-cumulative", "work-per-annotator"):
        svg = page.locator(f"#chart-{chart} svg")
        assert svg.get_attribute("role") == "img"
        assert svg.locator("rect, circle").count() >= 1
    screenshot(page, "dashboard")

    page.goto(f"{base}/p/{SLUG}/items/?status=resolved")
    select_all = page.locator("#select-all")
    assert select_all.is_visible()  # the script shows it
    select_all.check()
    boxes = page.locator('input[name="items"]')
    assert boxes.count() == 1 and boxes.nth(0).is_checked()
    page.select_option("#bulk-action", "return")
    screenshot(page, "items-checked")
    page.click("#bulk-form button[type=submit]")
    page.wait_for_url(f"{base}/p/{SLUG}/items/?status=resolved")
    assert "1 item(s) returned to the queue." in page.content()
    screenshot(page, "items-returned")
    item = Item.objects.get(pk=flow["resolved"].pk)
    assert item.status == ItemStatus.OPEN
    assert page.js_errors == [] and page.csp_violations == []
