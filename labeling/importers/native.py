"""Reading native JSONL workloads: one JSON object per line, streamed line by line."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

from labeling.importers.record_errors import (
    MAX_JSON_DEPTH,
    RecordError,
    check_depth,
    check_storable,
    echo,
)

READ_BLOCK = 1 << 20
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|d[89a-f][0-9a-f]{2})", re.IGNORECASE)
# One record per line; a longer line is refused before it is parsed (parsing costs about ten
# times the line's size in memory). 64 MiB holds any realistic question with its sources.
MAX_LINE_BYTES = 64 << 20


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class DuplicateKey(ValueError):
    """A JSON object names the same key twice (``key``); ``json`` would keep the last value."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {echo(key)}")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of ``json.loads`` that refuses a repeated key.

    Raises:
        DuplicateKey: a key occurs twice in one object (a ``ValueError``).
    """
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return obj


def _number(literal: str) -> float | int:
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"number {literal[:20]} is out of range")
    # One value, one form: 2.0 is read as 2, so a re-import that writes 2.0 for 2 changes nothing.
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


#: Extra recursion depth the JSON parser may use while parsing one value.
PARSER_DEPTH_HEADROOM = 1000


def loads_strict(text: str, location: str) -> Any:
    r"""Parse JSON strictly and check every string can be stored.

    Refuses ``NaN``/``Infinity``, out-of-range numbers and repeated keys (``json`` accepts
    them), NUL or lone surrogates in any string, key or value (written as ``\u`` escapes:
    raw, they are not valid JSON or UTF-8), and values nested deeper than
    :data:`~labeling.importers.record_errors.MAX_JSON_DEPTH`. Integral numbers are read as ints
    (``2.0`` -> 2).

    Raises:
        json.JSONDecodeError: malformed JSON (with ``lineno``/``colno``).
        ValueError: a non-standard constant, an out-of-range number or a repeated key.
        RecordError: an unstorable character or too deep a value, naming the field path.
        RecursionError: a value nested too deeply for the parser itself.
    """
    # The C parser counts each nesting level against the interpreter's recursion limit, on top
    # of the caller's own stack (a web request's middleware, the import service): without
    # headroom, whether a value 900 levels deep is refused by the parser ("(line)") or by
    # check_depth (naming its field) would depend on how deep the caller is.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + PARSER_DEPTH_HEADROOM)
    try:
        value = json.loads(
            text, parse_constant=_no_constants, parse_float=_number, object_pairs_hook=unique_keys
        )
    finally:
        sys.setrecursionlimit(limit)
    # A value nested deeper than the limit opens more arrays and objects than the limit (the
    # count includes brackets inside strings, so it only errs towards walking).
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        check_depth(value, location)
    # The walk is needed only when an escape could have produced NUL or a surrogate.
    if _UNSTORABLE_ESCAPE.search(text):
        check_storable(value, location)
    return value


def parse_json_line(raw: bytes, location: str) -> dict[str, Any] | RecordError:
    """Parse one JSONL line into an object, or return the error that names what is wrong.

    Strict JSON: ``NaN``/``Infinity`` and repeated keys are refused, and the line must be UTF-8.
    """
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        return RecordError(location, "(line)", f"not valid UTF-8 at byte {exc.start}")
    try:
        value = loads_strict(text, location)
    except RecordError as exc:
        return exc
    except RecursionError:
        return RecordError(location, "(line)", "JSON nested too deeply")
    except json.JSONDecodeError as exc:
        return RecordError(location, "(line)", f"invalid JSON: {exc.msg} at column {exc.colno}")
    except ValueError as exc:
        return RecordError(location, "(line)", f"invalid JSON: {exc}")
    if not isinstance(value, dict):
        return RecordError(
            location, "(line)", f"expected a JSON object, got {type(value).__name__}"
        )
    return value


def read_jsonl(
    stream: IO[bytes], max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[str, dict[str, Any] | RecordError]]:
    r"""Yield ``("line N", object-or-error)`` for each non-blank line of a binary stream.

    A UTF-8 byte-order mark at the start of the file is skipped; line ends may be LF or CRLF
    (texts keep their own ``\r\n`` because inside JSON strings they are escaped). A line
    longer than ``max_line_bytes`` is reported as an error and skipped without being held.
    """
    number = 0
    while raw := stream.readline(max_line_bytes + 1):
        number += 1
        location = f"line {number}"
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            while (rest := stream.readline(READ_BLOCK)) and not rest.endswith(b"\n"):
                pass
            yield (
                location,
                RecordError(location, "(line)", f"longer than the limit of {max_line_bytes} bytes"),
            )
            continue
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        yield location, parse_json_line(raw, location)


def convert_jsonl(
    stream: IO[bytes], convert: Callable[[dict[str, Any], str], dict[str, Any]]
) -> Iterator[tuple[str, dict[str, Any] | RecordError]]:
    """Read a JSONL dataset and map each object to a native record with ``convert``.

    ``convert(obj, location)`` returns the native record or raises RecordError; parse errors
    and conversion errors are yielded in the line's place, so validation reports them all.
    """
    for location, obj in read_jsonl(stream):
        if isinstance(obj, RecordError):
            yield location, obj
            continue
        try:
            yield location, convert(obj, location)
        except RecordError as exc:
            yield location, exc


def file_sha256(stream: IO[bytes]) -> str:
    """Return the sha256 of a seekable binary stream and rewind it to the start."""
    digest = hashlib.sha256()
    stream.seek(0)
    while block := stream.read(READ_BLOCK):
        digest.update(block)
    stream.seek(0)
    return digest.hexdigest()
