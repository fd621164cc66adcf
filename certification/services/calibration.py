"""Calibration runs: the frozen contract's background computation.

A run reads a :class:`~certification.models.CalibrationSpec`
(:mod:`certification.services.calibration_specs`), which it freezes.
A :class:`~certification.models.CalibrationRun` snapshots the inputs (resolved labels, scores,
answers) when it is requested, so its input hash says whether anything changed: requesting a
run of unchanged inputs returns the existing run (idempotent). The Celery task
``calibration_run_execute_task`` computes the result from the snapshot alone
(:func:`~certification.certificates.calibration_result_compute`).

Runs start on demand (:func:`calibration_run_start`, managers), from ``manage.py certify``, and
whenever labels are resolved in a partition a spec reads (the calibration kind of derived
results, marked when :func:`calibration_reads` says so -> :func:`calibration_runs_refresh`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from certification.certificates import STATS_VERSION
from certification.contract import canonical_json, inputs_sha256, spec_content, spec_sha256
from certification.exceptions import CertificationError, RunNotFound
from certification.locks import calibration_spec_lock
from certification.models import (
    LIVE_RUN_STATUSES,
    CalibrationInput,
    CalibrationRun,
    CalibrationSpec,
    RunStatus,
    RunTrigger,
)
from certification.selectors import (
    EVALUATOR_PREFIX,
    calibration_inputs,
    calibration_run_latest,
    calibration_spec_latest_list,
    parse_evaluator_field,
)
from certification.stats.errors import StatsError
from labeling import dispatch, engine
from labeling.exceptions import NotFound
from labeling.models import Evaluator, Item, Partition, Project
from labeling.permissions import MANAGERS, require_role

logger = logging.getLogger(__name__)


def _check_spec_hash(spec: CalibrationSpec) -> str:
    digest = spec_sha256(spec)
    if digest != spec.content_sha256:
        raise CertificationError(
            f"spec {spec} does not match its content hash (it was changed outside the services)",
            data={"spec": spec.pk},
        )
    return digest


CALIBRATION_RUN = "calibration_run"
#: A run a worker is still to compute (or computing).
LIVE_WORK = (RunStatus.PENDING, RunStatus.RUNNING)


def calibration_run_send(run_id: int) -> None:
    """Send a run's task to a worker (the engine's sender for calibration runs).

    The task is registered as ``CALIBRATION_RUN`` by ``certification.tasks``
    (:mod:`labeling.dispatch`).
    """
    dispatch.task(CALIBRATION_RUN).delay(run_id)


def calibration_run_work_kind() -> engine.WorkKind:
    """Calibration runs as the engine recovers them (registered in ``ready``)."""
    return engine.WorkKind(
        name=CALIBRATION_RUN,
        model=CalibrationRun,
        send=calibration_run_send,
        to_do=lambda: Q(status__in=LIVE_WORK),
        failed=lambda attempts: {
            "status": RunStatus.FAILED,
            "error": f"failed: its worker stopped {attempts} times; not started again",
        },
    )


#: The error of a lapsed run that a new request replaced.
REPLACED_ERROR = "replaced: its worker stopped (stale: no sign of life within the lapse)"


def _retire_stale(run: CalibrationRun) -> bool:
    """Mark a lapsed pending or running run failed (replaced); return whether it was lapsed."""
    if not engine.is_lapsed(run):
        return False
    CalibrationRun.objects.filter(pk=run.pk, status=run.status).update(
        status=RunStatus.FAILED, error=REPLACED_ERROR, finished_at=timezone.now(), lease_owner=""
    )
    logger.warning("calibration_run.replaced", extra={"run": run.pk, "status": run.status})
    return True


def calibration_input_store(inputs: Mapping[str, Any]) -> CalibrationInput:
    """Return the stored row of this input snapshot, storing it if it is new.

    A snapshot is stored once however many runs (of however many specs) read it: its key is the
    sha256 of its canonical JSON.

    Concurrency: the unique sha256 makes a concurrent duplicate fail; the loser reads the
    winner's row.
    """
    digest = hashlib.sha256(canonical_json(inputs).encode("utf-8")).hexdigest()
    found = CalibrationInput.objects.filter(sha256=digest).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return CalibrationInput.objects.create(sha256=digest, snapshot=dict(inputs))
    except IntegrityError:
        return CalibrationInput.objects.get(sha256=digest)


def calibration_run_request(
    *,
    spec: CalibrationSpec,
    trigger: str,
    requested_by: Any = None,
    inputs: Mapping[str, Any] | None = None,
) -> CalibrationRun:
    """Return the run of ``spec`` on its current inputs, creating and enqueueing it if needed.

    Snapshots the inputs (:func:`certification.selectors.calibration_inputs`) and hashes them.
    A pending, running or done run with the same input hash is returned as is (idempotent); a
    pending or running run that lapsed (its worker stopped, or its task was lost:
    :func:`labeling.engine.is_lapsed`) is marked failed ("replaced: its
    worker stopped") and replaced. A new run is created ``pending``, its snapshot stored once
    per distinct snapshot (:func:`calibration_input_store`), and its execution enqueued after
    commit. No permission check: callers decide (the manager service, the label-change
    refresh, the management command). ``inputs`` may pass a snapshot the caller just read, to
    avoid reading it twice.

    Raises:
        CertificationError: the spec no longer matches its content hash.

    Concurrency: must run inside the caller's transaction (it is not atomic on its own; the
    services that call it are). Locks the spec row and reads it again, so an edit either
    commits before (the run certifies the edited spec) or waits and is refused as frozen. The
    partial unique constraint on (spec, input hash) makes a concurrent duplicate fail; the loser
    returns the winner's run.
    """
    # Read the spec again under its row lock (the write lock on SQLite): the caller's copy may
    # predate an edit that committed since, and a run must certify the spec as it now stands.
    spec = calibration_spec_lock(spec.pk)
    spec_sha = _check_spec_hash(spec)
    if inputs is None:
        inputs = calibration_inputs(spec=spec)
    digest = inputs_sha256(spec_sha=spec_sha, inputs=inputs)
    existing = CalibrationRun.objects.filter(
        spec=spec, input_sha256=digest, status__in=LIVE_RUN_STATUSES
    ).first()
    if existing is not None and not _retire_stale(existing):
        return existing
    stored = calibration_input_store(inputs)
    try:
        with transaction.atomic():
            run = CalibrationRun.objects.create(
                project_id=spec.project_id,
                spec=spec,
                trigger=trigger,
                requested_by=requested_by,
                spec_sha256=spec_sha,
                input_sha256=digest,
                stats_version=STATS_VERSION,
                input=stored,
                enqueued_at=timezone.now(),
            )
    except IntegrityError:
        return CalibrationRun.objects.get(
            spec=spec, input_sha256=digest, status__in=LIVE_RUN_STATUSES
        )
    engine.send(CALIBRATION_RUN, run.pk)
    logger.info(
        "calibration_run.requested",
        extra={"run": run.pk, "spec": spec.pk, "trigger": trigger, "input_sha256": digest},
    )
    return run


@transaction.atomic
def calibration_run_start(*, spec: CalibrationSpec, actor: Any) -> CalibrationRun:
    """Start a run of ``spec`` on demand (managers), or return the one on the same inputs.

    Returns:
        The run: new and pending (computed in the background after commit), or the existing
        pending, running or done run of the same inputs. A failed run is retried.

    Raises:
        NotFound: the actor is not a member of the project.
        PermissionDenied: the actor is not a manager.
        CertificationError: the spec no longer matches its content hash.

    Concurrency: opens its own transaction; see :func:`calibration_run_request`.
    """
    require_role(project=spec.project, actor=actor, roles=MANAGERS)
    return calibration_run_request(spec=spec, trigger=RunTrigger.MANUAL, requested_by=actor)


@transaction.atomic
def calibration_runs_refresh(*, project_id: int) -> list[CalibrationRun]:
    """Start a run for each latest spec version of the project whose inputs changed.

    The derived recomputation of the calibration kind: after labels are resolved in a partition
    a spec reads (:func:`calibration_reads`), a spec changed, or an evaluator its score field
    names got labels; spaced by its cost (``certification.services.derived``). A spec whose
    latest run (of any status) has the current input hash gets nothing new, so a refresh over
    unchanged labels writes nothing; a superseded spec version is never refreshed.

    Returns:
        The runs created (pending; their execution is enqueued after commit).

    Raises:
        NotFound: no project has this id.

    Concurrency: opens its own transaction; two concurrent refreshes create at most one run
    per (spec, inputs) (see :func:`calibration_run_request`).
    """
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound(f"project {project_id} does not exist")
    created = []
    for spec in calibration_spec_latest_list(project=project).select_related("project"):
        latest = calibration_run_latest(spec=spec)
        spec_sha = _check_spec_hash(spec)
        inputs = calibration_inputs(spec=spec)
        digest = inputs_sha256(spec_sha=spec_sha, inputs=inputs)
        if latest is not None and latest.input_sha256 == digest:
            continue
        run = calibration_run_request(spec=spec, trigger=RunTrigger.LABELS_CHANGED, inputs=inputs)
        if latest is None or run.pk != latest.pk:
            created.append(run)
    if created:
        logger.info(
            "calibration_runs.refreshed",
            extra={"project_id": project_id, "runs": [r.pk for r in created]},
        )
    return created


#: Item ids per query of :func:`calibration_reads` (below SQLite's bound on parameters).
READS_CHUNK = 500


def calibration_reads(
    project_id: int, item_ids: tuple[int, ...], evaluator_ids: tuple[int, ...]
) -> bool:
    """Whether a change of these items or evaluators is an input of a calibration refresh.

    The derived-results inputs test of the calibration kind (``labeling.derived``): called in
    the transaction that resolved, returned or made gold the items, or imported the evaluators'
    labels. A refresh reads, for the latest version of each spec, the questions of the spec's
    calibration partition and of the test partition (:func:`certification.selectors.
    calibration_inputs`) and, when its score field names an evaluator, that evaluator's scores.
    So a change is an input when an item's question lies in a partition a latest spec reads,
    or an evaluator is one a latest spec's score field names. A project without a spec, and a
    question outside every partition read (or not partitioned yet), mark nothing.

    Queries: one when the project has no spec; else one per :data:`READS_CHUNK` items
    (stopping at the first hit), and two for evaluators: in the size of the change, never of
    the project.
    """
    latest = CalibrationSpec.objects.filter(project_id=project_id, next_version__isnull=True)
    if len(item_ids) > READS_CHUNK and not latest.exists():
        return False  # a large change (a start, an import) of a project without a spec
    if evaluator_ids:
        named = {
            field
            for field in latest.values_list("score_field", flat=True)
            if parse_evaluator_field(field) is not None
        }
        if named:
            fields = {
                f"{EVALUATOR_PREFIX}{name}@{version}"
                for name, version in Evaluator.objects.filter(
                    project_id=project_id, pk__in=evaluator_ids
                ).values_list("name", "version")
            }
            if named & fields:
                return True
    partition = "candidate__question__partition"
    read = Exists(latest.filter(partition=OuterRef(partition))) | (
        Q(**{partition: Partition.TEST}) & Exists(latest)
    )
    for at in range(0, len(item_ids), READS_CHUNK):
        chunk = item_ids[at : at + READS_CHUNK]
        if Item.objects.filter(read, pk__in=chunk, project_id=project_id).exists():
            return True
    return False


def calibration_run_fail(
    *, run_id: int, error: str, lease_owner: str | None = None
) -> CalibrationRun:
    """Mark a pending or running run failed with ``error`` (a done run is left alone).

    With ``lease_owner``, only if this owner still holds the run's lease.

    Raises:
        RunNotFound: no run has this id.
    """
    rows = CalibrationRun.objects.filter(
        pk=run_id, status__in=(RunStatus.PENDING, RunStatus.RUNNING)
    )
    if lease_owner is not None:
        rows = rows.filter(lease_owner=lease_owner)
    rows.update(
        status=RunStatus.FAILED, error=error or "failed", finished_at=timezone.now(), lease_owner=""
    )
    run = CalibrationRun.objects.filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no calibration run {run_id}")
    logger.warning("calibration_run.failed", extra={"run": run_id, "error": error})
    return run


def calibration_run_execute(*, run_id: int, task_id: str | None = None) -> CalibrationRun:
    """Compute a pending run from its stored inputs and its spec; store the result.

    Idempotent: a run that is done, failed or held by a live worker elsewhere is returned
    unchanged. A statistics error (``StatsError``) or a certification error fails the run
    closed: status ``failed`` with the error text, and no certificate. While it computes, its
    lease's heartbeat is written (:class:`labeling.engine.Lease`).

    Args:
        run_id: the run.
        task_id: the Celery task's id (a retry of the same task takes its own lease back).

    Returns:
        The run, now done or failed (or as another worker left it).

    Raises:
        RunNotFound: no run has this id.

    Concurrency: the engine's claim lets exactly one worker compute, and counts the attempt;
    the computation runs outside any transaction; the result is written only while this
    worker still holds the lease, so a worker presumed dead writes nothing.
    """
    # The statistics (NumPy, SciPy) load with the first run computed, not with the web process.
    from certification.certificates.compute import calibration_result_compute

    run = CalibrationRun.objects.select_related("spec", "input").filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no calibration run {run_id}")
    me = engine.owner(task_id)
    attempt = engine.claim(
        CalibrationRun,
        run_id,
        lease_owner=me,
        when=Q(status__in=LIVE_WORK),
        cap=engine.max_attempts(),
        status=RunStatus.RUNNING,
        enqueued_at=None,
    )
    if attempt is None:
        return run
    try:
        if spec_sha256(run.spec) != run.spec_sha256:
            raise CertificationError("the spec changed after the run was requested")
        with engine.Lease(CalibrationRun, run_id, lease_owner=me):
            result = calibration_result_compute(contract=spec_content(run.spec), inputs=run.inputs)
    except (StatsError, CertificationError) as exc:
        return calibration_run_fail(run_id=run_id, error=str(exc), lease_owner=me)
    engine.release(
        CalibrationRun,
        run_id,
        lease_owner=me,
        status=RunStatus.DONE,
        result=result,
        outcome=result["outcome"][:64],
        finished_at=timezone.now(),
        error="",
    )
    run.refresh_from_db()
    logger.info(
        "calibration_run.done", extra={"run": run_id, "outcome": run.outcome, "status": run.status}
    )
    return run


def calibration_run_rebuild(*, run: CalibrationRun) -> bool:
    """Recompute a done run from its stored inputs and spec; return whether it is identical.

    Nothing is written: this is the check that every stored number can be rebuilt.
    """
    from certification.certificates.compute import calibration_result_compute

    if run.status != RunStatus.DONE:
        return False
    result = calibration_result_compute(contract=spec_content(run.spec), inputs=run.inputs)
    stored = canonical_json(run.result)
    return (
        canonical_json(result) == stored
        and inputs_sha256(spec_sha=run.spec_sha256, inputs=run.inputs) == run.input_sha256
    )
