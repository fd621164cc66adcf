"""Audit selectors: evaluators, their audit reports and samples, and the rows an audit reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from certification.exceptions import (
    AuditNotConfigured,
    EvaluatorNotFound,
)
from certification.models import (
    AuditReport,
    AuditSample,
)
from labeling.models import (
    Evaluator,
    EvaluatorLabel,
    Item,
    ItemStatus,
    Project,
    ResolutionStatus,
)
from labeling.permissions import can_see_labels


@dataclass(frozen=True)
class AuditRow:
    """One evaluator-labelled item, aligned with its resolved human answer label.

    ``human_label`` is None when the item has no resolution or its resolution is "unresolved";
    ``resolved`` says whether a resolution exists (the item was labelled and adjudicated).
    Evaluator ``label``/``score`` are None when the evaluator was unavailable.
    """

    item_id: int
    item: str
    available: bool
    label: str | None
    score: float | None
    resolved: bool
    human_label: str | None
    rationale: str
    domain: str | None
    question_type: str | None
    generator: str | None


def evaluator_get(*, project: Project, evaluator_id: int) -> Evaluator:
    """Return the project's evaluator ``evaluator_id``.

    Raises:
        EvaluatorNotFound: if the id is not an evaluator of ``project``.
    """
    try:
        return Evaluator.objects.get(project=project, pk=evaluator_id)
    except Evaluator.DoesNotExist as exc:
        raise EvaluatorNotFound("no such evaluator in this project") from exc


def evaluator_get_by_spec(*, project: Project, spec: str) -> Evaluator:
    """Return the project's evaluator named ``NAME@VERSION``.

    Raises:
        EvaluatorNotFound: if there is none.
    """
    name, _, version = spec.rpartition("@")
    try:
        return Evaluator.objects.get(project=project, name=name, version=version)
    except Evaluator.DoesNotExist as exc:
        raise EvaluatorNotFound(f"no evaluator {spec!r} in this project") from exc


def evaluator_audit_list(*, project: Project) -> list[tuple[Evaluator, AuditReport | None]]:
    """Return every evaluator version of the project with its audit report (None if none)."""
    evaluators = list(Evaluator.objects.filter(project=project).order_by("name", "version"))
    reports = {r.evaluator_id: r for r in AuditReport.objects.filter(project=project)}
    return [(e, reports.get(e.pk)) for e in evaluators]


def audit_report_get(*, project: Project, evaluator: Evaluator) -> AuditReport:
    """Return the evaluator's audit report.

    Raises:
        AuditNotConfigured: if no audit has been declared for the evaluator.
    """
    try:
        return AuditReport.objects.select_related("evaluator").get(
            project=project, evaluator=evaluator
        )
    except AuditReport.DoesNotExist as exc:
        raise AuditNotConfigured("no audit is declared for this evaluator yet") from exc


def audit_sample_list(*, project: Project, evaluator: Evaluator) -> QuerySet[AuditSample]:
    """Return the evaluator's audit samples, newest first, with their members prefetched."""
    return AuditSample.objects.filter(project=project, evaluator=evaluator).prefetch_related(
        "members"
    )


def items_closed_to_people(*, project: Project) -> QuerySet[Item]:
    """Return the project's items no person may label or adjudicate any more.

    Those are the items resolved by consensus of their annotators: an open item is still being
    labelled, an item in disagreement waits for an adjudicator, and an adjudicated (or
    ``unresolved``) item may still be corrected by one. Evaluator-derived facts of any other item
    (its evaluator label, score, or audit stratum, which is the evaluator's verdict) would anchor
    the person who decides it.
    """
    return Item.objects.filter(
        project=project,
        status=ItemStatus.RESOLVED,
        resolution__status=ResolutionStatus.CONSENSUS,
    )


@dataclass(frozen=True)
class AuditView:
    """An audit report's result as one viewer may see it.

    ``result`` is the stored result with the disagreement rows the viewer may not see removed;
    ``withheld`` counts the rows removed (0 for a manager).
    """

    result: dict[str, Any]
    withheld: int


def audit_result_for_viewer(*, report: AuditReport, role: str | None) -> AuditView:
    """Return the report's result without what would tell the viewer an evaluator's verdict.

    Managers (``labeling.permissions.LABEL_VIEWER_ROLES``) see everything. Anyone else (an
    adjudicator) sees the disagreement rows only of items no person may decide any more
    (:func:`items_closed_to_people`): the rows name the evaluator's label of an item. While any
    audited item is still open to people, such a viewer also gets no per-stratum figures (a
    stratum's population counts the evaluator's verdicts in a slice, which names the verdict of
    an item alone in its slice) and no anytime-valid figures of an active sample (its prefix adds
    the evaluator's predictions of open items one by one). The aggregate figures stay. Two
    queries.
    """
    result = dict(report.result or {})
    if can_see_labels(role):
        return AuditView(result=result, withheld=0)
    closed = {
        f"{external_id}/{key}"
        for external_id, key in items_closed_to_people(project=report.project)
        .filter(candidate__evaluator_labels__evaluator=report.evaluator)
        .distinct()
        .values_list("candidate__question__external_id", "candidate__key")
    }
    if len(closed) < int(result.get("n_items") or 0):
        for key in ("error_rate", "anytime"):
            if isinstance(result.get(key), dict):
                result[key] = _without_strata(result[key])
        sample = result.get("sample") or {}
        if sample.get("kind") == "active" and isinstance(result.get("anytime"), dict):
            result["anytime"] = {
                "kind": result["anytime"].get("kind"),
                "reason": "hidden from adjudicators while audited items are open to people: "
                "an active sample's sequence adds the evaluator's predictions item by item",
            }
    rows = list(result.get("disagreements") or [])
    kept = [row for row in rows if row and row[0] in closed]
    result["disagreements"] = kept
    return AuditView(result=result, withheld=len(rows) - len(kept))


