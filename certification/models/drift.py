"""The drift watch of applied certificates: the scores new traffic brought, and its state."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from certification.models.calibration import CalibrationRun
from labeling.models import LeasedWork


class AppliedScore(models.Model):
    """The scores one decision of the apply API saw (append-only; never a text or an answer).

    ``seq`` numbers a run's decisions 1, 2, ... in the order they were recorded (taken from
    :attr:`DriftWatch.recorded` under its row lock, so a decision visible to a reader means every
    smaller ``seq`` is too). ``scores`` holds the spec's score field of each unit the selector
    emitted for the question (one, or one per candidate with ``each_candidate``); null: missing.
    """

    run = models.ForeignKey(CalibrationRun, on_delete=models.CASCADE, related_name="+")
    seq = models.PositiveBigIntegerField()
    scores = models.JSONField(default=list)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="applied_score_unique_seq"),
        ]

    def __str__(self) -> str:
        return f"decision {self.seq} under run {self.run_id}"


class DriftWatch(LeasedWork):
    """The conformal test martingale of one run's applied scores (``certification.stats.drift``).

    Created by the run's first apply. ``delta`` (``CERTLABEL_DRIFT_DELTA`` then, frozen: a level
    changed after the data were seen voids Ville's bound) and ``seed`` (of the tie-breakers) are
    fixed for the watch's life. ``recorded`` counts the decisions recorded (the apply path adds
    to it); ``folded`` those the background fold has read; ``observations`` those with a score,
    the martingale's time. ``bag`` is every score compared so far, sorted (float64 bytes), from
    ``n_reference`` calibration observations; None until the first fold. ``crossed_seq`` and
    ``crossed_at`` are the decision at which the martingale first reached ``1/delta`` and its
    time, ``crossed_observation`` its place among the observations. ``unavailable`` says why no
    martingale can be kept (no calibration score).
    """

    run = models.OneToOneField(CalibrationRun, on_delete=models.CASCADE, related_name="drift_watch")
    delta = models.FloatField()
    seed = models.BigIntegerField()
    recorded = models.PositiveBigIntegerField(default=0)
    folded = models.PositiveBigIntegerField(default=0)
    observations = models.PositiveBigIntegerField(default=0)
    n_reference = models.PositiveIntegerField(null=True, blank=True)
    bag = models.BinaryField(null=True, blank=True)
    log_p_up = models.FloatField(default=0.0)
    log_p_down = models.FloatField(default=0.0)
    log_martingale = models.FloatField(default=0.0)
    crossed_seq = models.PositiveBigIntegerField(null=True, blank=True)
    crossed_at = models.DateTimeField(null=True, blank=True)
    crossed_observation = models.PositiveBigIntegerField(null=True, blank=True)
    unavailable = models.CharField(max_length=300, blank=True, default="")
    folded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(delta__gt=0, delta__lt=1), name="drift_watch_delta_open_unit"
            ),
            models.CheckConstraint(
                condition=Q(folded__lte=models.F("recorded")), name="drift_watch_folded_recorded"
            ),
        ]

    def __str__(self) -> str:
        return f"drift watch of run {self.run_id}"
