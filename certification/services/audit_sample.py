"""Audit samples: a seeded random sample of evaluator-labelled items, stratified or active.

``audit_sample_draw`` draws one of two designs. The stratified one (the default) stratifies the
evaluator's labelled items by verdict (positive, negative, unavailable under the audit's declared
polarity) and, optionally, one slice dimension; it allocates the sample size proportionally (largest
remainders, at least one item per stratum while the size allows), draws each stratum's items with
``numpy.random.default_rng(seed)`` without replacement, and records the seed, the design (N_h, n_h,
n_h / N_h) and each member's inclusion probability. The sampled items still open are moved to the
front of the labelling queue (``labeling.services.items_prioritise``): they are then labelled blind
and N-way and adjudicated like any other item. The audit's error-rate estimates use the latest
sample's design (``certification.services.audit``).

The active one (Zrnic and Candès 2024, "Active Statistical Inference", arXiv:2403.03208) needs
the evaluator's prediction on every item: it includes each item independently with probability
pi_i growing with the evaluator's uncertainty (``certification.stats.ppi.active``), the pi_i
summing to the manager's budget, and records every item's pi_i and prediction when it draws, so
the estimate never recomputes them from labels imported later.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Any

from django.db import transaction

from certification.exceptions import InvalidAudit
from certification.models import AuditReport, AuditSample, AuditSampleMember, SampleKind
from certification.selectors import AuditRow, audit_report_get, audit_rows
from certification.services.audit import audit_report_recompute
from certification.services.audit_compute import (
    SLICE_DIMENSIONS,
    declaration_json,
    judge_prediction,
)
from certification.services.audit_design import evaluator_verdict
from labeling.derived import derived_mark
from labeling.exceptions import PermissionDenied
from labeling.models import DerivedKind, Evaluator, Project
from labeling.permissions import MANAGERS, require_role
from labeling.services import items_prioritise

logger = logging.getLogger(__name__)


# The largest seed the database stores (a signed 64-bit integer).
MAX_SEED = 2**63 - 1


def verdict_class(report: AuditReport, row: AuditRow) -> str:
    """Return ``positive``, ``negative`` or ``unavailable``: the evaluator's verdict stratum."""
    verdict = evaluator_verdict(report, row)
    if verdict is None:
        return "unavailable"
    return "positive" if verdict in report.evaluator_positive else "negative"


def stratum_of(report: AuditReport, row: AuditRow, slice_dimension: str) -> str:
    """Return the row's stratum key, ``verdict`` or ``verdict|slice value``."""
    verdict = verdict_class(report, row)
    if not slice_dimension:
        return verdict
    return f"{verdict}|{getattr(row, slice_dimension) or '(none)'}"


def allocate(population: dict[str, int], size: int) -> dict[str, int]:
    """Split ``size`` over strata proportionally to their populations (largest remainders).

    Every stratum gets at least one item while ``size`` allows (so each stratum's error rate
    can be estimated), and never more than its population. Deterministic: ties go to the
    stratum key first in sorted order.
    """
    keys = sorted(population)
    total = sum(population.values())
    share = {k: size * population[k] / total for k in keys}
    counts = {k: min(int(math.floor(share[k])), population[k]) for k in keys}
    order = sorted(keys, key=lambda k: (-(share[k] - math.floor(share[k])), k))
    left = size - sum(counts.values())
    while left > 0:
        for k in order:
            if left and counts[k] < population[k]:
                counts[k] += 1
                left -= 1
    if size >= len(keys):
        # one item from every stratum: take it from the stratum with the most
        for k in keys:
            if counts[k] == 0:
                donor = max(keys, key=lambda j: (counts[j], j))
                counts[donor] -= 1
                counts[k] = 1
    return {k: v for k, v in counts.items() if v > 0}


#: The floor share of the active design when the manager gives none (see the stats module).
ACTIVE_DEFAULT_FLOOR = 0.2


