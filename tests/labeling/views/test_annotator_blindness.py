"""Blindness over every page an annotator can reach: annotators see only their own work.

The URL list comes from the URL configuration, so a new page is covered without editing this
test. Every page is fetched as an annotator who shares an item with another annotator and with
an imported prior annotation and an evaluator label; none of their traces may appear anywhere
in the HTML (text, attributes, data-* attributes or embedded JSON).
"""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from labeling.models import Assignment, Item, Role
from tests.factories import start_labelling
from tests.labeling.views.conftest import (
    EVALUATOR,
    EVALUATOR_SCORE,
    METADATA,
    PRIOR_ANNOTATOR,
    PRIOR_NOTE,
    claim_next,
    form_url,
    labels_post,
    secret_record,
)

pytestmark = pytest.mark.django_db

OTHER_COMMENT = "OTHER-ANNOTATOR-COMMENT"


def web_routes() -> list[tuple[str, str]]:
    """(name, pattern) of every named page of labeling.web_urls (not admin, API, accounts)."""
    from labeling import web_urls

    routes = []
    for entry in web_urls.urlpatterns:
        assert isinstance(entry, URLPattern) and not isinstance(entry, URLResolver)
        routes.append((entry.name, str(entry.pattern)))
    assert routes and get_resolver()  # the root configuration includes them
    return routes


def kwargs_for(pattern: str, *, item_id: int, assignment_id: int) -> dict[str, object]:
    # a job page is refused to annotators whatever the id (managers only); a token, an
    # invitation or a join link that is not the annotator's is not found
    values = {
        "slug": "study",
        "item_id": item_id,
        "assignment_id": assignment_id,
        "job_id": 1,
        "token_id": 1,
        "invitation_id": 1,
        "token": "not-a-join-token",
    }
    return {name: values[name] for name in re.findall(r"<(?:\w+:)?(\w+)>", pattern)}


@pytest.fixture
def shared_item(client, project, import_records, member):
    """q1/c0 carries a prior vote and an evaluator label; with overlap 3 another annotator
    labels it first, then ``annotator`` claims and submits it too."""
    import_records([secret_record("q1")])
    start_labelling(project, overlap=3)
    other = member(Role.ANNOTATOR)
    theirs = claim_next(project, other)
    client.force_login(other)
    client.post(
        form_url(theirs),
        labels_post(theirs.item, answer="inadmissible", comment=OTHER_COMMENT),
    )
    annotator = member(Role.ANNOTATOR)
    mine = claim_next(project, annotator)
    assert mine.item_id == theirs.item_id
    return annotator, other, mine


def test_no_page_reachable_by_an_annotator_shows_anyone_elses_traces(client, shared_item):
    annotator, other, mine = shared_item
    client.force_login(annotator)
    # the annotator's own form before submitting, then submit (the item is now compared)
    before = client.get(form_url(mine))
    client.post(form_url(mine), labels_post(mine.item, answer="admissible"))
    item = Item.objects.get(pk=mine.item_id)
    assert Assignment.objects.filter(item=item, status="submitted").count() == 2
    secrets = [
        EVALUATOR,
        EVALUATOR_SCORE,
        PRIOR_ANNOTATOR,
        PRIOR_NOTE,
        METADATA,
        OTHER_COMMENT,
        other.username,
        other.email,
        "Annotator 1",
        "Annotator 2",
        "prior_votes",
        "assigned_count",
        "disagreement",
        "consensus",
    ]

    pages = {"form (before submit)": before}
    for name, pattern in web_routes():
        url = reverse(name, kwargs=kwargs_for(pattern, item_id=item.pk, assignment_id=mine.pk))
        pages[name] = client.get(url)

    reached = []
    for name, response in pages.items():
        assert response.status_code in (200, 403, 404, 405), (name, response.status_code)
        if response.status_code != 200:
            continue
        reached.append(name)
        content = response.content.decode()
        for secret in secrets:
            assert secret not in content, f"{secret!r} on {name}"
        # vote counts: no "2 votes"/"3 annotations"-style figure about the item
        assert not re.search(r"\b\d+\s+(votes?|annotations?)\b", content, re.I), name
    # the pages an annotator works with were all fetched and checked
    assert {"annotate-next", "annotate-form", "my-annotations", "project-detail"} <= set(reached)
    # the item browser and the adjudication pages do not exist for annotators
    for name in ("item-list", "item-detail", "adjudication-queue", "adjudication-item"):
        assert pages[name].status_code == 404, name
