"""The one stream validator: check records one by one and collect up to ``MAX_ERRORS`` errors.

Every import reads a stream of ``(location, object-or-RecordError)`` pairs (workload records,
source versions, evaluator labels, the lines of a release's ``sources.jsonl``). Validation goes on
after the first error, so a user can fix several at once, and stops once ``MAX_ERRORS`` errors are
collected: the import is refused anyway, and reading on would only cost time.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from pydantic import ValidationError

from labeling.importers.schema import RecordError, format_validation_error

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

    Args:
        records: ``(location, raw)`` pairs, read lazily.
        parse: turns one raw record into its checked value, or raises.
        errors: the import's error list, appended to.
        limit: stop reading once ``errors`` holds this many.
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


# Records validated ahead are handed over in batches of this many (fewer queue operations), with
# at most AHEAD_BATCHES batches waiting: the records read ahead stay few whatever the file size.
AHEAD_BATCH = 100
AHEAD_BATCHES = 10
_END = object()


def validated_stream_ahead(
    records: Iterable[tuple[str, Any]],
    parse: Callable[[str, Any], T],
    errors: list[RecordError],
    limit: int = MAX_ERRORS,
) -> Iterator[tuple[str, T]]:
    """:func:`validated_stream`, with reading and ``parse`` run in a thread ahead of the caller.

    While the caller waits for its database (which releases the GIL), the next records are read
    and checked. The caller sees exactly what :func:`validated_stream` gives it: the same records
    and the same errors, appended to ``errors`` in input order and only when the caller reaches
    them, and the stream stops at the same record once ``errors`` holds ``limit`` errors (also
    errors the caller appended). An exception the reader or ``parse`` raises (other than the
    errors collected) is raised here, at the point of the stream where it occurred.

    ``records`` and ``parse`` must not use the database (the thread has no part in the caller's
    transaction). The thread has stopped when the iterator is exhausted or closed.
    """
    handover: queue.Queue[Any] = queue.Queue(maxsize=AHEAD_BATCHES)
    stop = threading.Event()

    def produce() -> None:
        found: list[RecordError] = []
        # (location, value, None) of a record, (None, None, error) of an error
        batch: list[tuple[Any, Any, RecordError | None]] = []
        sent = 0
        try:
            for location, value in validated_stream(records, parse, found, limit):
                batch.extend((None, None, e) for e in found[sent:])
                sent = len(found)
                batch.append((location, value, None))
                if len(batch) >= AHEAD_BATCH:
                    if stop.is_set():
                        return
                    handover.put(batch)
                    batch = []
            batch.extend((None, None, e) for e in found[sent:])
            handover.put(batch)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            # What came before the exception first: the caller meets it where it occurred.
            batch.extend((None, None, e) for e in found[sent:])
            handover.put(batch)
            handover.put(exc)
        finally:
            handover.put(_END)

    thread = threading.Thread(target=produce, name="import-validate", daemon=True)
    thread.start()
    try:
        while (batch := handover.get()) is not _END:
            if isinstance(batch, BaseException):
                raise batch
            for location, value, error in batch:
                if len(errors) >= limit:
                    return
                if error is not None:
                    errors.append(error)
                else:
                    yield location, value
    finally:
        stop.set()
        while thread.is_alive() or not handover.empty():
            try:
                handover.get(timeout=0.1)
            except queue.Empty:
                continue
        thread.join()
