"""An evaluator audit's statistics from its inputs: the stored result JSON and its input hash.

:func:`audit_result_compute` aligns the evaluator's verdicts with the resolved labels and
computes ``certification.stats.audit`` (confusion matrix, accuracy, kappa, sensitivity,
specificity, PPV, NPV, McNemar, slices, disagreements) and
``certification.stats.ppi.estimate_error_rate`` (human-only exact bound, PPI, PPI++, union
bound), or the active estimate of an active sample; :func:`audit_inputs_sha256` is the hash that
says whether anything changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from certification.models import AuditReport, AuditSample, FlagWhen, SampleKind
from certification.selectors import AuditRow
from certification.services.audit_design import (
    FLAG,
    PASS,
    ActiveDesign,
    SampleDesign,
    evaluator_verdict,
    to_json,
)
from certification.stats.errors import StatsError

if TYPE_CHECKING:
    import numpy as np

    from certification.stats.audit import AuditMetrics

# The statistics (NumPy, SciPy) are imported by the computation only (audit_result_compute): the
# web process loads this module (through certification.services.audit, to configure audits) and
# must not load them.

# Part of the input hash: bump it when the statistics or the stored JSON change.
AUDIT_STATS_VERSION = 4  # 2: the anytime-valid figures and the target; 3: the active design;
# 4: the anytime-valid figures of an active sample
#: The slice dimensions of the per-slice tables.
SLICE_DIMENSIONS = ("domain", "question_type", "generator")
POLARITY_NAME = "error / not supported"
SAMPLE_ASSUMPTION = (
    "the resolved items are treated as a simple random sample of the evaluator-labelled items "
    "(true when every item is labelled or items are served in seeded random order)"
)

SAMPLED_ASSUMPTION = (
    "the audited items are the resolved members of the latest audit sample, a seeded stratified "
    "random sample (strata: evaluator verdict x slice); members not yet resolved are assumed "
    "missing at random within their stratum"
)

ACTIVE_ASSUMPTION = (
    "the audited items are the members of the latest audit sample, an active sample: each item "
    "was drawn independently with its recorded probability, which grows with the evaluator's "
    "uncertainty"
)
#: Why the stratified estimates are not computed for an active sample.
ACTIVE_NOT_STRATIFIED = (
    "the latest audit sample is active (probabilities that differ item by item): the human-only, "
    "PPI and union-bound estimates assume a stratified sample; see the active estimate"
)
#: Why the active estimate waits for every member.
ACTIVE_PENDING = (
    "pending until every member of the active sample is resolved: the estimate weights each "
    "member by 1 / its probability, and the members people resolve last (disagreements, hard "
    "items) are not missing at random"
)


# -- computation ------------------------------------------------------------------------------
def judge_prediction(report: AuditReport, row: AuditRow) -> tuple[float | None, str]:
    """Return the evaluator's predicted error probability of the item, or (None, why not).

    A thresholded audit reads the score as a probability under its flag inequality: flagging
    ``score < t`` (a low consistency score is an error, as HHEM) predicts 1 - score, flagging
    ``score > t`` predicts the score. A label audit predicts 1 for a positive verdict, 0 for a
    negative one.
    """
    if not row.available:
        return None, "has no evaluator label (unavailable)"
    if report.score_threshold is None:
        if row.label is None:
            return None, "has no evaluator verdict"
        return (1.0 if row.label in report.evaluator_positive else 0.0), ""
    if row.score is None:
        return None, "has no evaluator score"
    if not (0.0 <= row.score <= 1.0):
        return None, f"has score {row.score}, not a probability in [0, 1]"
    low_flags = report.flag_when in (FlagWhen.LT, FlagWhen.LE)
    return (1.0 - row.score if low_flags else row.score), ""


def sample_design(report: AuditReport) -> SampleDesign | ActiveDesign | None:
    """Return the design of the evaluator's latest audit sample, or None without one."""
    sample = AuditSample.objects.filter(evaluator_id=report.evaluator_id).first()
    if sample is None:
        return None
    if sample.kind == SampleKind.ACTIVE:
        return ActiveDesign(
            sample.pk,
            sample.seed,
            {int(pk): (pi, f) for pk, (pi, f) in sample.population.items()},
            frozenset(sample.members.values_list("item_id", flat=True)),
            float(sample.design["floor"]),
        )
    members = dict(sample.members.values_list("item_id", "inclusion_probability"))
    strata = {int(pk): key for pk, key in sample.population.items()}
    return SampleDesign(sample.pk, sample.seed, strata, members)


def declaration_json(report: AuditReport) -> dict[str, Any]:
    """Return the audit's declaration as JSON (stored in reports and samples)."""
    return {
        "evaluator": str(report.evaluator),
        "human_positive": list(report.human_positive),
        "evaluator_positive": list(report.evaluator_positive),
        "score_threshold": report.score_threshold,
        "flag_when": report.flag_when if report.score_threshold is not None else None,
        "confidence": format(Decimal(report.confidence).normalize(), "f"),
        "polarity": POLARITY_NAME,
    }


