"""Agreement selectors: a project's stored agreement report, shaped for pages and the API."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model

from certification.models import (
    AgreementReport,
)
from labeling.models import (
    Project,
)
from labeling.permissions import can_manage, project_role
from labeling.selectors.votes import rater_sort_key

LEVEL_TITLES = {"answer": "Answer labels", "claim": "Claim labels"}


@dataclass(frozen=True)
class StatisticView:
    """A statistic that may be undefined: ``value`` or ``reason`` (never both)."""

    value: float | None
    reason: str | None


@dataclass(frozen=True)
class PairView:
    """Cohen's kappa of one rater pair over the ``n`` units both rated."""

    rater_a: str
    rater_b: str
    n: int
    kappa: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    observed_agreement: float | None
    reason: str | None
    interval_reason: str | None
    se0: float | None
    z: float | None
    p_value: float | None


@dataclass(frozen=True)
class LevelView:
    """One label level's agreement figures (``certification.services.agreement.level_to_json``)."""

    level: str
    title: str
    n_units: int
    n_pairable_units: int
    n_votes: int
    n_raters: int
    label_counts: tuple[tuple[str, int], ...]
    alpha: StatisticView
    fleiss_kappa: StatisticView
    percent_agreement: StatisticView
    confidence: float
    pairs: tuple[PairView, ...]
    pairs_reason: str | None = None
    scale: str = "nominal"


@dataclass(frozen=True)
class VersionAgreementView:
    """The agreement figures of the votes made under one label policy version."""

    policy_version: int
    levels: tuple[LevelView, ...]


@dataclass(frozen=True)
class AgreementView:
    """A project's stored agreement report, ready to render or serialise.

    ``computed_at`` is aware. ``identities_shown`` is True when rater names are real (a manager
    reads); otherwise raters are "Rater 1", "Rater 2", ... numbered in one order across both
    levels. ``levels`` are the answer then claim level of ``policy_version``, the newest version
    with votes; ``versions`` hold every version's figures apart, oldest first (never pooled).
    """

    computed_at: datetime
    input_sha256: str
    identities_shown: bool
    levels: tuple[LevelView, ...]
    policy_version: int | None = None
    versions: tuple[VersionAgreementView, ...] = ()


def rater_display_names(raters: Iterable[str]) -> dict[str, str]:
    """Return each rater id's display name: the username, or the pseudonym + " (imported)".

    Names identify people: the caller shows them to managers only. One query (the usernames).
    """
    raters = list(raters)
    user_ids = [int(r.split(":", 1)[1]) for r in raters if rater_sort_key(r)[0] == 1]
    usernames = dict(get_user_model().objects.filter(pk__in=user_ids).values_list("pk", "username"))
    names = {}
    for rater in raters:
        name = rater.partition(":")[2]
        if rater_sort_key(rater)[0] == 1:
            names[rater] = usernames.get(int(name), f"deleted user {name}")
        else:
            names[rater] = f"{name} (imported)"
    return names


def _rater_names(report: AgreementReport, *, identities: bool) -> dict[str, str]:
    levels = [report.answer, report.claim]
    levels += [v.get(name, {}) for v in report.versions for name in ("answer", "claim")]
    raters = sorted({r for level in levels for r in level.get("raters", [])}, key=rater_sort_key)
    if not identities:
        return {rater: f"Rater {i}" for i, rater in enumerate(raters, start=1)}
    return rater_display_names(raters)


def _statistic(data: dict[str, Any] | None) -> StatisticView:
    data = data or {"value": None, "reason": "not computed"}
    return StatisticView(value=data["value"], reason=data["reason"])


def _level(level: str, data: dict[str, Any], names: dict[str, str]) -> LevelView:
    return LevelView(
        level=level,
        title=LEVEL_TITLES.get(level, level),
        n_units=data.get("n_units", 0),
        n_pairable_units=data.get("n_pairable_units", 0),
        n_votes=data.get("n_votes", 0),
        n_raters=len(data.get("raters", [])),
        label_counts=tuple(sorted(data.get("label_counts", {}).items())),
        alpha=_statistic(data.get("alpha")),
        fleiss_kappa=_statistic(data.get("fleiss_kappa")),
        percent_agreement=_statistic(data.get("percent_agreement")),
        confidence=data.get("confidence", 0.95),
        pairs=tuple(
            PairView(
                rater_a=names.get(pair["rater_a"], pair["rater_a"]),
                rater_b=names.get(pair["rater_b"], pair["rater_b"]),
                n=pair["n"],
                kappa=pair["kappa"],
                se=pair["se"],
                ci_low=pair["ci_low"],
                ci_high=pair["ci_high"],
                observed_agreement=pair["observed_agreement"],
                reason=pair["reason"],
                # Results stored before the flag existed carry no such key.
                interval_reason=pair.get("interval_reason"),
                se0=pair.get("se0"),
                z=pair.get("z"),
                p_value=pair.get("p_value"),
            )
            for pair in data.get("pairs", [])
        ),
        pairs_reason=data.get("pairs_reason"),
        scale=data.get("scale", "nominal"),
    )


def agreement_report_get(*, project: Project, actor: Any = None) -> AgreementView | None:
    """Return the project's agreement report for display, or None before the first computation.

    Rater identities (usernames, imported pseudonyms) are shown only when ``actor`` is a
    manager of the project (``labeling.permissions``: members with the manager role, staff
    non-members); for anyone else, and when ``actor`` is omitted, raters are "Rater 1..N".
    The caller decides who may see the figures at all.

    Queries: one for the report, one for the usernames when identities are shown, plus the
    role lookup when ``project`` carries no ``member_role`` annotation. ``project`` is already
    scoped to the actor by the caller.
    """
    report = AgreementReport.objects.filter(project=project).first()
    if report is None:
        return None
    identities = actor is not None and can_manage(project_role(user=actor, project=project))
    names = _rater_names(report, identities=identities)
    return AgreementView(
        computed_at=report.computed_at,
        input_sha256=report.input_sha256,
        identities_shown=identities,
        levels=(_level("answer", report.answer, names), _level("claim", report.claim, names)),
        policy_version=report.policy_version,
        versions=tuple(
            VersionAgreementView(
                policy_version=v["policy_version"],
                levels=(
                    _level("answer", v.get("answer", {}), names),
                    _level("claim", v.get("claim", {}), names),
                ),
            )
            for v in report.versions
        ),
    )
