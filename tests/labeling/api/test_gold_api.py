"""/api/projects/<slug>/items/<id>/gold/, gold/ and qualifications/: managers only."""

from __future__ import annotations

import pytest

from labeling.models import GoldReference, Item, ItemStatus, LabelPolicy, Qualification, Role
from labeling.services import item_claim_next
from tests.labeling.api.conftest import claim_ids, labels_body, span

pytestmark = pytest.mark.django_db

GOLD = "/api/projects/study/gold/"
QUALIFICATIONS = "/api/projects/study/qualifications/"


def reference_url(item_id):
    return f"/api/projects/study/items/{item_id}/gold/"


def first_item():
    return Item.objects.order_by("queue_position").first()


def reference_body(item):
    """Claim 0 supported with its evidence, the others not supported."""
    ids = claim_ids(item)
    claims = [{"claim_id": c, "label": "not_supported"} for c in ids]
    claims[0] = {
        "claim_id": ids[0],
        "label": "supported",
        "evidence": [span(item, "The bridge opened in 1932")],
    }
    return {"answer_label": "admissible", "claims": claims, "rationale": "per the guide"}


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 403),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_every_gold_endpoint_is_for_managers_only(api, started, member, role, status):
    item = first_item()
    annotator = member(Role.ANNOTATOR)
    client = api(role)

    put = client.put(reference_url(item.pk), reference_body(item), format="json")
    decide = client.post(
        f"{QUALIFICATIONS}{annotator.pk}/decision/", {"admit": True}, format="json"
    )

    assert put.status_code == status
    assert client.get(reference_url(item.pk)).status_code == (status if status != 200 else 200)
    assert client.get(GOLD).status_code == status
    assert client.get(QUALIFICATIONS).status_code == status
    assert decide.status_code == status
    assert GoldReference.objects.exists() == (status == 200)


def test_set_read_and_revise_a_reference(client_for, manager, started):
    item = first_item()
    client = client_for(manager)

    created = client.put(reference_url(item.pk), reference_body(item), format="json")
    again = client.put(reference_url(item.pk), reference_body(item), format="json")
    changed = client.put(
        reference_url(item.pk),
        {**reference_body(item), "answer_label": "inadmissible"},
        format="json",
    )

    assert created.status_code == 200, created.json()
    body = created.json()
    assert (body["number"], body["answer_label"], body["rationale"]) == (
        1,
        "admissible",
        "per the guide",
    )
    (evidence,) = body["claim_labels"][0]["evidence"]
    # Browser (UTF-16) offsets in, code points stored: this source has no astral character
    # before the span, so both agree here
    assert evidence["quote"] == "The bridge opened in 1932"
    assert again.json()["number"] == 1
    assert changed.json()["number"] == 2
    assert client.get(reference_url(item.pk)).json()["answer_label"] == "inadmissible"
    assert Item.objects.get(pk=item.pk).status == ItemStatus.GOLD
    listed = client.get(GOLD).json()
    assert [row["item_id"] for row in listed["results"]] == [item.pk]


def test_a_reference_is_set_from_the_claim_ids_the_item_detail_lists(client_for, manager, started):
    # given the item as its detail lists it (no other source of claim ids)
    item = first_item()
    client = client_for(manager)
    claims = client.get(f"/api/projects/study/items/{item.pk}/").json()["claims"]
    # when the manager labels each listed claim by its claim_id
    body = {
        "answer_label": "inadmissible",
        "claims": [{"claim_id": c["claim_id"], "label": "not_supported"} for c in claims],
    }
    response = client.put(reference_url(item.pk), body, format="json")
    # then the reference is saved for exactly those claims
    assert response.status_code == 200, response.json()
    assert [c["claim_id"] for c in claims] == claim_ids(item)
    assert [c["claim_id"] for c in response.json()["claim_labels"]] == claim_ids(item)


