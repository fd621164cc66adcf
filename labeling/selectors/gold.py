"""Gold items of a project, their reference labels and the annotators' labels of them.

Manager-only data: the reference is a secret of managers, and which items are gold is too.
Nothing here may reach an annotator's page or API response.

Labels are given as vote values (:func:`labeling.selectors.votes.vote_value`: the label, or
``label:reason`` when it carries a reason), so a gold label equals the reference exactly when
the two values are equal, as comparison treats votes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Prefetch, QuerySet

from labeling.exceptions import InvalidTransition
from labeling.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    ClaimLabel,
    GoldClaimLabel,
    GoldReference,
    Item,
    ItemStatus,
    LabelPolicy,
    Membership,
    Project,
    Qualification,
    QualificationStatus,
    RetrievalLink,
    Role,
)
from labeling.selectors.votes import vote_value


@dataclass(frozen=True)
class Span:
    """An evidence span: ``(source_version_id, start, end)``, code points, end-exclusive."""

    source_version_id: int
    start: int
    end: int


@dataclass(frozen=True)
class GoldLabels:
    """A gold item's labels at both levels, as vote values; ``evidence``: sorted spans per claim."""

    answer: str
    claims: Mapping[int, str]
    evidence: Mapping[int, tuple[Span, ...]]


@dataclass(frozen=True)
class GoldAnnotation:
    """One annotator's submitted labels of a gold item (the current revision)."""

    annotator_id: int
    assignment_id: int
    submitted_at: datetime
    policy_version: int
    labels: GoldLabels


@dataclass(frozen=True)
class GoldItemData:
    """A gold item with its current reference and every submitted gold annotation of it.

    ``claim_ids`` ascend; ``reference_policy_version`` is the version the reference was checked
    against; ``annotations`` are ordered by (submitted_at, assignment id).
    """

    item_id: int
    claim_ids: tuple[int, ...]
    reference_number: int
    reference_policy_version: int
    reference: GoldLabels
    annotations: tuple[GoldAnnotation, ...]


def gold_item_list(*, project: Project) -> QuerySet[Item]:
    """Return the gold items of ``project`` by id, with candidate and question loaded."""
    return (
        Item.objects.filter(project=project, status=ItemStatus.GOLD)
        .select_related("candidate__question")
        .order_by("pk")
    )


def gold_reference_policy(*, project: Project) -> LabelPolicy:
    """Return the policy a reference is checked against: the labelling policy, else the draft.

    Raises:
        InvalidTransition: the project has no label policy.
    """
    policies = project.policies.order_by("-version")
    if project.labelling_started_at is not None:
        policies = policies.filter(frozen_at__isnull=False)
    policy = policies.first()
    if policy is None:
        raise InvalidTransition(f"project {project.slug!r} has no label policy")
    return policy


def evidence_locate(*, item: Item, quote: str) -> Span | None:
    """Return the first span of ``item``'s pinned sources whose text is ``quote``, or None.

    Sources are searched by retrieval rank (unranked last), then source version id; offsets
    are code points. The reference page lets a manager paste a quote instead of selecting it.
    """
    if not quote:
        return None
    links = RetrievalLink.objects.filter(question_id=item.candidate.question_id).select_related(
        "source_version"
    )
    ordered = sorted(
        links, key=lambda link: (link.rank is None, link.rank or 0, link.source_version_id)
    )
    for link in ordered:
        start = link.source_version.text.find(quote)
        if start >= 0:
            return Span(link.source_version_id, start, start + len(quote))
    return None


