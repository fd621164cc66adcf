"""GET/POST /api/projects/<slug>/policy/versions/: list, preview (dry_run) and publish."""

from __future__ import annotations

from typing import Any

import pytest

from labeling.models import Annotation, Item, LabelPolicy, Role
from labeling.selectors.policies import policy_description_data
from labeling.services import item_claim_next
from tests.labeling.api.conftest import claim_ids

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/policy/versions/"


def body(project, **overrides: Any) -> dict[str, Any]:
    data = policy_description_data(project.policies.get(version=1))
    data["answer_labels"] = [r for r in data["answer_labels"] if r["value"] != "abstained"]
    return {
        "based_on_version": 1,
        "note": "abstained is no longer an answer label",
        "content": data,
        **overrides,
    }


def test_a_dry_run_answers_the_diff_and_writes_nothing(started, manager, client_for):
    response = client_for(manager).post(URL, body(started, dry_run=True), format="json")
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert (answer["dry_run"], answer["previous_version"], answer["version"]) == (True, 1, 2)
    assert answer["policy"] is None
    assert [(c["field"], c["removed"], c["added"]) for c in answer["diff"]] == [
        ("answer_labels", ["abstained"], [])
    ]
    assert (answer["restarted"], answer["reopened"], answer["kept"]) == (0, 0, 0)
    assert LabelPolicy.objects.filter(project=started).count() == 1


def test_publishing_answers_201_with_the_new_version(started, manager, client_for):
    response = client_for(manager).post(URL, body(started, resolved="reopen"), format="json")
    assert response.status_code == 201, response.json()
    policy = response.json()["policy"]
    assert (policy["version"], policy["previous_version"]) == (2, 1)
    assert policy["change_note"] == "abstained is no longer an answer label"
    assert policy["published_by"] == manager.username
    assert [r["value"] for r in policy["description"]["answer_labels"]] == [
        "admissible",
        "inadmissible",
        "evidence_unavailable",
    ]
    listed = client_for(manager).get(URL).json()
    assert [v["version"] for v in listed["results"]] == [1, 2]
    assert listed["results"][0]["change_note"] == ""


@pytest.mark.parametrize(
    ("role", "status"),
    [(Role.ANNOTATOR, 403), (Role.ADJUDICATOR, 403), ("nonmember", 404), ("anonymous", 401)],
)
def test_only_managers_list_and_publish(started, api, role, status):
    client = api(role)
    assert client.get(URL).status_code == status
    assert client.post(URL, body(started), format="json").status_code == status
    assert LabelPolicy.objects.filter(project=started).count() == 1


@pytest.mark.parametrize("note", ["", "   "])
def test_the_change_note_is_required(started, manager, client_for, note):
    response = client_for(manager).post(URL, body(started, note=note), format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "note"


def test_an_invalid_description_names_the_field(started, manager, client_for):
    content = body(started)["content"]
    content["claim_labels"][0]["key"] = "j"  # a key the labelling page uses itself
    response = client_for(manager).post(URL, body(started, content=content), format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "claim_labels[0].key"


def test_publishing_on_an_old_version_is_a_conflict(started, manager, client_for):
    client = client_for(manager)
    assert client.post(URL, body(started), format="json").status_code == 201
    response = client.post(URL, body(started), format="json")
    assert response.status_code == 409
    answer = response.json()
    assert answer["code"] == "stale_version"
    assert (answer["based_on_version"], answer["current_policy_version"]) == (1, 2)


def test_publishing_before_labelling_starts_is_a_conflict(project, manager, client_for):
    response = client_for(manager).post(URL, body(project), format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "invalid_transition"


def test_an_annotation_made_under_the_old_version_is_refused(started, manager, member, client_for):
    annotator = member(Role.ANNOTATOR)
    assignment = item_claim_next(project=started, actor=annotator)
    item = Item.objects.get(pk=assignment.item_id)
    assert client_for(manager).post(URL, body(started), format="json").status_code == 201
    labels = {
        "answer_label": "inadmissible",
        "claims": [{"claim_id": c, "label": "not_supported"} for c in claim_ids(item)],
    }
    url = f"/api/projects/study/assignments/{assignment.pk}/annotation/"
    response = client_for(annotator).put(url, {**labels, "policy_version": 1}, format="json")
    assert response.status_code == 409
    answer = response.json()
    assert answer["code"] == "stale_version"
    assert answer["errors"][0]["field"] == "policy_version"
    assert (answer["policy_version"], answer["current_policy_version"]) == (1, 2)
    assert not Annotation.objects.filter(assignment=assignment).exists()
    response = client_for(annotator).put(url, {**labels, "policy_version": 2}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["current"]["policy_version"] == 2
