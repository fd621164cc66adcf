"""The drift watch of a run as pages and the API show it (``certification.models.DriftWatch``)."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings

from certification.models import CalibrationRun, DriftWatch

#: What an alarm means, in words (pages and API).
ALARM_MEANING = (
    "The traffic this certificate is applied to no longer looks like the calibration data: "
    "the certificate's guarantee may not hold for it."
)
#: What the watch tests, in words.
WATCH_MEANING = (
    "A conformal test martingale of the scores of applied decisions against the calibration "
    "partition's scores: while the traffic is exchangeable with the calibration data it "
    "reaches the threshold 1/delta with probability at most delta, ever."
)


def _martingale(log_value: float) -> float | str:
    return math.exp(log_value) if log_value < 709.0 else "inf"


def drift_json(watch: DriftWatch | None) -> dict[str, Any]:
    """A watch (None: the run was never applied) as JSON primitives.

    Keys: ``status`` (``no_traffic``: never applied; ``starting``: decisions recorded, not yet
    folded; ``watching``; ``alarm``: the martingale reached the threshold; ``unavailable``:
    ``reason`` says why), ``delta``, ``threshold`` (1/delta), ``martingale`` (its value after
    the folded decisions; ``"inf"`` beyond the float range), ``decisions_recorded``,
    ``decisions_folded``, ``observations`` (folded decisions with a score),
    ``calibration_observations``, ``crossed_at`` (ISO time of the decision at which it first
    reached the threshold), ``crossed_at_decision`` (that decision's number, from 1), ``folded_at``,
    ``reason``, ``meaning`` (what the watch tests, or, in alarm, what the alarm means).
    """
    if watch is None:
        delta = float(settings.CERTLABEL_DRIFT_DELTA)
        return {
            "status": "no_traffic",
            "delta": delta,
            "threshold": 1.0 / delta,
            "martingale": 1.0,
            "decisions_recorded": 0,
            "decisions_folded": 0,
            "observations": 0,
            "calibration_observations": None,
            "crossed_at": None,
            "crossed_at_decision": None,
            "folded_at": None,
            "reason": None,
            "meaning": WATCH_MEANING,
        }
    if watch.unavailable:
        status = "unavailable"
    elif watch.crossed_seq is not None:
        status = "alarm"
    elif watch.n_reference is None:
        status = "starting"
    else:
        status = "watching"
    return {
        "status": status,
        "delta": watch.delta,
        "threshold": 1.0 / watch.delta,
        "martingale": _martingale(watch.log_martingale),
        "decisions_recorded": watch.recorded,
        "decisions_folded": watch.folded,
        "observations": watch.observations,
        "calibration_observations": watch.n_reference,
        "crossed_at": watch.crossed_at.isoformat() if watch.crossed_at else None,
        "crossed_at_decision": watch.crossed_seq,
        "folded_at": watch.folded_at.isoformat() if watch.folded_at else None,
        "reason": watch.unavailable or None,
        "meaning": ALARM_MEANING if status == "alarm" else WATCH_MEANING,
    }


def drift_watch_get(*, run: CalibrationRun) -> dict[str, Any]:
    """The run's drift watch (:func:`drift_json`); one query, the stored bag not read."""
    return drift_json(DriftWatch.objects.defer("bag").filter(run=run).first())
