"""GET /api/projects/<slug>/disagreements/<item_id>/: the side-by-side view."""

from __future__ import annotations

import pytest

from labeling.models import Role
from tests.labeling.api.conftest import claim_ids

pytestmark = pytest.mark.django_db


def url(item_id: int) -> str:
    return f"/api/projects/study/disagreements/{item_id}/"


def test_shows_votes_side_by_side_as_pseudonymous_annotators(api, disputed):
    response = api(Role.ADJUDICATOR).get(url(disputed.pk))

    assert response.status_code == 200
    body = response.json()
    assert (body["item_id"], body["version"], body["status"]) == (
        disputed.pk,
        disputed.version,
        "disagreement",
    )
    assert body["can_adjudicate"] is True
    assert [(a["annotator"], a["answer_label"]) for a in body["annotators"]] == [
        ("Annotator 1", "admissible"),
        ("Annotator 2", "inadmissible"),
    ]
    assert body["annotators"][0]["claims"][0]["claim_id"] == claim_ids(disputed)[0]
    assert body["differences"] == {"answer_differs": True, "claim_ids": []}
    assert body["resolution"] is None and body["history"] == []
    assert len(body["sources"]) == 1 and len(body["claims"]) == 2
    # no identity of the annotators anywhere
    content = response.content.decode()
    for assignment in disputed.assignments.select_related("annotator"):
        assert assignment.annotator.username not in content


def test_an_open_item_is_404(api, started):
    from labeling.models import Item

    item = Item.objects.filter(project=started).first()

    response = api(Role.ADJUDICATOR).get(url(item.pk))

    assert response.status_code == 404


def test_annotators_are_refused(api, disputed):
    response = api(Role.ANNOTATOR).get(url(disputed.pk))

    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
