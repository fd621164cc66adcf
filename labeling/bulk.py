"""Fast inserts and updates of many plain rows, for whole-project work (imports, queues).

``bulk_create`` builds a model instance per row and the SQL of every batch in Python, most of a
large import's time. Here rows are plain tuples, PostgreSQL receives them by
``COPY … FROM STDIN`` and SQLite by multi-row ``INSERT … VALUES``. Primary keys are reserved up
front (the table's sequence on PostgreSQL; after the largest id in use on SQLite, whose writer
holds the database lock inside the import's transaction), so callers know every new row's id
without reading rows back. Database constraints apply exactly as for any INSERT.

``bulk_update`` is slower still: it builds one ``CASE WHEN id = … THEN …`` expression per row
and column in Python. :func:`update_rows` sends
PostgreSQL one ``UPDATE … FROM unnest(arrays)`` and SQLite one parameterised ``UPDATE`` per row,
which it runs in-process.

:func:`custom_plans` makes PostgreSQL plan the statements of such work for the tables' sizes as
they grow (not once for all runs of a prepared statement).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from typing import Any

from django.db import connection, models


@contextmanager
def custom_plans() -> Iterator[None]:
    """Plan each statement of the block for its own parameters (PostgreSQL; nothing on SQLite).

    Whole-project work (an import, starting labelling) runs the same statements once per
    chunk while the tables it writes grow from empty. With prepared statements on, PostgreSQL
    switches a statement to one generic plan after five runs, made from the sizes the tables
    had then: a lookup in the resolutions of the items of a chunk, planned as a scan of a table
    that looked empty, then scanned all of it on every later chunk (7 of 26 s of starting
    labelling on 50,000 items). Inside the block ``plan_cache_mode`` is ``force_custom_plan``
    (each run planned from its parameters and the tables' current sizes, a fraction of a
    millisecond per statement). When the block ends the transaction's previous mode is back:
    the foreign-key checks deferred to COMMIT (one per reference written) are statements too,
    and planning each of them again made a start's COMMIT 2 s → 7 s. Must run inside
    ``transaction.atomic``; when the block raises, the setting goes with the transaction (or
    savepoint) rolled back.
    """
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('plan_cache_mode'), "
            "set_config('plan_cache_mode', 'force_custom_plan', true)"
        )
        previous = cursor.fetchone()[0]
    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('plan_cache_mode', %s, true)", [previous])


def tables_analyze(tables: Iterable[type[models.Model]]) -> None:
    """Refresh PostgreSQL's statistics of these tables, in the current transaction.

    A large import writes its tables in one transaction. An ANALYZE that autovacuum runs
    meanwhile (e.g. after the rows of a killed attempt) records them as empty, and the plans of
    the recomputations that follow the commit then scan whole tables once per row (a vote read
    of 35,000 items ran for minutes). ANALYZE inside the import's transaction counts its own new
    rows and commits with them. Nothing on SQLite.
    """
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for model in tables:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


# {table: its id sequence's name}, read once per process (a table's sequence never changes).
_SEQUENCES: dict[str, str] = {}


def _sequence(cursor: Any, table: str) -> str:
    """Return the name of ``table``'s id sequence (PostgreSQL)."""
    if table not in _SEQUENCES:
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
        _SEQUENCES[table] = cursor.fetchone()[0]
    return _SEQUENCES[table]


