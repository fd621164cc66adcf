"""labeling/rows.py: plain statements that give what the ORM gives (instances, ids, timestamps)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import FieldDoesNotExist
from django.db import IntegrityError, connection, transaction
from django.forms.models import model_to_dict

from labeling.bulk import custom_plans
from labeling.models import (
    Assignment,
    AssignmentStatus,
    DerivedChange,
    DerivedKind,
    Item,
    LabelPolicy,
    Resolution,
    ResolutionStatus,
)
from labeling.rows import (
    ARRAY_ROWS,
    db_datetime,
    execute,
    id_array,
    in_ids,
    insert,
    insert_like,
    insert_select,
    placeholders,
    raw_first,
    raw_models,
    select_rows,
)
from labeling.services import project_labelling_start
from tests.conftest import native_record

pytestmark = pytest.mark.django_db


def _fields(instance):
    """Every concrete field of ``instance`` by attname (foreign keys as ids)."""
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def _change_rows_per_statement() -> int:
    """The rows of one INSERT of change rows (three columns).

    PostgreSQL: ARRAY_ROWS (one array per column); SQLite: the parameter limit, at most 500.
    """
    if connection.vendor == "postgresql":
        return ARRAY_ROWS
    return min(500, (connection.features.max_query_params or 65_535) // 3)


def _assignment(item, annotator, leased_at):
    """A lease of ``item`` leased at ``leased_at`` for an hour, written by the ORM."""
    return Assignment.objects.create(
        item=item,
        annotator=annotator,
        slot=1,
        leased_at=leased_at,
        lease_expires_at=leased_at + timedelta(hours=1),
    )


@pytest.fixture
def started(project, import_records, member):
    import_records([native_record("q1"), native_record("q2")])
    manager = member("manager")
    project_labelling_start(project=project, actor=manager)
    return project


def test_raw_models_build_the_instances_the_orm_builds(started):
    policy = LabelPolicy.objects.get(project=started)
    [raw] = raw_models(LabelPolicy, "SELECT * FROM labeling_labelpolicy WHERE id = %s", [policy.pk])
    assert _fields(raw) == _fields(policy)
    # the converters applied: JSON decoded, timestamps aware on every database
    assert isinstance(raw.answer_labels, list) and raw.answer_labels == policy.answer_labels
    assert raw.frozen_at is not None and raw.frozen_at.tzinfo is not None
    assert raw._state.adding is False and raw._state.db == "default"

    items = raw_models(Item, "SELECT * FROM labeling_item ORDER BY id", [])
    assert [_fields(i) for i in items] == [_fields(i) for i in Item.objects.order_by("id")]


def test_raw_models_set_extra_columns_as_attributes_and_reuse_the_shape(started):
    sql = (
        "SELECT i.*, c.key AS candidate_key FROM labeling_item i "
        "JOIN labeling_candidateanswer c ON c.id = i.candidate_id ORDER BY i.id"
    )
    first = raw_models(Item, sql, [])
    again = raw_models(Item, sql, [])
    assert [i.candidate_key for i in first] == [i.candidate_key for i in again]
    assert sorted(i.candidate_key for i in first) == sorted(
        Item.objects.values_list("candidate__key", flat=True)
    )


def test_raw_models_of_no_row_and_raw_first(started):
    assert raw_models(Item, "SELECT * FROM labeling_item WHERE id = %s", [-1]) == []
    assert raw_first(Item, "SELECT * FROM labeling_item WHERE id = %s", [-1]) is None
    item = Item.objects.order_by("id").first()
    assert raw_first(Item, "SELECT * FROM labeling_item ORDER BY id", []).pk == item.pk


def test_raw_models_refuse_a_statement_without_the_id(started):
    with pytest.raises(FieldDoesNotExist, match="must select its id"):
        raw_models(Item, "SELECT status FROM labeling_item", [])


def test_execute_returns_the_rows_changed(started):
    ids = list(Item.objects.values_list("id", flat=True))
    assert execute(
        f"UPDATE labeling_item SET version = version + 1 WHERE id IN ({placeholders(ids)})", ids
    ) == len(ids)
    assert execute("UPDATE labeling_item SET version = 0 WHERE id = %s", [-1]) == 0


def test_placeholders_refuse_an_empty_list():
    with pytest.raises(ValueError, match="at least one value"):
        placeholders([])


def test_in_ids_selects_what_an_in_list_selects(started):
    ids = list(Item.objects.order_by("id").values_list("id", flat=True))
    asked = [ids[-1], -5, ids[0], ids[0]]  # any order, an unknown id, a repeat
    where, params = in_ids("id", asked)
    found = select_rows(f"SELECT id FROM labeling_item WHERE {where} ORDER BY id", params)
    assert [pk for (pk,) in found] == sorted({ids[0], ids[-1]})
    # one array parameter on PostgreSQL (a statement psycopg caches), one per id on SQLite
    assert len(params) == (1 if connection.vendor == "postgresql" else len(asked))
    with pytest.raises(ValueError, match="at least one value"):
        in_ids("id", [])
    # only integers reach the statement, on both databases (PostgreSQL gets the array's text)
    for bad in (["1,2"], [1.0], [None]):
        with pytest.raises(TypeError):
            in_ids("id", bad)
    assert id_array([3, True, 7]) == "{3,1,7}"


def test_insert_of_several_rows_stores_every_type_as_the_orm_reads_it(
    started, django_assert_num_queries
):
    """JSON, floats, booleans, nulls, timestamps and keys go in as one statement's arrays."""
    first = LabelPolicy.objects.get(project=started)
    at = datetime(2026, 12, 3, 15, 20, 1, 123456, tzinfo=UTC)
    wanted = [
        dict(
            version=2,
            previous_id=first.pk,
            guideline="Zweite Fassung: “quotes”, emoji 🙂",
            answer_labels=["admissible", "inadmissible"],
            label_details={"answer": {"admissible": {"text": "Zulässig", "key": "1"}}},
            reason_texts={},
            gold_rate=0.25,
            qualification_required=True,
            qualification_items=7,
            frozen_at=at,
        ),
        dict(
            version=3,
            previous_id=None,
            guideline="",
            answer_labels=[],
            label_details={"claim": {"supported": {"description": None}}},
            reason_texts={"no_source": "Keine Quelle"},
            gold_rate=0.0,
            qualification_required=False,
            qualification_items=5,
            frozen_at=None,
        ),
    ]
    rows = [LabelPolicy(project=started, **fields) for fields in wanted]
    with django_assert_num_queries(1) as queries:
        insert(rows)
    if connection.vendor == "postgresql":
        assert "unnest(" in queries.captured_queries[0]["sql"]
    for row, fields in zip(rows, wanted, strict=True):
        stored = LabelPolicy.objects.get(pk=row.pk)
        assert {name: getattr(stored, name) for name in fields} == fields
        assert stored.created_at == row.created_at and stored.evidence_relation == "source_relative"


