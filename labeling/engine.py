"""The background engine: one lease, one heartbeat, one lapse rule and one recovery pass.

Every kind of background work (import and start jobs, calibration runs, release builds, the
recomputation of derived results) is a row with the columns of
:class:`~labeling.models.LeasedWork`, and goes through the same steps:

1. **Sent.** :func:`send` hands the row's task to the broker after the commit and records
   ``enqueued_at``. A broker that is away is logged, never raised: the row is in the database.
2. **Claimed.** The task calls :func:`claim`: one compare-and-set gives the lease to this worker
   (``lease_owner``, ``heartbeat_at``, ``attempts + 1``) when the lease is free, lapsed, or
   already this task's own (a retry of the same task after its database connection broke: a
   task is never blocked by its own earlier claim).
3. **Held.** While it works, :class:`Lease` refreshes ``heartbeat_at`` every
   ``CERTLABEL_WORK_HEARTBEAT_SECONDS`` from a daemon thread with its own connection, so the
   beat is visible while the work's own transaction is open.
4. **Released.** :func:`release` writes the outcome and frees the lease, only if this task
   still holds it (a worker presumed dead that comes back writes nothing).

**The lapse rule.** A lease whose heartbeat is older than ``CERTLABEL_WORK_LAPSE_SECONDS`` lost
its worker (killed, its pool child killed, or its database connection gone). A piece of work
that is still to do but not held, and whose task was sent longer than the lapse ago, lost its
message. :func:`recover` (every ``CERTLABEL_WORK_RECOVER_SECONDS``: Celery beat, or the embedded
default's background thread) sends both again; after ``CERTLABEL_WORK_MAX_ATTEMPTS`` claims a
job, run or build is failed closed instead. So a worker death is healed within the lapse plus
one recovery period of a worker being available.

On SQLite (the embedded default, one host) the database has one writer: a job writing for
longer than the lapse blocks its own heartbeat. There a lease whose owner process still runs on
this host is not lapsed, whatever its heartbeat.

Kinds register with :func:`work_kind_register` (each app in its ``AppConfig.ready``), so this
module, in the ``labeling`` app, never imports ``certification``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Case, F, IntegerField, Model, Q, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from labeling import in_process
from labeling.models import PeriodicRun
from labeling.models.lease import lapse

logger = logging.getLogger(__name__)

PENDING = "pending"


def heartbeat_seconds() -> float:
    """Seconds between two heartbeats of held work."""
    return float(settings.CERTLABEL_WORK_HEARTBEAT_SECONDS)


def max_attempts() -> int:
    """How many claims a job, run or build gets before it is failed closed."""
    return int(settings.CERTLABEL_WORK_MAX_ATTEMPTS)


def _started(pid: int) -> str:
    """When process ``pid`` started, in clock ticks since boot ("" where /proc has no answer).

    With the pid it names one process: a restarted process may get its old pid back (as in a
    container), never its old start time.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The command name (field 2) may hold spaces: count fields after its ")".
            return stat.read().rpartition(b")")[2].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}.{_started(os.getpid())}"


_PROCESS = _process_name()
_PROCESS_PID = os.getpid()


def owner(task_id: str | None = None) -> str:
    """The lease owner name of this process and task: ``host:pid.start:task``.

    Args:
        task_id: the Celery task id (retries of one task keep it); None for a fresh name.
    """
    global _PROCESS, _PROCESS_PID
    if os.getpid() != _PROCESS_PID:  # a forked child (Celery's prefork pool)
        _PROCESS, _PROCESS_PID = _process_name(), os.getpid()
    return f"{_PROCESS}:{task_id or uuid.uuid4().hex}"[:200]


def _owner_alive_here(lease_owner: str) -> bool:
    """Whether ``lease_owner`` names a process that still runs on this host (same start)."""
    host, _, rest = lease_owner.partition(":")
    pid_text, _, started = rest.partition(":")[0].partition(".")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return not started or _started(int(pid_text)) in ("", started)


def lapsed_lease(now: datetime) -> Q:
    """Rows whose lease is held but whose heartbeat (or, before one, claim) is too old."""
    return ~Q(lease_owner="") & Q(heartbeat_at__lt=now - lapse())


