"""items_compare: consensus or the disagreement queue when the N-th vote (live or prior) arrives."""

from __future__ import annotations

import pytest
from django.db import transaction

from labeling.models import (
    CANNOT_DECIDE,
    Claim,
    Disagreement,
    Item,
    ItemStatus,
    Resolution,
    ResolvedEvidence,
    SourceVersion,
)
from labeling.services.annotations import annotation_submit
from labeling.services.comparison import items_compare
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput
from labeling.signals import items_resolved
from tests.factories import WORK_SOURCE, AssignmentFactory, start_labelling, utf16_span, work_record

pytestmark = pytest.mark.django_db


def cp_span(quote: str) -> dict:
    start = WORK_SOURCE.index(quote)
    return {"source": "doc-q1", "start": start, "end": start + len(quote), "quote": quote}


def prior(
    annotator: str, answer: str | None = "admissible", claims=("supported", "supported"), **extra
) -> dict:
    labels = []
    for index, label in enumerate(claims):
        if label is None:
            continue
        row = {"claim": index, "label": label}
        if label == "supported":
            row["evidence"] = [
                cp_span(["The bridge opened in 1932", "It spans the harbour"][index])
            ]
        labels.append(row)
    return {"annotator": annotator, "answer_label": answer, "claim_labels": labels, **extra}


def record_with_priors(*priors: dict) -> dict:
    record = work_record()
    record["candidates"][0]["prior_annotations"] = list(priors)
    return record


@pytest.fixture
def setup(project, import_records):
    """Import work_record (with optional priors on c0), start labelling, return item c0."""

    def make(*priors: dict, **settings) -> Item:
        import_records([record_with_priors(*priors)])
        start_labelling(project, **settings)
        return Item.objects.get(candidate__key="c0")

    return make


def cite(item: Item, quote: str) -> EvidenceInput:
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)
    start, end = utf16_span(version.text, quote)
    return EvidenceInput(version.pk, start, end, quote)


def claim_ids(item: Item) -> list[int]:
    return list(
        Claim.objects.filter(candidate=item.candidate)
        .order_by("index")
        .values_list("pk", flat=True)
    )


def data(
    item: Item,
    answer: str = "admissible",
    labels=("supported", "supported"),
    quotes=("opened in 1932", "It spans the harbour"),
    reasons=(None, None),
    answer_reason: str | None = None,
    boundary=(False, False),
) -> AnnotationInput:
    claims = tuple(
        ClaimInput(
            pk,
            label,
            reason=reason,
            boundary_error=flag,
            evidence=(cite(item, quote),) if label in ("supported", "contradicted") else (),
        )
        for pk, label, quote, reason, flag in zip(
            claim_ids(item), labels, quotes, reasons, boundary, strict=True
        )
    )
    return AnnotationInput(answer_label=answer, answer_reason=answer_reason, claims=claims)


def vote(project, item: Item, payload: AnnotationInput):
    assignment = AssignmentFactory(item=item)
    return annotation_submit(
        project=project, assignment_id=assignment.pk, actor=assignment.annotator, data=payload
    )


@pytest.fixture
def announced():
    """Collect items_resolved announcements as (item_ids, statuses)."""
    seen: list[tuple[tuple[int, ...], tuple[str, ...]]] = []

    def receiver(**kwargs):
        seen.append((kwargs["item_ids"], kwargs["statuses"]))

    items_resolved.connect(receiver)
    yield seen
    items_resolved.disconnect(receiver)


