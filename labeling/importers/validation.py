"""The one stream validator: check records one by one and collect up to ``MAX_ERRORS`` errors.

Every import reads a stream of ``(location, object-or-RecordError)`` pairs (workload records,
source versions, evaluator labels, the lines of a release's ``sources.jsonl``). Validation goes on
after the first error, so a user can fix several at once, and stops once ``MAX_ERRORS`` errors are
collected: the import is refused anyway, and reading on would only cost time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from pydantic import ValidationError

from labeling.importers.record_errors import RecordError, format_validation_error

# The most errors an import collects before it stops reading.
MAX_ERRORS = 20

T = TypeVar("T")


def validated_stream(
    records: Iterable[tuple[str, Any]],
    parse: Callable[[str, Any], T],
    errors: list[RecordError],
    limit: int = MAX_ERRORS,
) -> Iterator[tuple[str, T]]:
    """Yield ``(location, parse(location, raw))`` for each record that passes ``parse``.

    A record that is already a :class:`RecordError` (the reader could not parse it) and a record
    that ``parse`` refuses are appended to ``errors`` instead: a pydantic ``ValidationError`` as its
    first error (:func:`format_validation_error`), a :class:`RecordError` as it is, and a
    ``RecursionError`` as "nested too deeply". Before each record, the stream stops when
    ``errors`` holds ``limit`` errors (also errors the caller appended, e.g. while writing).
    """
    for location, raw in records:
        if len(errors) >= limit:
            return
        if isinstance(raw, RecordError):
            errors.append(raw)
            continue
        try:
            value = parse(location, raw)
        except ValidationError as exc:
            errors.append(format_validation_error(exc, location))
            continue
        except RecordError as exc:
            errors.append(exc)
            continue
        except RecursionError:
            errors.append(RecordError(location, "(record)", "nested too deeply"))
            continue
        yield location, value
