"""The agreement report: a project's agreement statistics, kept equal to its current votes.

``agreement_recompute`` folds the vote changes since its last run into the project's vote tally
and stores the statistics computed from the counts and the label sets' declared scales;
``votes_sha256`` is the hash of the full count (and the scales), the check that the incremental
count is right.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

from django.utils import timezone

from certification.locks import agreement_report_lock
from certification.models import AgreementReport
from certification.services.derived import project_report_store
from certification.stats.agreement import (
    AgreementSummary,
    LabelScale,
    LevelCounts,
    Statistic,
    agreement_summary_from_counts,
)
from certification.stats.agreement.counts import ScaleKind
from labeling.exceptions import NotFound
from labeling.models import LabelPolicy, Project
from labeling.selectors import ProjectVotes
from labeling.selectors.votes import ANSWER_LEVEL, CLAIM_LEVEL, LEVELS
from labeling.services.vote_tally import vote_tally_fold
from labeling.tally import Tally, rater_sort_key, total, unit_tally

logger = logging.getLogger(__name__)

# Part of the input hash: bump it when the statistics or the stored JSON change, so that the next
# recomputation rewrites reports computed by older code even when the votes did not change.
AGREEMENT_STATS_VERSION = 5
# Two-sided level of the pairwise kappa intervals.
AGREEMENT_CONFIDENCE = 0.95


Scales = dict[tuple[int, str], LabelScale]


def _tally_sha256(tally: Tally, scales: Scales) -> str:
    return tally.sha256(
        stats_version=AGREEMENT_STATS_VERSION,
        confidence=AGREEMENT_CONFIDENCE,
        scales=sorted(
            [version, level, scale.kind, list(scale.order)]
            for (version, level), scale in scales.items()
        ),
    )


def votes_sha256(votes: ProjectVotes) -> str:
    """Return the input hash of the agreement figures of ``votes``, counted in full.

    The sha256 of the canonical JSON of the votes' tally (``labeling.tally``: the counts every
    figure is a function of), of the declared scale of each policy version's label sets (an
    ordinal scale with its order: a scale changed over the same votes changes alpha) and of the
    statistics' version. Equal counts give an equal hash whatever the order the votes were cast
    in. A report kept current vote by vote stores the hash of its folded tally: the two are
    equal exactly when the incremental count equals the full one.
    """
    tallies = (
        unit_tally(version.policy_version, matrix.level, _unit_votes(matrix.raters, row))
        for version in votes.versions
        for matrix in version.levels()
        for row in matrix.ratings
    )
    return _tally_sha256(total(tallies), _policy_scales(votes.project_id))


def _unit_votes(raters: Sequence[str], row: Sequence[str | None]) -> dict[str, str]:
    return {r: v for r, v in zip(raters, row, strict=True) if v is not None}


def level_counts(tally: Tally, version: int, level: str) -> LevelCounts:
    """The :class:`LevelCounts` of one policy version and label level of a project's tally."""
    votes: dict[Any, int] = {}
    raters: dict[str, int] = {}
    units: dict[int, int] = {}
    pairable: dict[int, dict[Any, int]] = {}
    agreeing: dict[int, int] = {}
    pairs: dict[tuple[str, str], dict[tuple[Any, Any], int]] = {}
    coincident: dict[int, dict[tuple[Any, Any], int]] = {}
    for key, count in tally.items():
        if not count or key[1] != version or key[2] != level:
            continue
        name, rest = key[0], key[3:]
        if name == "votes":
            votes[rest[0]] = count
        elif name == "rater":
            raters[rest[0]] = count
        elif name == "units":
            units[rest[0]] = count
        elif name == "pairable":
            pairable.setdefault(rest[0], {})[rest[1]] = count
        elif name == "agreeing":
            agreeing[rest[0]] = count
        elif name == "pair":
            pairs.setdefault((rest[0], rest[1]), {})[(rest[2], rest[3])] = count
        elif name == "coincident":
            coincident.setdefault(rest[0], {})[(rest[1], rest[2])] = count
    return LevelCounts(
        raters=tuple(sorted(raters, key=rater_sort_key)),
        votes=votes,
        units=units,
        pairable=pairable,
        agreeing=agreeing,
        pairs=pairs,
        coincident=coincident,
    )


def _policy_scales(project_id: int) -> Scales:
    """Per (policy version, level), the declared scale of the label set (ordinal: its order)."""
    scales = {}
    for policy in LabelPolicy.objects.filter(project_id=project_id).only(
        "version", "answer_labels", "claim_labels", "answer_scale", "claim_scale"
    ):
        for level, kind, labels in (
            (ANSWER_LEVEL, policy.answer_scale, policy.answer_labels),
            (CLAIM_LEVEL, policy.claim_scale, policy.claim_labels),
        ):
            order = tuple(labels) if kind == "ordinal" else ()
            scales[(policy.version, level)] = LabelScale(cast(ScaleKind, kind), order)
    return scales


def _statistic_json(statistic: Statistic) -> dict[str, Any]:
    return {"value": statistic.value, "reason": statistic.reason}


