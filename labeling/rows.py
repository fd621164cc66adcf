"""Plain statements, for the reads and writes every labelling request runs.

A queryset's CPU cost (building, compiling, model instances) is several times the database's own
time for a lookup by key, so the label loop's hottest fixed-shape reads are plain parameterised
statements: :func:`select_rows` where the caller wants tuples, and
:func:`raw_models` and :func:`raw_first` where it wants model instances (built as
``Manager.raw`` builds them, the fields' converters applied, e.g. JSON).
The fixed-shape writes of the same loop (a status flip, a version bump, its new rows) are plain
statements too, through :func:`execute` and :func:`insert`. Parameters are adapted as
``Manager.raw`` adapts them (a timestamp is stored as the ORM stores it). The statements are
portable (PostgreSQL and SQLite); column names that are SQL keywords (``index``, ``start``,
``end``) are quoted.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.core.exceptions import FieldDoesNotExist
from django.db import connection, models, transaction
from django.db.models.expressions import DatabaseDefault
from django.db.models.sql import Query

M = TypeVar("M", bound=models.Model)
T = TypeVar("T")


def _adapted(params: Sequence[Any]) -> list[Any]:
    """``params`` in the database's form, as ``Manager.raw`` adapts them.

    A timestamp, say: SQLite stores UTC text without an offset, and an aware datetime passed
    as it is would add one (text comparisons between the two forms order wrongly).
    """
    adapt = connection.ops.adapt_unknown_value
    return [adapt(value) for value in params]


def select_rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Run one ``SELECT`` with ``params`` (``%s`` placeholders) and return its rows as tuples.

    Raises:
        django.db.DatabaseError: the statement failed (as any query does).
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, _adapted(params))
        return cursor.fetchall()


def execute(sql: str, params: Sequence[Any]) -> int:
    """Run one ``UPDATE`` (or other statement without rows) and return the rows it changed.

    Raises:
        django.db.DatabaseError: the statement failed (as any query does).
    """
    # As the ORM's own writes: an error marks the enclosing atomic block for rollback, so a
    # caller that catches it cannot go on and commit a half-done change.
    with transaction.mark_for_rollback_on_error(), connection.cursor() as cursor:
        cursor.execute(sql, _adapted(params))
        return cursor.rowcount


@dataclass(frozen=True)
class _Shape:
    """How the columns of one statement become instances of one model."""

    names: list[str]  # the model fields' attnames, in the model's order
    positions: list[int]  # the column of each of them
    extras: list[tuple[str, int]]  # (column, position): not a field, set as an attribute
    converters: list[tuple[int, list[Any], Any]]  # (position, converter functions, column)


# By (database alias, model, column names): a statement's shape is worked out once per process
# (Manager.raw works it out again on every query, which costs more than a lookup by key). The
# converters are bound to the connection of the thread that first met the shape; they read only
# what every connection of the alias shares (its time zone, from the settings), so any thread
# may apply them.
_shapes: dict[tuple[str, type[models.Model], tuple[str, ...]], _Shape] = {}


def _shape(model: type[models.Model], columns: tuple[str, ...]) -> _Shape:
    key = (connection.alias, model, columns)
    shape = _shapes.get(key)
    if shape is not None:
        return shape
    name = connection.introspection.identifier_converter
    by_column = {name(f.column): f for f in model._meta.fields if f.column}
    pk_column = model._meta.pk.column if model._meta.pk else None
    if not pk_column or name(pk_column) not in columns:
        raise FieldDoesNotExist(f"a statement of {model.__name__} rows must select its id")
    # The selected fields, in the model's order (Model.from_db takes its values in that order).
    present = [(columns.index(c), f) for c, f in by_column.items() if c in columns]
    cols: list[Any] = [
        by_column[c].get_col(model._meta.db_table) if c in by_column else None for c in columns
    ]
    compiler = connection.ops.compiler("SQLCompiler")(Query(model), connection, connection.alias)
    shape = _Shape(
        names=[f.attname for _, f in present],
        positions=[pos for pos, _ in present],
        extras=[(c, pos) for pos, c in enumerate(columns) if c not in by_column],
        converters=[
            (pos, functions, col) for pos, (functions, col) in compiler.get_converters(cols).items()
        ],
    )
    _shapes[key] = shape
    return shape


def _column_names(cursor: Any) -> tuple[str, ...]:
    """The names of the columns of the statement ``cursor`` (Django's wrapper) just ran.

    psycopg's ``description`` builds an object per column on every call; its result object
    gives the names directly. SQLite's ``description`` is plain tuples.
    """
    result = getattr(cursor.cursor, "pgresult", None)
    if result is not None:
        return tuple(result.fname(i).decode() for i in range(result.nfields))
    return tuple(column[0] for column in cursor.description)


def raw_models(model: type[M], sql: str, params: Sequence[Any]) -> list[M]:
    """Return the instances of ``model`` that ``sql`` selects, as ``Manager.raw`` builds them.

    ``sql`` selects the model's columns (e.g. ``SELECT t.* FROM ...``), its id among them, and
    may add columns, which become attributes of the instances; the fields' converters apply
    (JSON, SQLite's timestamps). Unlike ``Manager.raw``, which matches columns to fields on
    every query, the match is made once per statement shape.

    Raises:
        django.core.exceptions.FieldDoesNotExist: the statement does not select the id.
        django.db.DatabaseError: the statement failed (as any query does).
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, _adapted(params))
        rows = cursor.fetchall()
        if not rows:
            return []
        shape = _shape(model, _column_names(cursor))
    alias = connection.alias
    instances = []
    for row in rows:
        values = list(row)
        for pos, functions, col in shape.converters:
            value = values[pos]
            for function in functions:
                value = function(value, col, connection)
            values[pos] = value
        instance = model.from_db(alias, shape.names, [values[pos] for pos in shape.positions])
        for column, pos in shape.extras:
            setattr(instance, column, values[pos])
        instances.append(instance)
    return instances


def raw_first(model: type[M], sql: str, params: Sequence[Any]) -> M | None:
    """Return the first instance of ``model`` that ``sql`` selects (:func:`raw_models`), or None.

    Raises:
        django.core.exceptions.FieldDoesNotExist: the statement does not select the id.
        django.db.DatabaseError: the statement failed (as any query does).
    """
    found = raw_models(model, sql, params)
    return found[0] if found else None


def insert(instances: Sequence[M]) -> list[M]:
    """Insert unsaved instances of one model (its own table, an auto id); set their ids.

    What ``bulk_create`` does for the few rows of a submit, at a fraction of its CPU: each
    field's ``pre_save`` (``auto_now_add``) and ``get_db_prep_save`` (the database's form of
    the value) apply, and the statement of a model and row count is built once per process.
    Sends no ``pre_save``/``post_save`` signal, as ``bulk_create`` sends none. Returns the
    instances, saved (``_state.adding`` false).

    Raises:
        ValueError: a related object is unsaved, or a field has only a database default and
            no value.
        django.db.IntegrityError: a constraint refused a row (no row of the call stays).
        django.db.DatabaseError: the statement failed (as any query does).
    """
    if not instances:
        return []
    model = type(instances[0])
    fields = _insert_fields(model)
    for instance in instances:
        # As save() and bulk_create: a related object must be saved (ValueError otherwise),
        # and its id is taken from it.
        instance._prepare_related_fields_for_save(operation_name="insert")  # type: ignore[attr-defined]
    ids = _insert_db_rows(model, fields, [[_db_value(f, i) for f in fields] for i in instances])
    alias = connection.alias
    for instance, pk in zip(instances, ids, strict=True):
        setattr(instance, model._meta.pk.attname, pk)
        instance._state.adding = False
        instance._state.db = alias
    return list(instances)


def insert_like(
    template: models.Model, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> list[int]:
    """Insert one row per entry of ``rows``: ``template``'s values, ``columns`` from the entry.

    For many rows of one shape (the consensus resolutions of a whole project): ``template``
    (an unsaved instance) is converted once as :func:`insert` converts an instance, and each
    row takes that, with the fields named by ``columns`` (attnames, e.g. ``item_id``) set from
    its entry. The entries' values must be in the database's form already: ints, strings,
    booleans and None are; a timestamp goes through :func:`db_datetime`. Returns the new ids,
    in the order of ``rows``; ``template`` stays unsaved.

    Raises:
        ValueError: a column is not a field the insert writes, an entry's length is not
            that of ``columns``, or ``template`` has an unsaved related object.
        django.db.IntegrityError: a constraint refused a row (no row of the call stays).
    """
    if not rows:
        return []
    model = type(template)
    fields = _insert_fields(model)
    template._prepare_related_fields_for_save(operation_name="insert")  # type: ignore[attr-defined]
    position = {f.attname: n for n, f in enumerate(fields)}
    unknown = [c for c in columns if c not in position]
    if unknown:
        raise ValueError(f"{model.__name__} has no inserted field {', '.join(unknown)}")
    positions = [position[c] for c in columns]
    base = [_db_value(f, template) for f in fields]
    values = []
    for row in rows:
        if len(row) != len(positions):
            raise ValueError(f"a row of {len(row)} values for the {len(positions)} columns")
        out = base.copy()
        for at, value in zip(positions, row, strict=True):
            out[at] = value
        values.append(out)
    return _insert_db_rows(model, fields, values)


def insert_select(
    template: models.Model, expressions: Mapping[str, str], select: str, params: Sequence[Any]
) -> int:
    """Insert the rows of one ``SELECT``: ``template``'s values, some columns from the query.

    :func:`insert_like` with the rows made by the database (``INSERT … SELECT``): no row passes
    through Python. Every field an insert writes is written: those named in ``expressions``
    (attname → SQL expression over the query's tables, e.g. ``{"item_id": "s.item_id"}``)
    from the query, the others from ``template`` (converted once, as :func:`insert` converts an
    instance: ``auto_now_add``, defaults), as parameters; an expression takes no parameter of
    its own. ``select`` is the rest of the statement after the column list (``FROM … WHERE …
    ORDER BY …``; an ``ORDER BY`` gives the new ids in that order) and ``params`` its
    parameters. Returns the number of rows inserted.

    On PostgreSQL the template's parameters are cast to their columns' types: with
    server-side binding a parameter in a select list has no type of its own.

    Raises:
        ValueError: an expression names a field the insert does not write, or ``template``
            has an unsaved related object.
        django.db.IntegrityError: a constraint refused a row (no row of the call stays).
    """
    model = type(template)
    fields = _insert_fields(model)
    template._prepare_related_fields_for_save(operation_name="insert")  # type: ignore[attr-defined]
    unknown = sorted(set(expressions) - {f.attname for f in fields})
    if unknown:
        raise ValueError(f"{model.__name__} has no inserted field {', '.join(unknown)}")
    typed = connection.vendor == "postgresql"
    columns, values = [], []
    for field in fields:
        if field.attname in expressions:
            columns.append(expressions[field.attname])
            continue
        columns.append(f"CAST(%s AS {field.cast_db_type(connection)})" if typed else "%s")
        values.append(_db_value(field, template))
    quote = connection.ops.quote_name
    return execute(
        f"INSERT INTO {quote(model._meta.db_table)} "  # noqa: S608 - the model's names only
        f"({', '.join(quote(f.column) for f in fields)}) SELECT {', '.join(columns)} {select}",
        [*values, *params],
    )


def _insert_fields(model: type[models.Model]) -> list[Any]:
    """The fields an insert writes: every local column but the auto id and generated ones."""
    meta = model._meta
    return [f for f in meta.local_concrete_fields if f is not meta.auto_field and not f.generated]


def _insert_db_rows(
    model: type[models.Model], fields: list[Any], rows: list[list[Any]]
) -> list[int]:
    """Insert ``rows`` (database-ready values, one per field) into ``model``'s table; their ids."""
    returning = connection.features.can_return_rows_from_bulk_insert
    if _insert_sql(model, fields, 2, returning)[1]:  # several rows as arrays (cached)
        per_statement = ARRAY_ROWS  # one parameter per column, whatever the rows
    else:
        # A VALUES list: the database's limit of parameters (SQLite's may be 999; PostgreSQL's
        # protocol 65,535), and at most 500 rows (SQLite's limit of a compound statement).
        limit = connection.features.max_query_params or 65_535
        per_statement = max(1, min(500, limit // len(fields)))
    ids: list[int] = []
    # One transaction for every batch, as bulk_create: all rows or none.
    with transaction.atomic(savepoint=False):
        for at in range(0, len(rows), per_statement):
            batch = rows[at : at + per_statement]
            sql, by_column = _insert_sql(model, fields, len(batch) if returning else 1, returning)
            with connection.cursor() as cursor:
                if by_column:
                    cursor.execute(sql, [list(column) for column in zip(*batch, strict=True)])
                    ids += [pk for (pk,) in cursor.fetchall()]
                elif returning:
                    cursor.execute(sql, [value for row in batch for value in row])
                    ids += [pk for (pk,) in cursor.fetchall()]
                else:  # pragma: no cover - SQLite before 3.35
                    for row in batch:
                        cursor.execute(sql, row)
                        ids.append(cursor.lastrowid)
    return ids


def _db_value(field: Any, instance: models.Model) -> Any:
    value = field.pre_save(instance, True)
    if isinstance(value, DatabaseDefault):
        raise ValueError(
            f"{type(instance).__name__}.{field.name}: insert() writes every column; give a "
            "value for a field that has only a database default"
        )
    return field.get_db_prep_save(value, connection)


#: Rows per INSERT when they go in as one array per column (PostgreSQL): the statement's
#: parameters do not grow with the rows, and fewer statements plan and queue less.
ARRAY_ROWS = 5000

_insert_statements: dict[tuple[str, type[models.Model], int, bool], tuple[str, bool]] = {}


def _insert_sql(
    model: type[models.Model], fields: list[Any], rows: int, returning: bool
) -> tuple[str, bool]:
    """The INSERT of ``rows`` rows of ``model``, and whether it takes one array per column.

    On PostgreSQL, several rows go in as ``SELECT * FROM unnest(%s::type[], ...)``, one array
    parameter per column, as Django's ``bulk_create`` does there: psycopg parses and caches a
    statement's placeholders only up to 50 parameters (a 500-row ``VALUES`` list of 8 columns
    was parsed again on every run), and the statement is the same for any number of rows. A
    field whose placeholder depends on its value (``get_placeholder``) or whose type is not a
    standard one keeps the ``VALUES`` form, as in Django. ``RETURNING`` gives the ids in the
    rows' order in both forms.
    """
    key = (connection.alias, model, rows, returning)
    found = _insert_statements.get(key)
    if found is not None:
        return found
    quote = connection.ops.quote_name
    by_column = (
        connection.vendor == "postgresql"
        and returning
        and rows > 1
        and not any(hasattr(f, "get_placeholder") for f in fields)
        and all(
            (f.target_field if f.is_relation else f).get_internal_type() in connection.data_types
            for f in fields
        )
    )
    if by_column:
        arrays = ", ".join(f"%s::{f.db_type(connection).split('(')[0]}[]" for f in fields)
        values = f"SELECT * FROM unnest({arrays})"  # noqa: S608 (the model's types only)
    else:
        row = f"({placeholders(fields)})"
        values = f"VALUES {', '.join([row] * rows)}"
    sql = (  # identifiers and types of the model and placeholders only
        f"INSERT INTO {quote(model._meta.db_table)} "  # noqa: S608
        f"({', '.join(quote(f.column) for f in fields)}) {values}"
    )
    if returning:
        sql += f" RETURNING {quote(str(model._meta.pk.column))}"
    _insert_statements[key] = (sql, by_column)
    return sql, by_column


def in_ids(column: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
    """Return the condition "``column`` is one of ``ids``" as SQL and its parameters.

    SQLite: ``column IN (%s, %s, ...)``, one parameter per id. PostgreSQL:
    ``column = ANY(%s::bigint[])``, one parameter: the array's text (:func:`id_array`).
    psycopg caches a statement's placeholders only up to 50 parameters, and one array parameter
    keeps the statement's text independent of the number of ids (one prepared statement serves
    every chunk). ``column`` is SQL the caller writes (a column name, never input).

    Raises:
        ValueError: ``ids`` is empty (an empty list would select nothing: the caller skips it).
        TypeError: an id is not an integer.
    """
    if not ids:
        raise ValueError("an IN list needs at least one value")
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s::bigint[])", [id_array(ids)]
    return f"{column} IN ({placeholders(ids)})", list(map(operator.index, ids))


def id_array(ids: Iterable[int]) -> str:
    """Return the PostgreSQL array literal of integer ids, ``{1,2,3}``, for an ``::…[]`` cast.

    Sent as one text parameter: psycopg would adapt a list element by element in Python.

    Raises:
        TypeError: an id is not an integer (so no other text can reach the literal).
    """
    return "{" + ",".join(map(str, map(operator.index, ids))) + "}"


def placeholders(values: Sequence[Any]) -> str:
    """Return ``%s, %s, ...``, one per value, for an ``IN (...)`` list (at least one value).

    Raises:
        ValueError: ``values`` is empty (``IN ()`` is not SQL).
    """
    if not values:
        raise ValueError("an IN list needs at least one value")
    return ", ".join(["%s"] * len(values))


def db_datetime(value: datetime | None) -> Any:
    """Return an aware datetime (or None) as the ORM stores it, for :mod:`labeling.bulk`'s rows.

    SQLite stores UTC text without an offset; a raw aware datetime would add one, and text
    comparisons between the two forms would order wrongly. The statements of this module adapt
    their parameters themselves.
    """
    return None if value is None else connection.ops.adapt_datetimefield_value(value)


def aware(value: datetime | None) -> datetime | None:
    """Return a timestamp column's value as an aware datetime (None stays None).

    PostgreSQL gives aware datetimes; SQLite, where Django stores UTC without an offset, gives
    naive ones (Django's converter of declared ``datetime`` columns).
    """
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def chunks(values: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Yield ``values`` in consecutive slices of at most ``size`` (the last may be shorter)."""
    for at in range(0, len(values), size):
        yield values[at : at + size]
