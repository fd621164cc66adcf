"""Reading the OpenTelemetry GenAI semantic conventions off spans (for ``otel.py``).

Each function reads one thing from a span, from the attributes of the GenAI conventions and of
OpenInference (Phoenix) and OpenLLMetry, first match wins, and raises :class:`RecordError`
naming the span and the attribute when a value has the wrong OTLP type or shape. Structured
attributes (``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.retrieval.documents``) may be an ``arrayValue``/``kvlistValue`` or a JSON string, as
the conventions allow. Messages are ``{"role", "parts": [{"type": "text", "content"}]}`` (text
parts joined) or ``{"role", "content": "..."}``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from labeling.importers.native import loads_strict
from labeling.importers.otlp import Span, Value
from labeling.importers.record_errors import RecordError, echo

LLM, RETRIEVAL = "llm", "retrieval"
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
# gen_ai.request.<name> attributes kept as generator settings (numbers; stop_sequences a list).
REQUEST_SETTINGS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "choice.count",
)
QUESTION_FROM = (
    "gen_ai.input.messages",
    "gen_ai.prompt.N.content",
    "llm.input_messages.N.message.content",
    "gen_ai.prompt",
    "gen_ai.user.message event",
)
COMPLETIONS_FROM = (
    "gen_ai.output.messages",
    "gen_ai.completion.N.content",
    "llm.output_messages.N.message.content",
    "gen_ai.completion",
    "gen_ai.choice events",
    "output.value",
)


def attribute_text(span: Span, key: str, attributes: dict[str, Any] | None = None) -> str | None:
    """Return the string attribute ``key`` (None if absent).

    Raises:
        RecordError: the attribute is not a ``stringValue``.
    """
    value = span.value(key, attributes)
    if value.kind is None:
        return None
    if value.kind != "stringValue":
        raise RecordError(span.where, key, f"expected a string (stringValue), got {value.kind}")
    return str(value.value)


def _number(span: Span, key: str) -> int | float | None:
    value = span.value(key)
    if value.kind is None:
        return None
    if value.kind not in ("intValue", "doubleValue"):
        raise RecordError(
            span.where, key, f"expected a number (doubleValue or intValue), got {value.kind}"
        )
    number: int | float = value.value
    return number


def _structured(span: Span, key: str, counters: dict[str, Any], value: Value | None = None) -> Any:
    """Read a structured attribute: an ``arrayValue``/``kvlistValue``, or JSON in a string."""
    value = span.value(key) if value is None else value
    if value.kind is None:
        return None
    if value.kind in ("arrayValue", "kvlistValue"):
        return value.plain()
    if value.kind != "stringValue":
        raise RecordError(
            span.where,
            key,
            f"expected an arrayValue, a kvlistValue or a JSON string, got {value.kind}",
        )
    counters["json_string_attributes"] += 1
    try:
        return loads_strict(value.value, span.where)
    except RecordError as exc:
        raise RecordError(span.where, key, exc.reason) from None
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc) or "too deep"
        raise RecordError(span.where, key, f"a string that is not valid JSON: {reason}") from None


def span_role(span: Span) -> str | None:
    """Return :data:`RETRIEVAL`, :data:`LLM` or None for a span, from its kind attributes.

    Raises:
        RecordError: one of the kind attributes is not a string.
    """
    operation = attribute_text(span, "gen_ai.operation.name")
    kind = attribute_text(span, "openinference.span.kind")
    if operation == "retrieval" or kind == "RETRIEVER":
        return RETRIEVAL
    if (
        operation in LLM_OPERATIONS
        or kind == "LLM"
        or attribute_text(span, "llm.request.type") in ("chat", "completion")
    ):
        return LLM
    return None


def _indexed(span: Span, prefix: str, fields: tuple[str, ...]) -> list[dict[str, str]]:
    """Flattened list attributes ``<prefix>.N.<field>``: ``{field: attribute key}`` by N."""
    pattern = re.compile(rf"{re.escape(prefix)}\.(\d+)\.({'|'.join(re.escape(f) for f in fields)})")
    found: dict[int, dict[str, str]] = {}
    for key in span.attributes:
        match = pattern.fullmatch(key)
        if match:
            found.setdefault(int(match.group(1)), {})[match.group(2)] = key
    return [found[n] for n in sorted(found)]


def _message_text(message: Any, where: str, field: str) -> tuple[str | None, str | None]:
    """``(role, text)`` of a GenAI message: its ``text`` parts joined, or a string ``content``."""
    if not isinstance(message, dict):
        raise RecordError(where, field, f"expected a message object, got {type(message).__name__}")
    role = message.get("role")
    if role is not None and not isinstance(role, str):
        raise RecordError(where, f"{field}.role", "expected a string")
    parts = message.get("parts")
    if parts is not None:
        if not isinstance(parts, list):
            raise RecordError(where, f"{field}.parts", "expected a list of parts")
        texts = []
        for n, part in enumerate(parts):
            if isinstance(part, dict) and part.get("type") == "text":
                content = part.get("content")
                if not isinstance(content, str):
                    raise RecordError(
                        where, f"{field}.parts[{n}].content", "a text part's content is a string"
                    )
                texts.append(content)
        return role, "".join(texts) if texts else None
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise RecordError(where, f"{field}.content", "expected a string")
    return role, content


def _messages(
    span: Span, key: str, counters: dict[str, Any], value: Value | None = None
) -> list[tuple[str | None, str | None]] | None:
    messages = _structured(span, key, counters, value)
    if messages is None:
        return None
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list):
        raise RecordError(span.where, key, "expected a list of messages")
    return [_message_text(m, span.where, f"{key}[{n}]") for n, m in enumerate(messages)]


def _flattened_messages(
    span: Span, prefix: str, role: str, content: str
) -> list[tuple[str | None, str | None]]:
    return [
        (
            attribute_text(span, keys[role]) if role in keys else None,
            attribute_text(span, keys[content]) if content in keys else None,
        )
        for keys in _indexed(span, prefix, (role, content))
    ]


def _plain_or_messages(
    span: Span, key: str, counters: dict[str, Any]
) -> list[tuple[str | None, str | None]] | None:
    """The deprecated ``gen_ai.prompt``/``gen_ai.completion``: JSON messages, or plain text."""
    value = span.value(key)
    if value.kind is None:
        return None
    text = attribute_text(span, key)
    if text is not None and text.lstrip().startswith(("[", "{")):
        try:
            return _messages(span, key, counters, value)
        except RecordError:
            pass  # not messages: the text itself
    return [(None, text)]


def _last_user(messages: list[tuple[str | None, str | None]]) -> str | None:
    texts = [text for role, text in messages if text is not None and role in ("user", None)]
    return texts[-1] if texts else None


def question_of(span: Span, counters: dict[str, Any]) -> tuple[str, str]:
    """Return ``(question, where it was read)`` of an LLM span (:data:`QUESTION_FROM` order).

    Raises:
        RecordError: no user message anywhere, or a message attribute in the wrong shape.
    """
    readers: list[Callable[[], list[tuple[str | None, str | None]] | None]] = [
        lambda: _messages(span, "gen_ai.input.messages", counters),
        lambda: _flattened_messages(span, "gen_ai.prompt", "role", "content"),
        lambda: _flattened_messages(span, "llm.input_messages", "message.role", "message.content"),
        lambda: _plain_or_messages(span, "gen_ai.prompt", counters),
        lambda: [
            (None, attribute_text(span, "content", event.attributes))
            for event in span.events
            if event.name == "gen_ai.user.message"
        ],
    ]
    for name, read in zip(QUESTION_FROM, readers, strict=True):
        messages = read()
        question = _last_user(messages) if messages else None
        if question is not None:
            return question, name
    raise RecordError(
        span.where,
        "gen_ai.input.messages",
        "no question: the LLM span has no user message in any of " + ", ".join(QUESTION_FROM),
    )


def _choice_events(span: Span, counters: dict[str, Any]) -> list[tuple[str | None, str | None]]:
    choices: list[tuple[int, str | None, str | None]] = []
    for position, event in enumerate(span.events):
        if event.name != "gen_ai.choice":
            continue
        index = span.value("index", event.attributes)
        order = index.value if index.kind == "intValue" else position
        text = attribute_text(span, "content", event.attributes)
        message = span.value("message", event.attributes)
        if text is None and message.kind is not None:
            texts = [t for _, t in _messages(span, "message", counters, message) or []]
            text = texts[0] if texts else None
        choices.append((order, attribute_text(span, "finish_reason", event.attributes), text))
    return [(reason, text) for _, reason, text in sorted(choices, key=lambda c: c[0])]


def completions_of(span: Span, counters: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Return ``([{"text", "finish_reason"}], where read)`` of an LLM span's completions.

    Raises:
        RecordError: no completion anywhere (:data:`COMPLETIONS_FROM`), or one in the wrong shape.
    """
    readers: list[Callable[[], list[tuple[str | None, str | None]] | None]] = [
        lambda: _output_messages(span, _structured(span, "gen_ai.output.messages", counters)),
        lambda: [
            (
                attribute_text(span, keys["finish_reason"]) if "finish_reason" in keys else None,
                attribute_text(span, keys["content"]),
            )
            for keys in _indexed(span, "gen_ai.completion", ("content", "finish_reason"))
            if "content" in keys
        ],
        lambda: [
            (None, text)
            for _, text in _flattened_messages(
                span, "llm.output_messages", "message.role", "message.content"
            )
        ],
        lambda: [
            (None, text)
            for _, text in _plain_or_messages(span, "gen_ai.completion", counters) or []
        ],
        lambda: _choice_events(span, counters),
        lambda: [(None, attribute_text(span, "output.value"))],
    ]
    for name, read in zip(COMPLETIONS_FROM, readers, strict=True):
        found = [(reason, text) for reason, text in read() or [] if text is not None]
        if found:
            return [{"text": text, "finish_reason": reason} for reason, text in found], name
    raise RecordError(
        span.where,
        "gen_ai.output.messages",
        "no completion: the LLM span has no text in any of " + ", ".join(COMPLETIONS_FROM),
    )


