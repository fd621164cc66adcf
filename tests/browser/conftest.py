"""Fixtures of the end-to-end browser tests: Debian's chromium driven by Playwright (sync API).

``playwright install`` cannot download browsers here, so the tests launch the system chromium
(``executable_path``). Without chromium or the ``playwright`` package they skip with the reason,
unless ``CERTLABEL_REQUIRE_BROWSER=1`` (set by ``.ci/run``), which turns the skip into a failure.

Screenshots go to ``test-output/browser/<test name>/NN-<page>.png`` under the repository root
(gitignored); the folder is emptied when the test starts.
"""

from __future__ import annotations

import os
import re
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

REPO_ROOT = Path(__file__).resolve().parents[2]
OUTPUT_ROOT = REPO_ROOT / "test-output" / "browser"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
# Wide enough for the two-column labelling layout (sources beside the form above 60rem).
VIEWPORT = {"width": 1440, "height": 1000}


def _unavailable(reason: str) -> None:
    if os.environ.get("CERTLABEL_REQUIRE_BROWSER") == "1":
        pytest.fail(f"CERTLABEL_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A headless Debian chromium launched through Playwright, closed after the test."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    executable = shutil.which("chromium")
    if executable is None:
        _unavailable("chromium is not on PATH (Debian: apt-get install chromium)")
    # Playwright's sync API keeps an asyncio loop running on this thread between its calls, and
    # Django refuses ORM calls from a thread with a running loop. The test's own ORM calls
    # (setup and assertions) are plain synchronous code, so allow them.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            launched.close()
            # The test's ORM calls opened a connection in the context Playwright's loop runs
            # in; pytest-django's teardown does not see it, and on PostgreSQL the test database
            # could not be dropped. Close it here.
            connections.close_all()


@pytest.fixture
def new_page(browser: Any) -> Callable[[], Any]:
    """Open a page in a fresh browser context (its own cookies: one context per person)."""

    def make() -> Any:
        context = browser.new_context(viewport=VIEWPORT, locale="en-GB")
        context.set_default_timeout(15_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.js_errors = errors  # checked by the tests: a script error fails them
        # Chromium reports every Content-Security-Policy violation on the console ("Refused to
        # execute inline script because it violates the following Content Security Policy
        # directive ..."); the tests check that none is reported.
        violations: list[str] = []
        page.on(
            "console",
            lambda message: (
                violations.append(message.text)
                if "Content Security Policy" in message.text
                else None
            ),
        )
        page.csp_violations = violations
        return page

    return make


@pytest.fixture
def output_dir(request: pytest.FixtureRequest) -> Path:
    """This test's screenshot folder, emptied."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    folder = OUTPUT_ROOT / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def screenshot(output_dir: Path) -> Callable[[Any, str], Path]:
    """``screenshot(page, "login")`` saves ``NN-login.png`` (NN counts up) of the full page.

    A screenshot is a record for people, not a check: on a loaded machine (CI runs two suites
    side by side on two cores) Chromium can take longer than the 15 s action timeout to paint a
    full page, so a screenshot gets 60 s, and one that still times out is reported as a warning
    instead of failing the test. The tests' assertions keep the 15 s timeout.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    counter = iter(range(1, 100))

    def take(page: Any, name: str) -> Path:
        path = output_dir / f"{next(counter):02d}-{name}.png"
        try:
            page.screenshot(path=str(path), full_page=True, animations="disabled", timeout=60_000)
        except PlaywrightTimeoutError:
            warnings.warn(f"screenshot {path.name} timed out (60 s)", stacklevel=2)
        return path

    return take
