"""Every page, for every role, in a real browser: it fits 390 px and 1366 px screens, passes
axe-core in the light and the dark theme, and the navigation holds the links of the role.

The world is :func:`tests.worlds.build_world` (a manager, an adjudicator and annotators; items
in every state, a calibration spec with a done run, an evaluator audit and a built release), so
every page has content. The pages are discovered, not listed: for each role the crawl starts at
the project list and the project's dashboard and follows every same-origin link of each page
(GET only: forms are not submitted; downloads, the admin, the API and sign-out are skipped), so
pages added later are covered without changing this test. Pages whose addresses differ only by
ids or query values count as one shape, and at most :data:`PER_SHAPE` of a shape are checked.

For each page: ``document.documentElement.scrollWidth <= innerWidth`` at 390 px and at 1366 px,
and axe-core (vendored: ``tests/browser/vendor/axe.min.js``, injected by the test, never served
by the application) reports no serious or critical violation, in the light and the dark colour
scheme (``prefers-color-scheme``). Script errors and Content-Security-Policy reports fail too.

Screenshots (``tests/output/layout/``, gitignored): the dashboard at 390 px, light and dark, for
each role; the labelling page at 390 px and 1366 px.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.urls import reverse

from tests.browser.conftest import CHROMIUM_ARGS
from tests.worlds import build_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPO_ROOT = Path(__file__).resolve().parents[2]
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
OUTPUT = REPO_ROOT / "tests" / "output" / "layout"
NARROW = {"width": 390, "height": 844}
WIDE = {"width": 1366, "height": 900}
#: At most this many pages of one address shape (path with ids as N, query names) are checked.
PER_SHAPE = 2
#: A bound on the pages of one role, so the run time stays bounded as pages are added.
MAX_PAGES = 80
#: Addresses the crawl does not open: not pages of the site's layout, or not idempotent to open.
SKIP = re.compile(
    r"^/(admin|api|static|media|accounts/logout)/|\.(csv|json|jsonl|zip|txt)$|/files/"
)
#: The navigation links (ids in templates/base.html) each role has, and those it must not.
NAV_LINKS = {
    "annotator": {"nav-dashboard", "nav-next", "nav-my"},
    "adjudicator": {
        "nav-dashboard",
        "nav-disagreements",
        "nav-items",
        "nav-certification",
        "nav-audits",
        "nav-releases",
    },
    "manager": {
        "nav-dashboard",
        "nav-disagreements",
        "nav-items",
        "nav-certification",
        "nav-audits",
        "nav-releases",
        "nav-settings",
        "nav-members",
        "nav-import",
        "nav-partition",
        "nav-jobs",
    },
}
ALL_NAV = set().union(*NAV_LINKS.values())

# The axe-core run: every rule of the default set; only serious and critical results count.
AXE_RUN = """async () => {
    const result = await window.axe.run(document, { resultTypes: ["violations"] });
    return result.violations
        .filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => ({
            id: v.id,
            impact: v.impact,
            nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ") + " :: " + n.failureSummary),
        }));
}"""
# The widest elements of a page that is wider than the window (what to fix).
OVERFLOW = """() => {
    const width = window.innerWidth;
    const scroll = document.documentElement.scrollWidth;
    if (scroll <= width) return null;
    const wide = [];
    for (const el of document.body.querySelectorAll("*")) {
        const r = el.getBoundingClientRect();
        if (r.right > width + 1 && getComputedStyle(el).position !== "fixed") {
            const name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
                + (el.classList.length ? "." + [...el.classList].join(".") : "");
            wide.push(name + " right=" + Math.round(r.right));
        }
    }
    return { scrollWidth: scroll, innerWidth: width, elements: wide.slice(0, 6) };
}"""


def shape(path: str) -> str:
    """The address shape of ``path`` (with its query): ids replaced by N, query names only."""
    parts = urlsplit(path)
    names = sorted({name for name, _ in parse_qsl(parts.query, keep_blank_values=True)})
    return re.sub(r"\d+", "N", parts.path) + ("?" + "&".join(names) if names else "")


def session_cookie(user: Any) -> str:
    """A signed-in session of ``user`` in the live server's database, as the login would."""
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    assert session.session_key
    return session.session_key