def level_to_json(summary: AgreementSummary) -> dict[str, Any]:
    """Return one level's stored results as JSON primitives.

    Keys: ``n_units`` (units with a vote), ``n_pairable_units`` (units with 2 or more votes),
    ``n_votes``, ``raters`` (rater ids with a vote, see ``labeling.selectors.votes``),
    ``label_counts`` (votes per value), ``alpha`` / ``fleiss_kappa`` / ``percent_agreement``
    (``{"value": float | null, "reason": str | null}``), ``confidence``, ``pairs`` (per
    rater pair sharing a unit: ``rater_a``, ``rater_b``, ``n``, ``kappa``, ``se``, ``ci_low``,
    ``ci_high``, ``observed_agreement``, ``reason``, ``interval_reason``, and the test of
    kappa = 0: ``se0`` its null standard error, ``z``, ``p_value`` two-sided),
    ``pairs_reason`` (why there is no pair, or null) and ``scale`` (the labels' declared
    level of measurement, whose metric ``alpha`` uses). Proportions are in [0, 1].
    """
    return {
        "n_units": summary.n_units,
        "n_pairable_units": summary.n_pairable_units,
        "n_votes": summary.n_ratings,
        "raters": list(summary.raters),
        "label_counts": {str(label): count for label, count in summary.category_counts},
        "alpha": _statistic_json(summary.alpha),
        "fleiss_kappa": _statistic_json(summary.fleiss_kappa),
        "percent_agreement": _statistic_json(summary.percent_agreement),
        "confidence": summary.confidence,
        "pairs": [
            {
                "rater_a": pair.rater_a,
                "rater_b": pair.rater_b,
                "n": pair.result.n,
                "kappa": pair.result.kappa,
                "se": pair.result.se,
                "ci_low": pair.result.ci_low,
                "ci_high": pair.result.ci_high,
                "observed_agreement": pair.result.observed_agreement,
                "reason": pair.result.reason,
                "interval_reason": pair.result.interval_reason,
                "se0": pair.result.se0,
                "z": pair.result.z,
                "p_value": pair.result.p_value,
            }
            for pair in summary.pairs
        ],
        "pairs_reason": summary.pairs_reason,
        "scale": summary.scale,
    }


def agreement_recompute(*, project_id: int) -> AgreementReport:
    """Fold the project's vote changes into its tally and store the agreement statistics.

    The project's vote tally (``labeling.services.vote_tally``) is kept current by every write
    that changes a vote; this folds the changes since the last call (a cost of the changes, not
    of the project) and computes alpha, Fleiss' kappa, percent agreement and pairwise Cohen's
    kappa from the counts, for the answer and claim levels of each policy version apart (votes
    of two versions are never pooled). It upserts the project's one :class:`AgreementReport`:
    ``versions`` lists every version's figures, ``answer``/``claim`` repeat those of the newest
    version with votes (``policy_version``); alpha takes the metric of each label set's
    declared scale, part of the input hash. Votes are the current revisions of submitted
    annotations and the imported prior annotations (``labeling.selectors.vote_rows``). When the
    tally's hash equals the stored ``input_sha256`` nothing is written (``computed_at`` stays);
    the hash equals :func:`votes_sha256` of the votes counted in full. The result depends only
    on the votes at the time of the call, so running it twice, or two calls in either order,
    leaves the same row.

    A background job, not a user action: there is no actor and no permission check.

    Concurrency: the fold is one short transaction; the statistics are computed outside any
    write transaction, then a short one locks the project's report row (creating it if needed,
    the unique project key serialising concurrent creators). ``computed_at`` is when the run
    started, before its fold: a run that finds a report computed from votes read after its own
    writes nothing and raises ``SupersededInputs``, so a slow run never overwrites a newer
    report, and the caller keeps the change marks it read.

    Raises:
        NotFound: no project has this id.
        SupersededInputs: figures of votes read later are stored; nothing was written.
    """
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound(f"project {project_id} does not exist")
    read_at = timezone.now()
    tally = vote_tally_fold(project=project)
    scales = _policy_scales(project.pk)
    digest = _tally_sha256(tally, scales)

    def summary(version: int | None, level: str) -> dict[str, Any]:
        counts = (
            level_counts(tally, version, level)
            if version is not None
            else LevelCounts(raters=(), votes={}, units={})
        )
        return level_to_json(
            agreement_summary_from_counts(
                counts,
                confidence=AGREEMENT_CONFIDENCE,
                scale=None if version is None else scales.get((version, level)),
            )
        )

    def figures() -> dict[str, Any]:
        numbers = tally.versions()
        versions = [
            {"policy_version": v, **{level: summary(v, level) for level in LEVELS}} for v in numbers
        ]
        # the newest version's figures, computed once (empty levels when there is no vote)
        current = versions[-1] if versions else {level: summary(None, level) for level in LEVELS}
        return {
            "policy_version": numbers[-1] if numbers else None,
            "versions": versions,
            "answer": current[ANSWER_LEVEL],
            "claim": current[CLAIM_LEVEL],
        }

    report = project_report_store(
        name="agreement",
        model=AgreementReport,
        project=project,
        lock=agreement_report_lock,
        digest=digest,
        read_at=read_at,
        compute=figures,
        describe=lambda r: {"answer_votes": r.answer["n_votes"], "claim_votes": r.claim["n_votes"]},
    )
    return report
