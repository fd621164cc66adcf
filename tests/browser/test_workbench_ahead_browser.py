"""The next item at once: the workbench keeps the next item reserved and rendered, and a submit
shows it without waiting for the server.

The submit of the first item is held in the network (Playwright's router) while the test looks:
the next item is already mounted, the first is being saved and nothing is written yet; once the
answer is let through, the save is confirmed and the item after the next comes reserved. A
second tab of the same person gets the same item and the same reserve (never a third lease). A
refused save brings its item back with the input and the problem, and keeps the reserve for
after it. At the end every item has exactly one annotation and nothing is leased.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from labeling.models import Annotation, Assignment, AssignmentStatus, Role
from labeling.services import membership_set
from tests.factories import UserFactory, start_labelling

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-secret"  # UserFactory's
SLUG = "study"
SOURCE = "The bridge opened in 1932.\r\nIt spans the harbour of Sydney."
QUESTIONS = 4
# Per item (one claim, found in the source): cite the sentence the page selected for the claim,
# label it supported, the answer admissible, submit.
KEYS = ["c", "1", "Shift+Digit1"]


def record(n: int) -> dict[str, Any]:
    return {
        "external_id": f"q{n}",
        "text": f"When did bridge number {n} open?",
        "sources": [{"id": f"doc-{n}", "text": SOURCE, "rank": 1}],
        "candidates": [
            {
                "id": "c0",
                "text": "The bridge opened in 1932.",
                "generator": "model-a",
                "claims": [{"text": "The bridge opened in 1932."}],
            }
        ],
    }


def log_in(page: Any, base: str, username: str, next_path: str) -> None:
    page.goto(f"{base}/accounts/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base}{next_path}")


def ready(page: Any) -> str:
    """Wait until the workbench script has mounted an item; return its assignment id."""
    page.wait_for_selector("#workbench[data-ready]")
    page.wait_for_function(
        "() => document.querySelector('#workbench').dataset.ready === "
        "document.querySelector('#item-meta').dataset.assignmentId"
    )
    return page.locator("#item-meta").get_attribute("data-assignment-id")


def reserved(page: Any) -> str:
    """Wait until the page keeps a reserve for the item shown; return its assignment id."""
    page.wait_for_selector("#workbench[data-reserve]", state="attached")
    return page.locator("#workbench").get_attribute("data-reserve")


def saved(page: Any) -> None:
    """Wait until no save runs in the background."""
    page.wait_for_selector("#workbench[data-saving]", state="detached")


def wait_until(page: Any, condition: Callable[[], object]) -> None:
    """Let the page's events (a routed request) reach the test until ``condition()`` holds."""
    for _ in range(300):
        if condition():
            return
        page.wait_for_timeout(50)
    raise AssertionError("the condition did not hold within 15 s")


def unfocus(page: Any) -> None:
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


def label(page: Any) -> None:
    unfocus(page)
    for key in KEYS:
        page.keyboard.press(key)


def leases(user: Any) -> list[int]:
    return sorted(
        Assignment.objects.filter(annotator=user, status=AssignmentStatus.LEASED).values_list(
            "pk", flat=True
        )
    )


