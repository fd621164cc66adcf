"""The upload page: synchronous, atomic import of a workload file (managers only)."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from labeling.models import ImportBatch, Item, Question, Role, SourceVersion
from tests.conftest import jsonl_bytes, native_record

pytestmark = pytest.mark.django_db

URL = "/p/study/import/"


def upload(data: bytes, name: str = "work.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/x-ndjson")


def test_url_is_the_named_route():
    assert reverse("import-create", args=["study"]) == URL


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 403),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 302),
    ],
)
def test_upload_page_access_by_role(login, project, role, status):
    response = login(role).get(URL)

    assert response.status_code == status
    if status == 200:
        assert 'value="native"' in response.content.decode()


@pytest.mark.parametrize("role", [Role.ADJUDICATOR, Role.ANNOTATOR, "nonmember"])
def test_non_manager_upload_writes_nothing(login, project, role):
    data = jsonl_bytes([native_record("q1")])

    response = login(role).post(URL, {"file": upload(data), "format": "native"})

    assert response.status_code in (403, 404)
    assert not Question.objects.exists()


def test_valid_upload_imports_and_redirects_with_counts(login, project):
    # given a valid native file of two questions
    data = jsonl_bytes([native_record("q1"), native_record("q2")])
    client = login(Role.MANAGER)

    # when a manager uploads it
    response = client.post(URL, {"file": upload(data), "format": "native"})

    # then it is imported, recorded with the uploader and the file's sha, and summarised
    assert response.status_code == 302
    assert response["Location"] == reverse("project-detail", args=["study"])
    assert Question.objects.filter(project=project).count() == 2
    assert Item.objects.filter(project=project).count() == 4
    batch = ImportBatch.objects.get()
    assert (batch.filename, batch.format) == ("work.jsonl", "native")
    assert batch.file_sha256 == hashlib.sha256(data).hexdigest()
    message = [str(m) for m in get_messages(response.wsgi_request)][0]
    assert "2 records" in message and "questions 2" in message and "items 4" in message


def test_large_upload_streamed_from_a_temporary_file_is_imported(login, project, settings):
    # given uploads above this size go to a temporary file instead of memory
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 10
    data = jsonl_bytes([native_record(f"q{i}") for i in range(3)])

    response = login(Role.MANAGER).post(URL, {"file": upload(data), "format": "native"})

    assert response.status_code == 302
    assert Question.objects.filter(project=project).count() == 3
    assert ImportBatch.objects.get().file_sha256 == hashlib.sha256(data).hexdigest()


def test_uploader_is_recorded_on_the_batch(client, member, project):
    manager = member(Role.MANAGER)
    client.force_login(manager)

    client.post(URL, {"file": upload(jsonl_bytes([native_record("q1")])), "format": "native"})

    assert ImportBatch.objects.get().created_by == manager


def test_same_file_twice_changes_nothing(login, project):
    data = jsonl_bytes([native_record("q1")])
    client = login(Role.MANAGER)
    client.post(URL, {"file": upload(data), "format": "native"})

    response = client.post(URL, {"file": upload(data, "again.jsonl"), "format": "native"})

    assert response.status_code == 302
    assert ImportBatch.objects.count() == 1
    message = [str(m) for m in get_messages(response.wsgi_request)][-1]
    assert "already imported" in message


def test_invalid_upload_lists_errors_writes_nothing_and_is_400(login, project):
    # given a file whose 2nd line has a bad claim span and 3rd line is not JSON
    bad = native_record("q2")
    bad["candidates"][0]["claims"][0]["end"] = 999
    secret_text = "A-VERY-DISTINCTIVE-QUESTION-TEXT"
    bad["text"] = secret_text
    data = jsonl_bytes([native_record("q1"), bad]) + b"{not json\n"

    # when a manager uploads it
    response = login(Role.MANAGER).post(URL, {"file": upload(data), "format": "native"})

    # then nothing was written, the page lists each error by line and field, and no record is echoed
    assert response.status_code == 400
    assert not Question.objects.exists()
    assert not SourceVersion.objects.exists()
    assert not ImportBatch.objects.exists()
    errors = [(e.location, e.field) for e in response.context["errors"]]
    assert errors == [("line 2", "candidates[0].claims[0]"), ("line 3", "(line)")]
    content = response.content.decode()
    assert "<td>line 2</td>" in content
    assert "candidates[0].claims[0]" in content
    assert "Nothing was written" in content
    assert secret_text not in content


def test_upload_without_file_is_a_form_error(login, project):
    response = login(Role.MANAGER).post(URL, {"format": "native"})

    assert response.status_code == 400
    assert response.context["form"].errors["file"]


def test_unknown_format_is_a_form_error(login, project):
    data = jsonl_bytes([native_record("q1")])

    response = login(Role.MANAGER).post(URL, {"file": upload(data), "format": "nope"})

    assert response.status_code == 400
    assert response.context["form"].errors["format"]
    assert not Question.objects.exists()
