"""Bulk actions of managers: prioritise (role-checked) and return to the queue (append-only)."""

from __future__ import annotations

import dataclasses

import pytest

from labeling.exceptions import InvalidInput, NotFound, PermissionDenied
from labeling.models import (
    Annotation,
    AnnotationRevision,
    DerivedChange,
    DerivedKind,
    Disagreement,
    Item,
    ItemStatus,
    Resolution,
    ResolutionStatus,
    Role,
)
from labeling.services import (
    annotation_submit,
    item_claim_next,
    items_bulk_prioritise,
    items_return_to_queue,
)
from tests.conftest import native_record
from tests.factories import UserFactory, start_labelling
from tests.worlds import own_labels

pytestmark = pytest.mark.django_db


def vote(project, user, *, answer="admissible"):
    assignment = item_claim_next(project=project, actor=user)
    data = dataclasses.replace(own_labels(assignment.item), answer_label=answer)
    annotation_submit(project=project, assignment_id=assignment.pk, actor=user, data=data)
    return assignment.item


@pytest.fixture
def flow(project, import_records, member):
    """Overlap 2: the first item resolved by consensus, the second in disagreement, the rest
    open (4 items: two questions with two candidates each)."""
    import_records([native_record("q1"), native_record("q2")])
    start_labelling(project, overlap=2)
    a, b = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    resolved = vote(project, a)
    assert vote(project, b) == resolved
    disputed = vote(project, a)
    assert vote(project, b, answer="inadmissible") == disputed
    resolved.refresh_from_db()
    disputed.refresh_from_db()
    assert (resolved.status, disputed.status) == (ItemStatus.RESOLVED, ItemStatus.DISAGREEMENT)
    opened = Item.objects.filter(project=project, status=ItemStatus.OPEN).order_by("pk")
    return {"resolved": resolved, "disputed": disputed, "open": list(opened), "a": a, "b": b}


def counts():
    return (
        Annotation.objects.count(),
        AnnotationRevision.objects.count(),
        Resolution.objects.count(),
        Disagreement.objects.count(),
    )


def test_resolved_and_disputed_items_go_back_open_and_nothing_is_deleted(project, flow, member):
    resolved, disputed, opened = flow["resolved"], flow["disputed"], flow["open"][0]
    before = counts()
    # when
    result = items_return_to_queue(
        project=project,
        actor=member(Role.MANAGER),
        item_ids=[resolved.pk, disputed.pk, opened.pk, 424242],
    )
    # then
    assert result.changed == tuple(sorted([resolved.pk, disputed.pk]))
    assert result.skipped == tuple(sorted([opened.pk, 424242]))
    assert counts() == before  # append-only: every vote, resolution and disagreement kept
    for item in (resolved, disputed):
        item_before = item.overlap, item.version
        item.refresh_from_db()
        assert item.status == ItemStatus.OPEN
        assert item.resolution_id is None
        assert (item.overlap, item.version) == (item_before[0] + 1, item_before[1] + 1)
    assert not Disagreement.objects.filter(item=disputed, closed_at__isnull=True).exists()
    last = max(Item.objects.exclude(pk__in=result.changed).values_list("queue_position", flat=True))
    assert (
        min(Item.objects.filter(pk__in=result.changed).values_list("queue_position", flat=True))
        > last
    )


def test_a_returned_item_collects_one_more_vote_and_is_compared_again(project, flow, member):
    manager, resolved = member(Role.MANAGER), flow["resolved"]
    items_return_to_queue(project=project, actor=manager, item_ids=[resolved.pk])
    items_bulk_prioritise(project=project, actor=manager, item_ids=[resolved.pk])
    # the earlier annotators are not served it again; a third one is
    assert item_claim_next(project=project, actor=flow["a"]).item_id != resolved.pk
    # when
    assert vote(project, member(Role.ANNOTATOR)) == resolved
    # then: three agreeing votes, a new consensus numbered after the first
    resolved.refresh_from_db()
    assert resolved.status == ItemStatus.RESOLVED
    assert list(
        Resolution.objects.filter(item=resolved).order_by("number").values_list("number", "status")
    ) == [(1, ResolutionStatus.CONSENSUS), (2, ResolutionStatus.CONSENSUS)]
    assert resolved.resolution.number == 2


def test_what_reads_the_items_is_marked_stale_not_the_agreement(project, flow, member):
    from labeling.models import Question
    from tests.factories import make_spec

    def marks(kind):
        return DerivedChange.objects.filter(project=project, kind=kind).count()

    manager = member(Role.MANAGER)
    # no calibration spec, no audit: only the reliability reads the withdrawn resolution
    before = {kind: marks(kind) for kind in DerivedKind.values}
    items_return_to_queue(project=project, actor=manager, item_ids=[flow["resolved"].pk])
    after = {kind: marks(kind) for kind in DerivedKind.values}
    assert after[DerivedKind.RELIABILITY] == before[DerivedKind.RELIABILITY] + 1
    assert after[DerivedKind.CALIBRATION] == before[DerivedKind.CALIBRATION]
    assert after[DerivedKind.AUDIT] == before[DerivedKind.AUDIT]
    assert after[DerivedKind.AGREEMENT] == before[DerivedKind.AGREEMENT]
    # a spec calibrating on the item's partition reads it
    Question.objects.filter(project=project).update(partition="calibration")
    make_spec(project, thresholds=[0.5])
    before = {kind: marks(kind) for kind in DerivedKind.values}
    items_return_to_queue(project=project, actor=manager, item_ids=[flow["disputed"].pk])
    after = {kind: marks(kind) for kind in DerivedKind.values}
    assert after[DerivedKind.CALIBRATION] == before[DerivedKind.CALIBRATION] + 1
    assert after[DerivedKind.AGREEMENT] == before[DerivedKind.AGREEMENT]


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR])
@pytest.mark.parametrize("action", [items_return_to_queue, items_bulk_prioritise])
def test_only_managers_may_run_bulk_actions(project, flow, member, role, action):
    item = flow["resolved"] if action is items_return_to_queue else flow["open"][0]
    before = Item.objects.values_list("pk", "status", "queue_position").get(pk=item.pk)
    with pytest.raises(PermissionDenied):
        action(project=project, actor=member(role), item_ids=[item.pk])
    with pytest.raises(NotFound):
        action(project=project, actor=UserFactory(), item_ids=[item.pk])
    assert Item.objects.values_list("pk", "status", "queue_position").get(pk=item.pk) == before


@pytest.mark.parametrize(
    ("item_ids", "extra", "field"),
    [([], 1, "items"), (["1"], 1, "items"), ([0], 1, "items"), (None, 0, "extra_votes")],
)
def test_invalid_requests_are_refused(project, flow, member, item_ids, extra, field):
    ids = [flow["resolved"].pk] if item_ids is None else item_ids
    with pytest.raises(InvalidInput) as caught:
        items_return_to_queue(
            project=project, actor=member(Role.MANAGER), item_ids=ids, extra_votes=extra
        )
    assert caught.value.field == field


def test_prioritise_moves_open_items_first_and_reports_the_others(project, flow, member):
    target = flow["open"][-1]
    result = items_bulk_prioritise(
        project=project, actor=member(Role.MANAGER), item_ids=[target.pk, flow["resolved"].pk]
    )
    assert result.changed == (target.pk,)
    assert result.skipped == (flow["resolved"].pk,)
    first = Item.objects.filter(project=project).order_by("queue_position", "pk").first()
    assert first.pk == target.pk
