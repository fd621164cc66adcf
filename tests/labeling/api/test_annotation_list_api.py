"""GET /api/projects/<slug>/annotations/: the actor's own annotations, paginated."""

from __future__ import annotations

import pytest

from labeling.models import Role
from labeling.services import annotation_submit, item_claim_next
from tests.labeling.api.conftest import labels_input

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/annotations/"


def label_next(project, user, answer="admissible"):
    assignment = item_claim_next(project=project, actor=user)
    return annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=user,
        data=labels_input(assignment.item, answer=answer),
    )


def test_lists_only_the_actors_own_annotations(client_for, member, started):
    me, other = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    mine = [label_next(started, me), label_next(started, me, "inadmissible")]
    label_next(started, other)

    response = client_for(me).get(URL)

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    assert {row["id"] for row in body["results"]} == {a.pk for a in mine}
    row = next(r for r in body["results"] if r["id"] == mine[1].pk)
    assert row == {
        "id": mine[1].pk,
        "assignment_id": mine[1].assignment_id,
        "item_id": mine[1].item_id,
        "question_text": mine[1].item.candidate.question.text,
        "candidate_text": mine[1].item.candidate.text,
        "revision_count": 1,
        "answer_label": "inadmissible",
        "submitted_at": row["submitted_at"],
        "revised_at": row["revised_at"],
    }


def test_paginates_with_limit_and_offset(client_for, member, started):
    me = member(Role.ANNOTATOR)
    for _ in range(3):
        label_next(started, me)

    page = client_for(me).get(URL, {"limit": 2, "offset": 2}).json()

    assert page["count"] == 3
    assert len(page["results"]) == 1
    assert page["previous"] is not None


@pytest.mark.parametrize("role", [Role.ADJUDICATOR, Role.MANAGER])
def test_other_roles_get_an_empty_list(api, member, started, role):
    label_next(started, member(Role.ANNOTATOR))

    response = api(role).get(URL)

    assert response.status_code == 200
    assert response.json()["results"] == []


def test_query_count_does_not_grow_with_rows(
    client_for, member, started, django_assert_max_num_queries
):
    me = member(Role.ANNOTATOR)
    client = client_for(me)
    label_next(started, me)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as one:
        client.get(URL)
    for _ in range(3):
        label_next(started, me)

    with django_assert_max_num_queries(len(one)):
        assert len(client.get(URL).json()["results"]) == 4
