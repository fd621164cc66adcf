"""Plain rows from SQL, for the reads every labelling request runs.

A queryset costs about 1 ms of CPU per query on a small server (building, compiling and the
model instances), several times the database's own time for a lookup by key. The label loop
(next item, submit) runs a few dozen queries per cycle, so its hottest fixed-shape reads are
plain parameterised statements: :func:`select_rows` where the caller wants tuples, and
``Manager.raw`` where it wants model instances (it applies the fields' converters, e.g. JSON).
The statements are portable (PostgreSQL and SQLite); column names that are SQL keywords
(``index``, ``start``, ``end``) are quoted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection


def select_rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Run one ``SELECT`` with ``params`` (``%s`` placeholders) and return its rows as tuples.

    Raises:
        django.db.DatabaseError: the statement failed (as any query does).
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