def reserve_ids(table: str, n: int) -> list[int]:
    """Reserve ``n`` fresh primary keys of ``table`` and return them, ascending.

    The ids are not used by any row yet; a caller inserts rows with them explicitly (see
    :func:`insert_rows`) or points other rows at them first (foreign keys are checked at
    commit). Must run inside ``transaction.atomic`` (on SQLite the reservation holds under the
    transaction's write lock, and starts after the table's largest id: insert the rows of one
    reservation before the next reservation of that table).

    Raises:
        NotImplementedError: a database other than PostgreSQL or SQLite.
    """
    if n == 0:
        return []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The values come back as their range when they are consecutive (the usual case:
            # nobody else drew from the sequence meanwhile), else as an array.
            cursor.execute(
                "SELECT min(v), max(v), CASE WHEN max(v) - min(v) + 1 = count(*) THEN NULL "
                "ELSE array_agg(v ORDER BY v) END "
                "FROM (SELECT nextval(%s::regclass) AS v FROM generate_series(1, %s)) AS s",
                [_sequence(cursor, table), n],
            )
            low, high, scattered = cursor.fetchone()
            return list(range(low, high + 1)) if scattered is None else list(scattered)
        if connection.vendor == "sqlite":
            quoted = connection.ops.quote_name(table)
            cursor.execute(f"SELECT MAX(id) FROM {quoted}")  # noqa: S608 - a model's table
            largest = cursor.fetchone()[0] or 0
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
            row = cursor.fetchone()
            start = max(largest, row[0] if row else 0) + 1
            return list(range(start, start + n))
    raise NotImplementedError(f"no id reservation for {connection.vendor}")


def ids_by_key(
    model: type[models.Model], key_column: str, keys: Sequence[Any], **equal: Any
) -> dict[Any, int]:
    """Return ``{key: id}`` of the rows of ``model`` whose ``key_column`` is one of ``keys``.

    Args:
        model: the model whose table is read.
        key_column: the database column matched against ``keys`` (unique among the rows
            ``equal`` selects, else one of the ids is returned).
        keys: the values looked for; those without a row are left out of the result.
        equal: further ``column=value`` conditions (database column names).

    PostgreSQL gets the keys as one array parameter, joined as ``unnest(%s)``: building and
    sending an ``IN`` list of a thousand placeholders costs the client more than the query costs
    the server. The join, not ``= ANY(%s)``: a prepared statement's generic plan, made while
    an import's table still looks empty, scans the table and compares each row with every key
    of ``= ANY`` (quadratic over an import: 8 of 25 s at 20,000 questions); a join stays a
    hash or index lookup whatever the plan. SQLite runs the same query through the ORM.
    """
    if not keys:
        return {}
    if connection.vendor != "postgresql":
        rows = model._default_manager.filter(**{f"{key_column}__in": keys}, **equal)
        return dict(rows.values_list(key_column, "pk"))
    quote = connection.ops.quote_name
    key = quote(key_column)
    field = next(f for f in model._meta.concrete_fields if f.column == key_column)
    # The type without its length: a cast to varchar(n) would cut a longer key short, and the
    # cut key could match another row.
    array = re.sub(r"\(.*\)", "", field.cast_db_type(connection) or "text") + "[]"
    conditions = "".join(f" AND t.{quote(column)} = %s" for column in equal)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t.{key}, t.id FROM {quote(model._meta.db_table)} t "  # noqa: S608
            f"JOIN unnest(%s::{array}) AS wanted(k) ON t.{key} = wanted.k WHERE TRUE{conditions}",
            [list(keys), *equal.values()],
        )
        return dict(cursor.fetchall())


