"""Adjudication of imported votes: the evidence rule, the pre-fill, every problem at once.

The evidence rule: ``supported`` and ``contradicted`` need evidence, except a claim label that
adopts the label only imported votes without spans gave that claim; it is stored with
``evidence_waived``. Tested on factories and on real FaithBench rows (``shared_data``).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import DatabaseError, transaction

from labeling.exceptions import InvalidInput
from labeling.models import (
    Claim,
    Item,
    ItemStatus,
    Project,
    ResolvedClaimLabel,
    ResolvedEvidence,
    Role,
    SourceVersion,
)
from labeling.selectors.adjudication import adjudication_view, disagreement_queue
from labeling.selectors.vote_reads import (
    ClaimVote,
    Span,
    Vote,
    imported_evidence_waivers,
    votes_agreed,
)
from labeling.services import membership_set
from labeling.services.adjudication import adjudication_mark_unresolved, adjudication_resolve
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput
from tests.factories import AssignmentFactory, UserFactory, start_labelling, utf16_span, work_record

pytestmark = pytest.mark.django_db


def prior(annotator: str, answer: str, *labels: str) -> dict:
    return {
        "annotator": annotator,
        "answer_label": answer,
        "claim_labels": [{"claim": n, "label": label} for n, label in enumerate(labels)],
    }


@pytest.fixture
def adjudicator(project):
    user = UserFactory()
    membership_set(project=project, user=user, role=Role.ADJUDICATOR)
    return user


@pytest.fixture
def imported(project, import_records) -> Item:
    """Item c0 (two claims) with two imported votes, no spans: claim 0 agreed, claim 1 not."""
    record = work_record()
    record["candidates"][0]["prior_annotations"] = [
        prior("ds-a", "admissible", "supported", "supported"),
        prior("ds-b", "inadmissible", "supported", "contradicted"),
    ]
    import_records([record])
    start_labelling(project, overlap=2)
    item = Item.objects.get(candidate__key="c0")
    assert item.status == ItemStatus.DISAGREEMENT
    return item


def claim_ids(item: Item) -> list[int]:
    return list(
        Claim.objects.filter(candidate=item.candidate)
        .order_by("index")
        .values_list("pk", flat=True)
    )


def resolve(project, item, actor, labels, *, answer="admissible", rationale="As imported."):
    return adjudication_resolve(
        project=project,
        item_id=item.pk,
        actor=actor,
        expected_version=item.version,
        answer_label=answer,
        claims=[ClaimInput(cid, label, evidence=ev) for cid, (label, ev) in labels.items()],
        rationale=rationale,
    )


def test_adopting_imported_labels_without_evidence_is_accepted_and_recorded(
    project, imported, adjudicator
):
    first, second = claim_ids(imported)

    resolution = resolve(
        project, imported, adjudicator, {first: ("supported", ()), second: ("contradicted", ())}
    )

    waived = dict(
        ResolvedClaimLabel.objects.filter(resolution=resolution).values_list(
            "claim_id", "evidence_waived"
        )
    )
    assert waived == {first: True, second: True}
    assert not ResolvedEvidence.objects.filter(claim_label__resolution=resolution).exists()


def test_resolved_claim_labels_stay_append_only(project, imported, adjudicator):
    # the column's migration rebuilds the table on SQLite; its update trigger must be back
    first, second = claim_ids(imported)
    resolution = resolve(
        project, imported, adjudicator, {first: ("supported", ()), second: ("contradicted", ())}
    )

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        ResolvedClaimLabel.objects.filter(resolution=resolution).update(evidence_waived=False)

    assert (
        ResolvedClaimLabel.objects.filter(resolution=resolution, evidence_waived=True).count() == 2
    )


def test_a_label_no_vote_gave_still_needs_evidence(project, imported, adjudicator):
    first, second = claim_ids(imported)

    with pytest.raises(InvalidInput) as refused:
        resolve(
            project,
            imported,
            adjudicator,
            {first: ("contradicted", ()), second: ("supported", ())},
        )

    # claim 0: nobody said contradicted; claim 1: ds-a said supported without spans (waived)
    assert refused.value.data["errors"] == [
        {"field": "claims[0].evidence", "reason": "contradicted needs at least one evidence span"}
    ]


def test_cited_evidence_is_kept_and_nothing_is_waived(project, imported, adjudicator):
    first, second = claim_ids(imported)
    version = SourceVersion.objects.get(retrievals__question=imported.candidate.question)
    start, end = utf16_span(version.text, "opened in 1932")
    span = (EvidenceInput(version.pk, start, end, "opened in 1932"),)

    resolution = resolve(
        project, imported, adjudicator, {first: ("supported", span), second: ("supported", ())}
    )

    rows = {
        cl.claim_id: (cl.evidence_waived, cl.evidence.count())
        for cl in ResolvedClaimLabel.objects.filter(resolution=resolution)
    }
    assert rows == {first: (False, 1), second: (True, 0)}


def test_a_label_a_live_annotator_gave_with_evidence_needs_evidence(
    project, import_records, adjudicator
):
    # given one imported vote (supported, no span) and one live vote (supported, with a span)
    record = work_record()
    record["candidates"][0]["prior_annotations"] = [
        prior("ds-a", "inadmissible", "supported", "supported")
    ]
    import_records([record])
    start_labelling(project, overlap=2)
    item = Item.objects.get(candidate__key="c0")
    first, second = claim_ids(item)
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)
    spans = {
        cid: (EvidenceInput(version.pk, *utf16_span(version.text, quote), quote),)
        for cid, quote in ((first, "opened in 1932"), (second, "It spans the harbour"))
    }
    assignment = AssignmentFactory(item=item)
    annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=assignment.annotator,
        data=AnnotationInput(
            answer_label="admissible",
            claims=tuple(ClaimInput(cid, "supported", evidence=spans[cid]) for cid in spans),
        ),
    )
    item.refresh_from_db()
    assert item.status == ItemStatus.DISAGREEMENT
    view = adjudication_view(project=project, item_id=item.pk, actor=adjudicator)
    assert view.evidence_waivers == {}

    # when the adjudicator says supported without evidence: there is evidence to copy
    with pytest.raises(InvalidInput) as refused:
        resolve(project, item, adjudicator, {first: ("supported", ()), second: ("supported", ())})

    assert [e["field"] for e in refused.value.data["errors"]] == [
        "claims[0].evidence",
        "claims[1].evidence",
    ]


def test_every_problem_of_a_decision_is_reported_at_once(project, imported, adjudicator):
    first, _ = claim_ids(imported)

    with pytest.raises(InvalidInput) as refused:
        resolve(project, imported, adjudicator, {first: ("nonsense", ())}, rationale=" ")

    fields = [e["field"] for e in refused.value.data["errors"]]
    assert fields == ["claims[0].label", "claims", "rationale"]


def test_unresolved_without_a_reason_reports_the_reason(project, imported, adjudicator):
    with pytest.raises(InvalidInput) as refused:
        adjudication_mark_unresolved(
            project=project,
            item_id=imported.pk,
            actor=adjudicator,
            expected_version=imported.version,
            reason="",
            rationale="x" * 10_001,
        )

    assert [e["field"] for e in refused.value.data["errors"]] == ["reason", "rationale"]


# --- pre-fill ----------------------------------------------------------------------------------


def vote(answer: str | None, claims: dict[int, ClaimVote], *, live: bool = False) -> Vote:
    return Vote(
        item_id=1,
        live=live,
        ref=0,
        slot=None,
        answer_label=answer,
        answer_reason=None,
        claims=claims,
    )


def test_the_pre_fill_holds_what_every_vote_agrees_on():
    a, b = Span(7, 0, 4, "abcd"), Span(7, 10, 12, "xy")
    votes = [
        vote("admissible", {1: ClaimVote("supported", evidence=(a,)), 2: ClaimVote("supported")}),
        vote(
            "admissible",
            {1: ClaimVote("supported", evidence=(b, a)), 2: ClaimVote("not_supported")},
        ),
    ]

    agreed = votes_agreed(votes, [1, 2, 3])

    assert agreed.answer and agreed.vote.answer_label == "admissible"
    assert agreed.claims == {1}
    # the union of the spans, each once, in source order
    assert agreed.vote.claims[1].evidence == (a, b)


def test_nothing_is_pre_filled_where_a_vote_cannot_decide_or_misses_a_label():
    votes = [
        vote("cannot_decide", {1: ClaimVote("supported")}),
        vote("cannot_decide", {}),
    ]

    agreed = votes_agreed(votes, [1])

    assert not agreed.answer and agreed.claims == frozenset()
    assert votes_agreed([], [1]).claims == frozenset()


def test_waivers_cover_only_labels_imported_votes_gave_without_spans():
    span = Span(7, 0, 4, "abcd")
    votes = [
        vote("admissible", {1: ClaimVote("supported"), 2: ClaimVote("contradicted")}),
        vote(
            "admissible", {1: ClaimVote("supported"), 2: ClaimVote("supported", evidence=(span,))}
        ),
        vote("admissible", {3: ClaimVote("contradicted")}, live=True),
        vote("admissible", {4: ClaimVote("not_supported")}),
    ]

    assert imported_evidence_waivers(votes) == {
        1: frozenset({"supported"}),
        2: frozenset({"contradicted"}),
    }


# --- real FaithBench rows --------------------------------------------------------------------


@pytest.mark.shared_data
def test_use_all_of_an_imported_faithbench_vote_resolves(shared_data: Path, adjudicator_fb):
    project, adjudicator = adjudicator_fb
    items = list(disagreement_queue(project=project, filters={}))
    assert items
    waived_total = 0
    for item in items[:10]:
        view = adjudication_view(project=project, item_id=item.pk, actor=adjudicator)
        column = view.annotators[0]
        assert column.imported
        # "Use all": the column's answer and claim labels as they are (no evidence anywhere)
        resolution = adjudication_resolve(
            project=project,
            item_id=item.pk,
            actor=adjudicator,
            expected_version=view.version,
            answer_label=column.vote.answer_label,
            claims=[
                ClaimInput(c.id, column.vote.claims[c.id].label, reason=None) for c in view.claims
            ],
            rationale="Adopted the first annotator's labels.",
        )
        rows = ResolvedClaimLabel.objects.filter(resolution=resolution)
        expected = {c.id for c in view.claims if column.vote.claims[c.id].label != "not_supported"}
        assert {r.claim_id for r in rows if r.evidence_waived} == expected
        waived_total += len(expected)
    assert waived_total > 0


@pytest.fixture
def adjudicator_fb(shared_data: Path) -> tuple[Project, object]:
    call_command(
        "import_workload",
        shared_data / "faithbench" / "data_for_release" / "batch_1.json",
        "--project",
        "fb",
        "--create",
        "--format",
        "faithbench",
        "--no-progress",
        stdout=io.StringIO(),
    )
    project = Project.objects.get(slug="fb")
    start_labelling(project)
    user = UserFactory()
    membership_set(project=project, user=user, role=Role.ADJUDICATOR)
    return project, user