def gold_unseen_ids(*, project: Project, actor: Any) -> list[int]:
    """Return the ids of the gold items ``actor`` may still be given, ascending.

    Those they hold no assignment of, or only a lease that ran out (it may come back to them,
    as a regular item does): a gold item is labelled by a person at most once, and one they
    skipped is never served to them again.
    """
    held = Assignment.objects.filter(item=OuterRef("pk"), annotator=actor).exclude(
        status=AssignmentStatus.EXPIRED
    )
    return list(
        Item.objects.filter(project=project, status=ItemStatus.GOLD)
        .exclude(Exists(held))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def gold_reference_current(*, item: Item) -> GoldReference | None:
    """Return the current (highest-numbered) reference of ``item`` with its labels, or None."""
    return (
        GoldReference.objects.filter(item=item)
        .select_related("policy", "created_by")
        .prefetch_related(
            Prefetch(
                "claim_labels",
                queryset=GoldClaimLabel.objects.prefetch_related("evidence").order_by("claim_id"),
            )
        )
        .order_by("-number")
        .first()
    )


def _claim_evidence(rows: list[tuple[int, int, int, int]]) -> dict[int, tuple[Span, ...]]:
    by_claim: dict[int, list[Span]] = defaultdict(list)
    for claim_id, version_id, start, end in rows:
        by_claim[claim_id].append(Span(version_id, start, end))
    return {
        c: tuple(sorted(s, key=lambda x: (x.source_version_id, x.start, x.end)))
        for c, s in by_claim.items()
    }


def project_gold(*, project: Project) -> tuple[GoldItemData, ...]:
    """Return every gold item of ``project`` with its reference and its annotators' labels.

    Reads only, in a fixed number of queries (six) whatever the project's size. A gold item
    without a reference yet is left out. An annotation counts when its assignment is gold work
    and submitted; its labels are those of its current revision (earlier revisions are history).
    Users are given by id; whoever shows them decides who may see them (managers only). Items
    are ordered by id.
    """
    items = list(gold_item_list(project=project).values_list("pk", flat=True))
    claims: dict[int, list[int]] = defaultdict(list)
    for item_id, claim_id in (
        Item.objects.filter(pk__in=items)
        .values_list("pk", "candidate__claims__id")
        .order_by("pk", "candidate__claims__id")
    ):
        if claim_id is not None:
            claims[item_id].append(claim_id)
    references: dict[int, GoldReference] = {}
    for row in (
        GoldReference.objects.filter(item_id__in=items)
        .select_related("policy")
        .order_by("item_id", "number")
    ):
        references[row.item_id] = row  # the highest number wins
    ref_ids = [r.pk for r in references.values()]
    ref_claims: dict[int, dict[int, str]] = defaultdict(dict)
    for ref_id, claim_id, label, reason in GoldClaimLabel.objects.filter(
        reference_id__in=ref_ids
    ).values_list("reference_id", "claim_id", "label", "reason"):
        ref_claims[ref_id][claim_id] = vote_value(label, reason)
    ref_evidence: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for ref_id, claim_id, version_id, start, end in GoldClaimLabel.objects.filter(
        reference_id__in=ref_ids, evidence__isnull=False
    ).values_list(
        "reference_id",
        "claim_id",
        "evidence__source_version_id",
        "evidence__start",
        "evidence__end",
    ):
        ref_evidence[ref_id].append((claim_id, version_id, start, end))

    annotations = list(
        Annotation.objects.filter(
            item_id__in=items,
            assignment__gold=True,
            assignment__status=AssignmentStatus.SUBMITTED,
            current__isnull=False,
        )
        .select_related("assignment", "current__policy")
        .prefetch_related(
            Prefetch(
                "current__claim_labels", queryset=ClaimLabel.objects.prefetch_related("evidence")
            )
        )
        .order_by("item_id", "assignment__submitted_at", "assignment_id")
    )
    by_item: dict[int, list[GoldAnnotation]] = defaultdict(list)
    for annotation in annotations:
        revision = annotation.current
        if revision is None or annotation.assignment.submitted_at is None:  # excluded above
            continue
        claim_labels = list(revision.claim_labels.all())
        by_item[annotation.item_id].append(
            GoldAnnotation(
                annotator_id=annotation.annotator_id,
                assignment_id=annotation.assignment_id,
                submitted_at=annotation.assignment.submitted_at,
                policy_version=revision.policy.version,
                labels=GoldLabels(
                    answer=vote_value(revision.answer_label, revision.answer_reason),
                    claims={c.claim_id: vote_value(c.label, c.reason) for c in claim_labels},
                    evidence=_claim_evidence(
                        [
                            (c.claim_id, e.source_version_id, e.start, e.end)
                            for c in claim_labels
                            for e in c.evidence.all()
                        ]
                    ),
                ),
            )
        )
    result = []
    for item_id in items:
        ref = references.get(item_id)
        if ref is None:
            continue
        result.append(
            GoldItemData(
                item_id=item_id,
                claim_ids=tuple(claims[item_id]),
                reference_number=ref.number,
                reference_policy_version=ref.policy.version,
                reference=GoldLabels(
                    answer=vote_value(ref.answer_label, ref.answer_reason),
                    claims=dict(ref_claims[ref.pk]),
                    evidence=_claim_evidence(ref_evidence[ref.pk]),
                ),
                annotations=tuple(by_item[item_id]),
            )
        )
    return tuple(result)


# ---------------------------------------------------------------------------------------------
# Agreement with the references (qualification)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """Labels equal to the reference (``agreed``) of labels compared (``compared``)."""

    items: int
    agreed: int
    compared: int


def labels_agreement(
    reference: GoldLabels, labels: GoldLabels, claim_ids: Sequence[int]
) -> tuple[int, int]:
    """Return (agreed, compared) over the answer label and each claim of one gold item.

    A claim the annotator left unlabelled (a claim added after their submit) counts as a
    disagreement.
    """
    agreed = int(labels.answer == reference.answer)
    compared = 1
    for claim_id in claim_ids:
        expected = reference.claims.get(claim_id)
        if expected is None:
            continue
        compared += 1
        agreed += int(labels.claims.get(claim_id) == expected)
    return agreed, compared


def _agreement_of(gold: Sequence[GoldItemData], user_id: int, k: int) -> Agreement:
    """Agreement of ``user_id``'s first ``k`` submitted gold labels in ``gold``."""
    rows = [
        (annotation.submitted_at, annotation.assignment_id, data, annotation)
        for data in gold
        for annotation in data.annotations
        if annotation.annotator_id == user_id
    ]
    rows.sort(key=lambda r: (r[0], r[1]))
    agreed = compared = 0
    for _, _, data, annotation in rows[:k]:
        a, c = labels_agreement(data.reference, annotation.labels, data.claim_ids)
        agreed += a
        compared += c
    return Agreement(items=min(k, len(rows)), agreed=agreed, compared=compared)


def qualification_agreement(*, project: Project, actor: Any, k: int) -> Agreement:
    """Compare ``actor``'s first ``k`` submitted gold labels with the current references.

    "First" by submission time (then assignment id); each counts its current revision.
    """
    return _agreement_of(project_gold(project=project), actor.pk, k)


# ---------------------------------------------------------------------------------------------
# Qualification (managers)
# ---------------------------------------------------------------------------------------------

#: The state of an annotator without a recorded qualification: still labelling their k gold
#: items (the rule is on), or not asked to qualify (the rule is off).
QUALIFYING = "qualifying"
NOT_REQUIRED = "not_required"


@dataclass(frozen=True)
class QualificationRow:
    """One annotator's qualification as a manager sees it.

    ``status``: a recorded :class:`~labeling.models.QualificationStatus` value, or
    ``qualifying`` / ``not_required``. ``agreed`` of ``compared`` labels equal the references
    over ``items`` gold items (recorded figures, or so far for those still qualifying).
    ``gold_submitted``: every gold item they submitted (qualification and later).
    """

    user_id: int
    username: str
    status: str
    items: int
    agreed: int
    compared: int
    gold_submitted: int
    decided_by: str | None
    decided_at: datetime | None
    decision_note: str

    @property
    def awaiting_decision(self) -> bool:
        """Whether a manager is asked to decide (below the threshold, or too few gold items)."""
        return self.status == QualificationStatus.FAILED


def qualification_list(*, project: Project) -> list[QualificationRow]:
    """Return each active annotator's qualification, by username (managers only).

    Figures of an annotator still qualifying are those of their gold labels so far (the first
    ``k`` of the labelling policy). Queries: a fixed number plus the project's gold data once.
    """
    policy = project.policies.filter(frozen_at__isnull=False).order_by("-version").first()
    required = policy is not None and policy.qualification_required
    k = policy.qualification_items if policy is not None else 0
    recorded = {
        q.annotator_id: q
        for q in Qualification.objects.filter(project=project).select_related("decided_by")
    }
    members = (
        Membership.objects.filter(project=project, role=Role.ANNOTATOR, is_active=True)
        .select_related("user")
        .order_by("user__username")
    )
    gold = project_gold(project=project)
    submitted: dict[int, int] = defaultdict(int)
    for data in gold:
        for annotation in data.annotations:
            submitted[annotation.annotator_id] += 1
    rows = []
    for membership in members:
        user = membership.user
        q = recorded.get(user.pk)
        if q is not None:
            status, items, agreed, compared = q.status, q.items, q.agreed, q.compared
        else:
            status = QUALIFYING if required else NOT_REQUIRED
            so_far = _agreement_of(gold, user.pk, k) if required else Agreement(0, 0, 0)
            items, agreed, compared = so_far.items, so_far.agreed, so_far.compared
        rows.append(
            QualificationRow(
                user_id=user.pk,
                username=user.get_username(),
                status=status,
                items=items,
                agreed=agreed,
                compared=compared,
                gold_submitted=submitted[user.pk],
                decided_by=q.decided_by.get_username() if q and q.decided_by else None,
                decided_at=q.decided_at if q else None,
                decision_note=q.decision_note if q else "",
            )
        )
    return rows