def insert_rows(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    with_ids: bool = False,
) -> list[int]:
    """Insert ``rows`` into ``model``'s table and return their new ids (``[]`` if not asked).

    PostgreSQL receives them by ``COPY``, SQLite as few multi-row ``INSERT`` statements.

    Args:
        model: the model whose table receives the rows.
        columns: database column names, in the order of each row's values.
        rows: one sequence of database-ready values per row (JSON as a ``json.dumps`` string,
            datetimes aware, booleans as bool).
        with_ids: reserve primary keys and insert them explicitly; the ids are returned in row
            order.

    Raises:
        django.db.IntegrityError: a row breaks a constraint (nothing of the call is kept once
            the caller's transaction rolls back).

    Must run inside ``transaction.atomic`` (ids are reserved under the transaction's lock).
    """
    if not rows:
        return []
    table = model._meta.db_table
    ids = reserve_ids(table, len(rows)) if with_ids else []
    names = (["id"] if with_ids else []) + list(columns)
    quoted = ", ".join(connection.ops.quote_name(name) for name in names)
    data = [(i, *row) for i, row in zip(ids, rows, strict=True)] if with_ids else rows
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            sql = f"COPY {connection.ops.quote_name(table)} ({quoted}) FROM STDIN"
            # psycopg's copy object runs outside Django's cursor: the same checks and errors
            # as any statement (a broken transaction refused, IntegrityError not psycopg's).
            connection.validate_no_broken_transaction()
            with connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
                for row in data:
                    copy.write_row(row)
        else:
            _insert_values(
                cursor, f"INSERT INTO {connection.ops.quote_name(table)} ({quoted})", data
            )
    return ids


def _insert_values(cursor: Any, insert: str, data: Sequence[Sequence[Any]]) -> None:
    """Run ``insert`` (``INSERT INTO t (columns)``) with ``VALUES`` for all of ``data``.

    Each statement carries as many rows as SQLite's parameter limit allows: one row per
    statement costs SQLite a statement step and reset per row (a third of the insert time).
    """
    width = len(data[0])
    per_statement = max(1, (connection.features.max_query_params or 999) // width)
    # SQLite's own "?" placeholders: Django's cursor rewrites each "%s" by regular expression,
    # which for statements of hundreds of placeholders cost a third as much as SQLite's work;
    # a statement without "%s" goes through Django's cursor unchanged (errors, broken-
    # transaction check, execute wrappers). "%s" while queries are logged (DEBUG, a test
    # capturing them): the log renders a statement by %-formatting it with its parameters.
    mark = "%s" if connection.queries_logged else "?"
    row = "(" + ", ".join([mark] * width) + ")"
    full = f"{insert} VALUES {', '.join([row] * per_statement)}"
    for start in range(0, len(data), per_statement):
        part = data[start : start + per_statement]
        sql = (
            full
            if len(part) == per_statement
            else f"{insert} VALUES {', '.join([row] * len(part))}"
        )
        cursor.execute(sql, list(chain.from_iterable(part)))


def update_rows(
    model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> int:
    """Set ``columns`` of the rows of ``model``'s table given by id; return the rows given.

    Args:
        model: the model whose table is updated.
        columns: database column names to set.
        rows: one ``(id, value, ...)`` per row, the values in ``columns`` order and
            database-ready (as for :func:`insert_rows`).

    Raises:
        django.db.IntegrityError: an update breaks a constraint.

    PostgreSQL gets one statement, the values as one array per column (``UPDATE … FROM
    unnest(…)``); SQLite one ``UPDATE … WHERE id = ?`` per row, run in-process. Rows whose id
    does not exist are left alone, as ``bulk_update`` does. Run it inside the caller's
    ``transaction.atomic``, which holds what the values were computed from.
    """
    if not rows:
        return 0
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            types = {f.column: f.db_type(connection) for f in model._meta.concrete_fields}
            names = ["id", *columns]
            arrays = ", ".join(f"%s::{types[name]}[]" for name in names)
            assignments = ", ".join(f"{quote(c)} = v.{quote(c)}" for c in columns)
            aliases = ", ".join(quote(name) for name in names)
            cursor.execute(
                f"UPDATE {table} SET {assignments} FROM unnest({arrays}) "  # noqa: S608
                f"AS v({aliases}) WHERE {table}.id = v.id",
                [list(values) for values in zip(*rows, strict=True)],
            )
        else:
            assignments = ", ".join(f"{quote(column)} = %s" for column in columns)
            cursor.executemany(
                f"UPDATE {table} SET {assignments} WHERE id = %s",  # noqa: S608
                [(*row[1:], row[0]) for row in rows],
            )
    return len(rows)