def same_origin_links(page: Any, base: str) -> list[str]:
    """The paths (with query, without fragment) of the page's links to this site."""
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map((a) => a.href)")
    paths = []
    for href in hrefs:
        if not href.startswith(base + "/"):
            continue
        parts = urlsplit(href)
        paths.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    return paths


class Crawl:
    """The checks of one role's pages, collecting every problem found (none is expected)."""

    def __init__(self, context: Any, base: str, role: str) -> None:
        self.context = context
        self.base = base
        self.role = role
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on(
            "console",
            lambda m: self.errors.append(m.text) if "Content Security Policy" in m.text else None,
        )
        self.problems: dict[str, list[Any]] = {}
        self.checked: list[str] = []

    def problem(self, path: str, what: str, detail: Any) -> None:
        self.problems.setdefault(f"{self.role} {path}", []).append((what, detail))

    def check(self, path: str) -> list[str]:
        """Open ``path``, check it at both widths and in both themes; return its links."""
        page = self.page
        page.set_viewport_size(WIDE)
        page.emulate_media(color_scheme="light")
        response = page.goto(self.base + path, wait_until="load")
        if response is None or response.status != 200:
            self.problem(path, "status", response.status if response else None)
            return []
        if not response.headers.get("content-type", "").startswith("text/html"):
            return []
        self.checked.append(path)
        for name, viewport in (("1366px", WIDE), ("390px", NARROW)):
            page.set_viewport_size(viewport)
            overflow = page.evaluate(OVERFLOW)
            if overflow:
                self.problem(path, f"horizontal overflow at {name}", overflow)
        # axe in the light theme at 390 px (where tables scroll), in the dark one at 1366 px
        for scheme, viewport in (("light", NARROW), ("dark", WIDE)):
            page.set_viewport_size(viewport)
            page.emulate_media(color_scheme=scheme)
            violations = page.evaluate(AXE_RUN)
            if violations:
                self.problem(path, f"axe ({scheme}, {viewport['width']}px)", violations)
        if self.errors:
            self.problem(path, "script errors or CSP reports", list(self.errors))
            self.errors.clear()
        return same_origin_links(page, self.base)

    def run(self, starts: list[str]) -> None:
        """Check every page reachable from ``starts`` (breadth first, bounded per shape)."""
        queue = deque(starts)
        seen: set[str] = set()
        per_shape: Counter[str] = Counter()
        while queue and len(seen) < MAX_PAGES:
            path = queue.popleft()
            if path in seen or SKIP.search(path) or per_shape[shape(path)] >= PER_SHAPE:
                continue
            seen.add(path)
            per_shape[shape(path)] += 1
            queue.extend(link for link in self.check(path) if link not in seen)

    def assert_checks_can_fail(self, path: str) -> None:
        """On ``path`` given a too-wide element and grey-on-grey text, both checks report."""
        self.page.set_viewport_size(NARROW)
        self.page.goto(self.base + path)
        # (CSSOM assignments from a script are not inline styles: the page's policy allows them)
        self.page.evaluate(
            """() => {
                const wide = document.createElement("div");
                wide.style.width = "800px";
                wide.textContent = "wide";
                const pale = document.createElement("p");
                pale.style.color = "#aaaaaa";
                pale.style.background = "#bbbbbb";
                pale.textContent = "pale text";
                document.querySelector("main").append(wide, pale);
            }"""
        )
        assert self.page.evaluate(OVERFLOW) is not None
        found = {v["id"] for v in self.page.evaluate(AXE_RUN)}
        assert "color-contrast" in found, found
        self.errors.clear()

    def nav_links(self, path: str) -> set[str]:
        """The ids of the project navigation's links on ``path``."""
        self.page.goto(self.base + path)
        ids = self.page.eval_on_selector_all("#project-nav [id^=nav-]", "els => els.map(e => e.id)")
        return set(ids) & ALL_NAV

    def screenshot(self, path: str, name: str, viewport: dict[str, int], scheme: str) -> Path:
        """Save a full-page screenshot of ``path`` as ``tests/output/layout/<name>.png``."""
        self.page.set_viewport_size(viewport)
        self.page.emulate_media(color_scheme=scheme)
        self.page.goto(self.base + path)
        target = OUTPUT / f"{name}.png"
        self.page.screenshot(path=str(target), full_page=True)
        return target


