"""labeling.bulk: plain-row inserts and updates, on whichever database the suite runs."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from labeling.bulk import insert_rows, update_rows
from labeling.models import CandidateAnswer, Claim, Item
from tests.conftest import native_record

pytestmark = pytest.mark.django_db


def test_update_rows_sets_each_rows_values_and_leaves_the_others(project, import_records):
    import_records([native_record(f"q{i}") for i in range(3)])
    items = list(Item.objects.filter(project=project).order_by("pk"))
    untouched = items[2]
    with transaction.atomic():
        done = update_rows(
            Item,
            ["queue_position", "version"],
            [(items[0].pk, 7, items[0].version + 1), (items[1].pk, -3, items[1].version + 5)],
        )
    assert done == 2
    got = {i.pk: (i.queue_position, i.version) for i in Item.objects.filter(project=project)}
    assert got[items[0].pk] == (7, items[0].version + 1)
    assert got[items[1].pk] == (-3, items[1].version + 5)
    assert got[untouched.pk] == (untouched.queue_position, untouched.version)


def test_update_rows_ignores_missing_ids_and_empty_input(project, import_records):
    import_records([native_record("q1")])
    with transaction.atomic():
        assert update_rows(Item, ["queue_position"], []) == 0
        update_rows(Item, ["queue_position"], [(10**9, 1)])
    assert Item.objects.filter(queue_position=1).count() == 0


def test_update_rows_is_refused_by_a_constraint_and_writes_nothing(project, import_records):
    import_records([native_record("q1"), native_record("q2")])
    first, second = Item.objects.filter(project=project).order_by("pk")[:2]
    with pytest.raises(IntegrityError), transaction.atomic():
        # a row of the update is fine, the next one takes another item's candidate (unique)
        update_rows(
            Item,
            ["queue_position", "candidate_id"],
            [(first.pk, 99, first.candidate_id), (second.pk, 98, first.candidate_id)],
        )
    assert Item.objects.get(pk=first.pk).queue_position == first.queue_position
    assert Item.objects.get(pk=second.pk).candidate_id == second.candidate_id


def test_insert_rows_takes_more_rows_than_one_statement_holds(project, import_records):
    import_records([native_record("q1")])
    candidate = CandidateAnswer.objects.get(key="c1")
    # 2,500 rows of 7 values: several statements on SQLite (999 parameters each), one COPY on
    # PostgreSQL; the ids come back in row order.
    rows = [(candidate.pk, 100 + n, f"claim {n}", None, None, True, False) for n in range(2500)]
    with transaction.atomic():
        ids = insert_rows(
            Claim,
            ("candidate_id", "index", "text", "start", "end", "unanchored", "machine_split"),
            rows,
            with_ids=True,
        )
    stored = dict(Claim.objects.filter(index__gte=100).values_list("pk", "index"))
    assert len(stored) == 2500
    assert [stored[pk] for pk in ids] == [100 + n for n in range(2500)]