def _output_messages(span: Span, output: Any) -> list[tuple[str | None, str | None]] | None:
    if output is None:
        return None
    if not isinstance(output, list):
        raise RecordError(span.where, "gen_ai.output.messages", "expected a list of messages")
    found = []
    for n, message in enumerate(output):
        _, text = _message_text(message, span.where, f"gen_ai.output.messages[{n}]")
        reason = message.get("finish_reason")
        found.append((reason if isinstance(reason, str) else None, text))
    return found


def generator_of(span: Span, counters: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Return ``(model, settings)`` of an LLM span.

    The model is ``gen_ai.request.model``, else ``gen_ai.response.model``, else OpenInference
    ``llm.model_name`` ("" when none). Settings: each ``gen_ai.request.<name>`` of
    :data:`REQUEST_SETTINGS` given (a number), ``stop_sequences`` (a list of strings),
    ``response_model`` when it differs from the requested one, ``provider``
    (``gen_ai.provider.name`` or the older ``gen_ai.system``) and OpenInference's
    ``llm.invocation_parameters`` (JSON) as ``invocation_parameters``.

    Raises:
        RecordError: a setting of the wrong OTLP type, naming its attribute.
    """
    requested = attribute_text(span, "gen_ai.request.model")
    response = attribute_text(span, "gen_ai.response.model")
    model = requested or response or attribute_text(span, "llm.model_name") or ""
    settings: dict[str, Any] = {}
    for name in REQUEST_SETTINGS:
        number = _number(span, f"gen_ai.request.{name}")
        if number is not None:
            settings[name] = number
    stop = span.value("gen_ai.request.stop_sequences")
    if stop.kind is not None:
        values = stop.plain()
        if stop.kind != "arrayValue" or not all(isinstance(v, str) for v in values):
            raise RecordError(
                span.where, "gen_ai.request.stop_sequences", "expected an arrayValue of strings"
            )
        settings["stop_sequences"] = values
    if response is not None and requested is not None and response != requested:
        settings["response_model"] = response
    provider = attribute_text(span, "gen_ai.provider.name") or attribute_text(span, "gen_ai.system")
    if provider is not None:
        settings["provider"] = provider
    parameters = _structured(span, "llm.invocation_parameters", counters)
    if parameters is not None:
        settings["invocation_parameters"] = parameters
    if not model:
        counters["llm_spans_without_model"] += 1
    return model, settings


def documents_of(span: Span, counters: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the documents of a retrieval span.

    Each is ``{"id", "text", "score"?, "uri"?, "generated_id", "field"}``: ``generated_id`` when
    the id was made from the text, ``field`` the attribute naming its id (for errors).

    Raises:
        RecordError: a document without text (naming its attribute, e.g.
            ``retrieval.documents.2.document.content``), an id or score of the wrong type.
    """
    found: list[dict[str, Any]] = []
    structured = _structured(span, "gen_ai.retrieval.documents", counters)
    if structured is not None:
        counters["documents_from"]["gen_ai.retrieval.documents"] += 1
        if not isinstance(structured, list):
            raise RecordError(span.where, "gen_ai.retrieval.documents", "expected a list")
        for n, doc in enumerate(structured):
            field = f"gen_ai.retrieval.documents[{n}]"
            if not isinstance(doc, dict):
                raise RecordError(span.where, field, "expected a document object")
            found.append(
                _document(span, doc.get("id"), doc.get("content"), doc.get("score"), {}, field)
            )
        return found
    fields = ("document.id", "document.content", "document.score", "document.metadata")
    keys_by_index = _indexed(span, "retrieval.documents", fields)
    if keys_by_index:
        counters["documents_from"]["retrieval.documents.N.document.*"] += 1
    for keys in keys_by_index:
        field = next(iter(keys.values())).rsplit(".document.", 1)[0] + ".document"
        values = {name: span.value(key).plain() for name, key in keys.items()}
        metadata = (
            _structured(span, keys["document.metadata"], counters)
            if "document.metadata" in keys
            else {}
        )
        found.append(
            _document(
                span,
                values.get("document.id"),
                values.get("document.content"),
                values.get("document.score"),
                metadata if isinstance(metadata, dict) else {},
                field,
            )
        )
    return found


def _document(
    span: Span, doc_id: Any, content: Any, score: Any, metadata: dict[str, Any], field: str
) -> dict[str, Any]:
    if not isinstance(content, str) or not content:
        got = "missing" if content is None else echo(content)
        raise RecordError(
            span.where,
            f"{field}.content",
            f"a document without text cannot be a source (got {got})",
        )
    if doc_id is None:
        counters_id = "otel:" + hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]
        doc_id, generated = counters_id, True
    elif isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id, generated = str(doc_id), False
    elif isinstance(doc_id, str) and doc_id:
        generated = False
    else:
        raise RecordError(span.where, f"{field}.id", f"expected a string id, got {echo(doc_id)}")
    document: dict[str, Any] = {
        "id": doc_id,
        "text": content,
        "generated_id": generated,
        "field": f"{field}.id",
    }
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise RecordError(span.where, f"{field}.score", f"expected a number, got {echo(score)}")
        document["score"] = score
    uri = metadata.get("url", metadata.get("uri"))
    if isinstance(uri, str):
        document["uri"] = uri
    return document