def test_insert_like_writes_the_template_with_each_rows_columns(started, django_assert_num_queries):
    items = list(Item.objects.order_by("id"))
    policy = LabelPolicy.objects.get(project=started)
    template = Resolution(status=ResolutionStatus.CONSENSUS, policy=policy, number=1)
    rows = [(items[1].pk, 3, "inadmissible"), (items[0].pk, 1, "admissible")]
    with django_assert_num_queries(1):
        ids = insert_like(template, ["item_id", "number", "answer_label"], rows)
    assert template.pk is None and template._state.adding  # the template stays unsaved
    stored = [Resolution.objects.get(pk=pk) for pk in ids]
    assert [(r.item_id, r.number, r.answer_label) for r in stored] == rows
    for r in stored:  # the other fields are the template's, as insert() stores them
        assert (r.status, r.policy_id, r.rationale, r.supersedes_id, r.adjudicator_id) == (
            "consensus",
            policy.pk,
            "",
            None,
            None,
        )
        assert r.created_at == template.created_at and r.created_at is not None
    with django_assert_num_queries(0):
        assert insert_like(template, ["item_id"], []) == []
    with pytest.raises(ValueError, match="no inserted field item"):
        insert_like(template, ["item"], [(items[0].pk,)])
    with pytest.raises(ValueError, match="a row of 1 values for the 2 columns"):
        insert_like(template, ["item_id", "number"], [(items[0].pk,)])


