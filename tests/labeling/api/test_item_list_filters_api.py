"""The API item list takes the item browser's filters and sorts, documented in the schema."""

from __future__ import annotations

import pytest

from labeling.models import Item, Role
from tests.labeling.views.test_item_browser import flow  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/items/"


def ids(response):
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_filters_and_sort(api, flow):  # noqa: F811
    client = api(Role.MANAGER)
    resolved, disputed = flow["resolved"].pk, flow["disputed"].pk
    assert ids(client.get(URL, {"status": "resolved"})) == [resolved]
    assert ids(client.get(URL, {"disagreement": "answer"})) == [disputed]
    assert ids(client.get(URL, {"annotator": flow["a"].pk, "sort": "-id"})) == [disputed, resolved]
    assert ids(client.get(URL, {"q": "deep water"})) == [
        Item.objects.get(candidate__text="The harbour is deep.").pk
    ]
    row = client.get(URL, {"resolved_label": "admissible"}).json()["results"][0]
    assert (row["id"], row["status"], row["vote_count"], row["resolved_label"]) == (
        resolved,
        "resolved",
        2,
        "admissible",
    )
    with_prior = [i.pk for i in flow["open"] if i.prior_votes]
    manager = ids(client.get(URL, {"voted_label": "inadmissible"}))
    adjudicator = ids(api(Role.ADJUDICATOR).get(URL, {"voted_label": "inadmissible"}))
    assert manager == sorted([disputed, *with_prior]) and adjudicator == [disputed]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"status": "done"}, "status"), ({"sort": "name"}, "sort"), ({"annotator": "x"}, "annotator")],
)
def test_invalid_values_are_400(api, flow, params, field):  # noqa: F811
    response = api(Role.MANAGER).get(URL, params)
    assert response.status_code == 400
    assert field in response.content.decode()


def test_the_schema_documents_the_filters(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    names = {p["name"] for p in schema["paths"]["/api/projects/{slug}/items/"]["get"]["parameters"]}
    assert {"status", "disagreement", "resolved_label", "voted_label", "annotator", "sort"} <= names


def test_adjudicators_may_not_filter_by_annotator(api, flow):  # noqa: F811
    response = api(Role.ADJUDICATOR).get(URL, {"annotator": flow["a"].pk})
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
