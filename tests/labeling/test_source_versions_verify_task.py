"""The daily check of the pinned source texts: beat schedules it, it verifies every project."""

from __future__ import annotations

import logging

import pytest
from django.conf import settings

from labeling.celery import app
from labeling.services import project_create
from labeling.tasks import source_versions_verify_all_task, source_versions_verify_task
from tests.conftest import native_record


def test_beat_verifies_the_source_versions_once_a_day():
    entry = settings.CELERY_BEAT_SCHEDULE["source-versions-verify"]
    assert entry["task"] == source_versions_verify_all_task.name
    assert entry["task"] in app.tasks
    assert entry["schedule"] == 24 * 60 * 60
    # a run that waited for a worker longer than an hour is dropped, not piled up
    assert 0 < entry["options"]["expires"] < entry["schedule"]


@pytest.mark.django_db
def test_the_daily_task_verifies_every_project(project, import_records, caplog, monkeypatch):
    # given two projects with pinned source versions: two in one, one in the other
    other = project_create(slug="other", name="Other")
    import_records([native_record("q1"), native_record("q2")])
    import_records([native_record("x1")], target=other)
    checked: list[tuple[int, dict[str, object]]] = []
    original = source_versions_verify_task.run

    def spy(project_id: int) -> dict[str, object]:
        result = original(project_id)
        checked.append((project_id, result))
        return result

    monkeypatch.setattr(source_versions_verify_task, "run", spy)

    # when the beat task runs (in-process, as the tests run Celery)
    with caplog.at_level(logging.ERROR):
        result = source_versions_verify_all_task.delay()

    # then each project was verified by its own task, and every pin still matches
    assert result.get() == [project.pk, other.pk]
    assert sorted(checked) == [
        (project.pk, {"checked": 2, "mismatched": []}),
        (other.pk, {"checked": 1, "mismatched": []}),
    ]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.django_db
def test_a_project_deleted_before_its_check_ran_is_skipped(caplog):
    with caplog.at_level(logging.WARNING, logger="labeling.tasks"):
        assert source_versions_verify_task.delay(987654).get() == {"checked": 0, "mismatched": []}
    assert [(r.message, r.project_id) for r in caplog.records] == [
        ("source_versions_verify.missing_project", 987654)
    ]
