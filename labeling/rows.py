"""Plain rows from SQL, for the reads every labelling request runs.

A queryset costs about 1 ms of CPU per query on a small server (building, compiling and the
model instances), several times the database's own time for a lookup by key. The label loop
(next item, submit) runs a few dozen queries per cycle, so its hottest fixed-shape reads are
plain parameterised statements: :func:`select_rows` where the caller wants tuples, and
:func:`raw_first` (``Manager.raw``) where it wants a model instance (the fields' converters
apply, e.g. JSON).
The statements are portable (PostgreSQL and SQLite); column names that are SQL keywords
(``index``, ``start``, ``end``) are quoted.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)


def select_rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Run one ``SELECT`` with ``params`` (``%s`` placeholders) and return its rows as tuples.

    Raises:
        django.db.DatabaseError: the statement failed (as any query does).
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def raw_first(model: type[M], sql: str, params: Sequence[Any]) -> M | None:
    """Return the first instance of ``model`` that ``sql`` selects (``Manager.raw``), or None.

    ``sql`` selects the model's columns (e.g. ``SELECT t.* FROM ...``), and may add columns,
    which become attributes of the instance.

    Raises:
        django.db.DatabaseError: the statement failed (as any query does).
    """
    return next(iter(model._default_manager.raw(sql, params)), None)


def placeholders(values: Sequence[Any]) -> str:
    """Return ``%s, %s, ...``, one per value, for an ``IN (...)`` list (at least one value).

    Raises:
        ValueError: ``values`` is empty (``IN ()`` is not SQL).
    """
    if not values:
        raise ValueError("an IN list needs at least one value")
    return ", ".join(["%s"] * len(values))


def aware(value: datetime | None) -> datetime | None:
    """Return a timestamp column's value as an aware datetime (None stays None).

    PostgreSQL gives aware datetimes; SQLite, where Django stores UTC without an offset, gives
    naive ones (Django's converter of declared ``datetime`` columns).
    """
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)
