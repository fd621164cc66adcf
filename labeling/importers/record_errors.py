"""A record's errors, and the checks every format applies to any parsed value.

:class:`RecordError` names where (the record's location), which field (a dotted path, e.g.
``candidates[2].claims[0].end``, see :func:`dotted`) and why, never the record itself; a reason
repeats an input value only through :func:`echo`, at most 40 code points. :func:`check_depth`
and :func:`check_storable` refuse values nested too deep or holding what a database cannot store.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RecordError(Exception):
    """A problem with one field of one record: where, which field, and why (never the record)."""

    location: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: field {self.field}: {self.reason}"


# NUL (PostgreSQL text cannot hold it) and UTF-16 surrogates (not encodable as UTF-8).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


#: The most code points of an input value an error reason repeats.
ECHO_LIMIT = 40


def _short(text: str, limit: int = ECHO_LIMIT) -> str:
    """Render at most ``limit`` code points of ``text`` for an error message."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def echo(value: Any, limit: int = ECHO_LIMIT) -> str:
    """Render an input value for an error reason: its ``repr``, at most ``limit`` code points.

    A string shows at most ``limit`` of its own code points (quoted, ``…`` when cut); any other
    value (a number, a list, an object from the file) at most ``limit`` code points of its
    ``repr``. A reason never repeats a long value in full.
    """
    if isinstance(value, str):
        return _short(value, limit)
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


#: The deepest nesting of arrays and objects an imported JSON value may have (a record counts
#: as depth 1). Real records nest a handful of levels; deeper values could not be stored or
#: serialised again (Python's recursion limit) and are refused where they enter.
MAX_JSON_DEPTH = 64


def _field_of(parts: Sequence[str | int]) -> list[str | int]:
    """The leading path parts that name a field: up to the first key not followed by an index."""
    out: list[str | int] = []
    for n, part in enumerate(parts):
        out.append(part)
        if isinstance(part, str) and not (n + 1 < len(parts) and isinstance(parts[n + 1], int)):
            break
    return out


def check_depth(value: Any, location: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse a parsed JSON value nested deeper than ``limit`` arrays and objects.

    The walk is iterative, so a value of any depth is checked without recursion.

    Raises:
        RecordError: naming the field under which the value is too deep (the path down to the
            first key that does not hold a list, e.g. ``candidates[0].generator_settings``)
            and the limit.
    """
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, parts = stack.pop()
        if isinstance(node, dict):
            children: Any = node.items()
        elif isinstance(node, list):
            children = enumerate(node)
        else:
            continue
        if depth > limit:
            field = dotted(_field_of(parts)) or "(record)"
            raise RecordError(
                location,
                field,
                f"nested deeper than {limit} levels of arrays and objects",
            )
        for key, child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, (*parts, key)))


def check_storable(value: Any, location: str, path: str = "") -> None:
    """Refuse any string, key or value, that a database cannot store faithfully.

    NUL (U+0000: PostgreSQL ``text`` and ``jsonb`` refuse it) and lone UTF-16 surrogates (not
    encodable as UTF-8) are refused wherever they occur in a parsed record, metadata included.

    Raises:
        RecordError: naming the field's dotted path and the code point's position.
    """
    if isinstance(value, str):
        bad = _UNSTORABLE.search(value)
        if bad is None:
            return
        i, ch = bad.start(), bad.group()
        what = "NUL (U+0000)" if ch == "\x00" else f"a lone surrogate U+{ord(ch):04X}"
        raise RecordError(location, path or "(record)", f"contains {what} at code point {i}")
    if isinstance(value, dict):
        for key, item in value.items():
            where = dotted([path, key]) if path else path_key(key)
            check_storable(key, location, where)
            check_storable(item, location, where)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            check_storable(item, location, f"{path}[{n}]")


def format_validation_error(exc: Any, location: str) -> RecordError:
    """Turn a ``ValidationError``'s first error into a :class:`RecordError`, never echoing input."""
    first = exc.errors(include_input=False, include_url=False)[0]
    return RecordError(location, dotted(first["loc"]) or "(record)", first["msg"])


def path_key(key: str) -> str:
    """Render a record's key for a field path: escaped if unprintable, at most 40 characters.

    Keys come from the input (e.g. metadata keys), so a path must neither carry characters a
    response cannot encode nor repeat a long key; the empty key is written ``""``.
    """
    if key == "":
        return '""'  # an empty key is still named: a field is never the empty string
    if not key.isprintable():
        key = key.encode("unicode_escape", "backslashreplace").decode("ascii")
    return key if len(key) <= 40 else key[:40] + "…"


def dotted(parts: Sequence[str | int]) -> str:
    """Join a pydantic-style location into ``a[0].b`` form (keys through :func:`path_key`)."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{path_key(part)}" if out else path_key(part)
    return out