def test_equal_votes_resolve_by_consensus_keeping_both_annotators_evidence(
    project, setup, announced, django_capture_on_commit_callbacks
):
    # given two annotators who agree, citing one shared span and different ones for claim 2
    item = setup()
    vote(project, item, data(item))
    with django_capture_on_commit_callbacks(execute=True):
        vote(project, item, data(item, quotes=("opened in 1932", "harbour of Sydney")))
    # then consensus with the agreed labels
    item.refresh_from_db()
    assert item.status == ItemStatus.RESOLVED
    resolution = item.resolution
    assert (resolution.status, resolution.number, resolution.adjudicator) == ("consensus", 1, None)
    assert resolution.policy.frozen_at is not None
    assert resolution.answer_label == "admissible"
    first, second = claim_ids(item)
    labels = {cl.claim_id: cl for cl in resolution.claim_labels.all()}
    assert {k: v.label for k, v in labels.items()} == {first: "supported", second: "supported"}
    # the evidence is the union of both annotators' spans, the shared one once
    assert list(labels[first].evidence.values_list("quote", flat=True)) == ["opened in 1932"]
    assert sorted(labels[second].evidence.values_list("quote", flat=True)) == [
        "It spans the harbour",
        "harbour of Sydney",
    ]
    for span in ResolvedEvidence.objects.all():
        assert WORK_SOURCE[span.start : span.end] == span.quote
    # and it is announced after commit
    assert announced == [((item.pk,), ("consensus",))]
    assert not Disagreement.objects.exists()


@pytest.mark.parametrize(
    ("first", "second", "outcome"),
    [
        ({}, {"answer": "inadmissible"}, (True, False)),
        ({}, {"labels": ("supported", "not_supported")}, (False, True)),
        ({}, {"labels": ("contradicted", "supported")}, (False, True)),
        ({}, {"boundary": (True, False)}, "consensus"),
        ({}, {"quotes": ("The bridge opened", "harbour of Sydney")}, "consensus"),
        ({"answer": CANNOT_DECIDE}, {"answer": CANNOT_DECIDE}, (True, False)),
        (
            {"labels": (CANNOT_DECIDE, "supported")},
            {"labels": (CANNOT_DECIDE, "supported")},
            (False, True),
        ),
        (
            {"answer": "evidence_unavailable", "answer_reason": "blocked"},
            {"answer": "evidence_unavailable", "answer_reason": "blocked"},
            "consensus",
        ),
        (
            {"answer": "evidence_unavailable", "answer_reason": "blocked"},
            {"answer": "evidence_unavailable", "answer_reason": "not_found"},
            (True, False),
        ),
        (
            {"labels": ("supported", "evidence_unavailable"), "reasons": (None, "blocked")},
            {"labels": ("supported", "evidence_unavailable"), "reasons": (None, "source_changed")},
            (False, True),
        ),
        ({"answer": "evidence_unavailable", "answer_reason": "blocked"}, {}, (True, False)),
    ],
    ids=[
        "answer differs",
        "claim differs",
        "contradicted vs supported",
        "boundary flags only",
        "evidence only",
        "both cannot decide (answer)",
        "both cannot decide (claim)",
        "unavailable, same reason",
        "unavailable, other reason",
        "claim unavailable, other reason",
        "unavailable vs admissible",
    ],
)
def test_votes_are_compared_level_by_level(project, setup, first, second, outcome):
    item = setup()
    vote(project, item, data(item, **first))
    vote(project, item, data(item, **second))
    item.refresh_from_db()
    if outcome == "consensus":
        assert item.status == ItemStatus.RESOLVED
        assert item.resolution.status == "consensus"
        return
    # the votes reach the queue, never dropped: an open disagreement at the differing levels
    assert item.status == ItemStatus.DISAGREEMENT
    assert item.resolution is None
    disagreement = Disagreement.objects.get(item=item)
    assert disagreement.closed_at is None
    assert (disagreement.answer_differs, disagreement.claims_differ) == outcome


def test_consensus_on_unavailable_keeps_the_reason(project, setup):
    item = setup()
    for _ in range(2):
        vote(
            project,
            item,
            data(
                item,
                answer="evidence_unavailable",
                answer_reason="source_changed",
                labels=("evidence_unavailable", "not_supported"),
                reasons=("blocked", None),
            ),
        )
    resolution = Item.objects.get(pk=item.pk).resolution
    assert (resolution.answer_label, resolution.answer_reason) == (
        "evidence_unavailable",
        "source_changed",
    )
    assert sorted(resolution.claim_labels.values_list("label", "reason")) == [
        ("evidence_unavailable", "blocked"),
        ("not_supported", None),
    ]


