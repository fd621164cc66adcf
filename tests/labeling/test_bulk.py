"""labeling.bulk: plain-row inserts and updates, on whichever database the suite runs."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from labeling.bulk import ids_by_key, insert_rows, reserve_ids, update_rows
from labeling.models import CandidateAnswer, Claim, Item, Question
from labeling.services import project_create
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


def test_ids_by_key_gives_the_ids_of_the_keys_found_in_the_rows_selected(project, import_records):
    other_project = project_create(slug="other", name="Other")
    import_records([native_record(f"q{i}") for i in range(3)])
    import_records([native_record("q1")], other_project)
    stored = dict(Question.objects.filter(project=project).values_list("external_id", "pk"))

    found = ids_by_key(Question, "external_id", ["q2", "q0", "absent", "q2"], project_id=project.pk)

    assert found == {"q0": stored["q0"], "q2": stored["q2"]}
    assert ids_by_key(Question, "external_id", [], project_id=project.pk) == {}
    # the other project's q1 is not this project's
    assert ids_by_key(Question, "external_id", ["q1"], project_id=other_project.pk) == {
        "q1": Question.objects.get(project=other_project).pk
    }


def test_ids_by_key_finds_no_row_for_a_key_longer_than_the_column(project, import_records):
    # a key one character past the column's length must not match the row holding its prefix
    limit = Question._meta.get_field("external_id").max_length
    import_records([native_record("x" * limit)])

    assert ids_by_key(Question, "external_id", ["x" * (limit + 1)], project_id=project.pk) == {}
    assert list(ids_by_key(Question, "external_id", ["x" * limit], project_id=project.pk)) == [
        "x" * limit
    ]


def test_insert_rows_errors_are_djangos_and_a_broken_transaction_refuses_it(
    project, import_records
):
    # given a claim row, and a transaction whose insert of the same row failed
    import_records([native_record("q1")])
    candidate = CandidateAnswer.objects.get(key="c1")
    columns = ("candidate_id", "index", "text", "start", "end", "unanchored", "machine_split")
    row = (candidate.pk, 50, "claim", None, None, True, False)
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        insert_rows(Claim, columns, [row])
    if connection.vendor == "sqlite":  # PostgreSQL's COPY runs outside Django's cursor
        assert any(q["sql"].startswith("INSERT") for q in queries.captured_queries)
    with transaction.atomic():
        # then the unique violation is Django's IntegrityError on both databases
        with pytest.raises(IntegrityError), transaction.atomic(savepoint=False):
            insert_rows(Claim, columns, [row])
        # and the broken transaction refuses the next insert, as it refuses any statement
        with pytest.raises(transaction.TransactionManagementError):
            insert_rows(Claim, columns, [(candidate.pk, 51, "c", None, None, True, False)])
    assert Claim.objects.filter(candidate=candidate, index__gte=50).count() == 1


def test_reserve_ids_gives_fresh_ascending_ids_the_rows_then_take(project, import_records):
    import_records([native_record("q1")])
    largest = Claim.objects.order_by("-pk").values_list("pk", flat=True).first()
    candidate = CandidateAnswer.objects.get(key="c1")
    with transaction.atomic():
        ids = reserve_ids(Claim._meta.db_table, 1500)
        assert reserve_ids(Claim._meta.db_table, 0) == []
        insert_rows(
            Claim,
            ("id", "candidate_id", "index", "text", "start", "end", "unanchored", "machine_split"),
            [(pk, candidate.pk, 100 + n, "c", None, None, True, False) for n, pk in enumerate(ids)],
        )
    assert ids == sorted(set(ids)) and len(ids) == 1500
    assert ids[0] > largest
    assert set(Claim.objects.filter(index__gte=100).values_list("pk", flat=True)) == set(ids)


def test_reserve_ids_gives_the_values_drawn_when_they_are_not_consecutive(db):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite reserves after the largest id: always consecutive")
    table = Claim._meta.db_table
    with transaction.atomic(), connection.cursor() as cursor:
        # as if other sessions drew every other value meanwhile (undone with the transaction)
        cursor.execute(f"ALTER SEQUENCE {table}_id_seq INCREMENT BY 2")
        ids = reserve_ids(table, 5)
        transaction.set_rollback(True)
    assert [b - a for a, b in zip(ids, ids[1:], strict=False)] == [2, 2, 2, 2]
