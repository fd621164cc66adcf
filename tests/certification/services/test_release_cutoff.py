"""A release's cutoff is its own project's state: other projects' rows do not move it."""

from __future__ import annotations

import json

import pytest

from certification.models import BuildStatus
from certification.selectors import release_content_build
from certification.services.releases import release_export, release_freeze
from certification.services.releases.freeze import CUTOFF_MODELS, CUTOFF_PROJECT_PATHS
from labeling.models import CandidateAnswer, Role
from labeling.services import membership_set, policy_create, project_create
from tests.conftest import native_record
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_the_cutoff_is_the_largest_id_of_the_projects_own_rows(
    project, import_records, tmp_path, django_capture_on_commit_callbacks
):
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    import_records([native_record("a1"), native_record("a2")])
    other = project_create(slug="other", name="Other")
    # Newer rows of another project: larger ids in every table the cutoff covers.
    import_records([native_record("b1"), native_record("b2"), native_record("b3")], target=other)
    policy_create(project=other, guideline="a second policy of the other project")

    with django_capture_on_commit_callbacks(execute=True):  # the build runs on commit
        release = release_freeze(project=project, actor=manager, version="1")

    for key, model in CUTOFF_MODELS.items():
        own = model._default_manager.filter(**{CUTOFF_PROJECT_PATHS[key]: project})
        ids = list(own.values_list("pk", flat=True))
        assert release.cutoff[key] == max(ids, default=0), key
    others = CandidateAnswer.objects.filter(question__project=other).values_list("pk", flat=True)
    assert min(others) > release.cutoff["candidate"]
    assert release_content_build(release).status == BuildStatus.DONE
    directory = release_export(release=release, directory=tmp_path)
    lines = (directory / "labels.jsonl").read_bytes().splitlines()
    assert sorted({json.loads(line)["question"]["id"] for line in lines}) == ["a1", "a2"]
