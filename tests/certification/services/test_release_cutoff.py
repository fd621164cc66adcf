"""A release is its own project's state: other projects' rows, older or newer, never enter it."""

from __future__ import annotations

import json

import pytest

from certification.models import BuildStatus
from certification.selectors import release_content_build
from certification.services.releases import release_export, release_freeze, release_rebuild
from labeling.models import Role
from labeling.services import membership_set, policy_create, project_create
from tests.conftest import native_record
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _questions(release, directory):
    lines = (release_export(release=release, directory=directory) / "labels.jsonl").read_bytes()
    return sorted({json.loads(line)["question"]["id"] for line in lines.splitlines()})


def test_other_projects_rows_stay_out_and_a_rebuild_matches(
    project, import_records, tmp_path, django_capture_on_commit_callbacks
):
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    other = project_create(slug="other", name="Other")
    import_records([native_record("b0")], target=other)  # older than the project's rows
    import_records([native_record("a1"), native_record("a2")])
    # Newer rows of the other project: larger ids in every table the cutoff covers.
    import_records([native_record("b1"), native_record("b2")], target=other)
    policy_create(project=other, guideline="a second policy of the other project")

    with django_capture_on_commit_callbacks(execute=True):  # the build runs on commit
        release = release_freeze(project=project, actor=manager, version="1")
    assert release_content_build(release).status == BuildStatus.DONE
    assert _questions(release, tmp_path / "first") == ["a1", "a2"]

    # Later rows of both projects change nothing: the rebuild gives the same bytes.
    import_records([native_record("a3")])
    import_records([native_record("b3")], target=other)
    with django_capture_on_commit_callbacks(execute=True):
        rebuild = release_rebuild(release=release, actor=manager)
    rebuild.refresh_from_db()
    assert rebuild.status == BuildStatus.DONE, rebuild.error
    assert rebuild.matches is True, rebuild.mismatches
