"""Certification services (STYLE.md C3): write certification data, calling selectors and stats.

``agreement_recompute`` keeps a project's :class:`~certification.models.AgreementReport` equal to
the agreement statistics of its current votes (issue 3, item 8).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from certification.locks import agreement_report_lock
from certification.models import AgreementReport
from certification.services.derived import SupersededInputs
from certification.stats.agreement import AgreementSummary, Statistic, agreement_summary
from labeling.exceptions import NotFound
from labeling.models import Project
from labeling.selectors import ProjectVotes, project_votes

logger = logging.getLogger(__name__)

# Part of the input hash: bump it when the statistics or the stored JSON change, so that the next
# recomputation rewrites reports computed by older code even when the votes did not change.
AGREEMENT_STATS_VERSION = 2
# Two-sided level of the pairwise kappa intervals.
AGREEMENT_CONFIDENCE = 0.95


def votes_sha256(votes: ProjectVotes) -> str:
    """Return the sha256 of the canonical JSON of ``votes`` (and of the statistics' version).

    Canonical: keys sorted, no whitespace, UTF-8; policy versions ascending, units and raters in
    the selector's deterministic order. Equal votes give an equal hash whatever the order they
    were cast in.
    """
    payload = {
        "stats_version": AGREEMENT_STATS_VERSION,
        "confidence": AGREEMENT_CONFIDENCE,
        "versions": [
            {
                "policy_version": version.policy_version,
                "levels": {
                    matrix.level: {
                        "units": list(matrix.units),
                        "raters": list(matrix.raters),
                        "ratings": [list(row) for row in matrix.ratings],
                    }
                    for matrix in version.levels()
                },
            }
            for version in votes.versions
        ],
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _statistic_json(statistic: Statistic) -> dict[str, Any]:
    return {"value": statistic.value, "reason": statistic.reason}


def level_to_json(summary: AgreementSummary) -> dict[str, Any]:
    """Return one level's stored results as JSON primitives.

    Keys: ``n_units`` (units with a vote), ``n_pairable_units`` (units with 2 or more votes),
    ``n_votes``, ``raters`` (rater ids with a vote, see ``labeling.selectors.votes``),
    ``label_counts`` (votes per value), ``alpha`` / ``fleiss_kappa`` / ``percent_agreement``
    (``{"value": float | null, "reason": str | null}``), ``confidence`` and ``pairs`` (per
    rater pair sharing a unit: ``rater_a``, ``rater_b``, ``n``, ``kappa``, ``se``, ``ci_low``,
    ``ci_high``, ``observed_agreement``, ``reason``, ``interval_reason``). Proportions are in
    [0, 1].
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
            }
            for pair in summary.pairs
        ],
    }


def agreement_recompute(*, project_id: int) -> AgreementReport:
    """Recompute and store the agreement statistics of a project's current votes.

    Reads the votes through ``labeling.selectors.project_votes`` (current revisions of
    submitted annotations and imported prior annotations, per label level and policy version),
    computes alpha, Fleiss' kappa, percent agreement and pairwise Cohen's kappa for the answer
    and claim levels of each policy version apart (votes of two versions are never pooled), and
    upserts the project's one :class:`AgreementReport`: ``versions`` lists every version's
    figures, ``answer``/``claim`` repeat those of the newest version with votes
    (``policy_version``). When the votes' hash equals the
    stored ``input_sha256`` nothing is written (``computed_at`` stays). The result depends only
    on the votes at the time of the call, so running it twice, or two calls in either order,
    leaves the same row.

    A background job, not a user action: there is no actor and no permission check.

    Concurrency: reads and computes outside any write transaction (on SQLite a write
    transaction would stop every submit meanwhile), then opens a short one that locks the
    project's report row (creating it if needed, the unique project key serialising concurrent
    creators). ``computed_at`` is when the votes were read: a run that finds a report computed
    from votes read after its own writes nothing and raises ``SupersededInputs``, so a slow run
    that started on older votes (or on a host whose clock lags) never overwrites a newer report,
    and the caller keeps the change marks it read.

    Args:
        project_id: the project's id.

    Returns:
        The project's report.

    Raises:
        NotFound: no project has this id.
        SupersededInputs: figures of votes read later are stored; nothing was written.
    """
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise NotFound(f"project {project_id} does not exist")
    read_at = timezone.now()
    votes = project_votes(project=project)
    digest = votes_sha256(votes)
    stored = AgreementReport.objects.filter(project=project).first()
    if stored is not None and stored.input_sha256 == digest:
        logger.info("agreement.unchanged", extra={"project_id": project_id, "input_sha256": digest})
        return stored

    versions = [
        {
            "policy_version": version.policy_version,
            **{
                matrix.level: level_to_json(
                    agreement_summary(
                        matrix.ratings, matrix.raters, confidence=AGREEMENT_CONFIDENCE
                    )
                )
                for matrix in version.levels()
            },
        }
        for version in votes.versions
    ]
    newest = versions[-1] if versions else None
    empty = {
        matrix.level: level_to_json(
            agreement_summary(matrix.ratings, matrix.raters, confidence=AGREEMENT_CONFIDENCE)
        )
        for matrix in votes.levels()
    }
    with transaction.atomic():
        report, created = agreement_report_lock(project)
        if not created and report.input_sha256 == digest:
            logger.info(
                "agreement.unchanged", extra={"project_id": project_id, "input_sha256": digest}
            )
            return report
        if not created and report.computed_at > read_at:
            # Figures read after ours are stored (a slow run, or another host's clock): keep them.
            raise SupersededInputs(f"agreement of project {project_id}: newer figures stored")
        report.computed_at = read_at
        report.input_sha256 = digest
        report.policy_version = votes.policy_version
        report.versions = versions
        report.answer = newest["answer"] if newest else empty["answer"]
        report.claim = newest["claim"] if newest else empty["claim"]
        report.full_clean()
        report.save()
    logger.info(
        "agreement.recomputed",
        extra={
            "project_id": project_id,
            "input_sha256": digest,
            "answer_votes": report.answer["n_votes"],
            "claim_votes": report.claim["n_votes"],
        },
    )
    return report
