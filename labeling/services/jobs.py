"""Background jobs: start, run, report progress, finish or fail.

A request that would run too long (a large workload upload, starting labelling on a large
project) creates a :class:`~labeling.models.Job` with :func:`job_start` (or the two helpers
:func:`workload_import_job_start` and :func:`labelling_start_job_start`) and answers at once;
``labeling.tasks.job_run_task`` (queue ``builds``) runs :func:`job_execute` after the commit.
With eager Celery (the default configuration) the job runs in the request's process right
after the commit, so the page shows it done.

A job is background work of the engine (``labeling.engine``): its worker holds its lease and,
on PostgreSQL, a heartbeat thread with its own connection writes the lease and the job's
progress every few seconds while the work's one transaction is open (on SQLite, one writer at
a time, progress is written before and after the work). A job whose worker died is run again
by the engine's recovery pass: both kinds are one transaction and idempotent (an import
matches rows on natural keys and a committed file is "already imported"; a start that had
committed is recognised), and after the last attempt the job is failed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import IO, Any

from django.conf import settings
from django.core.files.base import File
from django.core.files.storage import storages
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from labeling import dispatch, engine
from labeling.exceptions import ErrorCode, LabelingError
from labeling.models import Item, Job, JobKind, JobStatus, Project
from labeling.permissions import MANAGERS, require_role

logger = logging.getLogger(__name__)

MAX_MESSAGE = 500


JOB = "job"


def job_send(job_id: int) -> None:
    """Send a job's task to a worker (the engine's sender for jobs; runs it, when eager).

    The task is registered as ``JOB`` by ``labeling.tasks`` (:mod:`labeling.dispatch`).
    """
    dispatch.task(JOB).delay(job_id)


@transaction.atomic
def job_start(
    *,
    project: Project,
    kind: str,
    actor: Any,
    payload: dict[str, Any] | None = None,
    total: int = 0,
    message: str = "",
) -> Job:
    """Create a pending job of ``project`` and enqueue it after the commit.

    ``actor`` None is the command line; ``total`` is the units of progress expected (0 when
    unknown); ``message`` is shown on the page.

    Returns:
        The new job (``pending``; with eager Celery it has run once this transaction commits).

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project.
        NotFound: ``actor`` is not a member (and not staff).
    """
    require_role(project=project, actor=actor, roles=MANAGERS, action="start background work")
    job = Job.objects.create(
        project=project,
        kind=JobKind(kind),
        actor=actor if actor is not None and actor.is_authenticated else None,
        payload=payload or {},
        progress_total=max(0, total),
        message=message[:MAX_MESSAGE],
    )
    logger.info(
        "job.started",
        extra={"job_id": job.pk, "project_id": project.pk, "kind": job.kind},
    )
    engine.send(JOB, job.pk)
    return job


def workload_import_job_start(
    *,
    project: Project,
    stream: IO[bytes],
    format_name: str,
    filename: str,
    actor: Any,
    claims: str | None = None,
    evaluator_version: str | None = None,
) -> Job:
    """Store an uploaded workload file and create the job that imports it.

    ``claims`` (the import's claim splitting) and ``evaluator_version`` are passed on to
    ``workload_import_file``.

    The file is kept in the ``jobs`` storage until the job finishes; the import itself runs in
    the job, as one transaction, with the same checks and results as a synchronous import.

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project (nothing is stored).
        NotFound: ``actor`` is not a member.
    """
    require_role(project=project, actor=actor, roles=MANAGERS, action="import")
    storage = storages["jobs"]
    stream.seek(0, 2)
    size = stream.tell()
    stream.seek(0)
    name = storage.save(f"{project.pk}/{uuid.uuid4().hex}.upload", File(stream))
    try:
        return job_start(
            project=project,
            kind=JobKind.WORKLOAD_IMPORT,
            actor=actor,
            payload={
                "format": format_name,
                "filename": filename,
                "upload": name,
                "claims": claims,
                "evaluator_version": evaluator_version,
            },
            total=size,
            message=f"import of {filename}",
        )
    except BaseException:
        storage.delete(name)
        raise


def workload_import_in_background(size: int | None) -> bool:
    """Whether an upload of ``size`` bytes (None: unknown) should be imported by a job.

    True above ``JOB_IMPORT_BYTES``; a smaller file is imported in the request.
    """
    return size is not None and size > settings.JOB_IMPORT_BYTES


def labelling_start_in_background(project: Project) -> bool:
    """Whether starting labelling on ``project`` should run as a job.

    True when labelling has not started, the project has a label policy, and it holds more
    than ``JOB_START_ITEMS`` items; otherwise the start runs in the request (and refuses a
    second start or a missing policy there, at once).
    """
    if project.labelling_started_at is not None or not project.policies.exists():
        return False
    return Item.objects.filter(project=project).count() > settings.JOB_START_ITEMS


def labelling_start_job_start(*, project: Project, actor: Any) -> Job:
    """Create the job that starts labelling the project (see ``project_labelling_start``).

    Raises:
        PermissionDenied: ``actor`` is not a manager of the project.
        NotFound: ``actor`` is not a member.
    """
    total = Item.objects.filter(project=project).count()
    return job_start(
        project=project,
        kind=JobKind.LABELLING_START,
        actor=actor,
        total=total,
        message=f"start labelling ({total} items)",
    )


def job_finish(
    *, job_id: int, result: dict[str, Any], message: str = "", lease_owner: str | None = None
) -> bool:
    """Mark a job done with its result (JSON) and free its lease; return whether written.

    With ``lease_owner``, only if this owner still holds the job's lease.
    """
    job = Job.objects.get(pk=job_id)
    rows = Job.objects.filter(pk=job_id)
    if lease_owner is not None:
        rows = rows.filter(lease_owner=lease_owner)
    written = rows.update(
        status=JobStatus.DONE,
        result=result,
        error=None,
        progress_done=max(job.progress_done, job.progress_total),
        finished_at=timezone.now(),
        lease_owner="",
        message=(message or job.message)[:MAX_MESSAGE],
    )
    if written:
        logger.info("job.done", extra={"job_id": job_id, "kind": job.kind})
    return bool(written)


def job_fail(
    *, job_id: int, error: dict[str, Any], message: str = "", lease_owner: str | None = None
) -> bool:
    """Mark a job failed with its error (``detail``, ``code``, ``field`` or ``errors``).

    With ``lease_owner``, only if this owner still holds the job's lease. Returns whether the
    job was written.
    """
    fields: dict[str, Any] = {
        "status": JobStatus.FAILED,
        "error": error,
        "finished_at": timezone.now(),
        "lease_owner": "",
    }
    if message:
        fields["message"] = message[:MAX_MESSAGE]
    rows = Job.objects.filter(pk=job_id)
    if lease_owner is not None:
        rows = rows.filter(lease_owner=lease_owner)
    written = rows.update(**fields)
    if written:
        logger.warning("job.failed", extra={"job_id": job_id, "code": error.get("code")})
    return bool(written)


def job_lost_fields(attempts: int) -> dict[str, Any]:
    """The fields of a job failed closed after its worker stopped ``attempts`` times."""
    return {
        "status": JobStatus.FAILED,
        "error": {
            "detail": f"the job's worker stopped {attempts} time(s); nothing was written",
            "code": ErrorCode.WORKER_LOST.value,
        },
    }


class _Progress:
    """The job's latest progress, written with its heartbeat (PostgreSQL) or at the end."""

    def __init__(self, job: Job) -> None:
        self.job_id = job.pk
        self.done = job.progress_done
        self.total: int | None = None
        self.message = ""

    def add(self, n: int) -> None:
        self.done += n

    def set(self, done: int, total: int | None = None, message: str = "") -> None:
        self.done = done
        if total is not None:
            self.total = total
        if message:
            self.message = message

    def fields(self) -> dict[str, Any]:
        """The columns a heartbeat writes with the lease: done, and total and message if set."""
        fields: dict[str, Any] = {"progress_done": max(0, self.done)}
        if self.total is not None:
            fields["progress_total"] = max(0, self.total)
        if self.message:
            fields["message"] = self.message[:MAX_MESSAGE]
        return fields


def _lease(job: Job, progress: _Progress) -> AbstractContextManager[object]:
    """The job's lease heartbeat, writing its progress with each beat, while the body runs.

    On PostgreSQL an :class:`~labeling.engine.Lease` does it (its own connection: visible while
    the body's transaction is open). SQLite allows one writer, which the body is: nothing is
    written meanwhile (the engine does not take over a lease whose process still runs there).
    """
    if connection.vendor != "postgresql":
        return nullcontext()
    return engine.Lease(Job, job.pk, lease_owner=job.lease_owner, progress=progress.fields)


def _import_result(result: Any) -> dict[str, Any]:
    return {
        "batch": result.batch.pk if result.batch is not None else None,
        "already_imported": result.already_imported,
        "records": result.records,
        "created": dict(result.created),
        "notes": dict(result.notes),
    }


def _run_import(job: Job, progress: _Progress) -> dict[str, Any]:
    from labeling.services.imports import workload_import_file

    payload = job.payload
    storage = storages["jobs"]
    with storage.open(payload["upload"], "rb") as stream:
        result = workload_import_file(
            project=job.project,
            stream=stream,
            format_name=payload["format"],
            filename=payload["filename"],
            actor=job.actor,
            progress=progress.add,
            claims=payload.get("claims"),
            evaluator_version=payload.get("evaluator_version"),
        )
    return _import_result(result)


def _run_labelling_start(job: Job, progress: _Progress) -> dict[str, Any]:
    from labeling.exceptions import InvalidTransition
    from labeling.services.labelling_queue import project_labelling_start

    # One count over both steps, so progress only grows: items queued, then items queued plus
    # items compared (the total grows by the items to compare when the comparison begins).
    queued = 0

    def report(step: str, done: int, total: int) -> None:
        nonlocal queued
        if step == "queued":
            queued = total
            progress.set(done, total, message=f"queued {done} of {total} items")
        else:
            progress.set(
                queued + done,
                queued + total,
                message=f"compared the prior votes of {done} of {total} items",
            )

    try:
        project = project_labelling_start(project=job.project, actor=job.actor, progress=report)
    except InvalidTransition:
        project = Project.objects.get(pk=job.project_id)
        started = project.labelling_started_at
        if started is None or started < job.created_at:
            raise
        # An earlier attempt of this job committed the start, then its worker was lost.
    return {
        "labelling_started_at": project.labelling_started_at.isoformat()
        if project.labelling_started_at
        else None,
        "items": Item.objects.filter(project=project).count(),
    }


RUNNERS: dict[str, Callable[[Job, _Progress], dict[str, Any]]] = {
    JobKind.WORKLOAD_IMPORT: _run_import,
    JobKind.LABELLING_START: _run_labelling_start,
}


def _cleanup(job: Job) -> None:
    upload = job.payload.get("upload")
    if upload:
        storages["jobs"].delete(upload)


def job_execute(*, job_id: int, task_id: str | None = None) -> Job | None:
    """Run a job (the worker's side): take its lease, do its work, record the outcome.

    A domain error (invalid records, a refused permission, labelling already started) fails
    the job with the error's body, every import error naming its location and field; the
    upload is then deleted. An unexpected exception fails the job too and is re-raised (the
    worker logs it). A job finished, held by a live worker elsewhere, or out of attempts is
    left alone (the recovery pass fails the last).

    A retry of the same Celery task (``task_id``) may take its own lease back.

    Returns:
        The job as it ended, or None when this call did not run it.

    Raises:
        Exception: whatever unexpected error the work raised (after the job is marked failed).
    """
    me = engine.owner(task_id)
    attempt = engine.claim(
        Job,
        job_id,
        lease_owner=me,
        when=Q(status__in=[JobStatus.PENDING, JobStatus.RUNNING]),
        cap=engine.max_attempts(),
        status=JobStatus.RUNNING,
        enqueued_at=None,
        progress_done=0,  # an attempt that resumes a lost one starts its count again
    )
    if attempt is None:
        return None
    job = Job.objects.select_related("project", "actor").get(pk=job_id)
    progress = _Progress(job)
    runner = RUNNERS[job.kind]
    try:
        with _lease(job, progress):
            result = runner(job, progress)
    except LabelingError as exc:
        if job_fail(job_id=job.pk, error=exc.body(), message=exc.message, lease_owner=me):
            _cleanup(job)
    except Exception as exc:
        if job_fail(
            job_id=job.pk,
            error={
                "detail": f"internal error: {type(exc).__name__}",
                "code": ErrorCode.INTERNAL_ERROR.value,
            },
            lease_owner=me,
        ):
            _cleanup(job)
        raise
    else:
        if job_finish(job_id=job.pk, result=result, lease_owner=me):
            _cleanup(job)
    return Job.objects.get(pk=job.pk)


def job_work_kind() -> engine.WorkKind:
    """Jobs as the engine recovers them (registered in ``LabelingConfig.ready``)."""
    return engine.WorkKind(
        name=JOB,
        model=Job,
        send=job_send,
        to_do=lambda: Q(status__in=[JobStatus.PENDING, JobStatus.RUNNING]),
        failed=job_lost_fields,
        on_failed=_cleanup_failed,
    )


def _cleanup_failed(job_id: int) -> None:
    """Delete the upload of a job the recovery pass failed closed."""
    job = Job.objects.filter(pk=job_id).first()
    if job is not None:
        _cleanup(job)
