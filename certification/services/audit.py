"""Evaluator audits: how far an automated judge agrees with adjudicated people.

``audit_report_configure`` declares an evaluator version's polarity (and, for a score-only
evaluator such as HHEM, the threshold that turns its score into a flag) and computes the report;
``audit_report_recompute`` keeps the stored result equal to the statistics of the current
inputs, idempotently (same input hash, no write); ``audit_reports_refresh`` runs it for every
declared audit of a project as the derived recomputation of the audit kind
(``certification.services.derived``), after a change of its inputs (``audit_reads``: a
resolution of an item an audited evaluator labelled, an audited evaluator's labels).

The statistics are ``certification.stats.audit`` (confusion matrix, accuracy, kappa,
sensitivity, specificity, PPV, NPV, McNemar, slices, disagreements) and
``certification.stats.ppi.estimate_error_rate`` (human-only exact bound, PPI, PPI++, union
bound). This module only aligns the data and stores JSON.

Which items are "audited". The error-rate estimates need the audit sample: here every
evaluator-labelled item that has a resolution (resolved, or closed as unresolved). They are
treated as a simple random sample of the evaluator-labelled items (one stratum): true when the
whole workload is labelled, or when items are served in a seeded random order; not when people
labelled a hand-picked subset. The report states this assumption.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterable, Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from certification.exceptions import InvalidAudit
from certification.locks import audit_report_lock
from certification.models import AuditReport, AuditSample, FlagWhen, SampleKind
from certification.selectors import AuditRow, audit_report_get, audit_rows
from certification.services.audit_design import (
    FLAG,
    FLAG_OPERATORS,
    PASS,
    ActiveDesign,
    SampleDesign,
    evaluator_verdict,
    to_json,
)
from certification.services.derived import SupersededInputs
from certification.stats.errors import StatsError
from labeling.derived import derived_mark
from labeling.exceptions import NotFound, PermissionDenied
from labeling.models import DerivedKind, Evaluator, EvaluatorLabel, Project
from labeling.permissions import MANAGERS, require_role
from labeling.vocabulary import INADMISSIBLE

if TYPE_CHECKING:
    import numpy as np

    from certification.stats.audit import AuditMetrics

# The statistics (NumPy, SciPy) are imported by the computation only (audit_result_compute): the
# web process loads this module to configure audits and must not load them.

logger = logging.getLogger(__name__)

# Part of the input hash: bump it when the statistics or the stored JSON change.
AUDIT_STATS_VERSION = 4  # 2: the anytime-valid figures and the target; 3: the active design;
# 4: the anytime-valid figures of an active sample
#: Default declaration: FaithBench-style binary verdicts in the policy's answer schema.
DEFAULT_POSITIVE = (INADMISSIBLE,)
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


# -- declaration ------------------------------------------------------------------------------
def _labels(value: Iterable[str] | None, field: str) -> list[str]:
    labels = sorted({str(v).strip() for v in (value or ()) if str(v).strip()})
    if not labels:
        raise InvalidAudit(field, "declare at least one positive label")
    return labels


@transaction.atomic
def audit_report_configure(
    *,
    project: Project,
    evaluator: Evaluator,
    actor: Any,
    human_positive: Iterable[str] | None = None,
    evaluator_positive: Iterable[str] | None = None,
    score_threshold: float | None = None,
    flag_when: str = FlagWhen.LT,
    confidence: float | Decimal | str = "0.95",
) -> AuditReport:
    """Declare (or re-declare) an evaluator's audit and compute its report.

    Args:
        project: the evaluator's project.
        evaluator: the evaluator version audited.
        actor: the acting user; must manage ``project``. None only for a trusted operator
            (``manage.py audit_evaluator``), never from a request.
        human_positive: resolved answer labels counted positive (None: ``inadmissible``).
        evaluator_positive: evaluator labels counted positive (None: ``inadmissible``);
            ignored when ``score_threshold`` is set (the flag is then the positive label).
        score_threshold: for a score-only evaluator, the threshold of its flag.
        flag_when: the flag's inequality, ``score <op> threshold`` (default ``<``: a low
            consistency score flags an error, as HHEM).
        confidence: two-sided level of every interval, in (0, 1); delta = 1 - confidence.

    Returns:
        The report, recomputed.

    Raises:
        PermissionDenied: if ``actor`` does not manage the project.
        NotFound: if the evaluator is not of the project.
        InvalidAudit: on an empty or unknown positive label, a non-finite threshold, an unknown
            inequality or a confidence outside (0, 1).

    Opens its own transaction; ``update_or_create`` on the one-report-per-evaluator key.
    """
    require_role(
        project=project,
        actor=actor,
        roles=MANAGERS,
        action="declare an audit",
        outsider=PermissionDenied,
    )
    if evaluator.project_id != project.pk:
        raise NotFound("no such evaluator in this project")
    if flag_when not in FLAG_OPERATORS:
        raise InvalidAudit("flag_when", f"must be one of {', '.join(FLAG_OPERATORS)}")
    if score_threshold is not None:
        score_threshold = float(score_threshold)
        if not math.isfinite(score_threshold):
            raise InvalidAudit("score_threshold", "must be a finite number")
        ev_positive = [FLAG]
    else:
        ev_positive = _labels(
            DEFAULT_POSITIVE if evaluator_positive is None else evaluator_positive,
            "evaluator_positive",
        )
    policy = project.policies.order_by("-version").first()
    known = set(policy.answer_labels) if policy is not None else set()
    h_positive = _labels(
        DEFAULT_POSITIVE if human_positive is None else human_positive, "human_positive"
    )
    if unknown := sorted(set(h_positive) - known):
        raise InvalidAudit("human_positive", f"not answer labels of the policy: {unknown}")
    if score_threshold is None:
        used = set(
            evaluator.labels.filter(claim__isnull=True, label__isnull=False).values_list(
                "label", flat=True
            )
        )
        if unknown := sorted(set(ev_positive) - known - used):
            raise InvalidAudit(
                "evaluator_positive", f"neither policy labels nor labels it gave: {unknown}"
            )
    try:
        level = Decimal(str(confidence))
    except ArithmeticError as exc:
        raise InvalidAudit("confidence", "must be a number") from exc
    if not (0 < level < 1):
        raise InvalidAudit("confidence", "must lie strictly between 0 and 1")
    report, _ = AuditReport.objects.update_or_create(
        evaluator=evaluator,
        defaults={
            "project": project,
            "human_positive": h_positive,
            "evaluator_positive": ev_positive,
            "score_threshold": score_threshold,
            "flag_when": flag_when,
            "confidence": level,
            "configured_by": actor,
            "input_sha256": "",
        },
    )
    # The audit is computed here; other audits of the project are recomputed in the background.
    derived_mark(project_id=project.pk, kinds=[DerivedKind.AUDIT])
    return audit_report_recompute(report_id=report.pk)


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


def audit_report_recompute(*, report_id: int, background: bool = False) -> AuditReport:
    """Recompute one audit report from the current inputs; no write when they are unchanged.

    ``computed_at`` is when the inputs were read. In the background (``background``: the
    derived recomputation, :func:`audit_reports_refresh`) the inputs are read and the figures
    computed outside any write transaction, then a short one locks the report row and writes
    only if the stored figures are not of inputs read later, and the declaration is the one
    read: otherwise nothing is written and ``SupersededInputs`` is raised (as
    ``agreement_recompute`` and ``reliability_recompute`` do), so a slow run never overwrites a
    newer report and its change marks stay for the next run. A caller that changed the
    declaration or the sample in its own transaction (``audit_report_configure``, the sample
    draw) computes inside it and writes its figures whatever is stored: they are the only
    ones of its uncommitted inputs.

    Args:
        report_id: the report.
        background: the derived recomputation (the guard above); False inside a user's write.

    Raises:
        NotFound: if the report does not exist.
        SupersededInputs: (background only) figures of inputs read later, or of another
            declaration, are stored; nothing was written.
    """
    try:
        report = AuditReport.objects.select_related("evaluator").get(pk=report_id)
    except AuditReport.DoesNotExist as exc:
        raise NotFound("no such audit report") from exc
    read_at = timezone.now()
    rows = audit_rows(evaluator=report.evaluator)
    design = sample_design(report)
    digest = audit_inputs_sha256(report, rows, design)
    if digest == report.input_sha256:
        return report
    result = audit_result_compute(report, rows, design)
    with transaction.atomic():
        stored = audit_report_lock(report_id)
        if stored is None:
            raise NotFound("no such audit report")
        if background:
            if stored.input_sha256 == digest:
                return stored
            if stored.configured_at != report.configured_at or (
                stored.computed_at is not None and stored.computed_at > read_at
            ):
                # A declaration, or figures read after ours, are stored: keep them.
                raise SupersededInputs(f"audit report {report_id}: newer figures stored")
        report.result = result
        report.input_sha256 = digest
        report.computed_at = read_at
        AuditReport.objects.filter(pk=report.pk).update(
            result=result, input_sha256=digest, computed_at=read_at
        )
    logger.info(
        "audit_report_recompute.done",
        extra={"report_id": report.pk, "input_sha256": digest, "n_items": len(rows)},
    )
    return report


def audit_reports_refresh(*, project_id: int) -> list[AuditReport]:
    """Recompute every declared audit of the project (idempotent per report; the background).

    Each report is recomputed with the stale-write guard of :func:`audit_report_recompute`;
    a report whose newer figures are stored is left as it is and the others are still
    recomputed, then ``SupersededInputs`` is raised so that the change marks stay.

    Raises:
        NotFound: if the project does not exist.
        SupersededInputs: a report held figures of inputs read later (the others were written).
    """
    if not Project.objects.filter(pk=project_id).exists():
        raise NotFound("no such project")
    ids = AuditReport.objects.filter(project_id=project_id).values_list("pk", flat=True)
    reports = []
    superseded = []
    for pk in list(ids):
        try:
            reports.append(audit_report_recompute(report_id=pk, background=True))
        except SupersededInputs:
            superseded.append(pk)
        except NotFound:
            continue  # deleted meanwhile (its evaluator was)
    if superseded:
        raise SupersededInputs(f"audit reports {superseded}: newer figures stored")
    return reports


#: Item ids per query of :func:`audit_reads` (below SQLite's bound on parameters).
READS_CHUNK = 500


def audit_reads(project_id: int, item_ids: tuple[int, ...], evaluator_ids: tuple[int, ...]) -> bool:
    """Whether a change of these items or evaluators is an input of a declared audit.

    The derived-results inputs test of the audit kind (``labeling.derived``): called in the
    transaction that resolved, returned or made gold the items, or imported the evaluators'
    labels. An audit reads its evaluator's answer-level labels and the resolutions of the items
    they label (:func:`certification.selectors.audit_rows`). So a change is an input when an
    evaluator has a declared audit, or an item carries an answer-level label of an evaluator
    whose audit is declared. A project without a declared audit marks nothing.

    Queries: one when the project has no declared audit; else one for evaluators, one per
    :data:`READS_CHUNK` items (stopping at the first hit): in the size of the change, never of
    the project.
    """
    declared = AuditReport.objects.filter(project_id=project_id)
    if len(item_ids) > READS_CHUNK and not declared.exists():
        return False  # a large change (a start, an import) of a project without an audit
    if evaluator_ids and declared.filter(evaluator_id__in=evaluator_ids).exists():
        return True
    for at in range(0, len(item_ids), READS_CHUNK):
        if EvaluatorLabel.objects.filter(
            claim__isnull=True,
            candidate__item__pk__in=item_ids[at : at + READS_CHUNK],
            evaluator__audit_report__project_id=project_id,
        ).exists():
            return True
    return False


@transaction.atomic
def audit_target_set(
    *, project: Project, evaluator: Evaluator, actor: Any, target: Decimal | str | float | None
) -> AuditReport:
    """Set (or clear, with None) the audit's target error rate and recompute the report.

    Raises:
        PermissionDenied: if ``actor`` does not manage the project.
        AuditNotConfigured: if the evaluator's audit is not declared.
        InvalidAudit: (field ``anytime_target``) on a target that is not a number in (0, 1).

    Opens its own transaction; writes the report row.
    """
    require_role(
        project=project,
        actor=actor,
        roles=MANAGERS,
        action="set an audit's target",
        outsider=PermissionDenied,
    )
    report = audit_report_get(project=project, evaluator=evaluator)
    value = None
    if target is not None:
        try:
            value = Decimal(str(target))
        except InvalidOperation as exc:
            raise InvalidAudit("anytime_target", "must be a number") from exc
        if not (0 < value < 1):
            raise InvalidAudit("anytime_target", "must lie strictly between 0 and 1")
    AuditReport.objects.filter(pk=report.pk).update(anytime_target=value)
    logger.info("audit_target_set.done", extra={"report_id": report.pk})
    return audit_report_recompute(report_id=report.pk)
