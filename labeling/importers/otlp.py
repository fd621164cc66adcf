"""Reading OTLP JSON trace files into spans, and OTLP attribute values into Python values.

The file is what the OpenTelemetry collector's file exporter writes: JSON lines, each an
``ExportTraceServiceRequest`` ``{"resourceSpans": [{"resource": {...}, "scopeSpans": [{"scope":
{...}, "spans": [...]}]}]}``; a single JSON document of that shape (e.g. pretty-printed, as
Phoenix or Langfuse exports may be saved) is read too. OTLP/JSON encodes trace and span ids as
hex strings, 64-bit integers (``intValue``, ``startTimeUnixNano``) as decimal strings (a JSON
number is accepted too) and every attribute value as an ``AnyValue`` object with exactly one of
``stringValue``, ``boolValue``, ``intValue``, ``doubleValue``, ``arrayValue`` (``{"values":
[AnyValue, ...]}``), ``kvlistValue`` (``{"values": [{"key": ..., "value": AnyValue}]}``) or
``bytesValue``; ``{}`` is an empty value.

Attribute values are decoded when they are read (:meth:`Span.value`), so an attribute the
GenAI mapping does not read is never refused.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from labeling.importers.native import loads_strict, read_jsonl
from labeling.importers.record_errors import RecordError, echo

HEX_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
HEX_SPAN_ID = re.compile(r"[0-9a-fA-F]{16}")
DECIMAL = re.compile(r"-?[0-9]+")
INT64 = 2**63
VALUE_KINDS = (
    "stringValue",
    "boolValue",
    "intValue",
    "doubleValue",
    "arrayValue",
    "kvlistValue",
    "bytesValue",
)


@dataclass(frozen=True)
class Value:
    """A decoded ``AnyValue``: its OTLP ``kind`` and its Python ``value``.

    ``kind`` is e.g. ``"intValue"``, None when empty; ``value`` is a str, bool, int, float, a
    list of :class:`Value`, a dict of :class:`Value`, or the base64 text of ``bytesValue``.
    """

    kind: str | None
    value: Any

    def plain(self) -> Any:
        """Return the value with nested :class:`Value` objects unwrapped (JSON-like)."""
        if self.kind == "arrayValue":
            return [item.plain() for item in self.value]
        if self.kind == "kvlistValue":
            return {key: item.plain() for key, item in self.value.items()}
        return self.value


def any_value(raw: Any, location: str, field: str) -> Value:
    """Decode one OTLP/JSON ``AnyValue`` object.

    Raises:
        RecordError: at ``location`` naming ``field``: not an object, not exactly one kind, or a
            kind whose value has the wrong JSON type (an ``intValue`` that is not a decimal
            integer of 64 bits, a non-finite ``doubleValue``, ...).
    """
    if not isinstance(raw, dict):
        raise RecordError(location, field, f"expected an OTLP AnyValue object, got {_type(raw)}")
    if not raw:
        return Value(None, None)
    kinds = [k for k in raw if k in VALUE_KINDS]
    if len(raw) != 1 or len(kinds) != 1:
        raise RecordError(
            location,
            field,
            f"expected exactly one of {', '.join(VALUE_KINDS)}; got keys {echo(sorted(raw))}",
        )
    kind = kinds[0]
    inner = raw[kind]
    if kind in ("stringValue", "bytesValue"):
        if not isinstance(inner, str):
            raise RecordError(location, field, f"{kind} must be a JSON string, got {_type(inner)}")
        return Value(kind, inner)
    if kind == "boolValue":
        if not isinstance(inner, bool):
            raise RecordError(
                location, field, f"boolValue must be true or false, got {echo(inner)}"
            )
        return Value(kind, inner)
    if kind == "intValue":
        return Value(kind, _int64(inner, location, field, "intValue"))
    if kind == "doubleValue":
        return Value(kind, _double(inner, location, field))
    values = inner.get("values", []) if isinstance(inner, dict) else None
    if not isinstance(values, list):
        raise RecordError(location, field, f'{kind} must be an object {{"values": [...]}}')
    if kind == "arrayValue":
        return Value(kind, [any_value(v, location, f"{field}[{n}]") for n, v in enumerate(values)])
    items: dict[str, Value] = {}
    for n, pair in enumerate(values):
        if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
            raise RecordError(
                location, f"{field}.values[{n}]", 'expected {"key": string, "value": AnyValue}'
            )
        items[pair["key"]] = any_value(pair.get("value", {}), location, f"{field}.{pair['key']}")
    return Value(kind, items)


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _int64(raw: Any, location: str, field: str, what: str) -> int:
    if isinstance(raw, str) and DECIMAL.fullmatch(raw):
        value = int(raw)
    elif isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    else:
        raise RecordError(
            location, field, f"{what} must be a decimal integer string, got {echo(raw)}"
        )
    if not -INT64 <= value < INT64:
        raise RecordError(location, field, f"{what} {echo(raw)} does not fit 64 bits")
    return value


def _double(raw: Any, location: str, field: str) -> float | int:
    value: float | int
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str):
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
    else:
        raise RecordError(location, field, f"doubleValue must be a number, got {_type(raw)}")
    if not math.isfinite(value):
        raise RecordError(location, field, f"doubleValue must be finite, got {echo(raw)}")
    return value


@dataclass
class Event:
    """A span event: its ``name`` and raw ``attributes`` (key -> AnyValue object)."""

    name: str
    attributes: dict[str, Any]


@dataclass
class Span:
    """One span as read: ids, times (Unix nanoseconds), raw attributes and events.

    ``location`` is the file line (``"line 3"``); ``resource`` holds the raw attributes of the
    span's resource (``service.name``, ...).
    """

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[Event]
    location: str
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """The span's place in errors: ``"line 3 trace <id> span <id>"``."""
        return f"{self.location} trace {self.trace_id} span {self.span_id}"

    def value(self, key: str, attributes: dict[str, Any] | None = None) -> Value:
        """Decode attribute ``key`` of ``attributes`` (default the span's); absent: kind None."""
        raw = (self.attributes if attributes is None else attributes).get(key)
        if raw is None:
            return Value(None, None)
        return any_value(raw, self.where, key)


