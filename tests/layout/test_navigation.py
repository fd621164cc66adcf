"""The project navigation per role, the current page marked, "Next item" in one click, and the
API docs served from this site's static files only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

from labeling.models import Assignment

pytestmark = pytest.mark.django_db

# The links of the project navigation (ids in templates/base.html) each role gets.
ALL_LINKS = {
    "nav-dashboard",
    "nav-next",
    "nav-my",
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
}
EXPECTED_LINKS = {
    "annotator": {"nav-dashboard", "nav-next", "nav-my"},
    "adjudicator": {
        "nav-dashboard",
        "nav-disagreements",
        "nav-items",
        "nav-certification",
        "nav-audits",
        "nav-releases",
    },
    "manager": ALL_LINKS - {"nav-next", "nav-my"},
}
NAV = re.compile(r'<nav aria-label="Project" id="project-nav">(.*?)</nav>', re.DOTALL)


def nav_of(html: str) -> str:
    match = NAV.search(html)
    assert match, "no project navigation"
    return match.group(1)


def link_ids(nav: str) -> set[str]:
    return set(re.findall(r'id="(nav-[a-z-]+)"', nav)) & ALL_LINKS


@pytest.mark.parametrize("role", sorted(EXPECTED_LINKS))
def test_each_role_gets_the_links_of_the_pages_it_may_use(client, world, role):
    client.force_login(world.users[role])
    nav = nav_of(client.get(reverse("project-detail", args=[world.a.slug])).content.decode())
    assert link_ids(nav) == EXPECTED_LINKS[role]
    # every link of the navigation opens for this role
    for href in re.findall(r'<a href="([^"]+)"', nav):
        assert client.get(href).status_code == 200, (role, href)


def test_the_certification_pages_the_nav_links_exist_for_adjudicators_not_annotators(client, world):
    names = ["calibration-home", "audit-list", "release-list"]
    client.force_login(world.users["adjudicator"])
    assert [client.get(reverse(n, args=[world.a.slug])).status_code for n in names] == [200] * 3
    client.force_login(world.users["annotator"])
    assert [client.get(reverse(n, args=[world.a.slug])).status_code for n in names] == [404] * 3


def current_marks(html: str) -> dict[str, str]:
    """``{link id: aria-current value}`` of the navigation's marked links."""
    nav = nav_of(html)
    return dict(re.findall(r'id="(nav-[a-z-]+)"[^>]*? aria-current="(page|true)"', nav))


def test_the_current_page_and_section_are_marked(client, world):
    client.force_login(world.users["manager"])
    slug = world.a.slug
    release = world.releases["a"]
    assert current_marks(client.get(reverse("release-list", args=[slug])).content.decode()) == {
        "nav-releases": "page"
    }
    detail = client.get(reverse("release-detail", args=[slug, release.pk])).content.decode()
    assert current_marks(detail) == {"nav-releases": "true"}
    run = client.get(reverse("calibration-run-detail", args=[slug, world.runs["a"].pk]))
    assert current_marks(run.content.decode()) == {"nav-certification": "true"}
    assert current_marks(client.get(reverse("project-detail", args=[slug])).content.decode()) == {
        "nav-dashboard": "page"
    }


def test_next_item_in_the_navigation_opens_the_next_item_in_one_post(client, world):
    annotator = world.users["annotator"]
    client.force_login(annotator)
    slug = world.a.slug
    nav = nav_of(client.get(reverse("my-annotations", args=[slug])).content.decode())
    action = re.search(r'<form method="post" action="([^"]+)"[^>]*id="nav-next-form"', nav)
    assert action and action.group(1) == reverse("annotate-next", args=[slug])
    response = client.post(action.group(1))
    # the annotator holds a lease on the world's "leased" item: it is the one opened
    held = world.assignments["leased"]
    assert response.status_code == 302
    assert response["Location"] == reverse("annotate-form", args=[slug, held.pk])
    form = client.get(response["Location"]).content.decode()
    assert current_marks(form) == {"nav-next": "page"}


def test_next_item_claims_a_new_item_when_none_is_held(client, world):
    annotator = world.users["annotator"]
    slug = world.a.slug
    Assignment.objects.filter(pk=world.assignments["leased"].pk).delete()
    client.force_login(annotator)
    response = client.post(reverse("annotate-next", args=[slug]))
    assert response.status_code == 302
    claimed = Assignment.objects.get(item__project=world.a, annotator=annotator, status="leased")
    assert response["Location"] == reverse("annotate-form", args=[slug, claimed.pk])


ASSET = re.compile(r'<(?:script|link)\b[^>]*?\b(?:src|href)="([^"]+)"', re.IGNORECASE)


@pytest.mark.parametrize("path", ["/api/docs/", "/api/redoc/"])
def test_the_api_docs_load_only_this_sites_static_files(client, path):
    response = client.get(path)
    assert response.status_code == 200
    html = response.content.decode()
    assets = ASSET.findall(html)
    assert assets, html
    for url in assets:
        if url.startswith("data:"):
            continue
        assert url.startswith("/"), f"{path} loads {url} from elsewhere"
        assert not url.startswith("//"), url
        if url.startswith("/static/"):
            found = finders.find(url.removeprefix("/static/"))
            assert found and Path(found).stat().st_size > 0, f"{url}: no such static file"
        else:
            # Swagger UI's page script, served by the docs view itself
            assert client.get(url).status_code == 200, url
    assert "http://" not in html and "https://" not in html
    policy = response["Content-Security-Policy"]
    assert "script-src 'self';" in policy + ";" and "http" not in policy


def test_the_docs_link_is_in_the_header(client, world):
    client.force_login(world.users["annotator"])
    html = client.get(reverse("project-list")).content.decode()
    assert f'href="{reverse("api-docs")}" id="nav-api-docs"' in html