def _active_draw(
    report: AuditReport, rows: list[AuditRow], budget: int, seed: int, floor: float
) -> tuple[dict[str, Any], dict[str, list[float]], list[tuple[int, str, float]]]:
    """Draw the active design: (design JSON, population item -> [pi, prediction], members).

    Raises:
        InvalidAudit: (field ``kind``) if an item has no usable prediction; (field ``size``)
            if the draw selected no item (each item is drawn on its own, so a small budget can
            draw none).
    """
    import numpy as np

    from certification.stats.ppi import active_inclusion_probabilities, judge_uncertainty

    predictions = []
    for row in rows:
        prediction, problem = judge_prediction(report, row)
        if prediction is None:
            raise InvalidAudit(
                "kind",
                f"the active design needs a prediction on every item: item {row.item} {problem}",
            )
        predictions.append(prediction)
    pi = active_inclusion_probabilities(judge_uncertainty(predictions), budget=budget, floor=floor)
    drawn = np.random.default_rng(seed).random(len(rows)) < pi
    if not drawn.any():
        raise InvalidAudit(
            "size",
            f"the active draw with seed {seed} selected no item (expected {pi.sum():.1f} of "
            f"{len(rows)}): raise the budget or draw with another seed",
        )
    design = {
        "budget": budget,
        "floor": floor,
        "expected_size": float(pi.sum()),
        "drawn": int(drawn.sum()),
        "min_probability": float(pi.min()),
        "max_probability": float(pi.max()),
        "uncertainty": (
            "sqrt(p(1 - p)) of the evaluator's predicted error probability p"
            if report.uses_score
            else "constant: the evaluator gives verdicts only, so the design is uniform"
        ),
    }
    population = {
        str(row.item_id): [float(p), float(f)]
        for row, p, f in zip(rows, pi, predictions, strict=True)
    }
    members = [
        (row.item_id, SampleKind.ACTIVE.value, float(p))
        for row, p, d in zip(rows, pi, drawn, strict=True)
        if d
    ]
    return design, population, members


