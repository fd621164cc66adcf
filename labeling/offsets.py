r"""Evidence offsets: browser UTF-16 offsets to code points, and the checks a cited span must pass.

Stored offsets are Unicode code points of the pinned source text, 0-based and end-exclusive, so
``text[start:end] == quote`` in Python. Browsers count UTF-16 code units
(``Selection``/``Range`` offsets, ``String.length``): a character outside the Basic Multilingual
Plane (an emoji, U+1F600) is one code point but two UTF-16 units. The server converts on the way
in and refuses, never shifts, a span that does not fit the stored text exactly:

- an offset inside a surrogate pair (half an astral character) or past the end;
- an empty span;
- a quote that differs from the text at the converted offsets;
- a stored text whose sha256 no longer matches its pin;
- a boundary inside an extended grapheme cluster (a base letter and its combining accent, an
  emoji with its skin-tone modifier, a flag's two regional indicators; UAX #29 via the ``regex``
  module's ``\X``) or between the CR and LF of a CRLF line ending.

Pure functions with no database. Errors are :class:`labeling.exceptions.InvalidInput` with
``field`` naming the offending input (``start``, ``end``, ``quote``, ``unit`` or
``source``); callers prefix the field with its place in the request.
"""

from __future__ import annotations

import hashlib

import regex

from labeling.exceptions import InvalidInput

UNIT_UTF16 = "utf16"
UNIT_CODEPOINT = "codepoint"
UNITS = (UNIT_UTF16, UNIT_CODEPOINT)

_GRAPHEME = regex.compile(r"\X")
# Error messages show at most this many code points of a text.
SHOWN = 40


def _error(field: str, reason: str) -> InvalidInput:
    return InvalidInput(reason, field=field)


def shorten(text: str, limit: int = SHOWN) -> str:
    """Render at most ``limit`` code points of ``text`` (repr, with an ellipsis when cut)."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def utf16_to_codepoint(text: str, offset: int, *, field: str = "offset") -> int:
    """Convert a UTF-16 code-unit offset into ``text`` to a code-point offset.

    Args:
        text: the text the offset points into (a pinned source text, with no lone surrogates).
        offset: 0 ≤ offset ≤ the UTF-16 length of ``text``.
        field: the input's name for error messages.

    Raises:
        InvalidInput: the offset is negative, past the end, or between the two halves of a
            surrogate pair.
    """
    if offset < 0:
        raise _error(field, f"offset {offset} is negative")
    encoded = text.encode("utf-16-le")
    units = len(encoded) // 2
    if offset > units:
        raise _error(
            field, f"UTF-16 offset {offset} is past the end of the text ({units} UTF-16 units)"
        )
    prefix = encoded[: 2 * offset]
    if offset > 0:
        last = int.from_bytes(prefix[-2:], "little")
        if 0xD800 <= last <= 0xDBFF:
            raise _error(
                field,
                f"UTF-16 offset {offset} falls inside a surrogate pair (half of one character "
                "outside the Basic Multilingual Plane, e.g. an emoji)",
            )
    return len(prefix.decode("utf-16-le"))


def is_grapheme_boundary(text: str, offset: int) -> bool:
    """Return whether ``offset`` (code points) lies between two extended grapheme clusters.

    The ends of the text are boundaries. Scanning starts after the last line feed before
    ``offset``, which is always a cluster boundary (UAX #29 rule GB4), so long texts with lines
    are not rescanned from the start.
    """
    if offset <= 0 or offset >= len(text):
        return offset in (0, len(text))
    anchor = text.rfind("\n", 0, offset) + 1
    if anchor == offset:
        return True
    for match in _GRAPHEME.finditer(text, pos=anchor):
        if match.end() >= offset:
            return match.end() == offset
    return False  # pragma: no cover - the last cluster always ends at len(text)


def text_sha256(text: str) -> str:
    """Return the hex sha256 of the UTF-8 encoding of ``text`` (the pin of a source version)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_boundary(text: str, offset: int, field: str) -> None:
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        raise _error(
            field,
            f"offset {offset} splits a CRLF line ending (between CR and LF); select the whole "
            "line break or none of it",
        )
    if not is_grapheme_boundary(text, offset):
        around = shorten(text[max(0, offset - 3) : offset + 3])
        raise _error(
            field,
            f"offset {offset} splits a character (a grapheme cluster such as a letter with its "
            f"combining accent, or an emoji with its modifier) in {around}",
        )


def evidence_span_check(
    *, text: str, sha256: str, start: int, end: int, quote: str, unit: str
) -> tuple[int, int]:
    """Check a cited span against a pinned source text and return its code-point offsets.

    Args:
        text: the stored text of the source version.
        sha256: the version's pin (hex sha256 of the UTF-8 text).
        start: start offset, in ``unit``.
        end: end offset (exclusive), in ``unit``.
        quote: the text the client says it selected; must equal the text at the offsets.
        unit: ``"utf16"`` (browser offsets, converted here) or ``"codepoint"``.

    Returns:
        ``(start, end)`` in code points, with ``text[start:end] == quote``.

    Raises:
        InvalidInput: with ``field`` naming ``unit``, ``source``, ``start``, ``end`` or
            ``quote``, when the unit is unknown, the stored text does not match its hash, an
            offset is out of range or inside a surrogate pair, the span is empty or reversed,
            the quote differs from the text (both shown, cut to 40 code points), or a boundary
            splits a grapheme cluster or a CRLF pair.
    """
    if unit not in UNITS:
        raise _error("unit", f"unknown offset unit {unit!r}; one of {list(UNITS)}")
    if text_sha256(text) != sha256:
        raise _error(
            "source",
            "the stored source text no longer matches its sha256 pin; nothing can be cited "
            "from it until the source is re-imported",
        )
    if unit == UNIT_UTF16:
        start_cp = utf16_to_codepoint(text, start, field="start")
        end_cp = utf16_to_codepoint(text, end, field="end")
    else:
        for name, value in (("start", start), ("end", end)):
            if not 0 <= value <= len(text):
                raise _error(
                    name,
                    f"offset {value} is outside the text (0 to {len(text)} code points)",
                )
        start_cp, end_cp = start, end
    if end_cp < start_cp:
        raise _error("end", f"the span ends ({end}) before it starts ({start})")
    if end_cp == start_cp:
        raise _error("end", "the span is empty; select at least one character")
    if text[start_cp:end_cp] != quote:
        raise _error(
            "quote",
            f"the quote {shorten(quote)} differs from the source text at [{start}:{end}] "
            f"({unit}), which is {shorten(text[start_cp:end_cp])}; nothing was shifted",
        )
    _check_boundary(text, start_cp, "start")
    _check_boundary(text, end_cp, "end")
    return start_cp, end_cp
