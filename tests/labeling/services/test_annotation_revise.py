"""annotation_submit on a submitted assignment: append-only revisions, idempotent repeats."""

from __future__ import annotations

import dataclasses

import pytest

from labeling.exceptions import InvalidTransition
from labeling.models import (
    Annotation,
    AnnotationRevision,
    Claim,
    ClaimLabel,
    EvidenceSpan,
    Item,
    ItemStatus,
    SourceVersion,
)
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput
from tests.conftest import row_counts
from tests.factories import AssignmentFactory, start_labelling, utf16_span, work_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def item(project, import_records) -> Item:
    import_records([work_record()])
    start_labelling(project)
    return Item.objects.get(candidate__key="c0")


def labels(item: Item, answer: str = "admissible", second: str = "supported", **extra):
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)

    def cite(quote: str) -> EvidenceInput:
        start, end = utf16_span(version.text, quote)
        return EvidenceInput(version.pk, start, end, quote)

    first_id, second_id = (
        Claim.objects.filter(candidate=item.candidate)
        .order_by("index")
        .values_list("pk", flat=True)
    )
    return AnnotationInput(
        answer_label=answer,
        claims=(
            ClaimInput(first_id, "supported", evidence=(cite("opened in 1932"),)),
            ClaimInput(
                second_id,
                second,
                evidence=(cite("It spans the harbour"),) if second == "supported" else (),
            ),
        ),
        **extra,
    )


def submit(project, assignment, data):
    return annotation_submit(
        project=project, assignment_id=assignment.pk, actor=assignment.annotator, data=data
    )


def test_a_changed_submit_appends_a_revision_and_keeps_the_old_one(project, item):
    # given a submitted annotation
    assignment = AssignmentFactory(item=item)
    first = submit(project, assignment, labels(item)).current
    first_rows = list(ClaimLabel.objects.filter(revision=first).values_list("pk", "label"))
    # when the annotator changes a claim label
    annotation = submit(
        project, assignment, labels(item, second="not_supported", based_on_revision=1)
    )
    # then revision 2 follows revision 1, which is unchanged
    assert annotation.revision_count == 2
    revision = annotation.current
    assert revision.number == 2 and revision.previous == first
    assert revision.content_sha256 != first.content_sha256
    assert list(ClaimLabel.objects.filter(revision=first).values_list("pk", "label")) == first_rows
    assert list(revision.claim_labels.order_by("claim__index").values_list("label", flat=True)) == [
        "supported",
        "not_supported",
    ]
    assert AnnotationRevision.objects.filter(annotation=annotation).count() == 2
    assert Annotation.objects.count() == 1
    # the old evidence is kept with the old revision, the new revision has its own rows
    assert EvidenceSpan.objects.filter(claim_label__revision=first).count() == 2
    assert EvidenceSpan.objects.filter(claim_label__revision=revision).count() == 1


@pytest.mark.parametrize("repeat", ["at once", "after a revision"])
def test_the_same_content_again_writes_nothing(project, item, repeat):
    assignment = AssignmentFactory(item=item)
    submit(project, assignment, labels(item))
    if repeat == "after a revision":
        submit(project, assignment, labels(item, answer="inadmissible", based_on_revision=1))
        data = labels(item, answer="inadmissible", based_on_revision=2)
    else:
        data = labels(item)
    before = row_counts()
    version = Item.objects.get(pk=item.pk).version
    # when the same content is submitted again (a retry), with a different time spent
    annotation = submit(project, assignment, dataclasses.replace(data, time_spent_seconds=99))
    # then nothing is written, not even the item's version
    assert row_counts() == before
    assert Item.objects.get(pk=item.pk).version == version
    assert annotation.revision_count == (2 if repeat == "after a revision" else 1)


def test_a_changed_comment_alone_is_a_new_revision(project, item):
    assignment = AssignmentFactory(item=item)
    submit(project, assignment, labels(item))
    annotation = submit(
        project, assignment, labels(item, comment="second thoughts", based_on_revision=1)
    )
    assert annotation.revision_count == 2
    assert annotation.current.comment == "second thoughts"


@pytest.mark.parametrize("other_answer", ["admissible", "inadmissible"], ids=["consensus", "queue"])
def test_a_revision_is_refused_once_the_votes_were_compared_whatever_the_outcome(
    project, item, other_answer
):
    # given an item whose two votes were compared (agreeing: consensus; differing: the queue)
    a, b = AssignmentFactory(item=item), AssignmentFactory(item=item)
    submit(project, a, labels(item))
    submit(project, b, labels(item, answer=other_answer))
    item.refresh_from_db()
    assert item.status != ItemStatus.OPEN
    before = row_counts()
    # when the first annotator tries to revise
    with pytest.raises(InvalidTransition) as refused:
        submit(project, a, labels(item, answer="abstained", based_on_revision=1))
    # then nothing changed, and the refusal does not tell how the other vote went
    assert row_counts() == before
    assert str(refused.value) == (
        f"item {item.pk} is closed: its votes were compared, so annotations can no longer "
        "be revised"
    )
    # repeating the unchanged labels is still answered (idempotent)
    assert submit(project, a, labels(item)).revision_count == 1
