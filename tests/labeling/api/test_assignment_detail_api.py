"""GET /api/projects/<slug>/assignments/<id>/: the labelling form of one's own assignment."""

from __future__ import annotations

import pytest

from labeling.models import Role
from labeling.services import annotation_submit, item_claim_next, project_create
from tests.conftest import native_record
from tests.labeling.api.conftest import claim_ids, labels_input

pytestmark = pytest.mark.django_db


def url(assignment_id: int, slug: str = "study") -> str:
    return f"/api/projects/{slug}/assignments/{assignment_id}/"


def test_the_form_carries_the_actors_current_revision(client_for, member, started):
    # given an annotator who submitted labels with a comment
    user = member(Role.ANNOTATOR)
    assignment = item_claim_next(project=started, actor=user)
    data = labels_input(assignment.item)
    annotation = annotation_submit(
        project=started,
        assignment_id=assignment.pk,
        actor=user,
        data=type(data)(answer_label="inadmissible", claims=data.claims, comment="hm"),
    )

    # when they open the assignment again
    response = client_for(user).get(url(assignment.pk))

    # then the form holds their own current revision
    assert response.status_code == 200
    body = response.json()
    assert body["assignment_status"] == "submitted"
    assert body["current"] == {
        "annotation_id": annotation.pk,
        "revision": 1,
        "answer_label": "inadmissible",
        "answer_reason": None,
        "comment": "hm",
        "submitted_at": body["current"]["submitted_at"],
        "claims": [
            {
                "claim_id": claim,
                "label": "not_supported",
                "reason": None,
                "boundary_error": False,
                "evidence": [],
            }
            for claim in claim_ids(assignment.item)
        ],
    }


def test_someone_elses_assignment_is_404(client_for, member, started):
    mine = item_claim_next(project=started, actor=member(Role.ANNOTATOR))

    response = client_for(member(Role.ANNOTATOR)).get(url(mine.pk))

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_an_assignment_of_another_project_is_404(client_for, member, started, import_records):
    # given the same annotator works in two projects
    user = member(Role.ANNOTATOR)
    other = project_create(slug="other", name="Other")
    from labeling.services import membership_set, project_labelling_start

    membership_set(project=other, user=user, role=Role.ANNOTATOR)
    membership_set(project=other, user=member(Role.MANAGER), role=Role.MANAGER)
    import_records([native_record("x1")], target=other)
    project_labelling_start(project=other, actor=other.memberships.get(role=Role.MANAGER).user)
    theirs = item_claim_next(project=other, actor=user)

    # when they open it through the first project's URL
    response = client_for(user).get(url(theirs.pk))

    # then it does not exist there; through its own project it does
    assert response.status_code == 404
    assert client_for(user).get(url(theirs.pk, "other")).status_code == 200


def test_reading_the_form_writes_nothing(client_for, member, started):
    from tests.conftest import row_counts

    user = member(Role.ANNOTATOR)
    assignment = item_claim_next(project=started, actor=user)
    before = row_counts()

    client_for(user).get(url(assignment.pk))

    assert row_counts() == before
