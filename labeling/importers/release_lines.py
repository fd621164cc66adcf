"""Reading the lines of a release strictly: JSON as written, only the fields the format defines.

:func:`parse_line` parses one JSONL line (numbers as written, no NaN, no repeated key);
:class:`ReleaseFields` refuses a field schema 1.0 does not define (or counts it, for a newer
minor version); :class:`ReleaseSources` indexes ``sources.jsonl`` and reads its texts on demand.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import IO, Any

from labeling.exceptions import WorkloadImportFailed
from labeling.importers.base import SourcedRecord
from labeling.importers.record_errors import (
    RecordError,
    check_depth,
    check_storable,
    echo,
    path_key,
)
from labeling.importers.validation import validated_stream
from labeling.release_format import SCHEMA_VERSION, SOURCE_LINE_KEYS, SOURCES_JSONL

# The keys of every object of labels.jsonl and sources.jsonl, as schema 1.0 defines them (the
# exporter, certification/services/releases/records.py, writes exactly these).
PINNED = ("uri", "published_at", "observed_at")


# ImportBatch.report notes: fields a newer minor schema version added, ignored.
IGNORED = "unknown_fields_ignored"


_ESCAPE = re.compile(r"\\u(?:0000|d[89a-f][0-9a-f]{2})", re.IGNORECASE)


class Malformed(Exception):
    """A line that is not a release record (missing or mistyped key)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {echo(key)}")
        obj[key] = value
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise ValueError(f"number {literal[:20]} is out of range")
    return value


