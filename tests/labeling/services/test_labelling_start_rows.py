"""The set-based start writes exactly the rows of the item-by-item start (queue and comparison).

``project_labelling_start`` writes its rows with a handful of set-based statements
(labeling/services/labelling_start.py). The same records are imported into two projects: one is
started by the service, the other item by item as the start did before (``_enqueue``, then
``items_compare``, the path ``items_enqueue`` still takes), and every row the start writes is
compared: the items (status, overlap, prior votes, version, queue position, resolution), the
resolutions, their claim labels and evidence, the disagreements (all in id order, so in the
same insertion order), the derived results marked stale and the resolutions announced.

The prior votes are generated at random (seeded) over what the comparison distinguishes:
answer and claim labels, ``evidence_unavailable`` with and without a reason (a reason under
another label is no part of the vote), ``cannot_decide``, unlabelled and missing claim labels,
prior annotations without an answer label (no vote), and evidence spans shared, distinct and
empty.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from labeling.models import (
    DerivedChange,
    DerivedKind,
    Disagreement,
    Item,
    LabelPolicy,
    Partition,
    Project,
    Question,
    Resolution,
    ResolvedClaimLabel,
    ResolvedEvidence,
    ServingOrder,
)
from labeling.services import project_create, project_labelling_configure
from labeling.services.labelling_queue import _compare_full_items, _enqueue
from labeling.signals import items_resolved
from tests.conftest import import_native
from tests.factories import WORK_SOURCE, AssignmentFactory, UserFactory, start_labelling

pytestmark = pytest.mark.django_db

ANSWERS = ["admissible", "inadmissible", "evidence_unavailable", "cannot_decide", None]
CLAIMS = ["supported", "not_supported", "contradicted", "evidence_unavailable", "cannot_decide"]
REASONS = [None, "not_found", "blocked"]
# Spans of WORK_SOURCE (code points, as the native format counts them): a few, so that votes
# often cite the same one; one empty (cites nothing).
QUOTES = ["The bridge opened in 1932", "opened in 1932", "It spans the harbour", "harbour"]


def _span(quote: str) -> dict[str, Any]:
    start = WORK_SOURCE.index(quote)
    return {"source": "doc", "start": start, "end": start + len(quote), "quote": quote}


def _vote(rng: random.Random, n_claims: int) -> dict[str, Any]:
    """A random prior vote's labels (no annotator yet)."""
    claims = []
    for index in range(n_claims):
        if rng.random() < 0.05:
            continue  # the claim is not labelled by this vote
        label = rng.choice([*CLAIMS, None]) if rng.random() < 0.2 else rng.choice(CLAIMS[:2])
        row: dict[str, Any] = {"claim": index, "label": label}
        if label == "evidence_unavailable" or rng.random() < 0.1:
            row["reason"] = rng.choice(REASONS)
        spans = rng.sample(QUOTES, rng.randint(0, 2))
        row["evidence"] = [_span(q) for q in spans]
        if rng.random() < 0.1:
            row["evidence"].append({"source": "doc", "start": 3, "end": 3, "quote": ""})
        claims.append(row)
    answer = rng.choice(ANSWERS) if rng.random() < 0.3 else rng.choice(ANSWERS[:2])
    vote: dict[str, Any] = {"answer_label": answer, "claim_labels": claims}
    if answer == "evidence_unavailable" or rng.random() < 0.1:
        vote["answer_reason"] = rng.choice(REASONS)
    return vote


def _priors(rng: random.Random, n_claims: int) -> list[dict[str, Any]]:
    """0 to 3 prior annotations; often copies of one vote (so that they agree)."""
    base = _vote(rng, n_claims)
    priors = []
    for n in range(rng.choice([0, 1, 2, 2, 2, 3, 3])):
        vote = dict(base) if rng.random() < 0.6 else _vote(rng, n_claims)
        if rng.random() < 0.5:  # the same labels, other spans
            vote["claim_labels"] = [
                {**row, "evidence": [_span(q) for q in rng.sample(QUOTES, rng.randint(0, 2))]}
                for row in vote["claim_labels"]
            ]
        priors.append(
            {
                "annotator": f"ann-{n}",
                "origin": rng.choice(["human", "human", "automatic"]),
                **vote,
            }
        )
    if rng.random() < 0.15:  # a prior annotation without an answer label is no vote
        priors.append({"annotator": "note-only", "claim_labels": base["claim_labels"]})
    return priors