def _without_strata(value: Any) -> Any:
    """Return ``value`` (JSON) with every ``strata`` entry removed, at any depth."""
    if isinstance(value, dict):
        return {k: _without_strata(v) for k, v in value.items() if k != "strata"}
    if isinstance(value, list):
        return [_without_strata(v) for v in value]
    return value


@dataclass(frozen=True)
class AuditSampleView:
    """An audit sample as one viewer may see it.

    ``kind``: the sample design (stratified or active). ``design``: stratum -> ``{"population",
    "sampled", "inclusion_probability"}`` (an active sample: its budget and floor), or None for a
    blind viewer while any member is pending. ``members``: ``{"item", "stratum",
    "inclusion_probability"}`` dicts, the last two None for a pending member and a blind viewer.
    """

    id: int
    kind: str
    size: int
    seed: int
    slice_dimension: str
    declaration: dict[str, Any]
    design: dict[str, Any] | None
    created_at: datetime
    members: list[dict[str, Any]]


def audit_sample_view(*, sample: AuditSample, role: str | None) -> AuditSampleView:
    """Return a sample with what would reveal a pending member's verdict hidden from the viewer.

    A member's stratum is the evaluator's verdict on the item ("positive"/"negative"). A viewer
    other than a manager (``labeling.permissions.LABEL_VIEWER_ROLES``) gets, for every member a
    person may still label or adjudicate (:func:`items_closed_to_people`), a null ``stratum``
    and a null ``inclusion_probability`` (n_h / N_h differs between strata), and, while any
    member is pending, a null ``design``: its per-stratum counts would tell a pending member's
    verdict whenever one stratum is empty or sampled exhaustively. Two queries.
    """
    members = list(sample.members.all())
    pending: set[int] = set()
    if not can_see_labels(role):
        closed = set(
            items_closed_to_people(project=sample.project)
            .filter(pk__in=[m.item_id for m in members])
            .values_list("pk", flat=True)
        )
        pending = {m.item_id for m in members} - closed
    return AuditSampleView(
        id=sample.pk,
        kind=sample.kind,
        size=sample.size,
        seed=sample.seed,
        slice_dimension=sample.slice_dimension,
        declaration=sample.declaration,
        design=None if pending else sample.design,
        created_at=sample.created_at,
        members=[
            {
                "item": m.item_id,
                "stratum": None if m.item_id in pending else m.stratum,
                "inclusion_probability": None if m.item_id in pending else m.inclusion_probability,
            }
            for m in members
        ],
    )


def _slice_value(slices: Mapping[str, Any], key: str) -> str | None:
    value = slices.get(key) if isinstance(slices, Mapping) else None
    return None if value is None or value == "" else str(value)


def audit_rows(*, evaluator: Evaluator) -> list[AuditRow]:
    """Return the evaluator's answer-level labels aligned with the resolved human labels.

    One row per item whose candidate the evaluator labelled (claim-level labels are not part
    of the answer-level audit), ordered by item id. Three queries, whatever the size.
    """
    labels = {
        row["candidate_id"]: row
        for row in EvaluatorLabel.objects.filter(evaluator=evaluator, claim__isnull=True).values(
            "candidate_id", "label", "score", "available"
        )
    }
    items = (
        # A subquery, not a list of ids: with 100,000 labels the list alone cost 1.4 s.
        Item.objects.filter(
            project_id=evaluator.project_id,
            candidate_id__in=EvaluatorLabel.objects.filter(
                evaluator=evaluator, claim__isnull=True
            ).values("candidate_id"),
        )
        # A gold item's reference is no resolved label: gold items are never audited.
        .exclude(status=ItemStatus.GOLD)
        .order_by("pk")
        .values(
            "pk",
            "candidate_id",
            "candidate__key",
            "candidate__generator",
            "candidate__question__external_id",
            "candidate__question__slices",
            "resolution__status",
            "resolution__answer_label",
            "resolution__rationale",
        )
    )
    rows = []
    for item in items:
        label = labels[item["candidate_id"]]
        status = item["resolution__status"]
        slices = item["candidate__question__slices"] or {}
        human = None
        if status is not None and status != ResolutionStatus.UNRESOLVED:
            human = item["resolution__answer_label"]
        rows.append(
            AuditRow(
                item_id=item["pk"],
                item=f"{item['candidate__question__external_id']}/{item['candidate__key']}",
                available=label["available"],
                label=label["label"],
                score=label["score"],
                resolved=status is not None,
                human_label=human,
                rationale=item["resolution__rationale"] or "",
                domain=_slice_value(slices, "domain") or _slice_value(slices, "field"),
                question_type=_slice_value(slices, "question_type"),
                generator=item["candidate__generator"] or None,
            )
        )
    return rows