@dataclass(frozen=True)
class WorkKind:
    """One kind of background work the engine recovers.

    Attributes:
        name: a stable name for logs (``job``, ``calibration_run``...).
        model: the model (a :class:`~labeling.models.LeasedWork`).
        send: sends the task of one row by primary key (called after commit; may raise).
        to_do: rows that still have work to do (e.g. status pending or running).
        stateful: whether the model has ``status`` pending / running / done / failed: a
            lapsed lease sets it back to pending, and the last attempt fails it.
        failed: the fields that fail a row closed after ``attempts`` lost workers (stateful).
        on_failed: called with the row's id once the recovery pass failed it closed.
        before_pass: run at the start of each recovery pass (e.g. create missing rows).
        after_pass: run at its end (e.g. remove what killed workers left on disk).
    """

    name: str
    model: type[Model]
    send: Callable[[int], None]
    to_do: Callable[[], Q]
    stateful: bool = True
    failed: Callable[[int], dict[str, Any]] | None = None
    on_failed: Callable[[int], object] | None = None
    before_pass: Callable[[], object] | None = None
    after_pass: Callable[[], object] | None = None


_kinds: dict[str, WorkKind] = {}


def work_kind_register(kind: WorkKind) -> None:
    """Register (or replace, by name) a kind of work for :func:`recover` and :func:`send`."""
    _kinds[kind.name] = kind


def work_kinds() -> list[WorkKind]:
    """The registered kinds, in registration order."""
    return list(_kinds.values())


def _manager(model: type[Model]) -> Any:
    return model._default_manager


def send(kind_name: str, pk: int) -> None:
    """Send the task of row ``pk`` of a kind after the current transaction commits.

    ``enqueued_at`` is written just before the task is sent. A failure to send (the broker is
    away) is logged and clears it again, so the next recovery pass sends it. In a process that
    runs the embedded default's background thread (``labeling.in_process``: a web process
    without a broker) the task runs there, off the request, as derived results do.
    """
    kind = _kinds[kind_name]

    def deliver() -> None:
        sent = timezone.now()
        _manager(kind.model).filter(pk=pk, lease_owner="").update(enqueued_at=sent)
        try:
            if in_process.running():  # the embedded default's web process: off the request
                in_process.run_later(f"{kind.name} {pk}", kind.send, pk)
            else:
                kind.send(pk)
        except Exception:  # the broker is away: the next recovery pass sends it again
            _manager(kind.model).filter(pk=pk, enqueued_at=sent).update(enqueued_at=None)
            logger.exception("work.send_failed", extra={"kind": kind.name, "id": pk})

    transaction.on_commit(deliver, robust=True)


def claim(
    model: type[Model],
    pk: int,
    *,
    lease_owner: str,
    when: Q | None = None,
    cap: int | None = None,
    **fields: Any,
) -> int | None:
    """Take the lease of row ``pk`` for ``lease_owner``; return the attempt number, or None.

    The lease is taken when it is free, lapsed, or held for the same task (a retry, or a
    message handed back when its pool child died, takes the lease back at once), and the row
    matches ``when`` (e.g. status pending or running). Every claim counts an attempt except one
    by the very same process and task (a retry after a database error), so work that kills its
    worker each time is still failed closed after ``cap`` attempts. One compare-and-set update:
    two workers never both win.

    Args:
        model: a :class:`~labeling.models.LeasedWork` model.
        pk: the row.
        lease_owner: :func:`owner` of the claiming task.
        when: an extra condition on the row.
        cap: at most this many attempts (a new claim of a row with ``cap`` attempts fails).
        **fields: columns to set in the same update (e.g. ``status="running"``).
    """
    now = timezone.now()
    mine = Q(lease_owner=lease_owner)
    free = Q(lease_owner="") | _same_task(lease_owner) | lapsed_lease(now)
    capped = Q() if cap is None else (Q(attempts__lt=cap) | mine)
    won = (
        _manager(model)
        .filter(free, capped, when or Q(), pk=pk)
        .update(
            lease_owner=lease_owner,
            heartbeat_at=now,
            started_at=Coalesce(F("started_at"), now),
            attempts=Case(
                When(mine, then=F("attempts")),
                default=F("attempts") + 1,
                output_field=IntegerField(),
            ),
            **fields,
        )
    )
    if not won:
        return None
    attempt: int = _manager(model).values_list("attempts", flat=True).get(pk=pk)
    return attempt