def audit_inputs_sha256(
    report: AuditReport,
    rows: Sequence[AuditRow],
    design: SampleDesign | ActiveDesign | None = None,
) -> str:
    """Return the sha256 of the canonical JSON of the declaration, the sample and the inputs."""
    payload = {
        "stats_version": AUDIT_STATS_VERSION,
        "sample": None if design is None else design.sample_id,
        "declaration": declaration_json(report),
        "anytime_target": None if report.anytime_target is None else str(report.anytime_target),
        "rows": [
            [
                r.item_id,
                evaluator_verdict(report, r),
                r.resolved,
                r.human_label,
                r.rationale,
                r.domain,
                r.question_type,
                r.generator,
            ]
            for r in rows
        ],
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _metrics_json(metrics: AuditMetrics) -> dict[str, Any]:
    data = to_json(metrics)
    matrix = metrics.matrix
    data["matrix"] = {
        "evaluator_labels": list(matrix.evaluator_labels),
        "human_labels": list(matrix.human_labels),
        "counts": [list(row) for row in matrix.counts],
        "binary": to_json(matrix.binary),
    }
    return data


def _codes_judge(verdicts: Sequence[str | None], positive: frozenset[str]) -> np.ndarray:
    import numpy as np

    from certification.stats.ppi import MISSING, NEGATIVE, POSITIVE

    return np.array(
        [MISSING if v is None else POSITIVE if v in positive else NEGATIVE for v in verdicts],
        dtype=np.int64,
    )


def active_result(
    rows: Sequence[AuditRow], design: ActiveDesign, positive: frozenset[str], confidence: float
) -> dict[str, Any]:
    """Return the active estimate of the error rate as JSON, or its pending state.

    Keys: ``status`` (``"pending"`` until every member has a resolution, then ``"done"``),
    ``n_members``, ``n_resolved``, ``n_labelled_after_draw`` (items not covered: labelled after
    the draw), ``n_unresolved_as_error`` (members closed as unresolved, counted as errors: the
    project's default, conservative for the upper bound), ``floor``, ``reason`` (pending) or
    ``estimate`` (:class:`~certification.stats.ppi.ActivePPIEstimate` as JSON, with ``clipped``:
    estimate, lower, upper and upper bound within [0, 1]).
    """
    from certification.stats.ppi import active_ppi_mean

    by_item = {r.item_id: r for r in rows}
    resolved = [pk for pk in design.members if pk in by_item and by_item[pk].resolved]
    base: dict[str, Any] = {
        "n_members": len(design.members),
        "n_resolved": len(resolved),
        "n_labelled_after_draw": len(set(by_item) - set(design.population)),
        "floor": design.floor,
    }
    if len(resolved) < len(design.members):
        return {**base, "status": "pending", "reason": ACTIVE_PENDING}
    order = sorted(design.population)
    position = {pk: i for i, pk in enumerate(order)}
    labelled = sorted(design.members)
    labels = [by_item[pk].human_label for pk in labelled]
    estimate = active_ppi_mean(
        [design.population[pk][1] for pk in order],
        [design.population[pk][0] for pk in order],
        [position[pk] for pk in labelled],
        [1.0 if label is None or label in positive else 0.0 for label in labels],
        delta=1.0 - confidence,
    )
    return {
        **base,
        "status": "done",
        "n_unresolved_as_error": sum(label is None for label in labels),
        "estimate": {**to_json(estimate), "clipped": list(estimate.clipped())},
    }


def audit_result_compute(
    report: AuditReport,
    rows: Sequence[AuditRow],
    design: SampleDesign | ActiveDesign | None = None,
) -> dict[str, Any]:
    """Compute the audit's result JSON from aligned rows (no database access).

    Keys: ``declaration``, ``assumptions``, ``n_items`` (evaluator-labelled items),
    ``n_resolved`` (items with a resolution), ``n_pending`` (items still waiting for people),
    ``metrics`` (:class:`AuditMetrics` as JSON, over the items with a resolution: unresolved
    ones in their own column; pending items are left out of the comparison and counted),
    ``slices`` (per dimension, per value: metrics), ``error_rate`` (the four estimates with their
    assumptions, or ``{"reason": ...}``; fixed-n), ``anytime`` (the anytime-valid figures,
    ``certification.services.audit_anytime.anytime_json``), ``disagreements`` (rows of
    ``DISAGREEMENT_COLUMNS``) and ``disagreement_columns``; with an audit sample (``design``),
    ``sample`` (its id, seed, members, resolved members) and ``sample_metrics`` (the metrics
    over the sampled items, with Hájek-weighted population rates by 1 / inclusion probability),
    and the error-rate estimates use the sample's strata and resolved members; with an active
    sample, ``sample`` and ``active`` (:func:`active_result`) instead, and ``error_rate`` says
    why the stratified estimates do not apply.
    """
    import numpy as np

    from certification.services.audit_anytime import anytime_json
    from certification.stats.audit import (
        DISAGREEMENT_COLUMNS,
        AuditRecord,
        Polarity,
        audit,
        audit_by_slice,
        disagreements,
    )
    from certification.stats.ppi import MISSING, NEGATIVE, POSITIVE, estimate_error_rate

    positive_h = frozenset(report.human_positive)
    positive_e = frozenset(report.evaluator_positive)
    polarity = Polarity(
        name=POLARITY_NAME, human_positive=positive_h, evaluator_positive=positive_e
    )
    confidence = float(report.confidence)
    verdicts = [evaluator_verdict(report, r) for r in rows]
    humans = [r.human_label for r in rows]
    ev_order = [FLAG, PASS] if report.score_threshold is not None else None
    # The comparison with people covers the items people have decided (resolved, or closed as
    # unresolved: its own column). Items still waiting for labels are pending, counted apart
    # (``n_pending``), never shown as "unresolved".
    decided = [i for i, r in enumerate(rows) if r.resolved]
    d_verdicts = [verdicts[i] for i in decided]
    d_humans = [humans[i] for i in decided]
    metrics = audit(d_verdicts, d_humans, polarity, confidence=confidence, evaluator_order=ev_order)
    slices = {}
    for dimension in SLICE_DIMENSIONS:
        keys = [getattr(rows[i], dimension) for i in decided]
        if all(k is None for k in keys):
            continue
        per_slice = audit_by_slice(
            d_verdicts,
            d_humans,
            keys,
            polarity,
            confidence=confidence,
            evaluator_order=ev_order,
        )
        slices[dimension] = [
            {"slice": key, "metrics": _metrics_json(m)} for key, m in per_slice.items()
        ]
    records = [
        AuditRecord(
            item=r.item, evaluator_label=v, human_label=r.human_label, rationale=r.rationale
        )
        for r, v in ((rows[i], verdicts[i]) for i in decided)
    ]
    disagreement_rows = [list(d.as_row()) for d in disagreements(records, polarity)]
    error_rate: dict[str, Any]
    strata = None
    sample_json = None
    sample_metrics = None
    assumption = SAMPLE_ASSUMPTION
    active = None
    if isinstance(design, ActiveDesign):
        audited = []
        assumption = ACTIVE_ASSUMPTION
        active = active_result(rows, design, positive_h, confidence)
        sample_json = {
            "id": design.sample_id,
            "seed": design.seed,
            "kind": SampleKind.ACTIVE.value,
            "n_members": active["n_members"],
            "n_resolved": active["n_resolved"],
        }
    elif design is None:
        audited = [i for i, r in enumerate(rows) if r.resolved]
    else:
        audited = [i for i, r in enumerate(rows) if r.resolved and r.item_id in design.members]
        # items labelled after the draw form a stratum of their own (never sampled)
        strata = [design.strata.get(r.item_id, "(labelled after the draw)") for r in rows]
        assumption = SAMPLED_ASSUMPTION
        in_sample = [i for i in decided if rows[i].item_id in design.members]
        sample_json = {
            "id": design.sample_id,
            "seed": design.seed,
            "kind": SampleKind.STRATIFIED.value,
            "n_members": len(design.members),
            "n_resolved": len(audited),
        }
        if in_sample:
            sample_metrics = _metrics_json(
                audit(
                    [verdicts[i] for i in in_sample],
                    [humans[i] for i in in_sample],
                    polarity,
                    confidence=confidence,
                    evaluator_order=ev_order,
                    weights=[1.0 / design.members[rows[i].item_id] for i in in_sample],
                )
            )
    if not rows:
        error_rate = {"reason": "the evaluator labelled no item"}
    elif active is not None:
        error_rate = {"reason": ACTIVE_NOT_STRATIFIED}
    else:
        human_codes = np.array(
            [
                MISSING
                if rows[i].human_label is None
                else POSITIVE
                if rows[i].human_label in positive_h
                else NEGATIVE
                for i in audited
            ],
            dtype=np.int64,
        )
        try:
            comparison = estimate_error_rate(
                _codes_judge(verdicts, positive_e),
                np.array(audited, dtype=np.int64),
                human_codes,
                strata=None if strata is None else np.array(strata, dtype=object),
                delta=1.0 - confidence,
            )
        except StatsError as exc:
            error_rate = {"reason": str(exc)}
        else:
            error_rate = to_json(comparison)
            error_rate["summaries"] = to_json(comparison.summaries())
            error_rate["sample_assumption"] = assumption
    return {
        "declaration": declaration_json(report),
        "assumptions": [assumption],
        "n_items": len(rows),
        "n_resolved": len(decided),
        "n_pending": len(rows) - len(decided),
        "sample": sample_json,
        "sample_metrics": sample_metrics,
        "active": active,
        "metrics": _metrics_json(metrics),
        "slices": slices,
        "error_rate": error_rate,
        "anytime": anytime_json(report, rows, design),
        "disagreement_columns": list(DISAGREEMENT_COLUMNS),
        "disagreements": disagreement_rows,
    }
