"""XSum hallucination annotations: refused with the reason, whatever the entry point."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from labeling.importers import xsum
from labeling.models import Role
from tests.conftest import row_counts

FILES = (
    "hallucination_annotations_xsum_summaries.csv",
    "factuality_annotations_xsum_summaries.csv",
    "eval_scores_xsum_summaries.csv",
)


@pytest.mark.shared_data
@pytest.mark.django_db
@pytest.mark.parametrize("name", FILES)
def test_each_file_is_refused_saying_the_articles_are_missing(shared_data, project, name):
    path: Path = shared_data / "xsum-hallucination-annotations" / name
    errors = io.StringIO()
    before = row_counts()

    with pytest.raises(CommandError, match="nothing was written"):
        call_command(
            "import_workload",
            path,
            "--project",
            "study",
            "--format",
            "xsum",
            "--no-progress",
            stdout=io.StringIO(),
            stderr=errors,
        )

    assert f"{name}: field (file): {xsum.REFUSAL}" in errors.getvalue()
    assert "not distributed" in xsum.REFUSAL
    assert row_counts() == before


@pytest.mark.django_db
def test_an_api_upload_is_400_with_the_reason(api, project):
    manager = api(Role.MANAGER)
    upload = SimpleUploadedFile("x.csv", b"bbcid,system,summary\r\n1,Gold,a summary\r\n")
    before = row_counts()

    response = manager.post(
        "/api/projects/study/imports/", {"file": upload, "format": "xsum"}, format="multipart"
    )

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"location": "x.csv", "field": "(file)", "reason": xsum.REFUSAL}
    ]
    assert row_counts() == before