@pytest.fixture
def chromium(monkeypatch: pytest.MonkeyPatch) -> Any:
    """One headless chromium for the whole test (its roles each get their own context)."""
    import shutil

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed")
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("chromium is not on PATH")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from django.db import connections

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            launched.close()
            connections.close_all()


def test_every_page_of_every_role_fits_narrow_and_wide_screens_and_passes_axe(
    live_server: Any, chromium: Any
):
    world = build_world()
    base = live_server.url
    slug = world.a.slug
    dashboard = reverse("project-detail", args=[slug])
    labelling = reverse("annotate-form", args=[slug, world.assignments["leased"].pk])
    OUTPUT.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    problems: dict[str, list[Any]] = {}
    checked: dict[str, list[str]] = {}
    screenshots: list[Path] = []
    for role in ("annotator", "adjudicator", "manager"):
        context = chromium.new_context(locale="en-GB")
        context.set_default_timeout(20_000)
        context.add_cookies(
            [
                {
                    "name": settings.SESSION_COOKIE_NAME,
                    "value": session_cookie(world.users[role]),
                    "url": base,
                }
            ]
        )
        # axe-core is added to every document before the page's own scripts, by the browser
        # (not as an inline script, which the pages' Content-Security-Policy refuses).
        context.add_init_script(path=str(AXE))
        crawl = Crawl(context, base, role)
        try:
            assert crawl.nav_links(dashboard) == NAV_LINKS[role], role
            if role == "annotator":
                crawl.assert_checks_can_fail(dashboard)
            starts = [reverse("project-list"), dashboard]
            if role == "annotator":
                starts.append(labelling)
            crawl.run(starts)
            for scheme in ("light", "dark"):
                screenshots.append(
                    crawl.screenshot(dashboard, f"dashboard-{role}-390-{scheme}", NARROW, scheme)
                )
            if role == "annotator":
                for name, viewport in (("390", NARROW), ("1366", WIDE)):
                    screenshots.append(
                        crawl.screenshot(labelling, f"labelling-{name}-light", viewport, "light")
                    )
                screenshots.append(
                    crawl.screenshot(labelling, "labelling-390-dark", NARROW, "dark")
                )
        finally:
            context.close()
        problems.update(crawl.problems)
        checked[role] = crawl.checked
    # what was checked, for the record (beside the screenshots)
    summary = [f"crawl and checks: {time.monotonic() - started:.0f} s"]
    summary += [f"{role}: {len(paths)} pages: {' '.join(paths)}" for role, paths in checked.items()]
    summary += ["screenshots: " + " ".join(p.name for p in screenshots)]
    (OUTPUT / "crawl.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")
    (OUTPUT / "problems.json").write_text(json.dumps(problems, indent=1), encoding="utf-8")
    # the crawl did reach the pages that hold the content the world built
    assert labelling in checked["annotator"]
    for name, args in [
        ("release-detail", [slug, world.releases["a"].pk]),
        ("calibration-run-detail", [slug, world.runs["a"].pk]),
        ("audit-detail", [slug, world.evaluators["a"].pk]),
        ("adjudication-queue", [slug]),
    ]:
        assert reverse(name, args=args) in checked["adjudicator"], name
        assert reverse(name, args=args) in checked["manager"], name
    assert reverse("import-create", args=[slug]) in checked["manager"]
    assert problems == {}
