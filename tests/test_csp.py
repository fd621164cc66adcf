"""Content-Security-Policy: every page carries it and nothing in a page needs an exception.

The policy (``CONTENT_SECURITY_POLICY`` in labeling/settings.py) allows scripts and styles from
this site only: no inline ``<script>`` body, no ``on*=`` handler, no ``style=`` attribute and no
``<style>`` element may appear in a template or in a rendered page (the charts are inline SVG
and are checked here too). The browser tests check that Chromium reports no
violation on the labelling, adjudication and dashboard pages.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from tests.factories import UserFactory
from tests.test_permission_matrix import EXPECTED, ROUTES, params_for
from tests.worlds import build_world, url_for

REPO = Path(__file__).resolve().parents[1]
TEMPLATE_DIRS = [REPO / "templates", *REPO.glob("*/templates")]

# An opening <script> tag and what follows it up to </script>.
SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.IGNORECASE | re.DOTALL)
HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)
STYLE_ATTRIBUTE = re.compile(r"<[^>]*\sstyle\s*=", re.IGNORECASE)
STYLE_ELEMENT = re.compile(r"<style\b", re.IGNORECASE)
JAVASCRIPT_URL = re.compile(r"""(href|src|action)\s*=\s*["']?\s*javascript:""", re.IGNORECASE)


def inline_violations(html: str) -> list[str]:
    """What in ``html`` a ``script-src 'self'; style-src 'self'`` policy would block."""
    found = []
    for attributes, body in SCRIPT.findall(html):
        executable = not re.search(r"type\s*=\s*[\"']application/(ld\+)?json", attributes)
        if body.strip() and executable:
            found.append(f"inline script: {body.strip()[:60]!r}")
        if "src" not in attributes and executable and not body.strip():
            found.append(f"script without src: <script{attributes}>")
    found += [f"event handler: {m.group(0)[:80]!r}" for m in HANDLER.finditer(html)]
    found += [f"style attribute: {m.group(0)[:80]!r}" for m in STYLE_ATTRIBUTE.finditer(html)]
    found += [f"style element at {m.start()}" for m in STYLE_ELEMENT.finditer(html)]
    found += [f"javascript: URL: {m.group(0)!r}" for m in JAVASCRIPT_URL.finditer(html)]
    return found


def templates() -> list[Path]:
    return sorted(p for d in TEMPLATE_DIRS for p in d.rglob("*.html"))


def test_the_scan_finds_what_it_looks_for():
    assert inline_violations("<script>alert(1)</script>") != []
    assert inline_violations('<button onclick="x()">') != []
    assert inline_violations('<td style="color: red">') != []
    assert inline_violations("<style>p{}</style>") != []
    assert inline_violations('<a href="javascript:x()">') != []
    assert inline_violations('<script src="/static/a.js" defer></script>') == []
    assert inline_violations('<script type="application/json" id="d">{"a": 1}</script>') == []


def test_templates_were_found():
    names = {p.name for p in templates()}
    assert {"base.html", "annotate.html", "adjudicate.html", "audit_detail.html"} <= names


@pytest.mark.parametrize("template", templates(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_template_has_inline_script_handler_or_style(template):
    assert inline_violations(template.read_text(encoding="utf-8")) == []


def test_the_policy_allows_only_this_site():
    directives = settings.CONTENT_SECURITY_POLICY["DIRECTIVES"]
    assert directives["script-src"] == ["'self'"]
    assert directives["style-src"] == ["'self'"]
    assert directives["default-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]


PAGES = [r for r in ROUTES if not r.api and "GET" in EXPECTED.get(r.name, {})]


def test_every_page_with_a_get_is_rendered_below():
    assert len(PAGES) >= 20, [r.name for r in PAGES]


@pytest.mark.django_db
def test_every_page_carries_the_policy_and_renders_nothing_it_would_block():
    world = build_world()
    staff = UserFactory(is_staff=True)
    rendered: dict[str, int] = {}
    problems: dict[str, list[str]] = {}
    for route in PAGES:
        role = "manager" if EXPECTED[route.name]["GET"][2] == 200 else "annotator"
        client = Client()
        # "New project" is for staff (no member of the world may create projects)
        client.force_login(staff if route.name == "project-create" else world.users[role])
        response = client.get(url_for(route, params_for(route, world)))
        rendered[route.name] = response.status_code
        policy = response.get("Content-Security-Policy", "")
        if "script-src 'self'" not in policy or "style-src 'self'" not in policy:
            problems[route.name] = [f"policy header: {policy!r}"]
            continue
        if response["Content-Type"].startswith("text/html"):
            found = inline_violations(response.content.decode())
            if found:
                problems[route.name] = found
    assert problems == {}
    assert set(rendered.values()) == {200}, rendered
    # (the run page with its charts: tests/certification/views/test_calibration_pages.py)


@pytest.mark.django_db
def test_login_page_error_pages_and_api_carry_the_policy():
    client = Client()
    for url in ("/accounts/login/", "/no-such-page/", "/api/projects/"):
        response = client.get(url)
        assert "default-src 'self'" in response["Content-Security-Policy"], url
    assert inline_violations(client.get("/accounts/login/").content.decode()) == []


def test_swagger_page_is_vendored_and_relaxed_only_for_inline_styles(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    # scripts from this site only: Swagger UI is served from the sidecar's static files
    assert "script-src 'self';" in policy + ";"
    assert "http" not in policy
    assert "'unsafe-inline'" in policy.split("style-src", 1)[1].split(";", 1)[0]
    html = response.content.decode()
    assert "cdn." not in html and "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
    # its page script is served by the view, not inline
    assert not [v for v in inline_violations(response.content.decode()) if "script" in v]
    assert client.get("/api/docs/?script").status_code == 200