def test_a_prior_vote_and_one_live_vote_reach_overlap_two(project, setup):
    # given an imported human label (one vote) and overlap 2
    item = setup(prior("dataset-a"))
    item.refresh_from_db()
    assert (item.prior_votes, item.status) == (1, ItemStatus.OPEN)
    # when one live annotator agrees, citing another span
    vote(project, item, data(item, quotes=("opened in 1932", "harbour of Sydney")))
    # then consensus, keeping the prior annotator's evidence too
    item.refresh_from_db()
    assert item.status == ItemStatus.RESOLVED
    first, second = claim_ids(item)
    quotes = {
        cl.claim_id: sorted(cl.evidence.values_list("quote", flat=True))
        for cl in item.resolution.claim_labels.all()
    }
    assert quotes == {
        first: ["The bridge opened in 1932", "opened in 1932"],
        second: ["It spans the harbour", "harbour of Sydney"],
    }


def test_a_live_vote_that_differs_from_a_prior_vote_reaches_the_queue(project, setup):
    item = setup(prior("dataset-a", answer="inadmissible"))
    vote(project, item, data(item))
    item.refresh_from_db()
    assert item.status == ItemStatus.DISAGREEMENT
    assert Disagreement.objects.get(item=item).answer_differs


def test_prior_votes_alone_are_compared_when_labelling_starts(
    project, import_records, announced, django_capture_on_commit_callbacks
):
    # given one candidate whose two prior annotators agree and one where they differ
    record = record_with_priors(prior("a"), prior("b"))
    record["candidates"][1]["prior_annotations"] = [
        {
            "annotator": "a",
            "answer_label": "inadmissible",
            "claim_labels": [{"claim": 0, "label": "contradicted"}],
        },
        {
            "annotator": "b",
            "answer_label": "inadmissible",
            "claim_labels": [{"claim": 0, "label": "not_supported"}],
        },
    ]
    import_records([record])
    # when labelling starts (overlap 2)
    with django_capture_on_commit_callbacks(execute=True):
        start_labelling(project)
    # then the agreeing item is resolved, the other waits for adjudication
    agreed = Item.objects.get(candidate__key="c0")
    differing = Item.objects.get(candidate__key="c1")
    assert agreed.status == ItemStatus.RESOLVED and agreed.resolution.status == "consensus"
    assert differing.status == ItemStatus.DISAGREEMENT
    assert (Disagreement.objects.get(item=differing).claims_differ) is True
    assert announced == [((agreed.pk,), ("consensus",))]


def test_a_prior_vote_without_a_claim_label_sends_the_claim_to_the_queue(project, setup):
    # given an automatic prior label of the answer only
    item = setup(prior("checker", claims=("supported", None), origin="automatic"))
    vote(project, item, data(item))
    item.refresh_from_db()
    assert item.status == ItemStatus.DISAGREEMENT
    disagreement = Disagreement.objects.get(item=item)
    assert (disagreement.answer_differs, disagreement.claims_differ) == (False, True)


def test_a_prior_annotation_without_answer_label_is_not_a_vote(project, setup):
    item = setup(prior("expert", answer=None))
    item.refresh_from_db()
    assert item.prior_votes == 0
    vote(project, item, data(item))
    item.refresh_from_db()
    assert item.status == ItemStatus.OPEN


def test_items_with_too_few_votes_or_already_resolved_are_left_alone(project, setup):
    # given one vote of two on c0 and a resolved c1
    item = setup()
    vote(project, item, data(item))
    other = Item.objects.get(candidate__key="c1")
    claim = Claim.objects.get(candidate=other.candidate)
    for _ in range(2):
        vote(
            project,
            other,
            AnnotationInput("inadmissible", claims=(ClaimInput(claim.pk, "not_supported"),)),
        )
    other.refresh_from_db()
    assert other.status == ItemStatus.RESOLVED
    versions = dict(Item.objects.values_list("pk", "version"))
    # when compared again
    with transaction.atomic():
        result = items_compare(project=project, item_ids=[item.pk, other.pk, item.pk])
    # then nothing changes: one resolution, no disagreement
    assert result.consensus == () and result.disagreement == ()
    assert sorted(result.waiting) == sorted([item.pk, other.pk])
    assert dict(Item.objects.values_list("pk", "version")) == versions
    assert Resolution.objects.count() == 1
    assert not Disagreement.objects.exists()