def test_insert_select_writes_the_template_with_the_querys_columns(
    started, django_assert_num_queries
):
    items = list(Item.objects.order_by("id"))
    policy = LabelPolicy.objects.get(project=started)
    template = Resolution(status=ResolutionStatus.CONSENSUS, policy=policy, number=1)
    with django_assert_num_queries(1):
        inserted = insert_select(
            template,
            {"item_id": "i.id", "number": "i.id", "answer_label": "i.status"},
            "FROM labeling_item i WHERE i.project_id = %s ORDER BY i.id DESC",
            [started.pk],
        )
    assert inserted == len(items) and template.pk is None
    stored = list(Resolution.objects.order_by("pk"))  # ids in the ORDER BY's order
    assert [(r.item_id, r.number, r.answer_label) for r in stored] == [
        (item.pk, item.pk, item.status) for item in reversed(items)
    ]
    for r in stored:  # the other fields are the template's, as insert() stores them
        assert (r.status, r.policy_id, r.rationale, r.supersedes_id, r.adjudicator_id) == (
            "consensus",
            policy.pk,
            "",
            None,
            None,
        )
        assert r.created_at == template.created_at and r.created_at is not None
    with pytest.raises(ValueError, match="no inserted field item"):
        insert_select(template, {"item": "i.id"}, "FROM labeling_item i", [])


@pytest.mark.django_db(transaction=True)
def test_custom_plans_hold_inside_the_block_only(project):
    """Custom plans inside the block; the mode before it for the rest (COMMIT's key checks)."""

    def mode() -> str:
        [(value,)] = select_rows("SHOW plan_cache_mode", [])
        return value

    if connection.vendor != "postgresql":
        with transaction.atomic(), custom_plans():
            pass  # nothing to set on SQLite
        return
    with transaction.atomic():
        with custom_plans():
            assert mode() == "force_custom_plan"
        assert mode() == "auto"
        execute("SET LOCAL plan_cache_mode = force_generic_plan", [])
        with custom_plans():
            assert mode() == "force_custom_plan"
        assert mode() == "force_generic_plan"  # the transaction's own mode comes back
    assert mode() == "auto"
    # a block that raises inside a savepoint: the savepoint's rollback takes the setting away
    with transaction.atomic():
        with pytest.raises(ZeroDivisionError), transaction.atomic(), custom_plans():
            assert mode() == "force_custom_plan"
            raise ZeroDivisionError
        assert mode() == "auto"


def test_db_datetime_stores_what_the_orm_stores(started, member):
    """A timestamp written by a plain statement compares and reads back as the ORM's does."""
    annotator = member("annotator")
    item = Item.objects.order_by("id").first()
    at = datetime(2026, 12, 3, 6, 8, 13, 397106, tzinfo=UTC)
    assignment = _assignment(item, annotator, at)
    later = at + timedelta(microseconds=1)
    execute(
        "UPDATE labeling_assignment SET submitted_at = %s WHERE id = %s",
        [db_datetime(later), assignment.pk],
    )
    assignment.refresh_from_db()
    assert assignment.submitted_at == later
    # ordered against a value the ORM stored (on SQLite both are text in one form)
    assert Assignment.objects.filter(submitted_at__gt=at).count() == 1
    assert Assignment.objects.filter(leased_at__lt=later).count() == 1
    [(stored,)] = select_rows(
        "SELECT COUNT(*) FROM labeling_assignment WHERE submitted_at > leased_at", []
    )
    assert stored == 1
    # the same instant is the same value as the ORM's (an offset added on SQLite would differ)
    whole = at.replace(microsecond=0)
    Assignment.objects.filter(pk=assignment.pk).update(
        leased_at=whole, lease_expires_at=whole + timedelta(hours=1)
    )
    execute(
        "UPDATE labeling_assignment SET submitted_at = %s WHERE id = %s",
        [db_datetime(whole), assignment.pk],
    )
    [(same,)] = select_rows(
        "SELECT COUNT(*) FROM labeling_assignment WHERE submitted_at = leased_at", []
    )
    assert same == 1
    assert db_datetime(None) is None


