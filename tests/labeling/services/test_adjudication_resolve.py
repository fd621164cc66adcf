"""adjudication_resolve: final labels with a rationale, optimistic locking, corrections."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from labeling.exceptions import (
    InvalidInput,
    InvalidTransition,
    NotFound,
    PermissionDenied,
    StaleVersion,
)
from labeling.models import (
    CANNOT_DECIDE,
    Claim,
    Disagreement,
    EvidenceSpan,
    Item,
    ItemStatus,
    Resolution,
    Role,
    SourceVersion,
)
from labeling.services import membership_set
from labeling.services.adjudication import adjudication_resolve
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput
from labeling.signals import items_resolved
from tests.conftest import row_counts
from tests.factories import (
    WORK_SOURCE,
    AssignmentFactory,
    UserFactory,
    start_labelling,
    utf16_span,
    work_record,
)


def cite(item: Item, quote: str) -> EvidenceInput:
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)
    start, end = utf16_span(version.text, quote)
    return EvidenceInput(version.pk, start, end, quote)


def claims_of(item: Item, second: str = "supported", quote: str = "It spans the harbour"):
    first_id, second_id = (
        Claim.objects.filter(candidate=item.candidate)
        .order_by("index")
        .values_list("pk", flat=True)
    )
    return (
        ClaimInput(first_id, "supported", evidence=(cite(item, "opened in 1932"),)),
        ClaimInput(
            second_id, second, evidence=(cite(item, quote),) if second == "supported" else ()
        ),
    )


def disputed(project, answers=("admissible", "inadmissible")) -> tuple[Item, list]:
    """Item c0 with two annotations whose answers differ; returns (item, assignments)."""
    item = Item.objects.get(project=project, candidate__key="c0")
    assignments = []
    for answer in answers:
        assignment = AssignmentFactory(item=item)
        annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=assignment.annotator,
            data=AnnotationInput(answer, claims=claims_of(item)),
        )
        assignments.append(assignment)
    item.refresh_from_db()
    assert item.status == ItemStatus.DISAGREEMENT
    return item, assignments


@pytest.fixture
def item(project, import_records) -> Item:
    import_records([work_record()])
    start_labelling(project)
    return disputed(project)[0]


@pytest.fixture
def adjudicator(member):
    return member(Role.ADJUDICATOR)


def resolve(project, item, actor, version=None, **overrides):
    kwargs = {
        "answer_label": "admissible",
        "claims": claims_of(item),
        "rationale": "The source states both facts.",
    }
    kwargs.update(overrides)
    return adjudication_resolve(
        project=project,
        item_id=item.pk,
        actor=actor,
        expected_version=item.version if version is None else version,
        **kwargs,
    )


@pytest.mark.django_db
def test_resolves_the_disagreement_with_labels_evidence_and_rationale(
    project, item, adjudicator, django_capture_on_commit_callbacks
):
    seen = []

    def receiver(**kwargs):
        seen.append((kwargs["project_id"], kwargs["item_ids"], kwargs["statuses"]))

    items_resolved.connect(receiver)
    try:
        # when the adjudicator decides (a fresh browser selection in UTF-16 offsets)
        with django_capture_on_commit_callbacks(execute=True):
            resolution = resolve(
                project, item, adjudicator, claims=claims_of(item, quote="harbour of Sydney")
            )
    finally:
        items_resolved.disconnect(receiver)
    # then an adjudicated resolution is the item's, the disagreement is closed by it
    item_before = item.version
    item.refresh_from_db()
    assert item.status == ItemStatus.RESOLVED and item.resolution == resolution
    assert item.version == item_before + 1
    assert (resolution.status, resolution.number, resolution.supersedes) == ("adjudicated", 1, None)
    assert resolution.adjudicator == adjudicator
    assert resolution.rationale == "The source states both facts."
    assert resolution.answer_label == "admissible"
    assert resolution.policy.frozen_at is not None
    labels = resolution.claim_labels.order_by("claim__index")
    assert [cl.label for cl in labels] == ["supported", "supported"]
    span = labels[1].evidence.get()
    assert WORK_SOURCE[span.start : span.end] == span.quote == "harbour of Sydney"
    disagreement = Disagreement.objects.get(item=item)
    assert disagreement.closed_by == resolution and disagreement.closed_at is not None
    # announced after commit
    assert seen == [(project.pk, (item.pk,), ("adjudicated",))]


@pytest.mark.django_db
def test_evidence_copied_from_an_annotation_in_code_points_is_accepted(project, item, adjudicator):
    # given a span as stored in an annotation (code points)
    stored = EvidenceSpan.objects.filter(quote="It spans the harbour").first()
    first_id, second_id = (
        Claim.objects.filter(candidate=item.candidate)
        .order_by("index")
        .values_list("pk", flat=True)
    )
    copied = EvidenceInput(
        stored.source_version_id, stored.start, stored.end, stored.quote, unit="codepoint"
    )
    resolution = resolve(
        project,
        item,
        adjudicator,
        claims=(
            ClaimInput(first_id, "not_supported"),
            ClaimInput(second_id, "supported", evidence=(copied,)),
        ),
    )
    span = resolution.claim_labels.get(claim_id=second_id).evidence.get()
    assert (span.start, span.end) == (stored.start, stored.end)


@pytest.mark.django_db
def test_a_stale_version_is_refused_and_nothing_is_written(project, item, adjudicator):
    before = row_counts()
    with pytest.raises(StaleVersion):
        resolve(project, item, adjudicator, version=item.version - 1)
    assert row_counts() == before


@pytest.mark.django_db
def test_the_second_of_two_adjudicators_gets_a_conflict(project, item, adjudicator, member):
    # given two adjudicators who opened the item at the same version
    other = member(Role.ADJUDICATOR)
    version = item.version
    first = resolve(project, item, adjudicator, version=version)
    # when the second decides on the same version
    with pytest.raises(StaleVersion, match="reload"):
        resolve(project, item, other, version=version, answer_label="inadmissible")
    # then the first decision stands
    item.refresh_from_db()
    assert item.resolution == first
    assert Resolution.objects.count() == 1


@pytest.mark.django_db
def test_a_correction_supersedes_the_previous_decision(project, item, adjudicator, member):
    first = resolve(project, item, adjudicator)
    item.refresh_from_db()
    manager = member(Role.MANAGER)
    second = resolve(project, item, manager, answer_label="inadmissible", rationale="Re-read: no.")
    item.refresh_from_db()
    assert item.resolution == second
    assert (second.number, second.supersedes, second.adjudicator) == (2, first, manager)
    # the first is kept unchanged (append-only)
    first.refresh_from_db()
    assert first.answer_label == "admissible"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"rationale": "  "}, "rationale"),
        ({"answer_label": CANNOT_DECIDE}, "answer_label"),
        ({"answer_label": "evidence_unavailable"}, "answer_reason"),
    ],
)
def test_invalid_decisions_are_refused_naming_the_field(
    project, item, adjudicator, overrides, field
):
    before = row_counts()
    with pytest.raises(InvalidInput) as exc:
        resolve(project, item, adjudicator, **overrides)
    assert exc.value.field == field
    assert row_counts() == before


@pytest.mark.django_db
def test_supported_without_evidence_is_refused(project, item, adjudicator):
    first_id, second_id = (
        Claim.objects.filter(candidate=item.candidate)
        .order_by("index")
        .values_list("pk", flat=True)
    )
    with pytest.raises(InvalidInput) as exc:
        resolve(
            project,
            item,
            adjudicator,
            claims=(ClaimInput(first_id, "supported"), ClaimInput(second_id, "not_supported")),
        )
    assert exc.value.field == "claims[0].evidence"


@pytest.mark.django_db
def test_annotators_and_outsiders_cannot_adjudicate(project, item, member):
    with pytest.raises(PermissionDenied):
        resolve(project, item, member(Role.ANNOTATOR))
    with pytest.raises(NotFound):
        resolve(project, item, UserFactory())


@pytest.mark.django_db
def test_self_adjudication_is_refused_unless_the_project_allows_it(project, import_records):
    import_records([work_record()])
    start_labelling(project)
    item, assignments = disputed(project)
    annotator = assignments[0].annotator
    membership_set(project=project, user=annotator, role=Role.ADJUDICATOR)
    with pytest.raises(PermissionDenied, match="self-adjudication"):
        resolve(project, item, annotator)
    project.allow_self_adjudication = True
    project.save(update_fields=["allow_self_adjudication"])
    assert resolve(project, item, annotator).adjudicator == annotator


@pytest.mark.django_db
def test_a_consensus_item_is_not_adjudicated(project, item, adjudicator):
    # c1: two agreeing votes → consensus; it cannot be adjudicated
    other = Item.objects.get(candidate__key="c1")
    claim = Claim.objects.get(candidate=other.candidate)
    for _ in range(2):
        assignment = AssignmentFactory(item=other)
        annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=assignment.annotator,
            data=AnnotationInput("inadmissible", claims=(ClaimInput(claim.pk, "not_supported"),)),
        )
    other.refresh_from_db()
    with pytest.raises(InvalidTransition, match="consensus"):
        adjudication_resolve(
            project=project,
            item_id=other.pk,
            actor=adjudicator,
            expected_version=other.version,
            answer_label="admissible",
            claims=(ClaimInput(claim.pk, "not_supported"),),
            rationale="x",
        )


@pytest.mark.django_db
def test_an_open_item_is_not_adjudicated(project, import_records, adjudicator):
    import_records([work_record("q9")])
    item = Item.objects.filter(candidate__question__external_id="q9").first()
    start_labelling(project)
    item.refresh_from_db()
    with pytest.raises(InvalidTransition, match="collecting"):
        resolve(project, item, adjudicator)


@pytest.mark.django_db
def test_an_item_of_another_project_is_not_found(project, item, adjudicator):
    with pytest.raises(NotFound):
        adjudication_resolve(
            project=project,
            item_id=10**9,
            actor=adjudicator,
            expected_version=0,
            answer_label="admissible",
            claims=(),
            rationale="x",
        )


@pytest.mark.django_db(transaction=True)
def test_concurrent_adjudicators_one_wins_the_other_conflicts(project, import_records):
    # given an item in the queue and two adjudicators holding the same version
    import_records([work_record()])
    start_labelling(project)
    item, _ = disputed(project)
    judges = []
    for _ in range(2):
        user = UserFactory()
        membership_set(project=project, user=user, role=Role.ADJUDICATOR)
        judges.append(user)
    version = item.version
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def decide(judge):
        try:
            barrier.wait()
            resolve(project, item, judge, version=version)
            outcomes.append("ok")
        except StaleVersion:
            outcomes.append("stale")
        finally:
            connection.close()

    # when both decide at once
    threads = [threading.Thread(target=decide, args=(j,)) for j in judges]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # then exactly one decision is written; the other gets a conflict
    assert sorted(outcomes) == ["ok", "stale"]
    assert Resolution.objects.filter(item=item).count() == 1
