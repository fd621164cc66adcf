"""In a real browser: a manager declares a calibration spec with the keyboard and runs it; the
run's page then follows a run under way in place and loads once when it ends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from certification.models import CalibrationRun, CalibrationSpec, RunStatus
from labeling.models import Role
from tests.browser.test_workbench_browser import log_in
from tests.browser.test_workbench_edges_browser import person
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project
from tests.factories import calibration_record as rec

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BASE = "/p/study/certification"


def _tab_to(page: Any, element_id: str) -> None:
    """Press Tab until the element has the focus (the keyboard's way to a field)."""
    for _ in range(60):
        if page.evaluate("() => document.activeElement.id") == element_id:
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"#{element_id} never took the focus")


def test_a_spec_declared_with_the_keyboard_runs_and_its_page_follows_the_run(
    live_server: Any, project: Any, new_page: Callable, screenshot: Callable
):
    # given a project with resolved calibration and test questions, and its manager
    calibration_project(
        project,
        {
            "calibration": [
                rec(f"c{i}", [cand("a", answer="x", score=1.0, selected=True)]) for i in range(40)
            ],
            "test": [
                rec(f"t{i}", [cand("a", answer="x", score=1.0, selected=True)]) for i in range(5)
            ],
        },
    )
    manager = person(project, "manager-teal", Role.MANAGER)
    base = live_server.url
    page = new_page()
    log_in(page, base, manager.username, f"{BASE}/")
    # when the manager opens the form from the list and fills it with the keyboard only
    page.click("#new-spec")
    page.wait_for_url(f"{base}{BASE}/specs/new/")
    page.focus("#id_name")
    page.keyboard.type("keyboard")
    for field, keys in (
        ("id_method", "both"),  # a select: typing picks the option by its label
        ("id_alpha", "0.1"),
        ("id_delta", "0.05"),
        ("id_thresholds", "0.5, 0.9"),
        ("id_score_field", "acceptance_score"),
        ("id_selector", "the most"),
    ):
        _tab_to(page, field)
        page.keyboard.type(keys)
    assert page.eval_on_selector("#id_selector", "s => s.value") == "mode"
    assert page.eval_on_selector("#id_report_confidence", "i => i.value") == "0.95"
    screenshot(page, "spec-form")
    _tab_to(page, "save-spec")
    page.keyboard.press("Enter")
    # then the spec is saved as typed and its page offers Run now
    page.locator("#start-run").wait_for()
    spec = CalibrationSpec.objects.get(name="keyboard")
    assert (spec.method, spec.selector, spec.score_field) == ("both", "mode", "acceptance_score")
    assert spec.thresholds == [0.5, 0.9] and str(spec.alpha.normalize()) == "0.1"
    page.focus("#start-run")
    page.keyboard.press("Enter")
    page.locator("#run-outcome").wait_for()
    run = CalibrationRun.objects.get(spec=spec)
    assert run.status == RunStatus.DONE
    screenshot(page, "run-done")

    # given the run shown as running again (its worker holding it)
    CalibrationRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, attempts=1, lease_owner="worker-1", heartbeat_at=timezone.now()
    )
    page.goto(f"{base}{BASE}/runs/{run.pk}/")
    assert page.locator("#run-status").inner_text() == "running"
    assert page.locator("#run-worker-lost").is_hidden()
    page.evaluate("window.__notReloaded = true")  # survives only while the page is not loaded
    # when its worker is lost and a second attempt takes it, the page shows it without a reload
    CalibrationRun.objects.filter(pk=run.pk).update(attempts=2, heartbeat_at=None)
    page.locator("#run-worker-lost").wait_for(state="visible")
    assert page.locator("#run-live [data-work-field=attempts]").inner_text() == "attempt 2"
    assert page.evaluate("window.__notReloaded === true")
    screenshot(page, "run-worker-lost")
    # when it ends, the page is loaded once and shows the certificate
    CalibrationRun.objects.filter(pk=run.pk).update(status=RunStatus.DONE, lease_owner="")
    page.locator("#run-outcome").wait_for()
    assert page.evaluate("window.__notReloaded === undefined")
    assert page.locator("#run-status").inner_text() == "done"
    assert page.js_errors == [] and page.csp_violations == []