def _crafted() -> list[list[dict[str, Any]]]:
    """Prior votes (two, of one claim) on the edges of a vote's key: the reasons."""

    def two(answer: tuple[Any, Any], claim: tuple[Any, Any]) -> list[dict[str, Any]]:
        return [
            {
                "annotator": f"ann-{n}",
                "answer_label": answer[0],
                "answer_reason": answer[1],
                "claim_labels": [
                    {
                        "claim": 0,
                        "label": claim[0],
                        "reason": claim[1],
                        "evidence": [_span(QUOTES[n])],
                    }
                ],
            }
            for n, (answer, claim) in enumerate([(answer[0], claim[0]), (answer[1], claim[1])])
        ]

    admissible = ("admissible", None)
    supported = ("supported", None)
    unavailable = "evidence_unavailable"
    return [
        two((admissible,) * 2, ((unavailable, "blocked"),) * 2),  # consensus, reason kept
        two((admissible,) * 2, ((unavailable, "blocked"), (unavailable, "not_found"))),
        two((admissible,) * 2, ((unavailable, None), (unavailable, "not_found"))),
        two((admissible,) * 2, (("not_supported", "blocked"), ("not_supported", None))),
        two(((unavailable, "blocked"),) * 2, (supported,) * 2),  # consensus, reason kept
        two(((unavailable, "blocked"), (unavailable, None)), (supported,) * 2),
        two((("inadmissible", "blocked"), ("inadmissible", "not_found")), (supported,) * 2),
        two((("cannot_decide", None),) * 2, (supported,) * 2),
        two((admissible,) * 2, (("cannot_decide", None),) * 2),
        two((admissible,) * 2, ((None, None),) * 2),
    ]


def _records(seed: int, questions: int = 40) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    records = [
        {
            "external_id": f"edge{n}",
            "text": "When did the bridge open?",
            "sources": [{"id": "doc", "text": WORK_SOURCE, "rank": 1}],
            "candidates": [
                {
                    "id": "c0",
                    "text": "It opened in 1932.",
                    "claims": [{"text": "It opened in 1932."}],
                    "prior_annotations": priors,
                }
            ],
        }
        for n, priors in enumerate(_crafted())
    ]
    for q in range(questions):
        candidates = []
        for c in range(rng.randint(1, 2)):
            n_claims = rng.randint(0, 3)
            text = " ".join(f"Claim {c}.{k} is made." for k in range(n_claims)) or "No claim."
            candidates.append(
                {
                    "id": f"c{c}",
                    "text": text,
                    "claims": [{"text": f"Claim {c}.{k} is made."} for k in range(n_claims)],
                    "prior_annotations": _priors(rng, n_claims),
                }
            )
        records.append(
            {
                "external_id": f"q{q:02d}",
                "text": "When did the bridge open?",
                "sources": [{"id": "doc", "text": WORK_SOURCE, "rank": 1}],
                "candidates": candidates,
            }
        )
    return records


def _start_item_by_item(project: Project) -> None:
    """The start as it ran before the set-based statements (what ``items_enqueue`` still runs)."""
    with transaction.atomic():
        policy = project.policies.order_by("-version").first()
        now = timezone.now()
        LabelPolicy.objects.filter(pk=policy.pk).update(frozen_at=now)
        _enqueue(project=project, item_ids=None, first_position=1)
        project.labelling_started_at = now
        project.save(update_fields=["labelling_started_at"])
        _compare_full_items(project=project, item_ids=None)


def _snapshot(project: Project) -> dict[str, Any]:
    """Every row the start writes, with ids replaced by what they name, in id order."""
    items = {
        item.pk: (item.candidate.question.external_id, item.candidate.key)
        for item in Item.objects.filter(project=project).select_related("candidate__question")
    }
    resolutions = Resolution.objects.filter(item__project=project).order_by("pk")
    numbers = {r.pk: (items[r.item_id], r.number) for r in resolutions}
    labels = ResolvedClaimLabel.objects.filter(resolution__item__project=project).order_by("pk")
    claim_of = {label.pk: (numbers[label.resolution_id], label.claim.index) for label in labels}
    return {
        "items": sorted(
            (
                items[pk],
                status,
                overlap,
                prior_votes,
                assigned_count,
                version,
                position,
                numbers.get(resolution),
            )
            for pk, status, overlap, prior_votes, assigned_count, version, position, resolution in (
                Item.objects.filter(project=project).values_list(
                    "pk",
                    "status",
                    "overlap",
                    "prior_votes",
                    "assigned_count",
                    "version",
                    "queue_position",
                    "resolution_id",
                )
            )
        ),
        "resolutions": [
            (
                numbers[r.pk],
                r.status,
                r.policy.version,
                r.answer_label,
                r.answer_reason,
                r.rationale,
                r.unresolved_reason,
                numbers.get(r.supersedes_id),
                r.adjudicator_id,
                r.adjudicator_pseudonym,
                r.import_batch_id,
                r.created_at >= project.labelling_started_at,
            )
            for r in resolutions
        ],
        "claim_labels": [
            (claim_of[label.pk], label.label, label.reason, label.evidence_waived)
            for label in labels
        ],
        "evidence": [
            (claim_of[e.claim_label_id], e.source_version.document.key, e.start, e.end, e.quote)
            for e in ResolvedEvidence.objects.filter(
                claim_label__resolution__item__project=project
            ).order_by("pk")
        ],
        "disagreements": [
            (
                items[d.item_id],
                d.answer_differs,
                d.claims_differ,
                d.closed_at,
                d.closed_by_id,
                d.opened_at >= project.labelling_started_at,
            )
            for d in Disagreement.objects.filter(item__project=project).order_by("pk")
        ],
        # The start marks the agreement too, rows or not (it freezes the version imported votes
        # without one count under); the item-by-item reference marks what its rows touch.
        "derived_marked": sorted(
            DerivedChange.objects.filter(project=project)
            .exclude(kind=DerivedKind.AGREEMENT)
            .values_list("kind", flat=True)
        ),
    }


