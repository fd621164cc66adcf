"""POST /api/projects/<slug>/imports/: multipart upload, 201 / 200 / 400, managers only."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import ImportBatch, Question, Role, SourceVersion
from tests.conftest import jsonl_bytes, native_record

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/imports/"


def upload(data: bytes, name: str = "work.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/x-ndjson")


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
def test_import_access_by_role(api, project, role, status):
    data = jsonl_bytes([native_record("q1")])

    response = api(role).post(URL, {"file": upload(data), "format": "native"}, format="multipart")

    assert response.status_code == status
    assert Question.objects.exists() == (status == 201)


def test_new_file_is_201_with_batch_and_counts(api, project):
    data = jsonl_bytes([native_record("q1"), native_record("q2")])

    response = api(Role.MANAGER).post(URL, {"file": upload(data)}, format="multipart")

    assert response.status_code == 201
    body = response.json()
    assert body["batch"] == ImportBatch.objects.get().pk
    assert body["already_imported"] is False
    assert body["records"] == 2
    assert body["created"]["questions"] == 2
    assert body["created"]["items"] == 4


def test_same_file_again_is_200_already_imported(api, project):
    data = jsonl_bytes([native_record("q1")])
    client = api(Role.MANAGER)
    first = client.post(URL, {"file": upload(data)}, format="multipart").json()

    response = client.post(URL, {"file": upload(data, "copy.jsonl")}, format="multipart")

    assert response.status_code == 200
    assert response.json()["already_imported"] is True
    assert response.json()["batch"] == first["batch"]
    assert ImportBatch.objects.count() == 1


def test_other_file_with_nothing_new_is_200_without_batch(api, project):
    client = api(Role.MANAGER)
    client.post(URL, {"file": upload(jsonl_bytes([native_record("q1")]))}, format="multipart")
    # same record, different bytes (a blank line): a different file with nothing new
    data = jsonl_bytes([native_record("q1")]) + b"\n"

    response = client.post(URL, {"file": upload(data)}, format="multipart")

    assert response.status_code == 200
    assert response.json() == {
        "batch": None,
        "already_imported": False,
        "records": 1,
        "created": {},
        "notes": {},
    }


def test_invalid_file_is_400_with_errors_and_writes_nothing(api, project):
    bad = native_record("q2")
    bad["candidates"][0]["claims"][0]["end"] = 999
    bad["text"] = "A-VERY-DISTINCTIVE-QUESTION-TEXT"
    data = jsonl_bytes([native_record("q1"), bad]) + b"[1, 2]\n"

    response = api(Role.MANAGER).post(URL, {"file": upload(data)}, format="multipart")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "import_failed"
    assert "nothing was written" in body["detail"]
    assert [(e["location"], e["field"]) for e in body["errors"]] == [
        ("line 2", "candidates[0].claims[0]"),
        ("line 3", "(line)"),
    ]
    assert all(set(e) == {"location", "field", "reason"} for e in body["errors"])
    assert "A-VERY-DISTINCTIVE-QUESTION-TEXT" not in response.content.decode()
    assert not Question.objects.exists()
    assert not SourceVersion.objects.exists()
    assert not ImportBatch.objects.exists()


def test_missing_file_or_unknown_format_is_400(api, project):
    client = api(Role.MANAGER)
    data = jsonl_bytes([native_record("q1")])

    no_file = client.post(URL, {"format": "native"}, format="multipart")
    bad_format = client.post(URL, {"file": upload(data), "format": "nope"}, format="multipart")

    assert no_file.status_code == 400
    assert "file" in {e["field"] for e in no_file.json()["errors"]}
    assert bad_format.status_code == 400
    assert "format" in {e["field"] for e in bad_format.json()["errors"]}
    assert not Question.objects.exists()


def test_json_body_is_refused(api, project):
    response = api(Role.MANAGER).post(URL, {"format": "native"}, format="json")

    assert response.status_code == 415
