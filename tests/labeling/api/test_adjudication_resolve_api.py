"""POST /api/projects/<slug>/disagreements/<item_id>/resolve/: final labels, optimistic lock."""

from __future__ import annotations

import pytest

from labeling.models import Disagreement, ItemStatus, Resolution, ResolvedEvidence, Role
from labeling.services import membership_set, project_labelling_configure
from tests.factories import WORK_SOURCE
from tests.labeling.api.conftest import claim_ids, span

pytestmark = pytest.mark.django_db


def url(item_id: int) -> str:
    return f"/api/projects/study/disagreements/{item_id}/resolve/"


def decision(item, **overrides):
    first, second = claim_ids(item)
    body = {
        "expected_version": item.version,
        "answer_label": "admissible",
        "claims": [
            {"claim_id": first, "label": "not_supported"},
            {
                "claim_id": second,
                "label": "supported",
                "evidence": [span(item, "It spans the harbour of Sydney")],
            },
        ],
        "rationale": "The source says so.",
    }
    return {**body, **overrides}


def test_resolve_writes_the_adjudicated_resolution(client_for, member, disputed):
    adjudicator = member(Role.ADJUDICATOR)

    response = client_for(adjudicator).post(url(disputed.pk), decision(disputed), format="json")

    assert response.status_code == 201
    resolution = Resolution.objects.get()
    disputed.refresh_from_db()
    assert disputed.status == ItemStatus.RESOLVED
    assert disputed.resolution == resolution
    assert (resolution.status, resolution.adjudicator, resolution.rationale) == (
        "adjudicated",
        adjudicator,
        "The source says so.",
    )
    assert Disagreement.objects.get().closed_by == resolution
    [evidence] = ResolvedEvidence.objects.all()
    assert WORK_SOURCE[evidence.start : evidence.end] == "It spans the harbour of Sydney"
    body = response.json()
    assert body["id"] == resolution.pk
    assert body["number"] == 1
    assert body["status"] == "adjudicated"
    assert body["adjudicator"] == adjudicator.username
    assert [c["label"] for c in body["claims"]] == ["not_supported", "supported"]


def test_the_second_of_two_adjudicators_gets_a_conflict(client_for, member, disputed):
    first, second = client_for(member(Role.ADJUDICATOR)), client_for(member(Role.MANAGER))
    seen = decision(disputed)  # both loaded the same version

    assert first.post(url(disputed.pk), seen, format="json").status_code == 201
    response = second.post(url(disputed.pk), {**seen, "answer_label": "abstained"}, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "stale_version"
    assert Resolution.objects.get().answer_label == "admissible"


def test_a_correction_supersedes_the_previous_decision(client_for, member, disputed):
    client = client_for(member(Role.ADJUDICATOR))
    client.post(url(disputed.pk), decision(disputed), format="json")
    disputed.refresh_from_db()

    response = client.post(
        url(disputed.pk), decision(disputed, answer_label="inadmissible"), format="json"
    )

    assert response.status_code == 201
    assert response.json()["number"] == 2
    disputed.refresh_from_db()
    assert disputed.resolution.answer_label == "inadmissible"
    assert disputed.resolution.supersedes.answer_label == "admissible"


def test_a_missing_rationale_is_400(client_for, member, disputed):
    response = client_for(member(Role.ADJUDICATOR)).post(
        url(disputed.pk), decision(disputed, rationale="  "), format="json"
    )

    assert response.status_code == 400
    assert not Resolution.objects.exists()


def test_a_bad_claim_label_is_400_naming_the_field(client_for, member, disputed):
    body = decision(disputed)
    body["claims"][0]["label"] = "cannot_decide"

    response = client_for(member(Role.ADJUDICATOR)).post(url(disputed.pk), body, format="json")

    assert response.status_code == 400
    assert response.json()["field"] == "claims[0].label"


def test_an_annotator_of_the_item_may_not_adjudicate_it_unless_allowed(
    client_for, manager, started, disputed
):
    annotator = disputed.assignments.first().annotator
    membership_set(project=started, user=annotator, role=Role.ADJUDICATOR)
    client = client_for(annotator)

    refused = client.post(url(disputed.pk), decision(disputed), format="json")
    project_labelling_configure(project=started, actor=manager, allow_self_adjudication=True)
    allowed = client.post(url(disputed.pk), decision(disputed), format="json")

    assert refused.status_code == 403
    assert allowed.status_code == 201


def test_annotators_are_refused(api, disputed):
    response = api(Role.ANNOTATOR).post(url(disputed.pk), decision(disputed), format="json")

    assert response.status_code == 403
    assert not Resolution.objects.exists()


def test_a_conflict_returns_the_current_resolution_that_won(client_for, member, disputed):
    # given two adjudicators who loaded the same version; the first resolves "admissible"
    first, second = client_for(member(Role.ADJUDICATOR)), client_for(member(Role.MANAGER))
    seen = decision(disputed)
    won = first.post(url(disputed.pk), seen, format="json")
    assert won.status_code == 201

    # when the second decides "abstained" on the old version
    response = second.post(url(disputed.pk), {**seen, "answer_label": "abstained"}, format="json")

    # then 409, and the body shows the decision now current, with its labels
    assert response.status_code == 409
    body = response.json()
    assert (body["code"], body["expected_version"]) == ("stale_version", seen["expected_version"])
    assert body["version"] == seen["expected_version"] + 1
    current = body["current"]
    assert (current["resolution_id"], current["number"], current["status"]) == (
        won.json()["id"],
        1,
        "adjudicated",
    )
    assert (current["answer_label"], current["rationale"]) == ("admissible", seen["rationale"])
    assert [c["label"] for c in current["claims"]] == [c["label"] for c in won.json()["claims"]]
    assert [c["evidence"] for c in current["claims"]] == [
        c["evidence"] for c in won.json()["claims"]
    ]
    assert Resolution.objects.get().answer_label == "admissible"
