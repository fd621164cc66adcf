"""GET /api/projects/<slug>/disagreements/: the queue, filtered and paginated."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.models import Disagreement, Role
from labeling.services import annotation_submit, item_claim_next
from tests.labeling.api.conftest import labels_input

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/disagreements/"


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.ADJUDICATOR, 200),
        (Role.MANAGER, 200),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_queue_access_by_role(api, disputed, role, status):
    response = api(role).get(URL)

    assert response.status_code == status
    if status == 200:
        assert [r["item_id"] for r in response.json()["results"]] == [disputed.pk]


def test_rows_describe_the_disagreement(api, disputed):
    [row] = api(Role.ADJUDICATOR).get(URL).json()["results"]

    assert row == {
        "item_id": disputed.pk,
        "version": disputed.version,
        "question_external_id": "q1",
        "question_text": disputed.candidate.question.text,
        "partition": None,
        "candidate_key": "c0",
        "opened_at": row["opened_at"],
        "answer_differs": True,
        "claims_differ": False,
    }


@pytest.mark.parametrize(
    ("params", "found"),
    [
        ({"level": "answer"}, True),
        ({"level": "claim"}, False),
        ({"partition": "unassigned"}, True),
        ({"partition": "test"}, False),
        ({"min_age_hours": 1}, True),
        ({"min_age_hours": 5}, False),
    ],
)
def test_filters(api, disputed, params, found):
    # given the disagreement opened three hours ago
    Disagreement.objects.update(opened_at=timezone.now() - timedelta(hours=3))

    response = api(Role.ADJUDICATOR).get(URL, params)

    assert response.status_code == 200
    assert bool(response.json()["results"]) is found


@pytest.mark.parametrize(
    "params", [{"level": "both"}, {"partition": "nope"}, {"min_age_hours": -1}]
)
def test_bad_filters_are_400(api, disputed, params):
    response = api(Role.ADJUDICATOR).get(URL, params)

    assert response.status_code == 400
    assert set(params) <= {e["field"] for e in response.json()["errors"]}


def test_items_the_adjudicator_annotated_are_left_out(client_for, member, started):
    # given an adjudicator who annotated before being promoted (self-adjudication not allowed)
    from labeling.services import membership_set

    me, other = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    for user, answer in ((me, "admissible"), (other, "inadmissible")):
        assignment = item_claim_next(project=started, actor=user)
        annotation_submit(
            project=started,
            assignment_id=assignment.pk,
            actor=user,
            data=labels_input(assignment.item, answer=answer),
        )
    membership_set(project=started, user=me, role=Role.ADJUDICATOR)

    response = client_for(me).get(URL)

    assert response.status_code == 200
    assert response.json()["count"] == 0


def test_paginates(api, disputed):
    body = api(Role.MANAGER).get(URL, {"limit": 1}).json()

    assert body["count"] == 1
    assert set(body) == {"count", "next", "previous", "results"}


def test_query_count_does_not_grow_with_rows(api, member, started, disputed):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api(Role.ADJUDICATOR)
    client.get(URL)  # the token's first use is recorded once (last_used_at): not counted below
    with CaptureQueriesContext(connection) as one:
        assert client.get(URL).json()["count"] == 1
    # a second disagreement (the next item)
    for answer in ("admissible", "abstained"):
        user = member(Role.ANNOTATOR)
        assignment = item_claim_next(project=started, actor=user)
        annotation_submit(
            project=started,
            assignment_id=assignment.pk,
            actor=user,
            data=labels_input(assignment.item, answer=answer),
        )

    with CaptureQueriesContext(connection) as two:
        assert client.get(URL).json()["count"] == 2
    assert len(two) == len(one)


@pytest.mark.parametrize("age", ["1e9", "1e12", "6.9e307", "1e309", "878401", "nan"])
def test_a_huge_age_is_a_400_naming_the_parameter(api, disputed, age):
    # timedelta(hours=1e9) overflowed into a 500 before the bound
    response = api(Role.ADJUDICATOR).get(URL, {"min_age_hours": age})

    assert response.status_code == 400
    assert "min_age_hours" in response.content.decode()


def test_the_largest_age_is_accepted(api, disputed):
    from labeling.selectors.adjudication import MAX_QUEUE_AGE_HOURS

    response = api(Role.ADJUDICATOR).get(URL, {"min_age_hours": MAX_QUEUE_AGE_HOURS})

    assert response.status_code == 200
    assert response.json()["results"] == []
