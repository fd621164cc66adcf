"""annotation_submit: the first submit of a leased assignment, its validation and its refusals."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from labeling.exceptions import (
    InvalidInput,
    InvalidTransition,
    LeaseExpired,
    NotFound,
    PermissionDenied,
)
from labeling.models import (
    CANNOT_DECIDE,
    Annotation,
    AssignmentStatus,
    Claim,
    Item,
    ItemStatus,
    Role,
    SourceVersion,
)
from labeling.services import membership_set, project_create
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput
from tests.conftest import row_counts
from tests.factories import (
    WORK_SOURCE,
    AssignmentFactory,
    UserFactory,
    start_labelling,
    utf16_span,
    work_record,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def item(project, import_records) -> Item:
    import_records([work_record(), work_record("q2")])
    start_labelling(project)
    return Item.objects.get(candidate__key="c0", candidate__question__external_id="q1")


def evidence(item: Item, quote: str, occurrence: int = 0) -> EvidenceInput:
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)
    start, end = utf16_span(version.text, quote, occurrence)
    return EvidenceInput(source_version_id=version.pk, start=start, end=end, quote=quote)


def claim_ids(item: Item) -> list[int]:
    return list(
        Claim.objects.filter(candidate=item.candidate)
        .order_by("index")
        .values_list("pk", flat=True)
    )


def agreeing(item: Item, **overrides) -> AnnotationInput:
    """Both claims supported with evidence, answer admissible."""
    first, second = claim_ids(item)
    data = AnnotationInput(
        answer_label="admissible",
        claims=(
            ClaimInput(first, "supported", evidence=(evidence(item, "The bridge opened in 1932"),)),
            ClaimInput(second, "supported", evidence=(evidence(item, "It spans the harbour"),)),
        ),
        comment="clear",
        time_spent_seconds=42.5,
    )
    return dataclasses.replace(data, **overrides)


def submit(project, assignment, data):
    return annotation_submit(
        project=project, assignment_id=assignment.pk, actor=assignment.annotator, data=data
    )


def test_first_submit_creates_revision_one_and_marks_the_assignment_submitted(project, item):
    # given a leased assignment
    assignment = AssignmentFactory(item=item)
    # when the annotator submits
    annotation = submit(project, assignment, agreeing(item))
    # then one annotation with revision 1 under the frozen policy, and the assignment submitted
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert assignment.submitted_at is not None
    assert annotation.revision_count == 1
    revision = annotation.current
    assert revision.number == 1 and revision.previous is None
    assert revision.created_by == assignment.annotator
    assert revision.policy == project.policies.get(frozen_at__isnull=False)
    assert revision.answer_label == "admissible" and revision.answer_reason is None
    assert revision.comment == "clear" and revision.time_spent_seconds == 42.5
    assert len(revision.content_sha256) == 64
    assert [cl.label for cl in revision.claim_labels.order_by("claim__index")] == [
        "supported",
        "supported",
    ]
    # the item is still open: one vote of two
    item.refresh_from_db()
    assert item.status == ItemStatus.OPEN


def test_evidence_is_stored_in_code_points_of_the_pinned_text(project, item):
    # given a selection after an emoji with a skin tone (4 UTF-16 units, 2 code points)
    assignment = AssignmentFactory(item=item)
    cited = evidence(item, "It spans the harbour of Sydney")
    # when submitted
    first, second = claim_ids(item)
    annotation = submit(
        project,
        assignment,
        agreeing(
            item,
            claims=(
                ClaimInput(first, "supported", evidence=(evidence(item, "opened in 1932"),)),
                ClaimInput(second, "supported", evidence=(cited,)),
            ),
        ),
    )
    # then the stored offsets are code points and slice out the quote
    span = annotation.current.claim_labels.get(claim_id=second).evidence.get()
    assert (span.start, span.end) == (cited.start - 2, cited.end - 2)
    assert WORK_SOURCE[span.start : span.end] == span.quote == "It spans the harbour of Sydney"


def test_cannot_decide_and_evidence_unavailable_are_accepted(project, item):
    assignment = AssignmentFactory(item=item)
    first, second = claim_ids(item)
    annotation = submit(
        project,
        assignment,
        AnnotationInput(
            answer_label="evidence_unavailable",
            answer_reason="blocked",
            claims=(
                ClaimInput(first, CANNOT_DECIDE),
                ClaimInput(second, "evidence_unavailable", reason="not_found"),
            ),
        ),
    )
    revision = annotation.current
    assert (revision.answer_label, revision.answer_reason) == ("evidence_unavailable", "blocked")
    assert [(c.label, c.reason) for c in revision.claim_labels.order_by("claim__index")] == [
        (CANNOT_DECIDE, None),
        ("evidence_unavailable", "not_found"),
    ]


def test_a_span_cited_twice_for_one_claim_is_kept_once(project, item):
    assignment = AssignmentFactory(item=item)
    first, second = claim_ids(item)
    twice = evidence(item, "opened in 1932")
    annotation = submit(
        project,
        assignment,
        agreeing(
            item,
            claims=(
                ClaimInput(first, "supported", evidence=(twice, twice)),
                ClaimInput(second, "not_supported"),
            ),
        ),
    )
    assert annotation.current.claim_labels.get(claim_id=first).evidence.count() == 1


def test_the_item_is_compared_when_the_nth_vote_arrives(project, item):
    # given two annotators (overlap 2)
    a, b = AssignmentFactory(item=item), AssignmentFactory(item=item)
    submit(project, a, agreeing(item))
    item.refresh_from_db()
    assert item.status == ItemStatus.OPEN
    # when the second submits the same labels
    submit(project, b, agreeing(item, comment="other words"))
    # then the item is resolved by consensus in the same transaction
    item.refresh_from_db()
    assert item.status == ItemStatus.RESOLVED
    assert item.resolution.status == "consensus"


def test_a_leased_assignment_past_its_expiry_that_still_holds_its_slot_is_accepted(project, item):
    now = timezone.now()
    assignment = AssignmentFactory(
        item=item, leased_at=now - timedelta(hours=2), lease_expires_at=now - timedelta(hours=1)
    )
    submit(project, assignment, agreeing(item))
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (AssignmentStatus.EXPIRED, "your lease expired and the slot was given back"),
        (AssignmentStatus.SKIPPED, "you skipped this item"),
    ],
)
def test_a_submit_after_the_slot_was_given_back_is_refused_and_saves_nothing(
    project, item, status, message
):
    # given an assignment whose lease was released (or skipped)
    extra = {"skip_reason": "other"} if status == AssignmentStatus.SKIPPED else {}
    assignment = AssignmentFactory(item=item, status=status, ended_at=timezone.now(), **extra)
    before = row_counts()
    # when it submits late
    with pytest.raises(LeaseExpired, match=message) as exc:
        submit(project, assignment, agreeing(item))
    # then a conflict, and no row written
    assert "not saved" in exc.value.message
    assert row_counts() == before


def test_an_assignment_of_someone_else_is_not_found(project, item):
    assignment = AssignmentFactory(item=item)
    other = UserFactory()
    membership_set(project=project, user=other, role=Role.ANNOTATOR)
    with pytest.raises(NotFound):
        annotation_submit(
            project=project, assignment_id=assignment.pk, actor=other, data=agreeing(item)
        )


def test_an_assignment_of_another_project_is_not_found(project, item, import_records):
    other = project_create(slug="other", name="Other")
    import_records([work_record("x1")], target=other)
    start_labelling(other)
    assignment = AssignmentFactory(item=Item.objects.filter(project=other).first())
    membership_set(project=project, user=assignment.annotator, role=Role.ANNOTATOR)
    with pytest.raises(NotFound):
        submit(project, assignment, agreeing(item))


def test_a_non_member_is_not_found_and_a_non_annotator_is_refused(project, item):
    assignment = AssignmentFactory(item=item)
    membership_set(project=project, user=assignment.annotator, role=Role.ADJUDICATOR)
    with pytest.raises(PermissionDenied):
        submit(project, assignment, agreeing(item))
    assignment.annotator.memberships.all().delete()
    with pytest.raises(NotFound):
        submit(project, assignment, agreeing(item))


def test_a_submit_before_labelling_starts_is_refused(import_records):
    fresh = project_create(slug="fresh", name="Fresh")
    import_records([work_record()], target=fresh)
    item = Item.objects.get(project=fresh, candidate__key="c1")
    assignment = AssignmentFactory(item=item)
    claim = Claim.objects.get(candidate=item.candidate)
    with pytest.raises(InvalidTransition, match="not started"):
        submit(
            fresh,
            assignment,
            AnnotationInput("admissible", claims=(ClaimInput(claim.pk, "not_supported"),)),
        )


def _invalid_cases():
    """(name, build(item) -> AnnotationInput, field) of inputs the service refuses."""

    def claims(item, *labels):
        return tuple(
            ClaimInput(pk, label) if isinstance(label, str) else ClaimInput(pk, *label)
            for pk, label in zip(claim_ids(item), labels, strict=False)
        )

    def with_evidence(item, ev):
        first, second = claim_ids(item)
        return agreeing(
            item,
            claims=(
                ClaimInput(first, "supported", evidence=(ev,)),
                ClaimInput(second, "not_supported"),
            ),
        )

    def other_claim(item):
        return Claim.objects.exclude(candidate=item.candidate).first().pk

    def other_source(item):
        return SourceVersion.objects.exclude(retrievals__question=item.candidate.question).first()

    return [
        ("unknown answer label", lambda i: agreeing(i, answer_label="fine"), "answer_label"),
        (
            "unavailable without reason",
            lambda i: agreeing(i, answer_label="evidence_unavailable"),
            "answer_reason",
        ),
        (
            "unknown reason",
            lambda i: agreeing(i, answer_label="evidence_unavailable", answer_reason="lost"),
            "answer_reason",
        ),
        (
            "reason without unavailable",
            lambda i: agreeing(i, answer_reason="blocked"),
            "answer_reason",
        ),
        (
            "unknown claim label",
            lambda i: agreeing(i, claims=claims(i, "true", "supported")),
            "claims[0].label",
        ),
        (
            "claim unavailable without reason",
            lambda i: agreeing(i, claims=claims(i, "not_supported", "evidence_unavailable")),
            "claims[1].reason",
        ),
        (
            "supported without evidence",
            lambda i: agreeing(i, claims=claims(i, "not_supported", "supported")),
            "claims[1].evidence",
        ),
        ("a claim unlabelled", lambda i: agreeing(i, claims=claims(i, "not_supported")), "claims"),
        (
            "a claim labelled twice",
            lambda i: agreeing(
                i,
                claims=(
                    ClaimInput(claim_ids(i)[0], "not_supported"),
                    ClaimInput(claim_ids(i)[0], "not_supported"),
                    ClaimInput(claim_ids(i)[1], "not_supported"),
                ),
            ),
            "claims[1].claim_id",
        ),
        (
            "a claim of another item",
            lambda i: agreeing(
                i,
                claims=(
                    *claims(i, "not_supported", "not_supported"),
                    ClaimInput(other_claim(i), "supported"),
                ),
            ),
            "claims[2].claim_id",
        ),
        (
            "evidence from a source not pinned to the question",
            lambda i: with_evidence(
                i, EvidenceInput(other_source(i).pk, 0, 3, other_source(i).text[:3])
            ),
            "claims[0].evidence[0].source_version_id",
        ),
        (
            "a quote that differs from the text",
            lambda i: with_evidence(
                i, dataclasses.replace(evidence(i, "bridge opened"), quote="bridge opens.")
            ),
            "claims[0].evidence[0].quote",
        ),
        (
            "an offset inside a surrogate pair",
            lambda i: with_evidence(
                i,
                dataclasses.replace(
                    evidence(i, "1932 \U0001f44d"),
                    end=evidence(i, "1932 \U0001f44d").end - 1,
                ),
            ),
            "claims[0].evidence[0].end",
        ),
        (
            "a span splitting a grapheme cluster",
            lambda i: with_evidence(i, evidence(i, "1932 \U0001f44d")),
            "claims[0].evidence[0].end",
        ),
        (
            "a span splitting CRLF",
            lambda i: with_evidence(i, evidence(i, ".\r")),
            "claims[0].evidence[0].end",
        ),
        ("negative time", lambda i: agreeing(i, time_spent_seconds=-1), "time_spent_seconds"),
        ("more than a day", lambda i: agreeing(i, time_spent_seconds=86_401), "time_spent_seconds"),
        (
            "not a number",
            lambda i: agreeing(i, time_spent_seconds=float("nan")),
            "time_spent_seconds",
        ),
        ("a huge comment", lambda i: agreeing(i, comment="x" * 10_001), "comment"),
    ]


@pytest.mark.parametrize(
    ("build", "field"),
    [(b, f) for _, b, f in _invalid_cases()],
    ids=[n for n, _, _ in _invalid_cases()],
)
def test_invalid_input_is_refused_naming_the_field_and_nothing_is_written(
    project, item, build, field
):
    # given a leased assignment and an invalid submit
    assignment = AssignmentFactory(item=item)
    data = build(item)
    before = row_counts()
    # when submitted
    with pytest.raises(InvalidInput) as exc:
        submit(project, assignment, data)
    # then the error names the field, and nothing changed
    assert exc.value.field == field
    assert exc.value.message.startswith(field + ":")
    assert row_counts() == before
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.LEASED
    assert not Annotation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_last_votes_submitted_at_once_are_both_counted(project, import_records):
    # given an item with both slots leased (overlap 2)
    import_records([work_record()])
    start_labelling(project)
    item = Item.objects.get(candidate__key="c0")
    assignments = [AssignmentFactory(item=item), AssignmentFactory(item=item)]
    payloads = [agreeing(item), agreeing(item, answer_label="inadmissible")]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(assignment, data):
        try:
            barrier.wait()
            submit(project, assignment, data)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    # when both annotators submit at the same moment
    threads = [
        threading.Thread(target=run, args=pair) for pair in zip(assignments, payloads, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # then both are saved and the item was compared exactly once (not left open)
    assert errors == []
    assert Annotation.objects.filter(item=item).count() == 2
    item.refresh_from_db()
    assert item.status == ItemStatus.DISAGREEMENT
    assert item.disagreements.count() == 1


def test_every_problem_of_a_submit_is_reported_at_once(project, item):
    # given a submit with three problems: a reason missing, evidence missing, a label unknown
    assignment = AssignmentFactory(item=item)
    first, second = claim_ids(item)
    data = agreeing(
        item,
        answer_label="evidence_unavailable",
        claims=(ClaimInput(first, "supported"), ClaimInput(second, "made_up")),
    )
    before = row_counts()
    # when submitted
    with pytest.raises(InvalidInput) as exc:
        submit(project, assignment, data)
    # then all three are listed in input order, the first names the error, nothing is written
    problems = exc.value.body()["errors"]
    assert [p["field"] for p in problems] == [
        "answer_reason",
        "claims[0].evidence",
        "claims[1].label",
    ]
    assert problems[1]["reason"] == "supported needs at least one evidence span"
    assert exc.value.field == "answer_reason"
    assert exc.value.message.endswith("(and 2 more)")
    assert row_counts() == before


def test_a_submit_whose_lease_was_revived_before_the_item_lock_is_saved(project, item, monkeypatch):
    """Read expired, leased again by the annotator's next claim before the lock: saved."""
    from labeling.services import annotations as annotations_module
    from labeling.services.assignments import item_claim_next

    long_ago = timezone.now() - timedelta(days=1)
    assignment = AssignmentFactory(
        item=item,
        status=AssignmentStatus.EXPIRED,
        leased_at=long_ago,
        lease_expires_at=long_ago + timedelta(minutes=30),
        ended_at=long_ago + timedelta(minutes=30),
    )
    Item.objects.filter(pk=item.pk).update(assigned_count=0)
    real_lock = annotations_module.project_label_writes_lock
    revived = []

    def claim_in_between(project_id):
        real_lock(project_id)
        revived.append(item_claim_next(project=project, actor=assignment.annotator))

    monkeypatch.setattr(annotations_module, "project_label_writes_lock", claim_in_between)
    annotation = submit(project, assignment, agreeing(item))
    assert [a.pk for a in revived] == [assignment.pk]
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert annotation.assignment_id == assignment.pk and annotation.revision_count == 1
