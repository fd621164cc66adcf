"""Audit samples: a seeded stratified random sample of evaluator-labelled items.

``audit_sample_draw`` stratifies the evaluator's labelled items by verdict (positive, negative,
unavailable under the audit's declared polarity) and, optionally, one slice dimension; it
allocates the sample size proportionally (largest remainders, at least one item per stratum
while the size allows), draws each stratum's items with ``numpy.random.default_rng(seed)``
without replacement, and records the seed, the design (N_h, n_h, n_h / N_h) and each member's
inclusion probability. The sampled items still open are moved to the front of the labelling
queue (``labeling.services.items_prioritise``): they are then labelled blind and N-way and
adjudicated like any other item. The audit's error-rate estimates use the latest sample's
design (``certification.services.audit``).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Any

from django.db import transaction

from certification.exceptions import InvalidAudit
from certification.models import AuditReport, AuditSample, AuditSampleMember
from certification.selectors import AuditRow, audit_report_get, audit_rows
from certification.services.audit import (
    SLICE_DIMENSIONS,
    audit_report_recompute,
    declaration_json,
    evaluator_verdict,
)
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


@transaction.atomic
def audit_sample_draw(
    *,
    project: Project,
    evaluator: Evaluator,
    actor: Any,
    size: int,
    seed: int,
    slice_dimension: str = "",
) -> AuditSample:
    """Draw and record a seeded stratified sample of the evaluator's labelled items.

    Args:
        project: the evaluator's project.
        evaluator: the audited evaluator version (its audit must be declared: the verdict
            strata need its polarity).
        actor: the acting user, a manager of ``project`` (None only for a trusted operator).
        size: the number of items to sample, 1 <= size <= the evaluator's labelled items.
        seed: the seed of ``numpy.random.default_rng``; the same inputs and seed draw the
            same items.
        slice_dimension: ``""`` (verdict only) or one of ``domain``, ``question_type``,
            ``generator``.

    Returns:
        The recorded sample; its open items are served first, and the audit is recomputed
        with the sample's design.

    Raises:
        PermissionDenied: if ``actor`` does not manage the project.
        AuditNotConfigured: if the evaluator's audit is not declared.
        InvalidAudit: on a size or seed out of range or an unknown slice dimension.

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
    sample = AuditSample.objects.create(
        project=project,
        evaluator=evaluator,
        size=int(size),
        seed=int(seed),
        slice_dimension=slice_dimension,
        declaration=declaration_json(report),
        design=design,
        population={str(pk): key for key, ids in strata.items() for pk in ids},
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
        extra={"sample_id": sample.pk, "size": sample.size, "strata": len(design)},
    )
    return sample
