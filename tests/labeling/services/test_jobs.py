"""Background jobs: start, run in eager mode, progress, failure, and recovery of lost jobs
(the background engine's recovery pass, ``labeling.engine.recover``)."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.files.storage import storages
from django.utils import timezone

from labeling import engine
from labeling.exceptions import NotFound, PermissionDenied
from labeling.models import ImportBatch, Item, Job, JobKind, JobStatus, Question, Role
from labeling.services.jobs import (
    _Progress,
    _run_labelling_start,
    job_execute,
    job_fail,
    job_finish,
    job_start,
    labelling_start_in_background,
    labelling_start_job_start,
    workload_import_job_start,
)
from tests.conftest import jsonl_bytes, native_record


def start_import(project, actor, data: bytes, name: str = "work.jsonl") -> Job:
    return workload_import_job_start(
        project=project,
        stream=io.BytesIO(data),
        format_name="native",
        filename=name,
        actor=actor,
    )


@pytest.mark.parametrize(
    ("role", "error"),
    [(Role.ADJUDICATOR, PermissionDenied), (Role.ANNOTATOR, PermissionDenied), (None, NotFound)],
)
def test_only_managers_start_jobs_and_nothing_is_stored_for_others(
    project, member, role, error, _job_storage
):
    from tests.factories import UserFactory

    actor = member(role) if role else UserFactory()
    with pytest.raises(error):
        start_import(project, actor, jsonl_bytes([native_record("q1")]))
    with pytest.raises(error):
        job_start(project=project, kind=JobKind.LABELLING_START, actor=actor)
    assert not Job.objects.exists()
    assert not any(_job_storage.rglob("*.upload"))


def test_an_import_job_runs_after_commit_and_records_the_result(
    project, member, django_capture_on_commit_callbacks, _job_storage
):
    manager = member(Role.MANAGER)
    data = jsonl_bytes([native_record("q1"), native_record("q2")])

    # when the job is started; eager Celery runs it once the transaction commits
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        job = start_import(project, manager, data)
        # before the commit: pending, the upload stored, nothing imported
        assert job.status == JobStatus.PENDING
        assert storages["jobs"].exists(job.payload["upload"])
        assert not Question.objects.exists()
    # the job's enqueue, then (run by the job in-process) the import's staleness hand-off
    assert len(callbacks) == 2

    # then it is done, with the import's counts, and the upload was removed
    job.refresh_from_db()
    batch = ImportBatch.objects.get()
    assert job.status == JobStatus.DONE
    assert job.result == {
        "batch": batch.pk,
        "already_imported": False,
        "records": 2,
        "created": batch.report["created"],
        "notes": {},
    }
    assert job.result["created"]["questions"] == 2
    assert (job.progress_done, job.progress_total, job.attempts) == (len(data), len(data), 1)
    assert job.started_at is not None and job.finished_at >= job.started_at
    assert job.lease_owner == "" and job.enqueued_at is None  # the claim cleared it
    assert job.actor == manager
    assert not storages["jobs"].exists(job.payload["upload"])


def test_a_failed_import_job_keeps_the_errors_and_writes_nothing(
    project, member, django_capture_on_commit_callbacks
):
    bad = native_record("q2")
    bad["candidates"][0]["claims"][0]["end"] = 999
    data = jsonl_bytes([native_record("q1"), bad])

    with django_capture_on_commit_callbacks(execute=True):
        job = start_import(project, member(Role.MANAGER), data)

    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error["code"] == "import_failed"
    assert [(e["location"], e["field"]) for e in job.error["errors"]] == [
        ("line 2", "candidates[0].claims[0]")
    ]
    assert job.finished_at is not None
    assert not Question.objects.exists()
    assert not storages["jobs"].exists(job.payload["upload"])


def test_a_labelling_start_job_queues_every_item_with_progress(
    project, member, import_records, settings, django_capture_on_commit_callbacks
):
    import_records([native_record("q1"), native_record("q2"), native_record("q3")])
    manager = member(Role.MANAGER)
    settings.JOB_START_ITEMS = 5
    assert labelling_start_in_background(project)  # 6 items > 5

    with django_capture_on_commit_callbacks(execute=True):
        job = labelling_start_job_start(project=project, actor=manager)
    assert job.progress_total == 6

    job.refresh_from_db()
    project.refresh_from_db()
    assert job.status == JobStatus.DONE
    assert job.result == {
        "labelling_started_at": project.labelling_started_at.isoformat(),
        "items": 6,
    }
    assert (job.progress_done, job.progress_total) == (6, 6)
    assert sorted(Item.objects.values_list("queue_position", flat=True)) == [1, 2, 3, 4, 5, 6]
    # once started, a start is no longer a job (the request refuses it at once)
    assert not labelling_start_in_background(project)


def test_labelling_start_reports_the_queue_then_the_comparison_of_prior_votes(
    project, member, import_records
):
    # given six items, two of them (c1 of q1 and q2) with prior votes that reach overlap 2
    records = [native_record("q1"), native_record("q2"), native_record("q3")]
    for record in records[:2]:
        record["candidates"][1]["prior_annotations"] = [
            {"annotator": name, "answer_label": "inadmissible"} for name in ("ann-1", "ann-2")
        ]
    import_records(records)
    manager = member(Role.MANAGER)
    job = labelling_start_job_start(project=project, actor=manager)
    assert project.overlap == 2

    # when the job's runner starts labelling (the job's progress as the heartbeat writes it)
    progress = _Progress(job)
    calls: list[tuple[str, int, int]] = []
    real_set = progress.set

    def record(done: int, total: int | None = None, message: str = "") -> None:
        calls.append((message, done, total))
        real_set(done, total, message)

    progress.set = record  # type: ignore[method-assign]
    _run_labelling_start(job, progress)

    # then it reports the queue, then the comparison of the two items with enough prior votes,
    # counting on from the queue (progress only grows)
    assert calls == [
        ("queued 6 of 6 items", 6, 6),
        ("compared the prior votes of 2 of 2 items", 8, 8),
    ]
    compared = Item.objects.filter(
        candidate__key="c1", candidate__question__external_id__in=["q1", "q2"]
    )
    statuses = list(compared.values_list("status", flat=True))
    assert len(statuses) == 2 and set(statuses) <= {"resolved", "disagreement"}


def test_a_small_project_starts_in_the_request(project, member, import_records, settings):
    import_records([native_record("q1")])
    settings.JOB_START_ITEMS = 2
    assert not labelling_start_in_background(project)  # 2 items, not more than 2


# A worker on another machine: the SQLite rule "a lease whose process still runs on this host is
# not lapsed" (labeling.engine) never applies to it.
ELSEWHERE = "another-host:4242"


def _running_since(job: Job, seconds: float, task: str = "lost-task") -> None:
    """Mark ``job`` held by a worker whose last heartbeat was ``seconds`` ago."""
    at = timezone.now() - timedelta(seconds=seconds)
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        attempts=1,
        started_at=at,
        heartbeat_at=at,
        lease_owner=f"{ELSEWHERE}:{task}",
        enqueued_at=None,
    )


def test_a_job_whose_worker_died_is_run_again_by_the_recovery(
    project, member, settings, django_capture_on_commit_callbacks
):
    settings.CERTLABEL_WORK_LAPSE_SECONDS = 30
    data = jsonl_bytes([native_record("q1")])
    # given a job that a worker took 5 minutes ago, then died (its transaction rolled back)
    job = start_import(project, member(Role.MANAGER), data)  # not committed: never ran
    _running_since(job, 300)
    # and a job running elsewhere with a live heartbeat
    live = start_import(project, member(Role.MANAGER), jsonl_bytes([native_record("q9")]), "b")
    _running_since(live, 5, task="live-task")

    # when the recovery runs
    with django_capture_on_commit_callbacks(execute=True):
        report = engine.recover()

    # then the lost job ran again, to the end; the live one was left alone
    assert report.resent.get("job") == [job.pk]
    assert report.failed == {}
    job.refresh_from_db()
    assert (job.status, job.attempts, job.lease_owner) == (JobStatus.DONE, 2, "")
    assert job.result["created"]["questions"] == 1
    live.refresh_from_db()
    assert (live.status, live.attempts) == (JobStatus.RUNNING, 1)
    assert live.lease_owner == f"{ELSEWHERE}:live-task"
    # and a task delivered again for the live job does not run it twice
    assert job_execute(job_id=live.pk) is None


def test_a_worker_presumed_dead_that_comes_back_writes_nothing(project, member):
    job = start_import(project, member(Role.MANAGER), jsonl_bytes([native_record("q1")]))
    _running_since(job, 300)
    # another worker took the lapsed lease over
    assert engine.claim(Job, job.pk, lease_owner=f"{ELSEWHERE}:new-task") == 2
    # the first one comes back: neither its result nor its failure is written
    old = f"{ELSEWHERE}:lost-task"
    assert job_finish(job_id=job.pk, result={"late": True}, lease_owner=old) is False
    assert job_fail(job_id=job.pk, error={"code": "late"}, lease_owner=old) is False
    job.refresh_from_db()
    assert (job.status, job.result, job.error) == (JobStatus.RUNNING, None, None)
    assert job.lease_owner == f"{ELSEWHERE}:new-task"
    # the holder's result is written, and frees the lease
    assert job_finish(job_id=job.pk, result={"ok": True}, lease_owner=f"{ELSEWHERE}:new-task")
    job.refresh_from_db()
    assert (job.status, job.result, job.lease_owner) == (JobStatus.DONE, {"ok": True}, "")


def test_a_pending_job_whose_task_was_lost_is_enqueued_again(
    project, member, settings, django_capture_on_commit_callbacks
):
    job = start_import(project, member(Role.MANAGER), jsonl_bytes([native_record("q1")]))
    # its task was sent a moment ago: not lost yet
    Job.objects.filter(pk=job.pk).update(enqueued_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        assert "job" not in engine.recover().resent
    # five minutes later it has still not started: its message was lost
    Job.objects.filter(pk=job.pk).update(enqueued_at=timezone.now() - timedelta(minutes=5))

    with django_capture_on_commit_callbacks(execute=True):
        assert engine.recover().resent.get("job") == [job.pk]

    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.DONE, 1)


def _lost_too_often(project, member, settings) -> Job:
    settings.CERTLABEL_WORK_MAX_ATTEMPTS = 2
    job = start_import(project, member(Role.MANAGER), jsonl_bytes([native_record("q1")]))
    _running_since(job, 600)
    Job.objects.filter(pk=job.pk).update(attempts=2)
    return job


def test_a_job_lost_too_often_is_failed(project, member, settings):
    job = _lost_too_often(project, member, settings)

    report = engine.recover()

    assert report.failed == {"job": [job.pk]}
    assert "job" not in report.resent
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.lease_owner == ""
    assert job.error["code"] == "worker_lost"
    assert "2 time(s)" in job.error["detail"]
    assert not Question.objects.exists()
    # a late delivery of its task does not run it
    assert job_execute(job_id=job.pk) is None


def test_a_job_lost_too_often_has_its_upload_removed(project, member, settings):
    job = _lost_too_often(project, member, settings)
    engine.recover()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert not storages["jobs"].exists(job.payload["upload"])


def test_a_start_that_committed_before_its_worker_died_is_done_when_run_again(
    project, member, import_records, django_capture_on_commit_callbacks
):
    from labeling.services import project_labelling_start

    import_records([native_record("q1")])
    manager = member(Role.MANAGER)
    job = labelling_start_job_start(project=project, actor=manager)  # not committed: not run
    # the first attempt committed the start, then the worker died before recording it
    project_labelling_start(project=project, actor=manager)
    _running_since(job, 600)

    with django_capture_on_commit_callbacks(execute=True):
        assert engine.recover().resent.get("job") == [job.pk]

    job.refresh_from_db()
    assert job.status == JobStatus.DONE
    assert job.result["items"] == 2
