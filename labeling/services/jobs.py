"""Background jobs: start, run, report progress, finish or fail, and recover lost ones.

A request that would run too long (a large workload upload, starting labelling on a large
project) creates a :class:`~labeling.models.Job` with :func:`job_start` (or the two helpers
:func:`workload_import_job_start` and :func:`labelling_start_job_start`) and answers at once;
``labeling.tasks.job_run_task`` (queue ``builds``) runs :func:`job_execute` after the commit.
With eager Celery (the default configuration) the job runs in the request's process right
after the commit, so the page shows it done.

**Progress and heartbeat.** The work itself is one transaction (an import stays atomic), so
progress written inside it would be invisible until the end. On PostgreSQL a heartbeat thread
with its own database connection writes the job's progress and ``heartbeat_at`` every
``JOB_HEARTBEAT_SECONDS`` while the work runs. On SQLite (one writer at a time) progress is
written only before and after the work.

**Lost workers.** :func:`jobs_recover` (beat, every minute) re-runs a job whose heartbeat lapsed
(``JOB_HEARTBEAT_LAPSE``): its worker died, its transaction was rolled back, and both kinds are
idempotent (an import matches rows on natural keys and a committed file is "already
imported"; a start that had committed is recognised), so a re-run is safe. After
``JOB_MAX_ATTEMPTS`` runs the job is failed instead. A pending job whose task was lost (the
broker restarted) is enqueued again the same way.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import IO, Any

from django.conf import settings
from django.core.files.base import File
from django.core.files.storage import storages
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from labeling.exceptions import LabelingError
from labeling.heartbeat import PeriodicWrite
from labeling.models import Item, Job, JobKind, JobStatus, Project
from labeling.permissions import MANAGERS, require_role

logger = logging.getLogger(__name__)

MAX_MESSAGE = 500


def _enqueue(job_id: int) -> None:
    """Send the job to a worker once the current transaction commits (runs it, when eager)."""
    from labeling.tasks import job_run_task

    def send() -> None:
        try:
            job_run_task.delay(job_id)
        except Exception:  # the broker is away: jobs_recover enqueues it again
            logger.exception("job.enqueue_failed", extra={"job_id": job_id})

    transaction.on_commit(send, robust=True)


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

    Args:
        project: the project the job works on.
        kind: a :class:`~labeling.models.JobKind` value.
        actor: the manager asking for it (None from the command line).
        payload: the job's input, as JSON.
        total: the units of progress expected (0 when unknown).
        message: what the job is doing, for the page.

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
        heartbeat_at=timezone.now(),
    )
    logger.info(
        "job.started",
        extra={"job_id": job.pk, "project_id": project.pk, "kind": job.kind},
    )
    _enqueue(job.pk)
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


def job_progress(*, job_id: int, done: int, total: int | None = None, message: str = "") -> None:
    """Record a job's progress and refresh its heartbeat (outside the job's own transaction).

    Args:
        job_id: the job.
        done: units done so far.
        total: units expected (None keeps the stored total).
        message: what the job is doing now ("" keeps the stored message).
    """
    fields: dict[str, Any] = {"progress_done": max(0, done), "heartbeat_at": timezone.now()}
    if total is not None:
        fields["progress_total"] = max(0, total)
    if message:
        fields["message"] = message[:MAX_MESSAGE]
    Job.objects.filter(pk=job_id, status=JobStatus.RUNNING).update(**fields)


def job_finish(*, job_id: int, result: dict[str, Any], message: str = "") -> None:
    """Mark a running job done with its result (JSON)."""
    now = timezone.now()
    job = Job.objects.get(pk=job_id)
    Job.objects.filter(pk=job_id).update(
        status=JobStatus.DONE,
        result=result,
        error=None,
        progress_done=max(job.progress_done, job.progress_total),
        finished_at=now,
        heartbeat_at=now,
        message=(message or job.message)[:MAX_MESSAGE],
    )
    logger.info("job.done", extra={"job_id": job_id, "kind": job.kind})


def job_fail(*, job_id: int, error: dict[str, Any], message: str = "") -> None:
    """Mark a job failed with its error: ``detail``, ``code`` and ``field`` or ``errors``."""
    now = timezone.now()
    fields: dict[str, Any] = {
        "status": JobStatus.FAILED,
        "error": error,
        "finished_at": now,
        "heartbeat_at": now,
    }
    if message:
        fields["message"] = message[:MAX_MESSAGE]
    Job.objects.filter(pk=job_id).update(**fields)
    logger.warning("job.failed", extra={"job_id": job_id, "code": error.get("code")})


def _lapse() -> timedelta:
    return timedelta(seconds=float(settings.JOB_HEARTBEAT_LAPSE))


def _claim(job_id: int, now: datetime) -> Job | None:
    """Mark the job running for this worker; None when it is finished or running elsewhere.

    A job ``running`` whose heartbeat lapsed lost its worker: it is taken over (a task
    delivered again after the worker died, or re-enqueued by :func:`jobs_recover`).
    """
    lapsed = Q(status=JobStatus.RUNNING) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=now - _lapse())
    )
    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        return None
    claimed = (
        Job.objects.filter(Q(status=JobStatus.PENDING) | lapsed, pk=job_id).update(
            status=JobStatus.RUNNING,
            attempts=job.attempts + 1,
            started_at=now,
            heartbeat_at=now,
        )
        if job.attempts < settings.JOB_MAX_ATTEMPTS
        else 0
    )
    if not claimed:
        if job.attempts >= settings.JOB_MAX_ATTEMPTS and not job.finished:
            job_fail(job_id=job_id, error=_lost_error(job.attempts))
        return None
    return Job.objects.get(pk=job_id)


def _lost_error(attempts: int) -> dict[str, Any]:
    return {
        "detail": f"the job's worker stopped {attempts} time(s); nothing was written",
        "code": "worker_lost",
    }


class _Progress:
    """The job's latest progress, written by the heartbeat (PostgreSQL) or at the end."""

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

    def write(self) -> None:
        job_progress(job_id=self.job_id, done=self.done, total=self.total, message=self.message)