def _started(project: Project, start: Any, django_capture_on_commit_callbacks: Any) -> dict:
    """Start ``project`` with ``start``; its snapshot and the items_resolved announcements."""
    keys: dict[int, tuple[str, str]] = {}
    announced: list[tuple[tuple[str, str], str]] = []

    def receiver(**kwargs: Any) -> None:
        for pk, status in zip(kwargs["item_ids"], kwargs["statuses"], strict=True):
            announced.append((keys[pk], status))

    keys.update(
        (i.pk, (i.candidate.question.external_id, i.candidate.key))
        for i in Item.objects.filter(project=project).select_related("candidate__question")
    )
    items_resolved.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            start(project)
    finally:
        items_resolved.disconnect(receiver)
    project.refresh_from_db()
    return {**_snapshot(project), "announced": sorted(announced)}


def _two_projects(records: list[dict[str, Any]], **settings: Any) -> tuple[Project, Project]:
    """The records imported into two new projects, configured alike (overlap 2 by default)."""
    pair = []
    for slug in ("set-based", "item-by-item"):
        project = project_create(slug=slug, name=slug)
        import_native(project, records)
        if settings:
            manager = UserFactory(is_staff=True)
            project_labelling_configure(project=project, actor=manager, **settings)
        pair.append(project)
    return pair[0], pair[1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_set_based_start_writes_the_rows_of_the_item_by_item_start(
    seed, django_capture_on_commit_callbacks
):
    # given the same random records (and partitions) in two projects
    set_based, item_by_item = _two_projects(_records(seed))
    rng = random.Random(seed)
    for project in (set_based, item_by_item):
        for question in Question.objects.filter(project=project).order_by("external_id"):
            question.partition = random.Random(f"{seed}{question.external_id}").choice(
                [*Partition.values, None]
            )
            question.save(update_fields=["partition"])
    assert rng  # the partitions follow the question, not the project

    # when one is started by the service and the other item by item
    got = _started(set_based, start_labelling, django_capture_on_commit_callbacks)
    expected = _started(item_by_item, _start_item_by_item, django_capture_on_commit_callbacks)

    # then they hold the same rows, and the workload exercised every outcome
    assert got == expected
    statuses = {row[1] for row in got["items"]}
    assert statuses == {"open", "resolved", "disagreement"}
    assert got["evidence"] and got["announced"]
    assert {row[1:3] for row in got["disagreements"]} >= {(True, False), (False, True)}
    # (and resolutions of several claims, claims with several spans: the orders are compared)
    per_resolution = Counter(claim[0] for claim, *_ in got["claim_labels"])
    assert max(per_resolution.values()) >= 2
    assert max(Counter(claim for claim, *_ in got["evidence"]).values()) >= 2


@pytest.mark.parametrize("overlap", [1, 3])
def test_the_same_rows_under_another_overlap_and_the_seeded_order(
    overlap, django_capture_on_commit_callbacks
):
    set_based, item_by_item = _two_projects(
        _records(7, questions=25),
        overlap=overlap,
        serving_order=ServingOrder.SEEDED_RANDOM,
        serving_seed=11,
    )
    got = _started(set_based, start_labelling, django_capture_on_commit_callbacks)
    expected = _started(item_by_item, _start_item_by_item, django_capture_on_commit_callbacks)
    assert got == expected
    assert {row[2] for row in got["items"]} == {overlap}


def test_an_item_with_a_submitted_assignment_is_compared_as_a_submit_compares_it(
    django_capture_on_commit_callbacks,
):
    # given (in both projects) an item whose prior votes reach the overlap and which has a
    # submitted assignment (no such item exists before a start; its count is made 0 so that
    # the overlap check lets the start write its prior votes)
    set_based, item_by_item = _two_projects(_records(5, questions=10))
    for project in (set_based, item_by_item):
        item = (
            Item.objects.filter(project=project, candidate__prior_annotations__isnull=False)
            .order_by("candidate__question__external_id", "candidate__key")
            .first()
        )
        AssignmentFactory(item=item, status="submitted")
        Item.objects.filter(pk=item.pk).update(assigned_count=0)

    # when both are started, then the rows are the same (that item's rows are written after
    # the others', so compared in any order)
    got = _started(set_based, start_labelling, django_capture_on_commit_callbacks)
    expected = _started(item_by_item, _start_item_by_item, django_capture_on_commit_callbacks)
    assert {key: sorted(rows) for key, rows in got.items()} == {
        key: sorted(rows) for key, rows in expected.items()
    }