def _attributes(raw: Any, location: str, path: str) -> dict[str, Any]:
    """Return ``{key: raw AnyValue}`` of an OTLP ``attributes`` list (values decoded later)."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise RecordError(location, path, f"expected a list of key/value pairs, got {_type(raw)}")
    out: dict[str, Any] = {}
    for n, pair in enumerate(raw):
        if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
            raise RecordError(location, f"{path}[{n}]", 'expected {"key": string, "value": ...}')
        key = pair["key"]
        if key in out:
            raise RecordError(location, f"{path}[{n}]", f"attribute {echo(key)} repeats")
        out[key] = pair.get("value", {})
    return out


def _list(obj: dict[str, Any], key: str, location: str, path: str) -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise RecordError(location, f"{path}{key}", f"expected a list, got {_type(value)}")
    return value


def _object(value: Any, location: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordError(location, path, f"expected an object, got {_type(value)}")
    return value


def _span(raw: Any, location: str, path: str, resource: dict[str, Any]) -> Span:
    obj = _object(raw, location, path)
    ids: dict[str, str] = {}
    for key, pattern, digits in (
        ("traceId", HEX_TRACE_ID, 32),
        ("spanId", HEX_SPAN_ID, 16),
        ("parentSpanId", HEX_SPAN_ID, 16),
    ):
        value = obj.get(key, "")
        if key == "parentSpanId" and value == "":
            ids[key] = ""
            continue
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise RecordError(
                location,
                f"{path}.{key}",
                f"expected {digits} hex digits (OTLP JSON writes ids in hex), got {echo(value)}",
            )
        ids[key] = value.lower()
    name = obj.get("name", "")
    if not isinstance(name, str):
        raise RecordError(location, f"{path}.name", f"expected a string, got {_type(name)}")
    times = [
        _int64(obj.get(key, "0"), location, f"{path}.{key}", key)
        for key in ("startTimeUnixNano", "endTimeUnixNano")
    ]
    events = []
    for n, event in enumerate(_list(obj, "events", location, f"{path}.")):
        at = f"{path}.events[{n}]"
        event = _object(event, location, at)
        event_name = event.get("name", "")
        if not isinstance(event_name, str):
            raise RecordError(location, f"{at}.name", f"expected a string, got {_type(event_name)}")
        events.append(
            Event(event_name, _attributes(event.get("attributes"), location, f"{at}.attributes"))
        )
    return Span(
        trace_id=ids["traceId"],
        span_id=ids["spanId"],
        parent_span_id=ids["parentSpanId"],
        name=name,
        start=times[0],
        end=times[1],
        attributes=_attributes(obj.get("attributes"), location, f"{path}.attributes"),
        events=events,
        location=location,
        resource=resource,
    )


def request_spans(request: dict[str, Any], location: str) -> list[Span]:
    """Return the spans of one ``ExportTraceServiceRequest`` object, in file order.

    Raises:
        RecordError: naming the path of the first field in the wrong shape, e.g.
            ``resourceSpans[0].scopeSpans[1].spans[3].traceId``; a metrics or logs export
            (``resourceMetrics``/``resourceLogs``) is refused as not traces.
    """
    if "resourceSpans" not in request:
        other = [k for k in ("resourceMetrics", "resourceLogs") if k in request]
        reason = (
            f"this is an OTLP {other[0][8:].lower()} export, not traces"
            if other
            else 'missing: expected an ExportTraceServiceRequest {"resourceSpans": [...]}'
        )
        raise RecordError(location, "resourceSpans", reason)
    spans: list[Span] = []
    for r, resource_spans in enumerate(_list(request, "resourceSpans", location, "")):
        at = f"resourceSpans[{r}]"
        resource_spans = _object(resource_spans, location, at)
        resource = _object(resource_spans.get("resource", {}), location, f"{at}.resource")
        attributes = _attributes(resource.get("attributes"), location, f"{at}.resource.attributes")
        for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", location, f"{at}.")):
            sat = f"{at}.scopeSpans[{s}]"
            scope_spans = _object(scope_spans, location, sat)
            for n, raw in enumerate(_list(scope_spans, "spans", location, f"{sat}.")):
                spans.append(_span(raw, location, f"{sat}.spans[{n}]", attributes))
    return spans


def _first_object_line(stream: IO[bytes]) -> bool:
    """Whether ``stream``'s first non-blank line is a JSON object alone (JSON lines); rewinds it."""
    try:
        for _location, obj in read_jsonl(stream):
            return not isinstance(obj, RecordError)
        return True
    finally:
        stream.seek(0)