def _heartbeat(progress: _Progress) -> AbstractContextManager[object]:
    """Write progress and the heartbeat every JOB_HEARTBEAT_SECONDS while the body runs.

    On PostgreSQL a :class:`~labeling.heartbeat.PeriodicWrite` does it (its own connection:
    visible while the body's transaction is open). SQLite allows one writer, which the body is:
    nothing is written meanwhile.
    """
    if connection.vendor != "postgresql":
        return nullcontext()
    return PeriodicWrite(
        progress.write,
        interval=float(settings.JOB_HEARTBEAT_SECONDS),
        name=f"job-{progress.job_id}",
    )


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
    from labeling.services.assignments import project_labelling_start

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


def job_execute(*, job_id: int) -> Job | None:
    """Run a job (the worker's side): claim it, do its work, record the outcome.

    A domain error (invalid records, a refused permission, labelling already started) fails
    the job with the error's body, every import error naming its location and field; the
    upload is then deleted. An unexpected exception fails the job too and is re-raised (the
    worker logs it). A job finished, or running with a live heartbeat elsewhere, is left alone.

    Returns:
        The job as it ended, or None when this call did not run it.

    Raises:
        Exception: whatever unexpected error the work raised (after the job is marked failed).
    """
    job = _claim(job_id, timezone.now())
    if job is None:
        return None
    progress = _Progress(job)
    runner = RUNNERS[job.kind]
    try:
        with _heartbeat(progress):
            result = runner(job, progress)
    except LabelingError as exc:
        job_fail(job_id=job.pk, error=exc.body(), message=exc.message)
        _cleanup(job)
    except Exception as exc:
        job_fail(
            job_id=job.pk,
            error={"detail": f"internal error: {type(exc).__name__}", "code": "internal_error"},
        )
        _cleanup(job)
        raise
    else:
        job_finish(job_id=job.pk, result=result)
        _cleanup(job)
    return Job.objects.get(pk=job.pk)


def jobs_recover(*, now: datetime | None = None) -> list[int]:
    """Enqueue again every job whose worker or task was lost; return their ids.

    A ``running`` job whose heartbeat is older than ``JOB_HEARTBEAT_LAPSE`` lost its worker
    (its transaction was rolled back): it is set back to ``pending`` and enqueued, or failed
    with ``worker_lost`` after ``JOB_MAX_ATTEMPTS`` runs. A ``pending`` job enqueued longer
    ago than the lapse lost its task (the broker restarted) and is enqueued again.

    Args:
        now: the reference time (aware); default ``timezone.now()``.
    """
    now = now or timezone.now()
    cutoff = now - _lapse()
    lost = list(
        Job.objects.filter(status__in=[JobStatus.RUNNING, JobStatus.PENDING])
        .filter(Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff))
        .order_by("pk")
    )
    requeued: list[int] = []
    for job in lost:
        with transaction.atomic():
            if job.attempts >= settings.JOB_MAX_ATTEMPTS:
                if Job.objects.filter(pk=job.pk, status=job.status).update(
                    status=JobStatus.FAILED,
                    error=_lost_error(job.attempts),
                    finished_at=now,
                    heartbeat_at=now,
                ):
                    _cleanup(job)
                continue
            if Job.objects.filter(
                pk=job.pk, status=job.status, heartbeat_at=job.heartbeat_at
            ).update(status=JobStatus.PENDING, heartbeat_at=now):
                requeued.append(job.pk)
                logger.warning(
                    "job.recovered",
                    extra={"job_id": job.pk, "was": job.status, "attempts": job.attempts},
                )
                _enqueue(job.pk)
    return requeued
