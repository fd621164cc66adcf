"""Recording the scores applied certificates see, and scheduling their drift watch's fold.

The apply path (:func:`drift_scores_record`) costs one counter update, one read of it and one
bulk insert per request, in one short transaction: the update of the run's
:class:`~certification.models.DriftWatch` row takes its row lock (PostgreSQL) or the database's
write lock (SQLite, ``BEGIN IMMEDIATE``) until the commit, so the decisions of concurrent
requests on any number of hosts get consecutive ``seq`` numbers in commit order, and a reader
that sees decision ``s`` sees every decision before it. Applies of one run queue on that lock
for the length of the insert only; the decisions are computed before.

The fold (``certification.services.drift_fold``, in a worker) is one kind of the background
engine's work (``labeling.engine``): sent after the apply's commit when none waits (a
compare-and-set on ``enqueued_at``), and sent again by the recovery pass while a watch has
decisions it has not folded. So the watch never adds its computation to the apply latency.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from certification.models import AppliedScore, CalibrationRun, DriftWatch
from labeling import dispatch, engine
from labeling.models.lease import lapse

logger = logging.getLogger(__name__)

DRIFT_WATCH = "drift_watch"


def _watch_create(run: CalibrationRun) -> None:
    """Create the run's watch (its first apply), with the delta of now and the spec's seed."""
    DriftWatch.objects.get_or_create(
        run=run, defaults={"delta": float(settings.CERTLABEL_DRIFT_DELTA), "seed": run.spec.seed}
    )


@transaction.atomic
def drift_scores_record(
    *, run: CalibrationRun, scores: Sequence[Sequence[float | None]]
) -> DriftWatch:
    """Record the scores of one request's decisions, in order; schedule the fold after commit.

    Appends one :class:`~certification.models.AppliedScore` per decision (one bulk insert) and
    adds their number to the watch's ``recorded`` (creating the watch on the run's first
    apply). Only scores are stored, never a text, an answer or an id.

    Args:
        run: the applied run.
        scores: per decision (question), the scores of its emitted units (None: missing).

    Returns:
        The watch as it stands after the insert (``bag`` deferred: not read).

    Concurrency: opens its own transaction; holds the watch row's lock (its update) until the
    commit, so ``seq`` follows commit order across hosts.
    """
    count = len(scores)
    watches = DriftWatch.objects.filter(run=run)
    if not watches.update(recorded=F("recorded") + count):
        _watch_create(run)
        watches.update(recorded=F("recorded") + count)
    watch = watches.defer("bag").get()
    now = timezone.now()
    first = watch.recorded - count + 1
    AppliedScore.objects.bulk_create(
        AppliedScore(run=run, seq=first + i, scores=list(row), created_at=now)
        for i, row in enumerate(scores)
    )
    watch_id, due = watch.pk, watch.enqueued_at
    transaction.on_commit(lambda: drift_watch_schedule(watch_id=watch_id, enqueued_at=due))
    return watch


def drift_watch_schedule(*, watch_id: int, enqueued_at: Any = None) -> bool:
    """Send the fold of a watch unless one waits already; called after commit.

    Args:
        watch_id: the watch.
        enqueued_at: the watch's ``enqueued_at`` as last read (a recent one: a fold waits, and
            nothing is written).

    Returns:
        Whether this call sent a fold (the engine logs a send that failed; the recovery pass
        sends it again).
    """
    now = timezone.now()
    stale = now - lapse()
    if enqueued_at is not None and enqueued_at >= stale:
        return False
    free = Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=stale)
    if not DriftWatch.objects.filter(free, pk=watch_id).update(enqueued_at=now):
        return False
    engine.send(DRIFT_WATCH, watch_id)
    return True


def drift_watch_send(watch_id: int) -> None:
    """Send a watch's fold to a worker (the engine's sender for drift watches).

    The task is registered as ``DRIFT_WATCH`` by ``certification.tasks`` (:mod:`labeling.dispatch`).
    """
    dispatch.task(DRIFT_WATCH).delay(watch_id)


def drift_watch_work_kind() -> engine.WorkKind:
    """Drift watches as the engine recovers them (registered in ``ready``).

    Still to do: a watch with decisions recorded and not folded, unless no martingale can be
    kept for it (no calibration score).
    """
    return engine.WorkKind(
        name=DRIFT_WATCH,
        model=DriftWatch,
        send=drift_watch_send,
        to_do=lambda: Q(recorded__gt=F("folded"), unavailable=""),
        stateful=False,
    )