def _same_task(lease_owner: str) -> Q:
    """Rows held by ``lease_owner`` or by another process for the same task.

    A Celery retry keeps its task id but may run in another pool child or on another worker:
    it takes its own task's lease back all the same.
    """
    task = lease_owner.rpartition(":")[2]
    return Q(lease_owner=lease_owner) | Q(lease_owner__endswith=f":{task}")


def is_lapsed(row: Any, *, now: datetime | None = None) -> bool:
    """Whether ``row`` (a :class:`~labeling.models.LeasedWork`) lost its worker or its message.

    Held: its heartbeat is older than :func:`lapse`. Not held and pending (or without a
    status): its task was sent (or, never sent, it was created) longer than :func:`lapse` ago.
    """
    cutoff = (now or timezone.now()) - lapse()
    if row.lease_owner:
        return row.heartbeat_at is None or row.heartbeat_at < cutoff
    if getattr(row, "status", PENDING) != PENDING:
        return False
    sent = row.enqueued_at or getattr(row, "created_at", None)
    return sent is not None and sent < cutoff


def release(model: type[Model], pk: int, *, lease_owner: str, **fields: Any) -> bool:
    """Free the lease of row ``pk`` and write ``fields``, if ``lease_owner`` still holds it.

    Returns:
        Whether the row was still this owner's (False: the lease was taken over, nothing written).
    """
    return bool(
        _manager(model)
        .filter(pk=pk, lease_owner=lease_owner)
        .update(lease_owner="", heartbeat_at=timezone.now(), **fields)
    )


