"""Folding recorded scores into a run's drift watch (in a worker; loads NumPy and SciPy).

A fold takes the watch's lease (``labeling.engine``), reads at most :data:`FOLD_BATCH`
decisions after the last folded one in ``seq`` order, updates the martingale
(``certification.stats.drift``) and writes the new state by a compare-and-set on ``folded``
while it still holds the lease, then sends the next fold if decisions wait. The first fold
starts the watch from the run's calibration partition (its questions' observations,
``certification.certificates.drift``). The alarm is logged once, by the fold that records the
crossing.
"""

from __future__ import annotations

import logging

import numpy as np
from django.db.models import F
from django.utils import timezone

from certification.certificates.apply import certificate_freeze
from certification.certificates.drift import emitted_scores, observation
from certification.contract import spec_content
from certification.models import AppliedScore, DriftWatch
from certification.services.drift import drift_watch_schedule
from certification.stats.drift import DriftState, drift_start, drift_thetas, drift_update
from certification.stats.errors import InsufficientDataError
from labeling import engine

logger = logging.getLogger(__name__)

#: The most decisions one fold reads (the next fold takes the rest).
FOLD_BATCH = 20_000
NO_REFERENCE = "the calibration partition has no question with a score to compare with"


def _state(watch: DriftWatch) -> DriftState | None:
    """The watch's stored state; None when it has not started."""
    if watch.n_reference is None or watch.bag is None:
        return None
    return DriftState(
        bag=np.frombuffer(bytes(watch.bag), dtype=np.float64),
        n_reference=watch.n_reference,
        count=watch.observations,
        log_p_up=watch.log_p_up,
        log_p_down=watch.log_p_down,
        log_martingale=watch.log_martingale,
        crossed=watch.crossed_observation,
    )


def _reference(watch: DriftWatch) -> list[float]:
    """The observations of the run's calibration questions (the exchangeable past)."""
    run = watch.run
    certificate = certificate_freeze(
        run_id=run.pk,
        spec_sha256=run.spec_sha256,
        input_sha256=run.input_sha256,
        contract=spec_content(run.spec),
        result=run.result,
    )
    scores = emitted_scores(run.inputs["calibration"], certificate.contract)
    return [x for x in map(observation, scores) if x is not None]


def drift_watch_fold(*, watch_id: int, task_id: str | None = None) -> str:
    """Fold the decisions recorded since the last fold into the watch's martingale.

    Returns:
        ``"folded"``, ``"current"`` (nothing to fold), ``"busy"`` (another fold holds the
        lease; it sends the next one), ``"unavailable"`` (no calibration score: recorded
        on the watch) or ``"missing"`` (no such watch).

    Concurrency: one fold at a time per watch (the lease); the state is written only while
    this fold holds the lease and nothing else folded meanwhile (compare-and-set on
    ``folded``). Idempotent: a fold sent twice folds each decision once.
    """
    me = engine.owner(task_id)
    if not DriftWatch.objects.filter(pk=watch_id).exists():
        logger.warning("drift_watch.missing", extra={"watch_id": watch_id})
        return "missing"
    if engine.claim(DriftWatch, watch_id, lease_owner=me, enqueued_at=None) is None:
        logger.info("drift_watch.busy", extra={"watch_id": watch_id})
        return "busy"
    with engine.Lease(DriftWatch, watch_id, lease_owner=me):
        outcome = _fold(watch_id, me)
    engine.release(DriftWatch, watch_id, lease_owner=me)
    if DriftWatch.objects.filter(pk=watch_id, folded__lt=F("recorded"), unavailable="").exists():
        drift_watch_schedule(watch_id=watch_id)
    return outcome


def _fold(watch_id: int, me: str) -> str:
    watch = DriftWatch.objects.select_related("run__spec", "run__input").get(pk=watch_id)
    if watch.unavailable:
        return "unavailable"
    state = _state(watch)
    if state is None:
        try:
            state = drift_start(_reference(watch))
        except InsufficientDataError:
            DriftWatch.objects.filter(pk=watch_id, lease_owner=me).update(unavailable=NO_REFERENCE)
            logger.warning("drift_watch.unavailable", extra={"run": watch.run_id})
            return "unavailable"
    rows = list(
        AppliedScore.objects.filter(run_id=watch.run_id, seq__gt=watch.folded)
        .order_by("seq")
        .values_list("seq", "scores", "created_at")[:FOLD_BATCH]
    )
    if not rows and watch.n_reference is not None:
        return "current"
    observed = [(seq, at, x) for seq, scores, at in rows if (x := observation(scores)) is not None]
    thetas = drift_thetas(watch.seed, state.count, len(observed))
    new = drift_update(state, [x for _, _, x in observed], thetas, delta=watch.delta)
    crossing: dict[str, object] = {}
    if watch.crossed_seq is None and new.crossed is not None:
        seq, at, _ = observed[new.crossed - state.count - 1]
        crossing = {"crossed_seq": seq, "crossed_at": at, "crossed_observation": new.crossed}
    folded = rows[-1][0] if rows else watch.folded
    written = DriftWatch.objects.filter(pk=watch_id, lease_owner=me, folded=watch.folded).update(
        folded=folded,
        observations=new.count,
        n_reference=new.n_reference,
        bag=new.bag.astype(np.float64).tobytes(),
        log_p_up=new.log_p_up,
        log_p_down=new.log_p_down,
        log_martingale=new.log_martingale,
        folded_at=timezone.now(),
        **crossing,
    )
    if written and crossing:
        logger.warning(
            "drift_watch.alarm",
            extra={
                "run": watch.run_id,
                "decision": crossing["crossed_seq"],
                "martingale": new.martingale,
                "threshold": 1.0 / watch.delta,
            },
        )
    return "folded" if written else "busy"
