"""POST /api/projects/<slug>/evaluator-labels/: multipart upload, 201 / 200 / 400, managers only."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import EvaluatorLabel, ImportBatch, Role
from tests.conftest import jsonl_bytes, native_record, row_counts

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/evaluator-labels/"
LABEL = {"question": "q1", "candidate": "c0", "evaluator": "judge", "version": "v1"}


def upload(records, name: str = "labels.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, jsonl_bytes(records), content_type="application/x-ndjson")


@pytest.fixture
def imported(project, import_records):
    import_records([native_record("q1")])
    return project


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 201),
        (Role.ADJUDICATOR, 403),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_access_by_role(api, imported, role, status):
    records = [{**LABEL, "label": "inadmissible"}]

    response = api(role).post(URL, {"file": upload(records)}, format="multipart")

    assert response.status_code == status
    assert EvaluatorLabel.objects.exists() == (status == 201)


def test_new_labels_are_201_then_200_when_nothing_new(api, imported):
    client = api(Role.MANAGER)
    records = [
        {**LABEL, "label": "inadmissible", "score": 0.8},
        {**LABEL, "claim": 0, "score": 0.1},
    ]

    first = client.post(URL, {"file": upload(records)}, format="multipart")
    again = client.post(URL, {"file": upload(records[::-1], "b.jsonl")}, format="multipart")
    same = client.post(URL, {"file": upload(records)}, format="multipart")

    assert first.status_code == 201
    assert first.json()["batch"] == ImportBatch.objects.get(format="evaluator_labels").pk
    assert first.json()["created"] == {"evaluator_labels": 2, "evaluators": 1}
    assert (again.status_code, again.json()["batch"], again.json()["created"]) == (200, None, {})
    assert (same.status_code, same.json()["already_imported"]) == (200, True)
    assert EvaluatorLabel.objects.count() == 2


def test_refused_file_is_400_naming_line_and_field_and_writes_nothing(api, imported):
    client = api(Role.MANAGER)
    before = row_counts()
    records = [
        {**LABEL, "label": "inadmissible"},
        {**LABEL, "candidate": "c7", "label": "admissible"},
        {**LABEL, "candidate": "c1", "unavailable": True, "label": "admissible"},
    ]

    response = client.post(URL, {"file": upload(records)}, format="multipart")

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert sorted((e["location"], e["field"]) for e in errors) == [
        ("line 2", "candidate"),
        ("line 3", "label"),
    ]
    assert row_counts() == before


def test_a_changed_judge_under_the_same_version_is_400(api, imported):
    client = api(Role.MANAGER)
    client.post(URL, {"file": upload([{**LABEL, "label": "inadmissible"}])}, format="multipart")

    response = client.post(
        URL, {"file": upload([{**LABEL, "label": "admissible"}], "b.jsonl")}, format="multipart"
    )

    assert response.status_code == 400
    assert "new evaluator version" in response.json()["errors"][0]["reason"]
    assert EvaluatorLabel.objects.get().label == "inadmissible"


def test_missing_file_is_400(api, imported):
    assert api(Role.MANAGER).post(URL, {}, format="multipart").status_code == 400