@transaction.atomic
def audit_sample_draw(
    *,
    project: Project,
    evaluator: Evaluator,
    actor: Any,
    size: int,
    seed: int,
    slice_dimension: str = "",
    kind: str = SampleKind.STRATIFIED,
    floor: float | None = None,
) -> AuditSample:
    """Draw and record a seeded sample of the evaluator's labelled items, stratified or active.

    Args:
        project: the evaluator's project.
        evaluator: the audited evaluator version (its audit must be declared: the verdict
            strata need its polarity).
        actor: the acting user, a manager of ``project`` (None only for a trusted operator).
        size: the number of items to sample, 1 <= size <= the evaluator's labelled items; for
            an active sample the budget, the expected number of items (the drawn number varies).
        seed: the seed of ``numpy.random.default_rng``; the same inputs and seed draw the
            same items.
        slice_dimension: ``""`` (verdict only) or one of ``domain``, ``question_type``,
            ``generator`` (stratified samples only).
        kind: ``stratified`` or ``active`` (:class:`~certification.models.SampleKind`). An
            active sample needs the evaluator's prediction on every item: its score (in [0, 1],
            read under the audit's flag inequality) for a thresholded audit, else its verdict.
        floor: (active only) tau in (0, 1]: each item's probability is at least tau times the
            uniform rate size / N; None for 0.2.

    Returns:
        The recorded sample; its open items are served first, and the audit is recomputed
        with the sample's design.

    Raises:
        PermissionDenied: if ``actor`` does not manage the project.
        AuditNotConfigured: if the evaluator's audit is not declared.
        InvalidAudit: on a size or seed out of range, an unknown slice dimension or kind, a
            floor outside (0, 1] or given to a stratified sample, a slice dimension given to an
            active sample, or an item without a usable prediction for an active sample.

    Opens its own transaction; locks the Project row (through ``items_prioritise``).
    """
    require_role(
        project=project,
        actor=actor,
        roles=MANAGERS,
        action="draw an audit sample",
        outsider=PermissionDenied,
    )
    report = audit_report_get(project=project, evaluator=evaluator)
    if slice_dimension and slice_dimension not in SLICE_DIMENSIONS:
        raise InvalidAudit("slice_dimension", f"must be one of {', '.join(SLICE_DIMENSIONS)}")
    rows = audit_rows(evaluator=evaluator)
    if isinstance(size, bool) or not (1 <= int(size) <= len(rows)):
        raise InvalidAudit("size", f"must lie between 1 and {len(rows)} (the labelled items)")
    if isinstance(seed, bool) or not (0 <= int(seed) <= MAX_SEED):
        raise InvalidAudit("seed", f"must lie between 0 and {MAX_SEED} (stored as a 64-bit int)")
    if kind not in SampleKind.values:
        raise InvalidAudit("kind", f"must be one of {', '.join(SampleKind.values)}")
    if kind == SampleKind.ACTIVE:
        if slice_dimension:
            raise InvalidAudit("slice_dimension", "applies to stratified samples only")
        floor = ACTIVE_DEFAULT_FLOOR if floor is None else floor
        if isinstance(floor, bool) or not (0 < float(floor) <= 1):
            raise InvalidAudit("floor", "must lie in (0, 1]")
        design, population, members = _active_draw(report, rows, int(size), int(seed), float(floor))
        return _sample_record(
            project=project,
            evaluator=evaluator,
            report=report,
            actor=actor,
            kind=SampleKind.ACTIVE,
            size=len(members),
            seed=int(seed),
            slice_dimension="",
            design=design,
            population=population,
            chosen=members,
        )
    if floor is not None:
        raise InvalidAudit("floor", "applies to active samples only")
    strata: dict[str, list[int]] = defaultdict(list)
    for row in rows:  # ordered by item id: the draw depends only on the seed
        strata[stratum_of(report, row, slice_dimension)].append(row.item_id)
    allocation = allocate({k: len(v) for k, v in strata.items()}, int(size))
    # NumPy loads with the first draw, not with the web process that imports this module.
    import numpy as np

    rng = np.random.default_rng(int(seed))
    chosen: list[tuple[int, str, float]] = []
    design = {}
    for key in sorted(strata):
        n_h, big_n = allocation.get(key, 0), len(strata[key])
        design[key] = {"population": big_n, "sampled": n_h, "inclusion_probability": n_h / big_n}
        if n_h:
            picks = rng.choice(big_n, size=n_h, replace=False)
            chosen += [(strata[key][int(i)], key, n_h / big_n) for i in sorted(picks)]
    return _sample_record(
        project=project,
        evaluator=evaluator,
        report=report,
        actor=actor,
        kind=SampleKind.STRATIFIED,
        size=int(size),
        seed=int(seed),
        slice_dimension=slice_dimension,
        design=design,
        population={str(pk): key for key, ids in strata.items() for pk in ids},
        chosen=chosen,
    )


def _sample_record(
    *,
    project: Project,
    evaluator: Evaluator,
    report: AuditReport,
    actor: Any,
    kind: str,
    size: int,
    seed: int,
    slice_dimension: str,
    design: dict[str, Any],
    population: dict[str, Any],
    chosen: list[tuple[int, str, float]],
) -> AuditSample:
    """Save the sample and its members, serve them first, recompute the audit.

    Runs inside :func:`audit_sample_draw`'s transaction.
    """
    sample = AuditSample.objects.create(
        project=project,
        evaluator=evaluator,
        kind=kind,
        size=size,
        seed=seed,
        slice_dimension=slice_dimension,
        declaration=declaration_json(report),
        design=design,
        population=population,
        created_by=actor,
    )
    AuditSampleMember.objects.bulk_create(
        AuditSampleMember(sample=sample, item_id=pk, stratum=key, inclusion_probability=p)
        for pk, key, p in chosen
    )
    items_prioritise(project=project, item_ids=[pk for pk, _, _ in chosen])
    audit_report_recompute(report_id=report.pk)
    # The sample is an input of the audit: a background recomputation that read before this
    # commit (without the sample) and wrote after it is so followed by one that reads it.
    derived_mark(project_id=project.pk, kinds=[DerivedKind.AUDIT])
    logger.info(
        "audit_sample_draw.done",
        extra={"sample_id": sample.pk, "kind": kind, "size": sample.size},
    )
    return sample