def test_bad_references_are_400_naming_the_field(client_for, manager, started):
    item = first_item()
    client = client_for(manager)
    body = reference_body(item)
    body["claims"][1]["label"] = "maybe"

    response = client.put(reference_url(item.pk), body, format="json")

    assert response.status_code == 400
    fields = {e["field"] for e in response.json()["errors"]}
    assert "claims[1].label" in fields
    assert not GoldReference.objects.exists()
    missing = client.put(reference_url(item.pk), {"claims": []}, format="json")
    assert missing.status_code == 400 and "answer_label" in str(missing.json())


def test_an_item_already_given_out_is_409(client_for, manager, started, member):
    assignment = item_claim_next(project=started, actor=member(Role.ANNOTATOR))

    response = client_for(manager).put(
        reference_url(assignment.item_id), reference_body(assignment.item), format="json"
    )

    assert response.status_code == 409


def test_unknown_items_are_404(client_for, manager, started):
    client = client_for(manager)
    assert client.get(reference_url(first_item().pk)).status_code == 404  # not gold
    assert client.get(reference_url(10**30)).status_code == 404
    assert (
        client.put(
            reference_url(2**63 - 1), {"answer_label": "admissible"}, format="json"
        ).status_code
        == 404
    )


def test_qualifications_list_and_decision(client_for, manager, started, member):
    LabelPolicy.objects.filter(project=started).update(
        qualification_required=True, qualification_items=1
    )
    annotator = member(Role.ANNOTATOR)
    client = client_for(manager)

    (row,) = client.get(QUALIFICATIONS).json()
    assert (row["username"], row["status"], row["items"]) == (annotator.username, "qualifying", 0)

    decided = client.post(
        f"{QUALIFICATIONS}{annotator.pk}/decision/",
        {"admit": False, "note": "seen enough"},
        format="json",
    )
    assert decided.status_code == 200, decided.json()
    assert decided.json()["status"] == "refused"
    assert Qualification.objects.get(annotator=annotator).decision_note == "seen enough"
    assert (
        client.post(
            f"{QUALIFICATIONS}{manager.pk}/decision/", {"admit": True}, format="json"
        ).status_code
        == 404
    )  # a manager is no annotator
    # admit is true or false, nothing else
    for admit in ("perhaps", "yes", "true", "True", 1, 0):
        refused = client.post(
            f"{QUALIFICATIONS}{annotator.pk}/decision/", {"admit": admit}, format="json"
        )
        assert refused.status_code == 400, admit
        assert refused.json()["errors"] == [{"field": "admit", "reason": "Must be true or false."}]
    for form in ({"admit": "on"}, {"admit": "1"}):
        refused = client.post(f"{QUALIFICATIONS}{annotator.pk}/decision/", form)
        assert refused.status_code == 400, form
    assert Qualification.objects.get(annotator=annotator).status == "refused"


def test_the_annotators_policy_has_no_gold_rule(client_for, manager, started, member):
    LabelPolicy.objects.filter(project=started).update(gold_rate=0.3)
    annotator_body = client_for(member(Role.ANNOTATOR)).get("/api/projects/study/policy/").json()
    manager_body = client_for(manager).get("/api/projects/study/policy/").json()

    assert "gold_rate" not in annotator_body and "qualification_required" not in annotator_body
    assert manager_body["gold_rate"] == 0.3


def test_gold_work_submits_like_any_item(client_for, manager, started, member):
    # Given a gold item served first to an annotator
    client = client_for(manager)
    item = first_item()
    client.put(reference_url(item.pk), reference_body(item), format="json")
    LabelPolicy.objects.filter(project=started).update(gold_rate=1.0)
    annotator = client_for(member(Role.ANNOTATOR))

    served = annotator.post("/api/projects/study/assignments/next/")
    form = served.json()
    assert form["item_id"] == item.pk
    submitted = annotator.put(
        f"/api/projects/study/assignments/{form['assignment_id']}/annotation/",
        labels_body(item),
        format="json",
    )

    assert submitted.status_code == 200, submitted.json()
    assert "gold" not in str(form).lower() and "gold" not in str(submitted.json()).lower()
