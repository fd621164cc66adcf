"""PUT .../annotation/ with ``If-Match`` or ``revision``: a stale submit is 409, nothing lost.

Two API sessions (two tokens of one annotator) read the form, take its ETag, and submit.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from labeling.models import Annotation, AnnotationRevision, Assignment, Role
from labeling.services import item_claim_next
from tests.labeling.api.conftest import claim_ids, labels_body

pytestmark = pytest.mark.django_db


def url(assignment_id: int) -> str:
    return f"/api/projects/study/assignments/{assignment_id}/annotation/"


def form(assignment_id: int) -> str:
    return f"/api/projects/study/assignments/{assignment_id}/"


@pytest.fixture
def annotator(member):
    return member(Role.ANNOTATOR)


@pytest.fixture
def leased(started, annotator) -> Assignment:
    return item_claim_next(project=started, actor=annotator)


def session(user) -> APIClient:
    """A second API session of ``user``: a session login (the first uses the token)."""
    client = APIClient()
    client.force_authenticate(user=user)
    return client


@pytest.fixture
def sessions(client_for, annotator):
    return client_for(annotator), session(annotator)


def test_the_form_and_each_put_carry_the_revision_as_etag(sessions, leased):
    first, _ = sessions
    assert first.get(form(leased.pk))["ETag"] == '"0"'
    # a second tab asking for the next item gets the same lease, with its ETag
    again = first.post("/api/projects/study/assignments/next/")
    assert (again.json()["assignment_id"], again["ETag"]) == (leased.pk, '"0"')
    saved = first.put(url(leased.pk), labels_body(leased.item), format="json", HTTP_IF_MATCH='"0"')
    assert saved.status_code == 200
    assert saved["ETag"] == '"1"'
    assert first.get(form(leased.pk))["ETag"] == '"1"'


@pytest.mark.parametrize("how", ["If-Match", "revision"])
def test_two_sessions_the_second_put_on_the_old_revision_is_409_with_the_current_labels(
    sessions, leased, how
):
    # given two sessions that read the form at revision 1
    a, b = sessions
    body = labels_body(leased.item)
    assert a.put(url(leased.pk), body, format="json").status_code == 200
    etag = a.get(form(leased.pk))["ETag"]
    assert etag == b.get(form(leased.pk))["ETag"] == '"1"'

    def put(client, answer, comment):
        changed = {**body, "answer_label": answer, "comment": comment}
        if how == "revision":
            return client.put(url(leased.pk), {**changed, "revision": 1}, format="json")
        return client.put(url(leased.pk), changed, format="json", HTTP_IF_MATCH=etag)

    # when both revise, one after the other
    saved = put(a, "inadmissible", "session A")
    refused = put(b, "abstained", "session B")

    # then the first is revision 2; the second is 409 with revision 2's labels in the body
    assert saved.status_code == 200
    assert refused.status_code == 409
    data = refused.json()
    assert (data["code"], data["field"]) == ("stale_version", "revision")
    assert data["detail"].startswith("another session changed this annotation")
    assert (data["based_on_revision"], data["current_revision"]) == (1, 2)
    current = data["current"]
    assert (current["revision"], current["answer_label"], current["comment"]) == (
        2,
        "inadmissible",
        "session A",
    )
    assert [c["claim_id"] for c in current["claims"]] == claim_ids(leased.item)
    assert {c["label"] for c in current["claims"]} == {"not_supported"}
    # in the shape of the labelling form's "current", as the form now shows it
    own = b.get(form(leased.pk)).json()["current"]
    assert {k: own[k] for k in ("annotation_id", "revision", "answer_label", "comment")} == {
        k: current[k] for k in ("annotation_id", "revision", "answer_label", "comment")
    }
    assert own["claims"] == current["claims"]
    # and nothing was overwritten
    annotation = Annotation.objects.get()
    assert (annotation.revision_count, annotation.current.comment) == (2, "session A")
    assert AnnotationRevision.objects.count() == 2


def test_two_first_submits_made_on_revision_0_the_second_is_409(sessions, leased):
    a, b = sessions
    body = labels_body(leased.item)
    assert a.put(url(leased.pk), {**body, "revision": 0}, format="json").status_code == 200
    refused = b.put(
        url(leased.pk), {**body, "answer_label": "inadmissible", "revision": 0}, format="json"
    )
    assert refused.status_code == 409
    assert refused.json()["current"]["answer_label"] == "admissible"
    assert AnnotationRevision.objects.count() == 1


def test_a_retry_of_a_saved_put_is_200_whatever_its_precondition(sessions, leased):
    a, _ = sessions
    body = {**labels_body(leased.item), "revision": 0}
    first = a.put(url(leased.pk), body, format="json")
    again = a.put(url(leased.pk), body, format="json")
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()


@pytest.mark.parametrize(
    ("header", "body_revision", "field"),
    [
        ("2, 3", None, "If-Match"),
        ("*", None, "If-Match"),
        ('"abc"', None, "If-Match"),
        (f'"{2**63}"', None, "If-Match"),
        ('"1"', 0, "revision"),
    ],
)
def test_a_malformed_or_contradictory_precondition_is_400_naming_it(
    sessions, leased, header, body_revision, field
):
    a, _ = sessions
    body = labels_body(leased.item)
    if body_revision is not None:
        body["revision"] = body_revision
    response = a.put(url(leased.pk), body, format="json", HTTP_IF_MATCH=header)
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("invalid_input", field)
    assert not Annotation.objects.exists()


def test_a_weak_etag_and_a_bare_number_are_accepted(sessions, leased):
    a, _ = sessions
    body = labels_body(leased.item)
    assert a.put(url(leased.pk), body, format="json", HTTP_IF_MATCH='W/"0"').status_code == 200
    changed = {**body, "answer_label": "inadmissible"}
    assert a.put(url(leased.pk), changed, format="json", HTTP_IF_MATCH="1").status_code == 200
    assert Annotation.objects.get().revision_count == 2
