"""adjudication_mark_unresolved: the unresolved outcome with a reason from the taxonomy."""

from __future__ import annotations

import pytest

from labeling.exceptions import InvalidInput, InvalidTransition, PermissionDenied, StaleVersion
from labeling.models import (
    Assignment,
    Claim,
    Disagreement,
    Item,
    ItemStatus,
    Resolution,
    Role,
    UnresolvedReason,
)
from labeling.selectors.review import project_progress
from labeling.services import membership_set
from labeling.services.adjudication import adjudication_mark_unresolved, adjudication_resolve
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput
from labeling.signals import items_resolved
from tests.conftest import row_counts
from tests.factories import AssignmentFactory, start_labelling, work_record

pytestmark = pytest.mark.django_db


def vote(project, item, answer, label):
    claim = Claim.objects.get(candidate=item.candidate)
    assignment = AssignmentFactory(item=item)
    annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=assignment.annotator,
        data=AnnotationInput(answer, claims=(ClaimInput(claim.pk, label),)),
    )


@pytest.fixture
def item(project, import_records) -> Item:
    """Item c1 (one claim) in the queue: one annotator cannot decide, the other can."""
    import_records([work_record()])
    start_labelling(project)
    item = Item.objects.get(candidate__key="c1")
    vote(project, item, "inadmissible", "not_supported")
    vote(project, item, "inadmissible", "cannot_decide")
    item.refresh_from_db()
    assert item.status == ItemStatus.DISAGREEMENT
    return item


@pytest.fixture
def adjudicator(member):
    return member(Role.ADJUDICATOR)


def mark(project, item, actor, reason=UnresolvedReason.INSUFFICIENT_EVIDENCE, **kwargs):
    kwargs.setdefault("expected_version", item.version)
    return adjudication_mark_unresolved(
        project=project, item_id=item.pk, actor=actor, reason=reason, **kwargs
    )


@pytest.mark.parametrize("reason", UnresolvedReason.values)
def test_marks_the_item_unresolved_with_a_reason(
    project, item, adjudicator, reason, django_capture_on_commit_callbacks
):
    seen = []

    def receiver(**kwargs):
        seen.append((kwargs["item_ids"], kwargs["statuses"]))

    items_resolved.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            resolution = mark(project, item, adjudicator, reason=reason, rationale="see notes")
    finally:
        items_resolved.disconnect(receiver)
    # then an unresolved resolution without labels is the item's; the disagreement is closed
    item.refresh_from_db()
    assert item.status == ItemStatus.RESOLVED and item.resolution == resolution
    assert (resolution.status, resolution.unresolved_reason) == ("unresolved", reason)
    assert resolution.answer_label is None and not resolution.claim_labels.exists()
    assert (resolution.adjudicator, resolution.rationale) == (adjudicator, "see notes")
    assert Disagreement.objects.get(item=item).closed_by == resolution
    assert seen == [((item.pk,), ("unresolved",))]
    # and the dashboard counts it apart
    assert project_progress(project=project).unresolved == 1


@pytest.mark.parametrize(
    ("reason", "rationale"),
    [("unclear", "x"), ("", "x"), (UnresolvedReason.OTHER, ""), (UnresolvedReason.OTHER, "   ")],
)
def test_an_unknown_reason_or_other_without_rationale_is_refused(
    project, item, adjudicator, reason, rationale
):
    before = row_counts()
    with pytest.raises(InvalidInput) as exc:
        mark(project, item, adjudicator, reason=reason, rationale=rationale)
    assert exc.value.field in ("reason", "rationale")
    assert row_counts() == before


def test_a_stale_version_is_refused(project, item, adjudicator):
    with pytest.raises(StaleVersion):
        mark(project, item, adjudicator, expected_version=item.version + 1)
    assert not Resolution.objects.filter(status="unresolved").exists()


def test_unresolved_can_be_corrected_to_a_label_and_back(project, item, adjudicator):
    # given an unresolved item
    first = mark(project, item, adjudicator, reason=UnresolvedReason.AMBIGUOUS_GUIDELINE)
    item.refresh_from_db()
    claim = Claim.objects.get(candidate=item.candidate)
    # when a later decision gives it a label
    second = adjudication_resolve(
        project=project,
        item_id=item.pk,
        actor=adjudicator,
        expected_version=item.version,
        answer_label="inadmissible",
        claims=(ClaimInput(claim.pk, "not_supported"),),
        rationale="The guideline was clarified.",
    )
    item.refresh_from_db()
    # and a third marks it unresolved again
    third = mark(project, item, adjudicator, reason=UnresolvedReason.SOURCE_PROBLEM)
    # then each supersedes the one before; all are kept
    assert (second.number, second.supersedes) == (2, first)
    assert (third.number, third.supersedes) == (3, second)
    assert Item.objects.get(pk=item.pk).resolution == third
    assert Resolution.objects.filter(item=item).count() == 3


def test_a_consensus_item_cannot_be_marked_unresolved(project, item, adjudicator):
    other = Item.objects.get(candidate__key="c0")
    claims = Claim.objects.filter(candidate=other.candidate).order_by("index")
    for _ in range(2):
        assignment = AssignmentFactory(item=other)
        annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=assignment.annotator,
            data=AnnotationInput(
                "inadmissible",
                claims=tuple(ClaimInput(c.pk, "not_supported") for c in claims),
            ),
        )
    other.refresh_from_db()
    assert other.resolution.status == "consensus"
    with pytest.raises(InvalidTransition):
        mark(project, other, adjudicator)


def test_an_annotator_cannot_mark_unresolved(project, item, member):
    with pytest.raises(PermissionDenied):
        mark(project, item, member(Role.ANNOTATOR))


def test_an_annotator_of_the_item_turned_adjudicator_cannot_mark_it(project, item):
    annotator = Assignment.objects.filter(item=item).first().annotator
    membership_set(project=project, user=annotator, role=Role.ADJUDICATOR)
    with pytest.raises(PermissionDenied, match="self-adjudication"):
        mark(project, item, annotator)
