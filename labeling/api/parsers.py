"""Request body parsers of the API: one value per field, whatever the encoding.

The API takes JSON bodies (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``), and multipart form
data only where a file is uploaded (the views' own ``parser_classes``), so the schema declares
one media type per request body. DRF's own parsers keep the last of several values: ``json``
keeps the last of two equal keys of an object, and a serializer reads the last value of a form
field posted twice. These parsers refuse both with :class:`labeling.exceptions.MultipleValues`
(HTTP 400, code ``multiple_values``) naming the field: ``answer_label``, or
``claims[1].label`` for a key repeated inside a nested object. The JSON check is the
importers' (:func:`labeling.importers.native.unique_keys`). No upload takes a list as a
repeated form field, so every form field must occur once.

Its own module, importing no view: DRF reads ``DEFAULT_PARSER_CLASSES`` while
``rest_framework.views`` is being imported.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator, Mapping
from typing import IO, Any

from django.utils.datastructures import MultiValueDict
from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils.json import strict_constant

from labeling.exceptions import InvalidInput, MultipleValues
from labeling.importers.native import DuplicateKey, unique_keys

# A refusal names the field; a key longer than this is shortened in the name.
MAX_KEY_SHOWN = 40


def _shown(key: str) -> str:
    return key if len(key) <= MAX_KEY_SHOWN else key[:MAX_KEY_SHOWN] + "…"


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs in document order, repeats kept."""


def _entries(node: Any) -> Iterator[tuple[Any, Any]]:
    return iter(node) if isinstance(node, _Pairs) else enumerate(node)


def first_repeated_key(text: str) -> str | None:
    """Return the path of the first key repeated inside one object of ``text``, in document order.

    The path reads as the services name fields: ``answer_label``, ``claims[1].label``,
    ``[0].x`` when the document is an array. ``text`` must be valid JSON. The walk is
    iterative, so it is as deep as the parse.
    """
    tree = json.loads(text, object_pairs_hook=_Pairs)
    if not isinstance(tree, list):
        return None
    stack: list[tuple[Iterator[tuple[Any, Any]], str, set[str] | None]] = [
        (_entries(tree), "", set() if isinstance(tree, _Pairs) else None)
    ]
    while stack:
        entries, path, seen = stack[-1]
        step = next(entries, None)
        if step is None:
            stack.pop()
            continue
        key, value = step
        if seen is not None:
            here = f"{path}.{_shown(key)}" if path else _shown(key)
            if key in seen:
                return here
            seen.add(key)
        else:
            here = f"{path}[{key}]"
        if isinstance(value, list):
            stack.append((_entries(value), here, set() if isinstance(value, _Pairs) else None))
    return None


class StrictJSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing a key repeated in one object (and NaN, as DRF does)."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        """Parse the body as JSON, every object's keys distinct.

        Raises:
            MultipleValues: a key occurs twice in one object (``field`` its path, e.g.
                ``claims[0].label``).
            InvalidInput: the body is nested too deeply.
            ParseError: the body is not JSON (HTTP 400).
        """
        encoding = parsers.get_encoding(parser_context or {})  # type: ignore[attr-defined,unused-ignore]  # stubs differ
        try:
            text = codecs.getreader(encoding)(stream).read()
            return json.loads(text, parse_constant=strict_constant, object_pairs_hook=unique_keys)
        except DuplicateKey as exc:
            raise MultipleValues.of(first_repeated_key(text) or _shown(exc.key)) from None
        except RecursionError:
            raise InvalidInput("the JSON body is nested too deeply") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None


def _refuse_repeats(*fields: MultiValueDict[str, Any]) -> None:
    for values in fields:
        for key, given in values.lists():
            if len(given) > 1:
                raise MultipleValues.of(_shown(key), len(given))


class StrictMultiPartParser(parsers.MultiPartParser):
    """DRF's multipart parser, refusing a field or file posted more than once."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        """Parse the body as multipart form data, each field and file once.

        Raises:
            MultipleValues: a field or file occurs more than once.
            ParseError: the body is not valid multipart data (HTTP 400).
        """
        parsed = super().parse(stream, media_type, parser_context)
        _refuse_repeats(parsed.data, parsed.files)
        return parsed