def test_insert_sets_ids_in_order_and_fills_auto_fields(project, django_assert_num_queries):
    kinds = [DerivedKind.AGREEMENT, DerivedKind.AUDIT, DerivedKind.RELIABILITY]
    rows = [DerivedChange(project=project, kind=kind) for kind in kinds]
    with django_assert_num_queries(1):
        saved = insert(rows)
    assert saved == rows
    assert all(r._state.adding is False and r.created_at is not None for r in rows)
    stored = list(DerivedChange.objects.order_by("id"))
    assert [(r.pk, r.kind, r.created_at) for r in rows] == [
        (s.pk, s.kind, s.created_at) for s in stored
    ]
    assert insert([]) == []


def test_insert_splits_a_long_list_within_the_parameter_limit(project, django_assert_num_queries):
    count = _change_rows_per_statement() + 7
    rows = [DerivedChange(project=project, kind=DerivedKind.AGREEMENT) for _ in range(count)]
    with django_assert_num_queries(2):
        insert(rows)
    ids = [r.pk for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == count
    assert list(DerivedChange.objects.order_by("id").values_list("id", flat=True)) == ids


def test_insert_refused_by_a_constraint_writes_nothing(started, member):
    annotator = member("annotator")
    item = Item.objects.order_by("id").first()
    now = datetime(2026, 12, 3, tzinfo=UTC)
    fields = {
        "item": item,
        "annotator": annotator,
        "status": AssignmentStatus.LEASED,
        "leased_at": now,
        "lease_expires_at": now + timedelta(hours=1),
    }
    with pytest.raises(IntegrityError), transaction.atomic():
        # the same (item, annotator) twice: one row per pair
        insert([Assignment(slot=1, **fields), Assignment(slot=2, **fields)])
    assert not Assignment.objects.exists()
    [saved] = insert([Assignment(slot=1, **fields)])
    assert model_to_dict(Assignment.objects.get()) == model_to_dict(saved)


def test_statements_adapt_a_timestamp_parameter_as_the_orm(started, member):
    """An aware datetime passed as it is finds the row the ORM stored (SQLite: text, no offset)."""
    annotator = member("annotator")
    item = Item.objects.order_by("id").first()
    whole = datetime(2026, 12, 3, 6, 8, 13, tzinfo=UTC)
    assignment = _assignment(item, annotator, whole)
    sql = "SELECT * FROM labeling_assignment WHERE leased_at = %s"
    assert [a.pk for a in raw_models(Assignment, sql, [whole])] == [assignment.pk]
    assert select_rows("SELECT id FROM labeling_assignment WHERE leased_at = %s", [whole]) == [
        (assignment.pk,)
    ]
    assert execute("UPDATE labeling_assignment SET slot = 2 WHERE leased_at = %s", [whole]) == 1


def test_insert_refuses_an_unsaved_related_object(started, member):
    item = Item.objects.order_by("id").first()
    with pytest.raises(ValueError, match="unsaved related object"):
        insert([Assignment(item=Item(project=started), annotator=member("annotator"), slot=1)])
    assert not Assignment.objects.exists() and item.pk


def test_insert_refuses_a_field_with_only_a_database_default(started):
    item = Item.objects.order_by("id").first()
    with pytest.raises(ValueError, match=r"Item\.\w+: insert\(\) writes every column"):
        insert([Item(project=started, candidate_id=item.candidate_id)])


def test_execute_error_marks_the_transaction_for_rollback(started):
    from django.db.transaction import TransactionManagementError

    item = Item.objects.order_by("id").first()
    with transaction.atomic():
        with pytest.raises(IntegrityError):
            execute("UPDATE labeling_item SET candidate_id = NULL WHERE id = %s", [item.pk])
        # caught without a savepoint: the block cannot go on to commit a half-done change
        with pytest.raises(TransactionManagementError):
            Item.objects.count()


@pytest.mark.django_db(transaction=True)
def test_insert_outside_a_transaction_keeps_no_batch_when_one_fails(project):
    rows = [
        DerivedChange(project=project, kind=DerivedKind.AGREEMENT)
        for _ in range(_change_rows_per_statement())
    ]
    rows.append(DerivedChange(project_id=project.pk + 1000, kind=DerivedKind.AGREEMENT))
    assert not connection.in_atomic_block
    with pytest.raises(IntegrityError):
        insert(rows)  # the second batch's row names no project
    assert not DerivedChange.objects.exists()
