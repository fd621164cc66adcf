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
by the application) reports no serious or critical violation: every rule in the light colour
scheme at 390 px, the rules that depend on colours (:data:`COLOUR_RULES`) in the dark one
(``prefers-color-scheme``) at 1366 px. Every form control has a label (a placeholder is none).
Script errors and Content-Security-Policy reports fail too.

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
from django.db import transaction
from django.urls import reverse

from tests.worlds import build_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPO_ROOT = Path(__file__).resolve().parents[2]
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
OUTPUT = REPO_ROOT / "tests" / "output" / "layout"
NARROW = {"width": 390, "height": 844}
WIDE = {"width": 1366, "height": 900}
#: The axe rules whose outcome depends on the colours (all others read the DOM alone): the dark
#: theme is checked against these, the light theme against every rule.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
#: At most this many pages of one address shape (path with ids as N, query names) are checked.
PER_SHAPE = 2
#: A bound on the pages of one role, so the run time stays bounded as pages are added.
MAX_PAGES = 80
#: Addresses the crawl does not open: not pages of the site's layout, or not idempotent to open.
SKIP = re.compile(
    r"^/(admin|api|static|media|accounts/logout)/|\.(csv|json|jsonl|zip|txt)(\?|$)|/files/"
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
        "nav-reliability",
        "nav-members",
        "nav-import",
        "nav-partition",
        "nav-jobs",
    },
}
ALL_NAV = set().union(*NAV_LINKS.values())

# The axe-core run: every rule of the default set, or only ``rules``; only serious and critical
# results count.
AXE_RUN = """async (rules) => {
    const options = { resultTypes: ["violations"] };
    if (rules) options.runOnly = { type: "rule", values: rules };
    const result = await window.axe.run(document, options);
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
# Form controls without a label of their own (a placeholder is no label), and labels whose
# ``for`` names no element.
UNLABELLED = """() => {
    const name = (el) => el.tagName.toLowerCase() + (el.name ? "[name=" + el.name + "]" : "");
    const controls = document.querySelectorAll(
        "input:not([type=hidden]):not([type=submit]):not([type=button]), select, textarea");
    const bad = [...controls]
        .filter((el) => el.labels.length === 0 && !el.getAttribute("aria-label")
            && !el.getAttribute("aria-labelledby") && !el.title)
        .map((el) => "no label: " + name(el));
    for (const label of document.querySelectorAll("label[for]")) {
        if (!document.getElementById(label.htmlFor)) bad.push("label for no id: " + label.htmlFor);
    }
    return bad;
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
        #: ``{path: {window width: document width}}``, in CSS pixels
        self.widths: dict[str, dict[int, int]] = {}

    def problem(self, path: str, what: str, detail: Any) -> None:
        self.problems.setdefault(f"{self.role} {path}", []).append((what, detail))

    def resize(self, viewport: dict[str, int]) -> None:
        """Set the window size and wait two frames (the page's resize handlers have run)."""
        self.page.set_viewport_size(viewport)
        self.page.evaluate(
            "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )

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
        widths = self.widths.setdefault(path, {})
        for name, viewport in (("1366px", WIDE), ("390px", NARROW)):
            self.resize(viewport)
            widths[viewport["width"]] = page.evaluate("document.documentElement.scrollWidth")
            overflow = page.evaluate(OVERFLOW)
            if overflow:
                self.problem(path, f"horizontal overflow at {name}", overflow)
        unlabelled = page.evaluate(UNLABELLED)
        if unlabelled:
            self.problem(path, "form controls without a label", unlabelled)
        # axe in the light theme at 390 px (where tables scroll) with every rule, in the dark
        # one at 1366 px with the rules that depend on colours
        for scheme, viewport, rules in (("light", NARROW, None), ("dark", WIDE, COLOUR_RULES)):
            self.resize(viewport)
            page.emulate_media(color_scheme=scheme)
            violations = page.evaluate(AXE_RUN, rules)
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
        """On ``path`` given a too-wide element, grey-on-grey text and an unlabelled input (with
        a placeholder only), every check reports."""
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
                const box = document.createElement("input");
                box.placeholder = "search";
                document.querySelector("main").append(wide, pale, box);
            }"""
        )
        assert self.page.evaluate(OVERFLOW) is not None
        assert self.page.evaluate(UNLABELLED) == ["no label: input"]
        found = {v["id"] for v in self.page.evaluate(AXE_RUN, None)}
        assert "color-contrast" in {v["id"] for v in self.page.evaluate(AXE_RUN, COLOUR_RULES)}
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


def test_every_page_of_every_role_fits_narrow_and_wide_screens_and_passes_axe(
    live_server: Any, browser: Any
):
    # The world's calibration run request takes its spec's row lock inside its caller's
    # transaction (as the pages and the API call it); a live-server test holds none.
    with transaction.atomic():
        world = build_world()
    base = live_server.url
    slug = world.a.slug
    dashboard = reverse("project-detail", args=[slug])
    labelling = reverse("annotate-form", args=[slug, world.assignments["leased"].pk])
    OUTPUT.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    problems: dict[str, list[Any]] = {}
    checked: dict[str, list[str]] = {}
    widths: list[str] = []
    screenshots: list[Path] = []
    for role in ("annotator", "adjudicator", "manager"):
        context = browser.new_context(locale="en-GB")
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
        widths += [
            f"{role} {path}: " + ", ".join(f"{w} px wide at {v} px" for v, w in sizes.items())
            for path, sizes in crawl.widths.items()
        ]
    # what was checked, for the record (beside the screenshots)
    summary = [f"crawl and checks: {time.monotonic() - started:.0f} s"]
    summary += [f"{role}: {len(paths)} pages: {' '.join(paths)}" for role, paths in checked.items()]
    summary += ["screenshots: " + " ".join(p.name for p in screenshots)]
    summary += ["document widths:", *widths]
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


@pytest.mark.parametrize(
    ("path", "rendered"),
    [
        # Swagger UI's title block and Redoc's heading hold the schema's title once rendered
        ("/api/docs/", ".swagger-ui .info .title"),
        ("/api/redoc/", "redoc h1"),
    ],
)
def test_the_api_docs_render_offline_from_this_sites_files(
    live_server: Any, browser: Any, path: str, rendered: str
):
    base = live_server.url
    context = browser.new_context()
    context.set_default_timeout(30_000)
    elsewhere: list[str] = []

    def offline(route: Any) -> None:
        # as with no network: every request off this site fails (and is recorded)
        if route.request.url.startswith(base + "/") or route.request.url.startswith("blob:"):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", offline)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
    )
    try:
        page.goto(base + path)
        title = page.locator(rendered).first
        title.wait_for()
        assert settings.SPECTACULAR_SETTINGS["TITLE"] in title.inner_text()
        OUTPUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / f"api-docs-{path.strip('/').replace('/', '-')}.png"))
    finally:
        context.close()
    assert elsewhere == []
    # Redoc's bundle always draws its vendor's logo from the vendor's CDN; the page's policy
    # (img-src 'self') blocks it, so nothing is fetched (the link text stays): the one report
    # expected. Anything else (a script or style refused, a script error) fails.
    assert [e for e in errors if "https://cdn.redoc.ly/redoc/logo-mini.svg" not in e] == []
