"""Evaluator audits: how far an automated judge agrees with adjudicated people.

``audit_report_configure`` declares an evaluator version's polarity (and, for a score-only
evaluator such as HHEM, the threshold that turns its score into a flag) and computes the report;
``audit_report_recompute`` keeps the stored result equal to the statistics of the current
inputs, idempotently (same input hash, no write); ``audit_reports_refresh`` runs it for every
declared audit of a project as the derived recomputation of the audit kind
(``certification.services.derived``), after a change of its inputs (``audit_reads``: a
resolution of an item an audited evaluator labelled, an audited evaluator's labels).

The statistics are ``certification.stats.audit`` (confusion matrix, accuracy, kappa, sensitivity,
specificity, PPV, NPV, McNemar, slices, disagreements) and
``certification.stats.ppi.estimate_error_rate`` (human-only exact bound, PPI, PPI++, union bound),
computed in :mod:`certification.services.audit_compute`; this module stores the JSON.

Which items are "audited". The error-rate estimates need the audit sample: here every
evaluator-labelled item that has a resolution (resolved, or closed as unresolved). They are
treated as a simple random sample of the evaluator-labelled items (one stratum): true when the
whole workload is labelled, or when items are served in a seeded random order; not when people
labelled a hand-picked subset. The report states this assumption.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.utils import timezone

from certification.exceptions import InvalidAudit
from certification.locks import audit_report_lock
from certification.models import AuditReport, FlagWhen
from certification.selectors import audit_report_get, audit_rows
from certification.services.audit_compute import (
    audit_inputs_sha256,
    audit_result_compute,
    sample_design,
)
from certification.services.audit_design import FLAG, FLAG_OPERATORS
from certification.services.derived import SupersededInputs
from labeling.derived import derived_mark
from labeling.exceptions import NotFound, PermissionDenied
from labeling.models import DerivedKind, Evaluator, EvaluatorLabel, Project
from labeling.permissions import MANAGERS, require_role
from labeling.vocabulary import INADMISSIBLE

logger = logging.getLogger(__name__)

#: Default declaration: FaithBench-style binary verdicts in the policy's answer schema.
DEFAULT_POSITIVE = (INADMISSIBLE,)


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
