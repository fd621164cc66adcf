"""Log formatters that keep a record's context: the fields passed with ``extra=``.

``logger.info("release_build.done", extra={"build_id": 7})`` carries ``build_id`` on the record,
but a ``%(message)s`` format prints only the message. These formatters print every such field:

- :class:`KeyValueFormatter` (``CERTLABEL_LOG_FORMAT=kv``, the default), one line per record:
  ``2026-01-01 12:00:00,000 INFO certification.tasks release_build.done build_id=7``;
- :class:`JsonFormatter` (``CERTLABEL_LOG_FORMAT=json``), one JSON object per line, for a log
  collector: ``{"time": ..., "level": "INFO", "logger": ..., "message": ..., "build_id": 7}``.

Standard library only: ``labeling/settings.py`` names them in ``LOGGING``.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# The attributes every LogRecord has (and those that formatting adds): anything else on a
# record came from ``extra=``. ``taskName`` is a standard attribute from Python 3.12 on.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def record_context(record: logging.LogRecord) -> dict[str, Any]:
    """Return the fields that ``extra=`` put on ``record``, in the order they were given."""
    return {
        key: value
        for key, value in vars(record).items()
        if key not in _STANDARD_ATTRS and not key.startswith("_")
    }


def _json(value: Any) -> str:
    """Compact JSON; a value JSON cannot encode is written as its ``str()``."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _kv_value(value: Any) -> str:
    if isinstance(value, str):
        if value and not any(c.isspace() or c in "\"'=" for c in value):
            return value
        return _json(value)  # quoted, with escapes: the line stays one line and parseable
    return _json(value)


class KeyValueFormatter(logging.Formatter):
    """The configured format, then `` key=value`` for every ``extra`` field (before a traceback).

    Strings without spaces, quotes or ``=`` are printed bare; other strings, numbers, lists and
    mappings as compact JSON (``versions=[3,9]``, ``error="no such run"``).
    """

    def formatMessage(self, record: logging.LogRecord) -> str:
        """Format the line as configured and append the record's context fields."""
        line = super().formatMessage(record)
        context = record_context(record)
        if not context:
            return line
        return line + " " + " ".join(f"{k}={_kv_value(v)}" for k, v in context.items())


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message, the context.

    A traceback, when the record has one, is the ``exc_info`` string; a stack, ``stack_info``.
    The fixed keys win over a context field of the same name.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Serialise ``record`` as one line of JSON."""
        payload: dict[str, Any] = dict(record_context(record))
        payload.update(
            time=datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            level=record.levelname,
            logger=record.name,
            message=record.getMessage(),
        )
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            payload["exc_info"] = record.exc_text
        if record.stack_info:
            payload["stack_info"] = self.formatStack(record.stack_info)
        return _json(payload)