def read_requests(stream: IO[bytes]) -> Iterator[tuple[str, dict[str, Any] | RecordError]]:
    """Yield ``(location, request object or RecordError)`` for each request of an OTLP file.

    JSON lines are read line by line (``"line N"``); a file whose first line is not a JSON
    object by itself is read as one JSON document, located ``"line 1"``. Malformed or
    truncated JSON is an error at the line where parsing failed (``"line 40"``, reason
    ``invalid JSON: ... at column 3``).
    """
    if _first_object_line(stream):
        yield from read_jsonl(stream)
        return
    data = stream.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        yield f"line {line}", RecordError(f"line {line}", "(document)", "not valid UTF-8")
        return
    try:
        value = loads_strict(text, "line 1")
    except RecordError as exc:
        yield exc.location, exc
        return
    except RecursionError:
        yield "line 1", RecordError("line 1", "(document)", "JSON nested too deeply")
        return
    except json.JSONDecodeError as exc:
        location = f"line {exc.lineno}"
        reason = f"invalid JSON: {exc.msg} at column {exc.colno}"
        yield location, RecordError(location, "(document)", reason)
        return
    except ValueError as exc:
        yield "line 1", RecordError("line 1", "(document)", f"invalid JSON: {exc}")
        return
    if not isinstance(value, dict):
        reason = f"expected a JSON object, got {_type(value)}"
        yield "line 1", RecordError("line 1", "(document)", reason)
        return
    yield "line 1", value