class Lease:
    """Refresh the heartbeat of a held lease from a daemon thread while a block runs.

    The thread uses its own database connection (closed when it ends), so the heartbeat commits
    while the block's own transaction is open. A database error is logged and retried at the
    next beat; when the row is no longer this owner's the beating stops. ``progress`` (if given)
    is called before each beat and returns extra columns to write with it. Use as::

        with Lease(Job, job.pk, lease_owner=me):
            work()
    """

    def __init__(
        self,
        model: type[Model],
        pk: int,
        *,
        lease_owner: str,
        progress: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        """Prepare the heartbeat of row ``pk`` of ``model`` held by ``lease_owner``."""
        self.model, self.pk, self.lease_owner, self.progress = model, pk, lease_owner, progress
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"lease-{model.__name__}-{pk}", daemon=True
        )

    def beat(self) -> bool:
        """Write one heartbeat now; return whether the row is still this owner's."""
        extra = self.progress() if self.progress is not None else {}
        rows = (
            _manager(self.model)
            .filter(pk=self.pk, lease_owner=self.lease_owner)
            .update(heartbeat_at=timezone.now(), **extra)
        )
        return rows == 1

    def __enter__(self) -> Lease:
        """Start beating."""
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop beating and wait for the thread (at most a few seconds)."""
        self._stop.set()
        self._thread.join(timeout=max(5.0, heartbeat_seconds()))

    def _run(self) -> None:
        try:
            while not self._stop.wait(heartbeat_seconds()):
                try:
                    if not self.beat():
                        logger.warning(
                            "work.lease_lost", extra={"id": self.pk, "model": self.model.__name__}
                        )
                        return
                except DatabaseError:
                    logger.warning(
                        "work.heartbeat_failed", extra={"id": self.pk, "model": self.model.__name__}
                    )
                    # Django never drops a broken connection by itself (the database restarted):
                    # close it, so that the next beat connects afresh.
                    with contextlib.suppress(DatabaseError):
                        connection.close()
        finally:
            connection.close()  # this thread's own connection


@dataclass
class RecoveryReport:
    """What one recovery pass did, by kind name and row id."""

    resent: dict[str, list[int]] = field(default_factory=dict)
    failed: dict[str, list[int]] = field(default_factory=dict)

    def as_json(self) -> dict[str, dict[str, list[int]]]:
        """The report as plain data (the periodic task's result)."""
        return {"resent": self.resent, "failed": self.failed}


def _lapsed_rows(kind: WorkKind, now: datetime) -> list[Any]:
    rows = list(_manager(kind.model).filter(lapsed_lease(now)).order_by("pk"))
    if connection.vendor == "sqlite":
        rows = [row for row in rows if not _owner_alive_here(row.lease_owner)]
    return rows


def _each(kind: WorkKind, rows: list[Any], act: Callable[[Any], None]) -> None:
    """Run ``act`` on each row; a row that fails is logged and the pass goes on."""
    for row in rows:
        try:
            act(row)
        except Exception:
            logger.exception("work.recover_failed", extra={"kind": kind.name, "id": row.pk})


def _recover_lapsed(kind: WorkKind, now: datetime, report: RecoveryReport) -> None:
    """Free (or fail, after the last attempt) every lapsed lease of ``kind``; send it again.

    A lapsed lease on work that is no longer to do (finished meanwhile) is only freed.
    """
    manager = _manager(kind.model)
    to_do = set(manager.filter(lapsed_lease(now)).filter(kind.to_do()).values_list("pk", flat=True))

    def act(row: Any) -> None:
        # A compare-and-set on the owner and attempt seen: a worker that beat or finished
        # meanwhile wins, and two passes act once.
        same = manager.filter(pk=row.pk, lease_owner=row.lease_owner, attempts=row.attempts)
        if row.pk not in to_do:
            same.update(lease_owner="")
            return
        if kind.stateful and kind.failed is not None and row.attempts >= max_attempts():
            if same.update(lease_owner="", finished_at=now, **kind.failed(row.attempts)):
                report.failed.setdefault(kind.name, []).append(row.pk)
                logger.error("work.gave_up", extra={"kind": kind.name, "id": row.pk})
                if kind.on_failed is not None:
                    kind.on_failed(row.pk)
            return
        requeue = {"status": PENDING} if kind.stateful else {}
        with transaction.atomic():
            if same.update(lease_owner="", enqueued_at=now, **requeue):
                send(kind.name, row.pk)
                report.resent.setdefault(kind.name, []).append(row.pk)
                logger.warning(
                    "work.worker_lost",
                    extra={"kind": kind.name, "id": row.pk, "attempts": row.attempts},
                )

    _each(kind, _lapsed_rows(kind, now), act)


def _recover_unsent(kind: WorkKind, now: datetime, report: RecoveryReport) -> None:
    """Send again every row still to do, not held, whose task was sent too long ago."""
    manager = _manager(kind.model)
    stale = Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=now - lapse())

    def act(row: Any) -> None:
        with transaction.atomic():
            if manager.filter(pk=row.pk, lease_owner="", enqueued_at=row.enqueued_at).update(
                enqueued_at=now
            ):
                send(kind.name, row.pk)
                report.resent.setdefault(kind.name, []).append(row.pk)
                logger.warning("work.message_lost", extra={"kind": kind.name, "id": row.pk})

    _each(kind, list(manager.filter(kind.to_do(), stale, lease_owner="").order_by("pk")), act)


def recover(*, now: datetime | None = None) -> RecoveryReport:
    """One recovery pass over every registered kind: lapsed leases and lost messages.

    ``now`` (default: now) is the time lapses are judged by.

    Concurrency: each row is changed by its own compare-and-set and its task sent after that
    commits; two passes at once act on each row once. Every kind's work is idempotent.
    """
    now = now or timezone.now()
    report = RecoveryReport()
    for kind in work_kinds():
        if kind.before_pass is not None:
            kind.before_pass()
        _recover_lapsed(kind, now, report)
        _recover_unsent(kind, now, report)
        if kind.after_pass is not None:
            kind.after_pass()
    return report


def periodic_due(name: str, period: float, *, now: datetime | None = None) -> bool:
    """Whether the periodic task ``name`` should act now; records that it does.

    A compare-and-set on :class:`~labeling.models.PeriodicRun`: true when the task last acted
    more than 90 % of ``period`` seconds ago (or never), so two beats sending the same task act
    once per period.
    """
    now = now or timezone.now()
    before = now - timedelta(seconds=0.9 * period)
    if PeriodicRun.objects.filter(name=name, last_at__lt=before).update(last_at=now):
        return True
    _, created = PeriodicRun.objects.get_or_create(name=name, defaults={"last_at": now})
    return created