def test_the_next_item_shows_at_once_from_its_reserve_and_the_rules_hold(
    live_server: Any, import_records: Callable, project: Any, new_page: Callable, screenshot
):
    # given four one-claim items, overlap 1, and an annotator on the first one
    import_records([record(n) for n in range(QUESTIONS)])
    start_labelling(project, overlap=1)
    user = UserFactory(username="annotator-amber")
    membership_set(project=project, user=user, role=Role.ANNOTATOR)
    page = new_page()
    base = live_server.url
    log_in(page, base, user.username, f"/p/{SLUG}/annotate/")
    page.click("#next-item")
    first = ready(page)

    # then the next item is reserved for them while they work: one more lease, no third
    second = reserved(page)
    assert second != first
    assert leases(user) == sorted([int(first), int(second)])
    screenshot(page, "first-item-with-reserve")

    # when the first item is submitted while its save is held in the network
    held: list[Any] = []

    def hold(route: Any) -> None:
        if route.request.method == "POST":
            held.append(route)
        else:
            route.continue_()

    first_url = f"**/p/{SLUG}/annotate/{first}/"
    page.route(first_url, hold)
    label(page)
    page.keyboard.press("s")

    # then the reserve is shown at once, before the server answered: the first item is being
    # saved (nothing written yet), the URL names the item shown, and progress counts one done
    page.wait_for_function(
        f"() => document.querySelector('#workbench').dataset.ready === '{second}'"
    )
    assert ready(page) == second
    assert page.locator("#workbench").get_attribute("data-saving") == first
    assert page.url == f"{base}/p/{SLUG}/annotate/{second}/"
    assert page.locator("#progress-done").inner_text() == "1"
    assert page.locator("#revise-previous").get_attribute("href") == f"/p/{SLUG}/annotate/{first}/"
    wait_until(page, lambda: held)
    assert len(held) == 1 and not Annotation.objects.exists()
    page.wait_for_function("() => window.workbenchTimings.length === 1")
    swap_ms = page.evaluate("() => window.workbenchTimings[0]")
    assert swap_ms < 1000, swap_ms  # a DOM swap, no round trip (the benchmark's target: 150)
    screenshot(page, "second-item-shown-while-saving")

    # when the save's answer is let through
    held[0].continue_()
    saved(page)
    page.unroute(first_url, hold)

    # then the first item is saved, the reserve is confirmed, and the item after it is
    # reserved: the annotator holds the item shown and one reserve
    page.wait_for_function(
        "() => document.querySelector('#workbench-status').textContent.startsWith('Saved')"
    )
    annotation = Annotation.objects.get(assignment_id=int(first))
    assert annotation.current.answer_label == "admissible"
    third = reserved(page)
    assert third not in (first, second)
    assert leases(user) == sorted([int(second), int(third)])

    # when a second tab of the same person opens the labelling page and continues its item
    tab = page.context.new_page()
    tab_errors: list[str] = []
    tab.on("pageerror", lambda exc: tab_errors.append(str(exc)))
    tab.goto(f"{base}/p/{SLUG}/annotate/")
    tab.click("#current-lease a")

    # then it gets the item shown in the first tab and the same reserve: still two leases
    assert ready(tab) == second
    assert reserved(tab) == third
    assert leases(user) == sorted([int(second), int(third)])
    tab.close()
    assert tab_errors == []

    # when the second item's save is refused by the server
    second_url = f"**/p/{SLUG}/annotate/{second}/"
    problem = "The server refused this save (test)."

    def refuse(route: Any) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        route.fulfill(
            status=400,
            content_type="application/json",
            body=json.dumps(
                {
                    "problems": [
                        {
                            "field": "",
                            "target": "general",
                            "claim_position": None,
                            "where": "",
                            "text": problem,
                            "message": problem,
                        }
                    ],
                    "status": 400,
                }
            ),
        )

    page.route(second_url, refuse)
    label(page)
    page.keyboard.press("s")

    # then the second item comes back with its input and the problem, at its own URL, and the
    # reserve is kept for after it
    page.wait_for_function(
        "() => document.querySelector('#problem-summary') && "
        "!document.querySelector('#problem-summary').hidden"
    )
    saved(page)
    assert ready(page) == second
    assert problem in page.locator("#problem-summary").inner_text()
    assert page.url == f"{base}/p/{SLUG}/annotate/{second}/"
    assert page.locator("#claim-row-0 input[value=supported]").is_checked()
    assert reserved(page) == third
    assert Assignment.objects.get(pk=int(second)).status == AssignmentStatus.LEASED
    screenshot(page, "refused-save-back")

    # when it is submitted again, answered this time
    page.unroute(second_url, refuse)
    unfocus(page)
    page.keyboard.press("s")

    # then the third item shows, the second is saved, and so on to the end of the queue
    page.wait_for_function(
        f"() => document.querySelector('#workbench').dataset.ready === '{third}'"
    )
    saved(page)
    assert Assignment.objects.get(pk=int(second)).status == AssignmentStatus.SUBMITTED
    fourth = reserved(page)
    label(page)
    page.keyboard.press("s")
    page.wait_for_function(
        f"() => document.querySelector('#workbench').dataset.ready === '{fourth}'"
    )
    saved(page)
    # nothing is left to reserve after the last item: its submit leaves the workbench
    assert page.locator("#workbench").get_attribute("data-reserve") is None
    label(page)
    page.keyboard.press("s")
    page.wait_for_url(f"{base}/p/{SLUG}/annotate/")
    assert "No items are waiting" in page.content()

    # and every item has exactly one annotation, by this person, and nothing is leased
    assert sorted(Annotation.objects.values_list("assignment_id", flat=True)) == sorted(
        int(a) for a in (first, second, third, fourth)
    )
    assert Annotation.objects.values("item").distinct().count() == QUESTIONS
    assert leases(user) == []
    assert page.js_errors == [] and page.csp_violations == []
