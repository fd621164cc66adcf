"""Release pages while a build is under way: the data attributes that labeling's
work_progress.js reads, and the JSON they point at, asked with the page's own session."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client

from certification.models import ReleaseBuild
from certification.services.releases import release_freeze, release_rebuild
from tests.worlds import World

pytestmark = pytest.mark.django_db


def _polled(client: Client, page: str) -> list[dict[str, Any]]:
    """The work objects the page's script would read: its poll URL's JSON, walked by its path."""
    url = html.unescape(re.search(r'data-poll-url="([^"]+)"', page).group(1))
    path = re.search(r'data-poll-path="([^"]*)"', page).group(1)
    response = client.get(url, HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    found = [response.json()]
    for step in filter(None, path.split(".")):
        found = [v for f in found for v in (f if step == "*" else [f[step]])]
    return [work for work in found if work is not None]


def _client(world: World, role: str) -> Client:
    client = Client()
    client.force_login(world.users[role])
    return client


@pytest.mark.parametrize("role", ["manager", "adjudicator"])
def test_a_rebuild_under_way_is_polled_on_the_release_page_only(world, role):
    # given a done release whose rebuild is pending
    release = world.releases["a"]
    rebuild = release_rebuild(release=release, actor=world.users["manager"])
    client = _client(world, role)
    # when
    detail = client.get(f"/p/{world.a.slug}/releases/{release.pk}/").content.decode()
    listing = client.get(f"/p/{world.a.slug}/releases/").content.decode()
    # then the release page asks for every build; its rebuild row is the work it updates
    assert 'data-poll-path="builds.*" data-poll-ms="3000"' in detail
    assert '<script src="/static/labeling/work_progress.js" defer>' in detail
    works = {work["id"]: work for work in _polled(client, detail)}
    assert works[rebuild.pk]["status"] == "pending" and works[rebuild.pk]["worker_lost"] is False
    assert set(works) == set(
        ReleaseBuild.objects.filter(release=release).values_list("pk", flat=True)
    )
    assert f'<span data-work-id="{rebuild.pk}"><span class="badge" data-build-status="pending"' in (
        detail
    )
    # the list shows each release's first build only, all done: nothing to follow there
    assert "data-poll-url" not in listing and "work_progress.js" not in listing


def test_a_frozen_release_is_followed_on_the_list_with_its_progress(world):
    # given a release just frozen (its build pending)
    new = release_freeze(
        project=world.a, actor=world.users["manager"], version="2", parent=world.releases["a"]
    )
    build = ReleaseBuild.objects.get(release=new)
    ReleaseBuild.objects.filter(pk=build.pk).update(progress_done=3, progress_total=12)
    client = _client(world, "adjudicator")
    # when
    listing = client.get(f"/p/{world.a.slug}/releases/").content.decode()
    # then the list asks the releases' JSON for each release's build and shows the progress
    assert 'data-poll-path="results.*.build"' in listing
    works = {work["id"]: work for work in _polled(client, listing)}
    assert works[build.pk]["status"] == "pending"
    assert (works[build.pk]["progress_done"], works[build.pk]["progress_total"]) == (3, 12)
    row = re.search(rf'<span data-work-id="{build.pk}">.*?</span></span>', listing, re.S).group(0)
    assert '<progress max="100" value="25" data-work-field="progress">25%</progress>' in row
    assert '<span class="muted" data-work-field="count"> (3 of 12)</span>' in row
    assert 'data-work-field="lost" hidden' in row and 'data-work-field="attempts" hidden' in row