def parse_line(raw: bytes, location: str) -> dict[str, Any]:
    """Parse one JSONL line of a release strictly, keeping numbers as written (1.0 stays a float).

    Raises:
        RecordError: not UTF-8, not a JSON object, NaN/Infinity, a repeated key, NUL or a
            lone surrogate in a string, or a value nested deeper than ``MAX_JSON_DEPTH``.
    """
    try:
        text = raw.decode("utf-8")
        value = json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite,
            object_pairs_hook=_unique_keys,
        )
    except UnicodeDecodeError as exc:
        raise RecordError(location, "(line)", f"not valid UTF-8 at byte {exc.start}") from None
    except RecursionError:
        raise RecordError(location, "(line)", "JSON nested too deeply") from None
    except ValueError as exc:
        raise RecordError(location, "(line)", f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RecordError(location, "(line)", "expected a JSON object")
    check_depth(value, location)
    if _ESCAPE.search(text):
        check_storable(value, location)
    return value


def need(obj: Any, key: str) -> Any:
    """Return ``obj[key]``; raise :class:`Malformed` if ``obj`` is no object or lacks ``key``."""
    if not isinstance(obj, dict):
        raise Malformed(f"expected an object holding {echo(key)}")
    if key not in obj:
        raise Malformed(f"missing {echo(key)}")
    return obj[key]


def need_list(obj: Any, key: str) -> list[Any]:
    """Return ``obj[key]``, which must be a list (else :class:`Malformed`)."""
    value = need(obj, key)
    if not isinstance(value, list):
        raise Malformed(f"{echo(key)} is not a list")
    return value


class ReleaseFields:
    """Checks that release objects hold only the fields the format defines.

    A field the reader does not know is refused (naming the line and the field), unless the
    release's schema minor version is newer than the reader's (``lenient``): a newer minor may
    add fields, which are then ignored and counted in ``counters[IGNORED]``.
    """

    def __init__(self, lenient: bool, counters: dict[str, Any]) -> None:
        self.lenient = lenient
        self.counters = counters
        if lenient:
            counters[IGNORED] = 0

    def check(
        self, obj: Any, known: Collection[str], at: str, field: str, repeats: int = 1
    ) -> None:
        """Refuse (or count, ``repeats`` times) the keys of ``obj`` that are not ``known``.

        Raises:
            RecordError: an unknown key (strict reading), naming ``field`` + the key.
            Malformed: ``obj`` is not an object.
        """
        if not isinstance(obj, dict):
            raise Malformed(f"{field or 'the line'} is not an object")
        unknown = [key for key in obj if key not in known]
        if not unknown:
            return
        if self.lenient:
            self.counters[IGNORED] += len(unknown) * repeats
            return
        name = path_key(unknown[0])
        # the release's own (verified) schema version: it is not newer than the reader's
        version = self.counters.get("schema_version", SCHEMA_VERSION)
        raise RecordError(
            at,
            f"{field}.{name}" if field else name,
            f"unknown field: release schema {version} does not define it (only a newer "
            "minor schema version may add fields, which are then ignored)",
        )


class ReleaseSources:
    """The versions of ``sources.jsonl``: an index by (id, version), texts read on demand."""

    def __init__(self, path: Path, fields: ReleaseFields) -> None:
        self.path = path
        self.index: dict[tuple[str, int], tuple[int, str, tuple[Any, ...]]] = {}
        self.stream: IO[bytes] = path.open("rb")
        self.fields = fields
        errors: list[RecordError] = []
        for _ in validated_stream(self._lines(), self._index_line, errors):
            pass
        if errors:
            self.stream.close()
            raise WorkloadImportFailed(errors)

    def _lines(self) -> Iterator[tuple[str, tuple[int, bytes]]]:
        """Yield ``(location, (offset, line))`` for each line of the file."""
        offset = 0
        for number, raw in enumerate(self.stream, start=1):
            yield f"{SOURCES_JSONL} line {number}", (offset, raw)
            offset += len(raw)

    def _index_line(self, location: str, line_at: tuple[int, bytes]) -> None:
        """Index one line: its offset, sha256 and pinned metadata by (id, version).

        Raises:
            RecordError: the line is not a source version, has unknown fields, or repeats.
        """
        offset, raw = line_at
        try:
            line = parse_line(raw, location)
            self.fields.check(line, SOURCE_LINE_KEYS, location, "")
            key = (need(line, "id"), need(line, "version"))
            if not isinstance(key[0], str) or type(key[1]) is not int:
                raise Malformed("id must be a string and version an integer")
            if key in self.index:
                raise RecordError(
                    location, "version", f"version {key[1]} of {echo(key[0])} repeats"
                )
            pinned = tuple(need(line, name) for name in PINNED)
            self.index[key] = (offset, need(line, "sha256"), pinned)
        except Malformed as exc:
            raise RecordError(location, "(record)", f"not a source version: {exc}") from None

    def text(self, key: tuple[str, int]) -> str:
        """The text of a version (read again from its line)."""
        self.stream.seek(self.index[key][0])
        return parse_line(self.stream.readline(), SOURCES_JSONL)["text"]

    def preamble(self) -> Iterator[SourcedRecord]:
        """Yield every version as a native source version, checking its sha256 and length."""
        with self.path.open("rb") as stream:
            for number, raw in enumerate(stream, start=1):
                location = f"{SOURCES_JSONL} line {number}"
                try:
                    line = parse_line(raw, location)
                    text = need(line, "text")
                    if not isinstance(text, str):
                        raise RecordError(location, "text", "expected a string")
                    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
                    expected = need(line, "sha256")
                    if digest != expected:
                        raise RecordError(
                            location,
                            "sha256",
                            f"the text's sha256 is {digest}, the line says {echo(expected)}",
                        )
                    if len(text) != need(line, "length"):
                        raise RecordError(
                            location,
                            "length",
                            f"the text has {len(text)} code points, the line says "
                            f"{echo(line['length'])}",
                        )
                    yield (
                        location,
                        {
                            "id": need(line, "id"),
                            "version": need(line, "version"),
                            "text": text,
                            **{name: need(line, name) for name in PINNED},
                        },
                    )
                except RecordError as exc:
                    yield location, exc
                except Malformed as exc:
                    yield location, RecordError(location, "(record)", str(exc))

    def close(self) -> None:
        """Close the file read for texts."""
        self.stream.close()
