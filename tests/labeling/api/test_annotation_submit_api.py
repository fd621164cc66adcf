"""PUT /api/projects/<slug>/assignments/<id>/annotation/: submit, revise, refusals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.models import (
    Annotation,
    AnnotationRevision,
    Assignment,
    AssignmentStatus,
    EvidenceSpan,
    ItemStatus,
    Role,
)
from labeling.services import (
    annotation_submit,
    assignments_release_expired,
    item_claim_next,
)
from tests.factories import WORK_SOURCE
from tests.labeling.api.conftest import claim_ids, labels_body, labels_input, span

pytestmark = pytest.mark.django_db


def url(assignment_id: int) -> str:
    return f"/api/projects/study/assignments/{assignment_id}/annotation/"


@pytest.fixture
def annotator(member):
    return member(Role.ANNOTATOR)


@pytest.fixture
def leased(started, annotator) -> Assignment:
    return item_claim_next(project=started, actor=annotator)


def test_first_submit_stores_labels_and_converts_browser_offsets(client_for, annotator, leased):
    # given labels citing text after an emoji with a skin-tone modifier (4 UTF-16 units, 2 code
    # points), with the offsets a browser reports
    item = leased.item
    first, second = claim_ids(item)
    quote = "It spans the harbour of Sydney"
    body = {
        "answer_label": "admissible",
        "comment": "clear",
        "time_spent_seconds": 42.5,
        "claims": [
            {"claim_id": first, "label": "not_supported"},
            {"claim_id": second, "label": "supported", "evidence": [span(item, quote)]},
        ],
    }

    # when the annotator submits them
    response = client_for(annotator).put(url(leased.pk), body, format="json")

    # then one annotation with revision 1 is stored, offsets in code points
    assert response.status_code == 200
    annotation = Annotation.objects.get()
    revision = annotation.current
    assert (revision.number, revision.answer_label, revision.comment) == (1, "admissible", "clear")
    assert revision.time_spent_seconds == 42.5
    [stored] = EvidenceSpan.objects.all()
    assert WORK_SOURCE[stored.start : stored.end] == quote == stored.quote
    assert (stored.start, stored.end) == (WORK_SOURCE.index(quote), WORK_SOURCE.index(quote) + 30)
    leased.refresh_from_db()
    assert leased.status == AssignmentStatus.SUBMITTED
    # and the response is the actor's own annotation
    data = response.json()
    assert (data["id"], data["assignment_id"], data["item_id"]) == (
        annotation.pk,
        leased.pk,
        item.pk,
    )
    assert data["revision_count"] == 1
    assert data["current"]["answer_label"] == "admissible"
    assert data["current"]["policy_version"] == 1
    assert data["claims"][1]["evidence"] == [
        {
            "source_version_id": stored.source_version_id,
            "start": stored.start,
            "end": stored.end,
            "quote": quote,
            "unit": "codepoint",
        }
    ]


def test_code_point_offsets_are_accepted_with_unit_codepoint(client_for, annotator, leased):
    item = leased.item
    first, second = claim_ids(item)
    quote = "cafe\u0301s line its south end"
    start = WORK_SOURCE.index(quote)
    evidence = {
        **span(item, quote),
        "start": start,
        "end": start + len(quote),
        "unit": "codepoint",
    }
    body = labels_body(item)
    body["claims"][1] = {"claim_id": second, "label": "contradicted", "evidence": [evidence]}

    response = client_for(annotator).put(url(leased.pk), body, format="json")

    assert response.status_code == 200
    assert EvidenceSpan.objects.get().start == start


def test_a_repeated_submit_is_idempotent_and_a_change_is_a_revision(client_for, annotator, leased):
    client = client_for(annotator)
    body = labels_body(leased.item)

    first = client.put(url(leased.pk), body, format="json")
    again = client.put(url(leased.pk), body, format="json")

    assert again.status_code == 200
    assert again.json() == first.json()
    assert AnnotationRevision.objects.count() == 1

    revised = client.put(
        url(leased.pk), {**body, "answer_label": "inadmissible"}, format="json", HTTP_IF_MATCH='"1"'
    )

    assert revised.status_code == 200
    assert revised.json()["revision_count"] == 2
    assert revised.json()["current"]["number"] == 2
    annotation = Annotation.objects.get()
    assert annotation.current.answer_label == "inadmissible"
    assert annotation.current.previous.answer_label == "admissible"


def test_a_quote_that_does_not_match_is_400_naming_the_field(client_for, annotator, leased):
    item = leased.item
    body = labels_body(item)
    body["claims"][1] = {
        "claim_id": claim_ids(item)[1],
        "label": "supported",
        "evidence": [{**span(item, "It spans the harbour"), "quote": "It spans the harbor!"}],
    }

    response = client_for(annotator).put(url(leased.pk), body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert response.json()["field"] == "claims[1].evidence[0].quote"
    assert not Annotation.objects.exists()


def test_a_span_splitting_a_grapheme_cluster_is_400(client_for, annotator, leased):
    # "cafe" without its combining accent: the end falls inside the cluster e + U+0301
    item = leased.item
    start, end = span(item, "cafe")["start"], span(item, "cafe")["end"]
    body = labels_body(item)
    body["claims"][0] = {
        "claim_id": claim_ids(item)[0],
        "label": "supported",
        "evidence": [{**span(item, "cafe"), "start": start, "end": end}],
    }

    response = client_for(annotator).put(url(leased.pk), body, format="json")

    assert response.status_code == 400
    assert response.json()["field"].startswith("claims[0].evidence[0]")
    assert not Annotation.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"answer_label": None}, "answer_label"),
        ({"claims": [{"claim_id": "x", "label": "supported"}]}, "claims"),
        ({"time_spent_seconds": "soon"}, "time_spent_seconds"),
    ],
)
def test_malformed_bodies_are_400_by_field(client_for, annotator, leased, change, field):
    body = {**labels_body(leased.item), **change}

    response = client_for(annotator).put(url(leased.pk), body, format="json")

    assert response.status_code == 400
    assert any(e["field"].startswith(field) for e in response.json()["errors"])
    assert not Annotation.objects.exists()


def test_a_label_outside_the_policy_is_400(client_for, annotator, leased):
    body = labels_body(leased.item, answer="excellent")

    response = client_for(annotator).put(url(leased.pk), body, format="json")

    assert response.status_code == 400
    assert response.json()["field"] == "answer_label"


def test_a_late_submit_after_the_slot_was_given_back_is_409(client_for, annotator, leased):
    # given the lease expired and was released
    Assignment.objects.filter(pk=leased.pk).update(
        leased_at=timezone.now() - timedelta(hours=2),
        lease_expires_at=timezone.now() - timedelta(hours=1),
    )
    assert assignments_release_expired() == 1

    # when the annotator submits anyway
    response = client_for(annotator).put(url(leased.pk), labels_body(leased.item), format="json")

    # then it is a conflict and nothing is saved
    assert response.status_code == 409
    assert response.json()["code"] == "lease_expired"
    assert "not saved" in response.json()["detail"]
    assert not Annotation.objects.exists()


def test_a_second_first_submit_without_if_match_is_409_not_a_silent_replacement(
    client_for, annotator, leased
):
    # given two clients of one annotator that loaded the same leased assignment
    first_client, second_client = client_for(annotator), client_for(annotator)
    # when both submit their first labels, neither with If-Match, one after the other
    first = first_client.put(url(leased.pk), labels_body(leased.item), format="json")
    second = second_client.put(
        url(leased.pk), labels_body(leased.item, answer="inadmissible"), format="json"
    )
    # then the first is saved and the second refused, with the labels it would have replaced
    assert first.status_code == 200
    assert second.status_code == 409
    assert second.json()["code"] == "stale_version"
    assert second.json()["current_revision"] == 1
    assert second.json()["based_on_revision"] == 0
    assert "the submit named no revision" in second.json()["detail"]
    annotation = Annotation.objects.get()
    assert annotation.revision_count == 1
    assert annotation.current.answer_label == "admissible"
    assert AnnotationRevision.objects.count() == 1


def test_revising_a_resolved_item_is_409(client_for, member, started, annotator, leased):
    # given both annotators agreed: the item is resolved by consensus
    client_for(annotator).put(url(leased.pk), labels_body(leased.item), format="json")
    other = member(Role.ANNOTATOR)
    theirs = item_claim_next(project=started, actor=other)
    annotation_submit(
        project=started, assignment_id=theirs.pk, actor=other, data=labels_input(theirs.item)
    )
    leased.item.refresh_from_db()
    assert leased.item.status == ItemStatus.RESOLVED

    # when the first annotator tries to revise
    body = labels_body(leased.item, answer="inadmissible")
    response = client_for(annotator).put(url(leased.pk), body, format="json", HTTP_IF_MATCH='"1"')

    # then it is refused
    assert response.status_code == 409
    assert response.json()["code"] == "invalid_transition"
    assert AnnotationRevision.objects.count() == 2


def test_someone_elses_assignment_is_404(client_for, member, leased):
    response = client_for(member(Role.ANNOTATOR)).put(
        url(leased.pk), labels_body(leased.item), format="json"
    )

    assert response.status_code == 404
    assert not Annotation.objects.exists()


def test_session_auth_submits_too(client, annotator, leased):
    client.force_login(annotator)

    response = client.put(url(leased.pk), labels_body(leased.item), content_type="application/json")

    assert response.status_code == 200
    assert Annotation.objects.filter(annotator=annotator).exists()


def test_labels_read_back_from_the_api_can_be_sent_again_unchanged(client_for, annotator, leased):
    # given a submitted annotation whose evidence lies after an emoji (UTF-16 != code points)
    item = leased.item
    first, second = claim_ids(item)
    body = {
        "answer_label": "admissible",
        "claims": [
            {"claim_id": first, "label": "not_supported"},
            {
                "claim_id": second,
                "label": "supported",
                "evidence": [span(item, "It spans the harbour of Sydney")],
            },
        ],
    }
    url = f"/api/projects/{item.project.slug}/assignments/{leased.pk}/"
    api = client_for(annotator)
    assert api.put(url + "annotation/", body, format="json").status_code == 200
    # when a client sends back exactly the claims it reads
    current = api.get(url).json()["current"]
    echo = {
        "answer_label": current["answer_label"],
        "claims": [
            {"claim_id": c["claim_id"], "label": c["label"], "evidence": c["evidence"]}
            for c in current["claims"]
        ],
    }
    response = api.put(url + "annotation/", echo, format="json")
    # then it is the same annotation: no new revision
    assert response.status_code == 200, response.json()
    assert response.json()["revision_count"] == 1


def test_a_source_id_beyond_64_bits_is_a_400_naming_the_field(client_for, annotator, leased):
    item = leased.item
    first, second = claim_ids(item)
    evidence = {**span(item, "It spans the harbour of Sydney"), "source_version_id": 2**63}
    body = {
        "answer_label": "admissible",
        "claims": [
            {"claim_id": first, "label": "not_supported"},
            {"claim_id": second, "label": "supported", "evidence": [evidence]},
        ],
    }
    url = f"/api/projects/{item.project.slug}/assignments/{leased.pk}/annotation/"

    response = client_for(annotator).put(url, body, format="json")

    assert response.status_code == 400
    assert "source_version_id" in str(response.json())


def test_the_response_lists_claims_as_a_fresh_read_does_when_ids_and_indexes_disagree(
    client_for, annotator, leased
):
    # The submit's response is built from the rows it wrote, not read back: their order must
    # still be the models' (by claim index), here the reverse of the claims' ids.
    from labeling.api.work import AnnotationSubmitApi
    from labeling.models import Claim

    first, second = claim_ids(leased.item)
    Claim.objects.filter(pk=first).update(index=99)
    Claim.objects.filter(pk=second).update(index=0)
    Claim.objects.filter(pk=first).update(index=1)
    body = {
        "answer_label": "admissible",
        "claims": [
            {"claim_id": first, "label": "not_supported"},
            {"claim_id": second, "label": "not_supported"},
        ],
    }
    response = client_for(annotator).put(url(leased.pk), body, format="json")
    assert response.status_code == 200, response.content
    fresh = AnnotationSubmitApi.OutputSerializer(Annotation.objects.get()).data
    assert [c["claim_id"] for c in response.json()["claims"]] == [second, first]
    assert [c["claim_id"] for c in fresh["claims"]] == [second, first]
