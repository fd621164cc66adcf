"""End to end in a real browser, keyboard only: an adjudicator works through the FaithBench
disagreement queue. Agreed fields are pre-filled; "Use all" on an imported vote (no evidence
spans) resolves; the next item of the queue opens without a page load; every problem is shown
at once; the help overlay opens on ``?``; an item is marked unresolved by keyboard."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from labeling.models import (
    Item,
    Project,
    ResolutionStatus,
    ResolvedClaimLabel,
    Role,
)
from labeling.selectors.adjudication import disagreement_queue
from labeling.services import membership_set
from tests.browser.test_annotate_adjudicate_browser import log_in, wait_for_script
from tests.factories import UserFactory, start_labelling

pytestmark = [pytest.mark.browser, pytest.mark.shared_data, pytest.mark.django_db(transaction=True)]

SLUG = "fb"


def item_path(item_id: int) -> str:
    return f"/p/{SLUG}/adjudicate/{item_id}/"


@pytest.fixture
def faithbench_queue(shared_data: Path) -> tuple[Project, list[int]]:
    """FaithBench batch 1 imported and started: the items its annotators disagree on."""
    call_command(
        "import_workload",
        shared_data / "faithbench" / "data_for_release" / "batch_1.json",
        "--project",
        SLUG,
        "--create",
        "--format",
        "faithbench",
        "--no-progress",
        stdout=io.StringIO(),
    )
    project = Project.objects.get(slug=SLUG)
    start_labelling(project)
    queue = [item.pk for item in disagreement_queue(project=project, filters={})]
    assert len(queue) >= 3
    return project, queue


def press(page: Any, *keys: str) -> None:
    for key in keys:
        page.keyboard.press(key)


def test_keyboard_only_adjudication_of_imported_faithbench_votes(
    live_server: Any, faithbench_queue, new_page: Callable, screenshot
):
    project, queue = faithbench_queue
    judge = UserFactory(username="adjudicator-cyan")
    membership_set(project=project, user=judge, role=Role.ADJUDICATOR)
    base = live_server.url
    page = new_page()
    log_in(page, base, "adjudicator-cyan", f"/p/{SLUG}/adjudicate/", screenshot)
    page.click(f'#queue a[href$="{item_path(queue[0])}"]')
    wait_for_script(page)
    screenshot(page, "first-item")
    # a marker that survives only while no page is loaded
    page.evaluate("window.__noReload = true")

    # the fields every imported annotator agrees on are pre-filled and say so
    first = Item.objects.get(pk=queue[0])
    claims = list(first.candidate.claims.order_by("index").values_list("pk", flat=True))
    prefilled = page.locator(".claim-wrap.prefilled")
    assert page.locator("#prefill-note").is_visible()
    for n in range(prefilled.count()):
        row = prefilled.nth(n)
        assert row.locator("input[data-role=label]:checked").count() == 1
    assert "Annotator 1" in page.locator("th.annotator-column").first.inner_text()

    # when the help overlay is opened with ? and closed with Escape
    press(page, "?")
    help_dialog = page.locator("dialog#shortcut-help")
    assert help_dialog.is_visible()
    assert "use all of Annotator k" in help_dialog.inner_text()
    screenshot(page, "help")
    press(page, "Escape")
    assert not help_dialog.is_visible()

    # and a resolve without rationale lists the problem, without a page load
    press(page, "a", "1", "s")
    summary = page.locator("#form-errors")
    summary.wait_for(state="visible")
    assert "Rationale — write why you decided this" in summary.inner_text()
    screenshot(page, "problems")

    # and then the rationale is written and the item resolved, keyboard only
    press(page, "w")
    page.keyboard.type("Annotator 1 reads the source right.")
    press(page, "Escape", "s")
    page.wait_for_url(f"{base}{item_path(queue[1])}")
    wait_for_script(page)
    screenshot(page, "second-item")

    # then the next item of the queue opened in place, and the decision is stored with the
    # evidence of the adopted imported labels waived
    assert page.evaluate("window.__noReload") is True
    assert f"Item #{queue[0]} adjudicated." in page.locator("ul.messages").inner_text()
    first.refresh_from_db()
    assert first.resolution.status == ResolutionStatus.ADJUDICATED
    labels = ResolvedClaimLabel.objects.filter(resolution=first.resolution)
    assert labels.count() == len(claims)
    assert all(cl.evidence_waived == (cl.label != "not_supported") for cl in labels)
    assert any(cl.evidence_waived for cl in labels)

    # when the second item is marked unresolved: x asks for the reason, Enter submits
    press(page, "x")
    assert page.evaluate("document.activeElement.id") == "id_unresolved_reason"
    press(page, "ArrowDown", "Enter")
    page.wait_for_url(f"{base}{item_path(queue[2])}")
    wait_for_script(page)
    assert page.evaluate("window.__noReload") is True
    second = Item.objects.get(pk=queue[1])
    assert second.resolution.status == ResolutionStatus.UNRESOLVED

    # and n opens the next item without deciding; back returns to the previous URL
    press(page, "n")
    page.wait_for_url(f"{base}{item_path(queue[3] if len(queue) > 3 else queue[2])}")
    wait_for_script(page)
    screenshot(page, "next")

    # and evidence is cited by keyboard: ] selects the next source sentence, c cites it
    active = page.locator(".claim-row.active")
    chips = active.locator(".chip").count()
    press(page, "]", "c")
    assert active.locator(".chip").count() == chips + 1
    assert active.locator(".chip input[name$='-unit']").last.input_value() == "utf16"
    screenshot(page, "cited-by-keyboard")
    assert page.js_errors == []
    assert page.csp_violations == []
