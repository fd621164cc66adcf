"""items_prioritise: move open items to the front of the serving queue."""

from __future__ import annotations

import pytest

from labeling.models import Item, ItemStatus, Role
from labeling.services import item_claim_next, items_prioritise, project_create
from tests.conftest import native_record
from tests.factories import start_labelling

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(project, import_records):
    import_records([native_record(f"q{i}") for i in range(1, 4)])
    start_labelling(project, overlap=1)
    return list(Item.objects.filter(project=project).order_by("queue_position", "pk"))


def test_the_given_items_are_served_first_in_the_given_order(project, queued, member):
    last, before_last = queued[-1], queued[-2]
    # when
    moved = items_prioritise(project=project, item_ids=[last.pk, before_last.pk])
    # then
    assert moved == 2
    order = list(
        Item.objects.filter(project=project)
        .order_by("queue_position", "pk")
        .values_list("pk", flat=True)
    )
    assert order[:2] == [last.pk, before_last.pk]
    assignment = item_claim_next(project=project, actor=member(Role.ANNOTATOR))
    assert assignment.item_id == last.pk


def test_items_not_open_or_of_another_project_are_left_alone(project, queued, import_records):
    Item.objects.filter(pk=queued[-1].pk).update(status=ItemStatus.DISAGREEMENT)
    other = project_create(slug="other", name="Other")
    import_records([native_record("x1")], target=other)
    foreign = Item.objects.filter(project=other).first()
    before = dict(Item.objects.values_list("pk", "queue_position"))
    # when
    assert items_prioritise(project=project, item_ids=[queued[-1].pk, foreign.pk, 424242]) == 0
    # then
    assert dict(Item.objects.values_list("pk", "queue_position")) == before
