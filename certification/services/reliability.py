"""Per-person reliability: recompute a project's :class:`~certification.models.ReliabilityReport`.

``result`` holds JSON primitives (docs/reliability.md shows it): every rate is ``{"numerator",
"denominator", "estimate", "lower", "upper"}`` with the exact two-sided Clopper–Pearson interval
at ``confidence`` (null at 0/0); ``people`` per rater (``user:<id>`` or ``prior:<pseudonym>``),
with accuracy against resolutions and on gold items kept apart, dispute and silence figures;
``alpha`` per level with and without the flagged people (no label is dropped from any other
figure); ``dawid_skene`` per level, or ``{"reason": ...}`` when undefined. A person is flagged
``below_threshold`` at a level when the upper bound of their accuracy (against resolutions, or on
gold items) lies below the policy version's qualification threshold.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from certification.locks import reliability_report_lock
from certification.models import ReliabilityReport
from certification.selectors.reliability import (
    ReliabilityInputs,
    gold_matrices,
    reliability_inputs,
)
from certification.services.derived import project_report_store
from certification.stats.agreement import Statistic, krippendorff_alpha_nominal
from certification.stats.intervals import Proportion
from certification.stats.reliability import (
    ASSUMPTIONS,
    DAWID_SKENE_MAX_ITER,
    NEAR_SILENT_MIN_LABELS,
    NEAR_SILENT_RATIO,
    DawidSkeneEstimate,
    DawidSkeneUndefined,
    RaterAccuracy,
    accuracy_against,
    dawid_skene,
    dispute_rates,
    near_silence,
    rate,
)
from labeling.exceptions import NotFound
from labeling.models import Project, ResolutionStatus
from labeling.selectors.votes import LEVELS, VoteMatrix, rater_sort_key

logger = logging.getLogger(__name__)

# Part of the input hash: bump it when the statistics or the stored JSON change.
RELIABILITY_STATS_VERSION = 2
RELIABILITY_CONFIDENCE = 0.95


def _rate_json(value: Proportion) -> dict[str, Any]:
    return {
        "numerator": value.numerator,
        "denominator": value.denominator,
        "estimate": value.value,
        "lower": value.interval.lower if value.interval else None,
        "upper": value.interval.upper if value.interval else None,
    }


def _accuracy_json(result: RaterAccuracy) -> dict[str, Any]:
    kappa = result.kappa
    return {
        "accuracy": _rate_json(result.accuracy),
        "labels": list(result.labels),
        "confusion": [list(row) for row in result.confusion],
        "per_label": {label: _rate_json(r) for label, r in result.per_label},
        "kappa": {
            "value": kappa.kappa,
            "reason": kappa.reason,
            "ci_low": kappa.ci_low,
            "ci_high": kappa.ci_high,
            "interval_reason": kappa.interval_reason,
        },
    }


def _statistic_json(statistic: Statistic) -> dict[str, Any]:
    return {"value": statistic.value, "reason": statistic.reason}


def _estimate_json(estimate: DawidSkeneEstimate | DawidSkeneUndefined) -> dict[str, Any]:
    if isinstance(estimate, DawidSkeneUndefined):
        return {"reason": estimate.reason}
    return {
        "reason": None,
        "labels": list(estimate.labels),
        "priors": list(estimate.priors),
        "iterations": estimate.iterations,
        "change": estimate.change,
        "tol": estimate.tol,
        "max_iter": estimate.max_iter,
        "converged": estimate.converged,
        "confusion": {
            rater: [list(row) for row in matrix]
            for rater, matrix in zip(estimate.raters, estimate.confusion, strict=True)
        },
        "posteriors": {
            str(unit): list(row)
            for unit, row in zip(estimate.units, estimate.posteriors, strict=True)
        },
    }


def reliability_inputs_sha256(inputs: ReliabilityInputs) -> str:
    """Return the sha256 of the canonical JSON of the inputs (and of the statistics' version)."""
    payload = {
        "stats_version": RELIABILITY_STATS_VERSION,
        "confidence": RELIABILITY_CONFIDENCE,
        "threshold": inputs.threshold,
        "policy_version": inputs.votes.policy_version,
        "levels": {
            m.level: [list(m.units), list(m.raters), [list(r) for r in m.ratings]]
            for m in inputs.votes.levels()
        },
        "answer_references": {
            str(k): [v.status, v.label] for k, v in inputs.answer_references.items()
        },
        "claim_references": {
            str(k): [v.status, v.label] for k, v in inputs.claim_references.items()
        },
        "queued": sorted(inputs.queued_items),
        "compared": sorted(inputs.compared_items),
        "gold": {
            level: [list(u), list(r), rows, refs]
            for level, (u, r, rows, refs) in gold_matrices(inputs.gold).items()
        },
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _references(
    matrix: VoteMatrix, inputs: ReliabilityInputs, *, adjudicated_disputes: bool = False
) -> list[str | None]:
    source = inputs.answer_references if matrix.level == "answer" else inputs.claim_references
    refs: list[str | None] = []
    for unit, row in zip(matrix.units, matrix.ratings, strict=True):
        ref = source.get(unit)
        if ref is not None and adjudicated_disputes:
            labels = {v for v in row if v is not None}
            if ref.status != ResolutionStatus.ADJUDICATED or len(labels) < 2:
                ref = None
        refs.append(ref.label if ref else None)
    return refs


def _by_rater(results: Sequence[RaterAccuracy]) -> dict[str, RaterAccuracy]:
    return {r.rater: r for r in results}


def _level_figures(
    matrix: VoteMatrix, gold: tuple[Any, ...], inputs: ReliabilityInputs
) -> dict[str, dict[str, Any]]:
    """Per rater, one level's figures (without flags)."""
    confidence = RELIABILITY_CONFIDENCE
    ratings = [list(row) for row in matrix.ratings]
    resolved = _by_rater(
        accuracy_against(ratings, matrix.raters, _references(matrix, inputs), confidence=confidence)
    )
    sided = _by_rater(
        accuracy_against(
            ratings,
            matrix.raters,
            _references(matrix, inputs, adjudicated_disputes=True),
            confidence=confidence,
        )
    )
    disputed = dispute_rates(ratings, matrix.raters, confidence=confidence)
    silence = {s.rater: s for s in near_silence(ratings, matrix.raters, confidence=confidence)}
    _, gold_raters, gold_rows, gold_refs = gold
    on_gold = _by_rater(accuracy_against(gold_rows, gold_raters, gold_refs, confidence=confidence))
    figures: dict[str, dict[str, Any]] = {}
    counts = {r: 0 for r in matrix.raters}
    for row in matrix.ratings:
        for rater, value in zip(matrix.raters, row, strict=True):
            counts[rater] += value is not None
    for rater in sorted(set(matrix.raters) | set(on_gold), key=rater_sort_key):
        s = silence.get(rater)
        figures[rater] = {
            "n_labels": counts.get(rater, 0),
            "resolutions": _accuracy_json(resolved[rater]) if rater in resolved else None,
            "gold": _accuracy_json(on_gold[rater]) if rater in on_gold else None,
            "disputed": _rate_json(disputed.get(rater, rate(0, 0))),
            "sided_with": _rate_json(sided[rater].accuracy if rater in sided else rate(0, 0)),
            "silence": None
            if s is None
            else {
                "default_label": s.default_label,
                "flags": _rate_json(s.flags),
                "others_rate": s.others_rate,
                "near_silent": s.near_silent,
            },
        }
    return figures


def _below(figure: dict[str, Any] | None, threshold: float) -> bool:
    if figure is None:
        return False
    upper = figure["accuracy"]["upper"]
    return upper is not None and upper < threshold


def _queued(inputs: ReliabilityInputs, rater: str) -> Proportion:
    matrix = inputs.votes.answer
    column = matrix.raters.index(rater) if rater in matrix.raters else None
    if column is None:
        return rate(0, 0)
    items = {u for u, row in zip(matrix.units, matrix.ratings, strict=True) if row[column]}
    compared = items & inputs.compared_items
    return rate(
        len(compared & inputs.queued_items), len(compared), confidence=RELIABILITY_CONFIDENCE
    )


def _alpha_without(matrix: VoteMatrix, left_out: set[str]) -> dict[str, Any]:
    keep = [i for i, r in enumerate(matrix.raters) if r not in left_out]
    rows = [[row[i] for i in keep] for row in matrix.ratings]
    return {
        "all": _statistic_json(krippendorff_alpha_nominal(matrix.ratings)),
        "without_flagged": _statistic_json(krippendorff_alpha_nominal(rows)),
        "left_out": [r for r in matrix.raters if r in left_out],
    }


def reliability_result(inputs: ReliabilityInputs) -> dict[str, Any]:
    """Compute the stored JSON of the module docstring from the inputs (no database access)."""
    gold = gold_matrices(inputs.gold)
    levels = {m.level: _level_figures(m, gold[m.level], inputs) for m in inputs.votes.levels()}
    raters = sorted({r for figures in levels.values() for r in figures}, key=rater_sort_key)
    people: list[dict[str, Any]] = []
    for rater in raters:
        per_level = {level: levels[level].get(rater) for level in LEVELS}
        below = [
            level
            for level, f in per_level.items()
            if f is not None
            and (_below(f["resolutions"], inputs.threshold) or _below(f["gold"], inputs.threshold))
        ]
        silent = [
            level
            for level, f in per_level.items()
            if f is not None and f["silence"] is not None and f["silence"]["near_silent"]
        ]
        people.append(
            {
                "rater": rater,
                "queued": _rate_json(_queued(inputs, rater)),
                "flags": {"below_threshold": below, "near_silent": silent},
                "levels": per_level,
            }
        )
    flagged = {
        p["rater"] for p in people if p["flags"]["below_threshold"] or p["flags"]["near_silent"]
    }
    return {
        "policy_version": inputs.votes.policy_version,
        "confidence": RELIABILITY_CONFIDENCE,
        "threshold": inputs.threshold,
        "near_silent_rule": {"ratio": NEAR_SILENT_RATIO, "min_labels": NEAR_SILENT_MIN_LABELS},
        "people": people,
        "alpha": {m.level: _alpha_without(m, flagged) for m in inputs.votes.levels()},
        "dawid_skene": {
            m.level: _estimate_json(
                dawid_skene(
                    [list(r) for r in m.ratings], m.raters, m.units, max_iter=DAWID_SKENE_MAX_ITER
                )
            )
            for m in inputs.votes.levels()
        },
        "assumptions": list(ASSUMPTIONS),
    }


def reliability_recompute(*, project_id: int) -> ReliabilityReport:
    """Recompute and store the per-person reliability figures of a project.

    Reads the inputs through :func:`certification.selectors.reliability.reliability_inputs`
    (votes of the newest policy version with votes, current resolutions, disagreement history,
    gold references and gold work) and upserts the project's one :class:`ReliabilityReport`.
    When the inputs' hash equals the stored ``input_sha256`` nothing is written. The result
    depends only on the inputs at the time of the call (idempotent).

    A background job, not a user action: there is no actor and no permission check.

    Concurrency: as ``agreement_recompute``: reads and computes outside any write
    transaction, then locks the report row in a short one; ``computed_at`` is when the inputs
    were read, and a report computed from inputs read later is never overwritten (raises
    ``SupersededInputs``).

    Raises:
        NotFound: no project has this id.
        SupersededInputs: figures of inputs read later are stored; nothing was written.
    """
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound(f"project {project_id} does not exist")
    read_at = timezone.now()
    inputs = reliability_inputs(project=project)
    return project_report_store(
        name="reliability",
        model=ReliabilityReport,
        project=project,
        lock=reliability_report_lock,
        digest=reliability_inputs_sha256(inputs),
        read_at=read_at,
        compute=lambda: {
            "result": reliability_result(inputs),
            "policy_version": inputs.votes.policy_version,
        },
        describe=lambda r: {"people": len(r.result["people"])},
    )
