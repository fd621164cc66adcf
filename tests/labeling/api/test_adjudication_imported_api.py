"""The API side of adjudicating imported votes: notes in the side-by-side view, the evidence
rule (a label only imported votes gave without spans goes without evidence, flagged
``evidence_waived``) and every problem of a refused decision at once."""

from __future__ import annotations

import pytest

from labeling.models import Claim, Item, ItemStatus, Role
from tests.factories import start_labelling, work_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(project, import_records) -> Item:
    record = work_record()
    record["candidates"][0]["prior_annotations"] = [
        {
            "annotator": "ds-a",
            "answer_label": "admissible",
            "note": "NOTE-A",
            "claim_labels": [
                {"claim": 0, "label": "supported"},
                {"claim": 1, "label": "supported"},
            ],
            "spans": [{"start": 3, "end": 9, "quote": "opened", "labels": ["x"], "note": "FLAG-A"}],
        },
        {
            "annotator": "ds-b",
            "answer_label": "inadmissible",
            "claim_labels": [
                {"claim": 0, "label": "supported"},
                {"claim": 1, "label": "contradicted"},
            ],
        },
    ]
    import_records([record])
    start_labelling(project, overlap=2)
    item = Item.objects.get(candidate__key="c0")
    assert item.status == ItemStatus.DISAGREEMENT
    return item


def test_the_side_by_side_view_carries_the_imported_notes(api, imported):
    response = api(Role.ADJUDICATOR).get(f"/api/projects/study/disagreements/{imported.pk}/")

    assert response.status_code == 200
    columns = response.json()["annotators"]
    assert [c["note"] for c in columns] == ["NOTE-A", ""]
    assert [f["note"] for f in columns[0]["flags"]] == ["FLAG-A"]
    assert "ds-a" not in response.content.decode()


def test_resolving_with_imported_labels_without_evidence_is_flagged(api, imported):
    first, second = Claim.objects.filter(candidate=imported.candidate).order_by("index")
    body = {
        "expected_version": imported.version,
        "answer_label": "admissible",
        "claims": [
            {"claim_id": first.pk, "label": "supported"},
            {"claim_id": second.pk, "label": "contradicted"},
        ],
        "rationale": "Annotator 2 is right about claim 2.",
    }

    response = api(Role.ADJUDICATOR).post(
        f"/api/projects/study/disagreements/{imported.pk}/resolve/", body, format="json"
    )

    assert response.status_code == 201, response.json()
    claims = response.json()["claims"]
    assert [(c["label"], c["evidence"], c["evidence_waived"]) for c in claims] == [
        ("supported", [], True),
        ("contradicted", [], True),
    ]


def test_a_refused_decision_lists_every_problem(api, imported):
    first, second = Claim.objects.filter(candidate=imported.candidate).order_by("index")
    body = {
        "expected_version": imported.version,
        "answer_label": "admissible",
        "claims": [
            {"claim_id": first.pk, "label": "contradicted"},
            {"claim_id": second.pk, "label": "supported"},
        ],
        "rationale": " ",
    }

    response = api(Role.ADJUDICATOR).post(
        f"/api/projects/study/disagreements/{imported.pk}/resolve/", body, format="json"
    )

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "claims[0].evidence", "reason": "contradicted needs at least one evidence span"},
        {"field": "rationale", "reason": "give a rationale for the decision"},
    ]
