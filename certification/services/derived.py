"""Coalesced, single-flight recomputation of derived results.

A write marks its project's derived results stale in its own transaction
(:func:`labeling.derived.derived_mark` inserts :class:`~labeling.models.DerivedChange` rows) and
after the commit hands each (project, kind) to :func:`derived_schedule`. One
:class:`~certification.models.DerivedResultState` row per (project, kind) coalesces the work, as
one kind of ``labeling.engine`` work:

- :func:`derived_schedule` enqueues only when ``enqueued_at`` is empty (or older than the lapse),
  by compare-and-set, so at most one task waits; the task is held (:func:`_spacing`) so that
  computations start at most every ``CERTLABEL_DERIVED_INTERVAL`` and take at most
  ``CERTLABEL_DERIVED_MAX_SHARE`` of a worker. An explicit request
  (:func:`derived_recompute_request`) is sent at once.
- :func:`derived_recompute` takes the lease and clears ``enqueued_at`` in one update, recomputes,
  and in the same transaction deletes the change rows it covered: the result is current exactly
  when no change row is left (a late commit with a smaller id stays and counts as newer). With no
  change row left and a result present it computes nothing.
- The engine's recovery pass resends states with change rows and nothing queued, and frees a dead
  worker's lease. An enqueue failure is logged, never raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, Model, OuterRef, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from certification.models import DerivedResultState
from labeling import dispatch, engine, in_process
from labeling.derived import after_commit, derived_mark
from labeling.exceptions import InvalidInput
from labeling.models import DerivedChange, DerivedKind, Project
from labeling.permissions import MANAGERS, require_role
from labeling.rows import placeholders, raw_models
from labeling.services.vote_tally import vote_tally_invalidate

logger = logging.getLogger(__name__)

Compute = Callable[[int], object]


class SupersededInputs(Exception):  # noqa: N818 - a signal, not an error
    """A recomputation found figures stored from inputs read after its own; it wrote nothing.

    :func:`_covered_compute` then keeps the change rows it read (the stored figures may not
    cover them): the next recomputation covers them, so none is ever deleted unseen.
    """


Report = TypeVar("Report", bound=Model)


def project_report_store(
    *,
    name: str,
    model: type[Report],
    project: Project,
    lock: Callable[[Project], tuple[Report, bool]],
    digest: str,
    read_at: datetime,
    compute: Callable[[], dict[str, Any]],
    describe: Callable[[Report], dict[str, Any]],
) -> Report:
    """Store figures in a project's one report row, unless the row holds these or newer ones.

    The skeleton of every per-project report's recomputation (``name`` prefixes its log
    events): when the stored ``input_sha256`` already equals ``digest`` nothing is computed
    or written; otherwise ``compute()`` gives the report's fields, computed outside any write
    transaction, and a short transaction locks the row (``lock`` creates it if needed) and
    writes them with ``computed_at = read_at`` (when the inputs were read) and the digest;
    the log event ``<name>.recomputed`` then carries ``describe(report)``.

    Raises:
        SupersededInputs: the row holds figures of inputs read after ``read_at`` (a slow run,
            or another host's clock); nothing was written.
        django.core.exceptions.ValidationError: the fields fail the model's checks.
    """
    unchanged = {"project_id": project.pk, "input_sha256": digest}
    current: Any = model._default_manager.filter(project=project).first()
    if current is not None and current.input_sha256 == digest:
        logger.info(f"{name}.unchanged", extra=unchanged)
        return cast(Report, current)
    values = compute()
    with transaction.atomic():
        locked, created = lock(project)
        row: Any = locked
        if not created and row.input_sha256 == digest:
            logger.info(f"{name}.unchanged", extra=unchanged)
            return locked
        if not created and row.computed_at > read_at:
            raise SupersededInputs(f"{name} of project {project.pk}: newer figures stored")
        for field, value in {**values, "computed_at": read_at, "input_sha256": digest}.items():
            setattr(row, field, value)
        row.full_clean()
        row.save()
    logger.info(f"{name}.recomputed", extra={**unchanged, **describe(locked)})
    return locked


# After an enqueue failed, this process does not try the broker again for this many seconds:
# during an outage a request pays for at most one failed attempt, not one per kind. The marks
# are in the database, and the recovery pass schedules them once the broker is back.
BROKER_BACKOFF_SECONDS = 2.0
_broker_down_until = 0.0


def _state(project_id: int, kind: str) -> DerivedResultState:
    state, _ = DerivedResultState.objects.get_or_create(project_id=project_id, kind=kind)
    return state


# Recomputations one inline call runs at most, its own and those they schedule (a process
# without a worker or a background thread runs them in the sending call).
INLINE_RUNS_MAX = 3
_inline = threading.local()


def _enqueue(project_id: int, kind: str, *, countdown: float) -> None:
    """Send the recomputation to a worker, or to an embedded-default web process's thread.

    The thread (:mod:`labeling.in_process`) runs it off the request; a process that did not
    start one (a management command, the tests) sends it to Celery, which runs tasks in the
    sending call when ``CELERY_TASK_ALWAYS_EAGER`` is on. A recomputation run that way which
    schedules another (changes arrived, or figures of a later read are stored) would run it
    inside itself; so the other waits until the first one ends, and one inline call runs at
    most ``INLINE_RUNS_MAX``: beyond that the marks stay for the recovery pass or the next
    change (a clock lagging the stored figures' would otherwise recurse without end). The
    task is registered as ``DERIVED`` by ``certification.tasks`` (:mod:`labeling.dispatch`).
    """
    derived_recompute_task = dispatch.task(DERIVED)
    if not in_process.running():
        pending: list[tuple[int, str]] | None = getattr(_inline, "pending", None)
        if pending is not None:  # inside an inline run: after it, not within it
            pending.append((project_id, kind))
            return
        _inline.pending = pending = [(project_id, kind)]
        try:
            for _ in range(INLINE_RUNS_MAX):
                if not pending:
                    return
                derived_recompute_task.apply_async(pending.pop(0), countdown=countdown)
            for left in dict.fromkeys(pending):
                # never sent: free the slot, so the recovery pass or the next change sends it
                DerivedResultState.objects.filter(project_id=left[0], kind=left[1]).update(
                    enqueued_at=None
                )
                logger.warning(
                    "derived.inline_deferred", extra={"project_id": left[0], "kind": left[1]}
                )
        finally:
            del _inline.pending
        return
    in_process.run_later(
        f"derived {project_id}:{kind}",
        derived_recompute_task.apply,
        (project_id, kind),
        delay=countdown,
    )


def derived_schedule(*, project_id: int, kind: str, at_once: bool = False) -> bool:
    """Enqueue the recomputation of a (project, kind) unless one is already waiting.

    Called after commit (never inside a transaction that is still open). The state's
    ``enqueued_at`` is set by a compare-and-set update: only the caller that found it empty, or
    older than the engine's lapse, enqueues. If the enqueue fails (the broker is down),
    ``enqueued_at`` is cleared again and the failure logged; the change rows stay, and the
    recovery pass or the next change schedules it. For ``BROKER_BACKOFF_SECONDS`` after a
    failure this process does not try again (the marks wait for the recovery pass).

    The task is sent with the countdown of :func:`_spacing`; ``at_once`` (a manager's explicit
    request) sends it without one, and also when a task waits held for the spacing (that one
    then finds nothing left to cover, unless changes came meanwhile).

    ``at_once`` starts it now, not after the spacing.

    Returns:
        Whether a task was enqueued by this call.
    """
    return bool(derived_schedule_kinds(project_id=project_id, kinds=[kind], at_once=at_once))


def derived_schedule_kinds(
    *, project_id: int, kinds: Iterable[str], at_once: bool = False
) -> list[str]:
    """Schedule several kinds of one project as :func:`derived_schedule` does each.

    The states are read in one query (a missing one is created), so a commit that marked
    four kinds costs one read, not four.

    ``at_once`` starts them now, not after the spacing.

    Returns:
        The kinds for which this call enqueued a task, in the order given.
    """
    wanted = list(dict.fromkeys(kinds))
    if not wanted:
        return []
    if time.monotonic() < _broker_down_until:
        for kind in wanted:
            logger.info("derived.enqueue_skipped", extra={"project_id": project_id, "kind": kind})
        return []
    # After every submit's commit: one plain statement (labeling/rows.py). The f-string adds
    # only placeholders.
    states = {
        s.kind: s
        for s in raw_models(
            DerivedResultState,
            "SELECT * FROM certification_derivedresultstate "  # noqa: S608
            f"WHERE project_id = %s AND kind IN ({placeholders(wanted)})",
            [project_id, *wanted],
        )
    }
    enqueued = []
    for kind in wanted:
        state = states.get(kind) or _state(project_id, kind)
        if _schedule(state, at_once=at_once):
            enqueued.append(kind)
        elif time.monotonic() < _broker_down_until:
            break  # the broker refused: the other marks wait for the recovery pass too
    return enqueued


def _schedule(state: DerivedResultState, *, at_once: bool = False) -> bool:
    """The compare-and-set on ``state.enqueued_at`` and the enqueue of :func:`derived_schedule`.

    ``enqueued_at`` is set to the time the task is due (now plus its countdown).
    """
    global _broker_down_until
    project_id, kind = state.project_id, state.kind
    now = timezone.now()
    stale_before = now - engine.lapse()
    free = Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=stale_before)
    due_at = state.enqueued_at
    waiting = due_at is not None and due_at >= stale_before
    if at_once:
        # A task held for the spacing (due later) does not hold back an explicit request.
        free |= Q(enqueued_at__gt=now)
        waiting = due_at is not None and stale_before <= due_at <= now
    if waiting:
        # One waits already (the common case while annotators submit): it has not started,
        # since starting clears ``enqueued_at``, so it will read the change committed before
        # this read. The compare-and-set below would change nothing.
        return False
    countdown = 0.0 if at_once else _spacing(state)
    due = now + timedelta(seconds=countdown)
    claimed = DerivedResultState.objects.filter(free, pk=state.pk).update(enqueued_at=due)
    if not claimed:
        return False
    try:
        _enqueue(project_id, kind, countdown=countdown)
    except Exception:  # the broker is down or refused: the mark is in the database
        DerivedResultState.objects.filter(pk=state.pk, enqueued_at=due).update(enqueued_at=None)
        _broker_down_until = time.monotonic() + BROKER_BACKOFF_SECONDS
        logger.exception("derived.enqueue_failed", extra={"project_id": project_id, "kind": kind})
        return False
    return True


def spacing_gap(duration: float | None) -> float:
    """Seconds between the end of a kind's computation and the start of the next.

    ``max(interval, (1 - share) / share * duration)`` with the interval
    ``CERTLABEL_DERIVED_INTERVAL`` and the share ``CERTLABEL_DERIVED_MAX_SHARE``: a computation
    of ``duration`` seconds followed by this gap takes at most ``share`` of a worker.

    Args:
        duration: how long the last computation took (None: not measured).
    """
    interval = max(0.0, float(settings.CERTLABEL_DERIVED_INTERVAL))
    share = float(settings.CERTLABEL_DERIVED_MAX_SHARE)
    if not duration or duration <= 0 or share >= 1:
        return interval
    return max(interval, (1.0 - share) / share * duration)


def _spacing(state: DerivedResultState) -> float:
    """Seconds to hold a new recomputation: the rest of :func:`spacing_gap` since the last one.

    A recomputation reads the whole project (and a calibration refresh whose inputs changed
    creates a run per spec); while annotators submit without pause, starting one per change
    would keep a worker busy with figures that are outdated as soon as they are stored. Spaced,
    the changes arriving meanwhile coalesce into the one waiting recomputation, and the pages
    say how many newer changes wait. The gap is at least ``CERTLABEL_DERIVED_INTERVAL`` and
    grows with the last computation's ``duration_seconds`` (``CERTLABEL_DERIVED_MAX_SHARE``):
    on a large project a kind that takes 3 s starts at most every 30 s (27 s after the last
    one ended), so its cost per label stays bounded however large the project grows. The
    first one, and one after a quiet spell, starts at once.
    """
    if state.computed_at is None:
        return 0.0
    gap = spacing_gap(state.duration_seconds)
    if gap <= 0:
        return 0.0
    since = (timezone.now() - state.computed_at).total_seconds()
    return max(0.0, min(gap, gap - since))


def _covered_compute(project_id: int, kind: str, compute: Compute, lease_owner: str) -> int:
    """Recompute, then delete the change rows covered in one short transaction; return the top.

    The change rows are read first, so every change read is visible to the computation that
    follows. The computation opens its own transactions (a recomputation reads the whole
    project without holding a write transaction: on SQLite one would stop every submit for as
    long as it reads and computes); a change committed meanwhile keeps its row and is covered
    by the next recomputation. The covered rows are deleted only while ``lease_owner`` still
    holds the state's lease: a computation whose lease was taken over records nothing (the one
    that took it over covers the same rows).
    """
    ids = list(
        DerivedChange.objects.filter(project_id=project_id, kind=kind)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    started = time.monotonic()
    try:
        compute(project_id)
    except SupersededInputs:
        logger.info("derived.superseded", extra={"project_id": project_id, "kind": kind})
        return 0
    duration = time.monotonic() - started
    top = max(ids, default=0)
    with transaction.atomic():
        held = DerivedResultState.objects.filter(
            project_id=project_id, kind=kind, lease_owner=lease_owner
        ).update(
            covered_generation=Greatest("covered_generation", top),
            computed_at=timezone.now(),
            duration_seconds=duration,
            last_error="",
        )
        if not held:
            logger.warning("derived.lease_lost", extra={"project_id": project_id, "kind": kind})
            return 0
        if ids:
            DerivedChange.objects.filter(pk__in=ids).delete()
    return top


def derived_recompute(
    *, project_id: int, kind: str, compute: Compute, task_id: str | None = None
) -> str:
    """Run one coalesced recomputation of a (project, kind); the task's body.

    Takes the state's lease (and clears ``enqueued_at``) in one compare-and-set; a lease held
    by a live computation elsewhere makes this task give its queued slot back and end
    (``busy``); a lapsed lease, or this task's own from an attempt whose database connection
    broke, is taken over. Then it runs ``compute`` over the latest committed state under the
    lease's heartbeat, records the covered generation and frees the lease. When changes
    arrived meanwhile and nothing is queued, schedules one more. A failure of ``compute`` is
    logged and stored on the state (``last_error``); the change rows stay, so the recovery
    pass retries it. A database ``OperationalError`` is re-raised (the task retries, and takes
    its own lease back).

    A task that finds no change row of the (project, kind) and the result computed before
    computes nothing (``"current"``): its inputs did not change since (a message sent twice,
    or one held for the spacing while an explicit request ran first).

    Returns:
        ``"done"``, ``"failed"``, ``"busy"`` (another computation holds the lease),
        ``"current"`` (nothing changed since the last computation) or ``"missing"`` (no such
        project).

    Raises:
        OperationalError: a transient database error (the task retries).
    """
    from django.db import OperationalError

    if not Project.objects.filter(pk=project_id).exists():
        DerivedResultState.objects.filter(project_id=project_id, kind=kind).delete()
        logger.warning("derived.missing_project", extra={"project_id": project_id, "kind": kind})
        return "missing"
    state = _state(project_id, kind)
    me = engine.owner(task_id)
    if engine.claim(DerivedResultState, state.pk, lease_owner=me, enqueued_at=None) is None:
        # Another computation runs: give the queued slot back, so that the running one schedules
        # the next when it ends (it checks for change rows after releasing its lease). If it
        # ended meanwhile (its schedule found our slot taken), schedule here instead: in either
        # order one of the two sees the other's step, so no change is left unscheduled.
        DerivedResultState.objects.filter(pk=state.pk).update(enqueued_at=None)
        still_running = (
            DerivedResultState.objects.filter(pk=state.pk)
            .exclude(lease_owner="")
            .exclude(engine.lapsed_lease(timezone.now()))
            .exists()
        )
        waiting = DerivedChange.objects.filter(project_id=project_id, kind=kind).exists()
        if not still_running and waiting:
            derived_schedule(project_id=project_id, kind=kind)
        logger.info("derived.busy", extra={"project_id": project_id, "kind": kind})
        return "busy"
    changed = DerivedChange.objects.filter(project_id=project_id, kind=kind).exists()
    if not changed and (
        DerivedResultState.objects.filter(pk=state.pk, computed_at__isnull=False).exists()
    ):
        engine.release(DerivedResultState, state.pk, lease_owner=me)
        logger.info("derived.current", extra={"project_id": project_id, "kind": kind})
        return "current"
    outcome = "done"
    error = ""
    try:
        with engine.Lease(DerivedResultState, state.pk, lease_owner=me):
            top = _covered_compute(project_id, kind, compute, me)
        logger.info(
            "derived.recomputed",
            extra={"project_id": project_id, "kind": kind, "covered_generation": top},
        )
    except OperationalError:
        raise  # the lease stays this task's: its retry takes it back at once
    except Exception as exc:  # the task boundary: keep the rows, record and log the error
        outcome = "failed"
        error = f"{type(exc).__name__}: {exc}"[:2000]
        logger.exception("derived.failed", extra={"project_id": project_id, "kind": kind})
    if error:
        engine.release(DerivedResultState, state.pk, lease_owner=me, last_error=error)
    else:
        engine.release(DerivedResultState, state.pk, lease_owner=me)
    if (
        outcome == "done"
        and DerivedChange.objects.filter(project_id=project_id, kind=kind).exists()
    ):
        derived_schedule(project_id=project_id, kind=kind)
    return outcome


DERIVED = "derived"


def _derived_send(state_id: int) -> None:
    """Send the recomputation of one state (the engine's sender for derived results).

    The task keeps the spacing (:func:`_spacing`): the engine wrote ``enqueued_at`` as now, and
    it is moved to the time the task is due, so that the next recovery pass does not judge a
    held task lost (and send another) before then.
    """
    state = DerivedResultState.objects.filter(pk=state_id).first()
    if state is None:
        return
    countdown = _spacing(state)
    due = None
    if countdown > 0:
        due = timezone.now() + timedelta(seconds=countdown)
        DerivedResultState.objects.filter(
            pk=state_id, lease_owner="", enqueued_at=state.enqueued_at
        ).update(enqueued_at=due)
    try:
        _enqueue(state.project_id, state.kind, countdown=countdown)
    except Exception:
        if due is not None:  # as the engine clears its own mark: the recovery sends it again
            DerivedResultState.objects.filter(pk=state_id, enqueued_at=due).update(enqueued_at=None)
        raise


def _derived_states_create() -> None:
    """Create the state row of every (project, kind) that has changes and no state yet."""
    known = set(DerivedResultState.objects.values_list("project_id", "kind"))
    marked = set(DerivedChange.objects.values_list("project_id", "kind").distinct())
    for project_id, kind in sorted(marked - known):
        _state(project_id, kind)


def derived_work_kind() -> engine.WorkKind:
    """Derived results as the engine recovers them (registered in ``ready``).

    Still to do: a state with change rows it has not covered. The recovery pass sends each
    such state that nothing holds or has queued within the lapse.
    """
    changes = DerivedChange.objects.filter(project_id=OuterRef("project_id"), kind=OuterRef("kind"))
    return engine.WorkKind(
        name=DERIVED,
        model=DerivedResultState,
        send=_derived_send,
        to_do=lambda: Q(Exists(changes)),
        stateful=False,
        before_pass=_derived_states_create,
    )


@transaction.atomic
def derived_recompute_request(*, project: Project, kind: str, actor: Any) -> None:
    """Request a recomputation of one kind of a project's derived results (managers).

    Marks the kind stale (a change row, so the request survives a broker outage) and schedules
    it after commit, through the same coalescing as every other change, but at once: not held
    for the spacing (:func:`derived_schedule` with ``at_once``). A computation of the kind that
    is running then is followed by one after the spacing, as for any change. For ``agreement``
    the project's vote tally is dropped too, so the recomputation counts every vote again from
    scratch (the full count, the check of the counts kept vote by vote).

    ``kind`` is ``agreement``, ``calibration``, ``audit`` or ``reliability``; ``actor`` None is the
    command line.

    Raises:
        PermissionDenied: the actor is a member but not a manager.
        NotFound: the actor is not a member.
        InvalidInput: an unknown kind (field ``kind``).
    """
    require_role(project=project, actor=actor, roles=MANAGERS)
    if kind not in DerivedKind.values:
        raise InvalidInput(
            f"unknown kind {kind!r}; one of {', '.join(DerivedKind.values)}", field="kind"
        )
    derived_mark(project_id=project.pk, kinds=[kind])
    if kind == DerivedKind.AGREEMENT:
        vote_tally_invalidate(project=project)
    project_id = project.pk

    def at_once() -> None:
        derived_schedule(project_id=project_id, kind=kind, at_once=True)

    # An after-commit event runs before the batch hands the marks to the scheduler: this one
    # takes the queued slot first, without a countdown.
    after_commit(at_once)
    logger.info(
        "derived.recompute_requested",
        extra={"project_id": project.pk, "kind": kind, "actor": getattr(actor, "pk", None)},
    )
