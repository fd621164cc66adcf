"""Adapter for OpenTelemetry GenAI traces (``--format otel``): OTLP JSON, one question per trace.

Spans are grouped by ``traceId``; retrieval spans give the sources, the last LLM span the
question, candidates and generator (``genai.QUESTION_FROM``, ``genai.COMPLETIONS_FROM``,
``genai.REQUEST_SETTINGS``), following the GenAI semantic conventions and the OpenInference and
OpenLLMetry names; see docs/adapters.md ("OpenTelemetry GenAI traces"). A trace without retrieval
or LLM spans is skipped and counted; a trace with only one of them, a document without text, an
attribute of the wrong OTLP type or JSON that does not parse is refused, naming the trace or span
and the attribute (or the line).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from labeling.importers.base import ImportOptions, RecordSource, SourcedRecord, WorkloadFormat
from labeling.importers.claims import ClaimSplitter
from labeling.importers.genai import (
    LLM,
    RETRIEVAL,
    attribute_text,
    completions_of,
    documents_of,
    generator_of,
    question_of,
    span_role,
)
from labeling.importers.otlp import Span, read_requests, request_spans
from labeling.importers.record_errors import RecordError, echo


def _new_counters(splitter: ClaimSplitter) -> dict[str, Any]:
    return {
        "requests": 0,
        "spans": 0,
        "traces": 0,
        "traces_without_genai_spans": 0,
        "llm_spans_ignored": 0,
        "llm_spans_without_model": 0,
        "retrieval_spans": 0,
        "retrieval_spans_without_documents": 0,
        "documents": 0,
        "documents_without_id": 0,
        "documents_without_score": 0,
        "repeated_documents": 0,
        "completions": 0,
        "json_string_attributes": 0,
        "question_from": {},
        "completions_from": {},
        "documents_from": {"gen_ai.retrieval.documents": 0, "retrieval.documents.N.document.*": 0},
        "claim_splitting": splitter.counts,
    }


def _tally(counters: dict[str, Any], key: str, name: str) -> None:
    counters[key][name] = counters[key].get(name, 0) + 1


@dataclass
class _SpanRead:
    """What is kept of one GenAI span once read (the span's JSON itself is dropped).

    ``fields`` holds the values read (an LLM span: ``question``, ``question_from``,
    ``completions``, ``completions_from``, ``model``, ``settings``, ``conversation``,
    ``service``; a retrieval span: ``documents``, ``query``), ``counts`` the counters reading
    them moved (added to the import's when the span is used) and ``error`` what refused them: it
    refuses the trace only if the span is used (an ignored LLM span's does not).
    """

    role: str
    span_id: str
    where: str
    location: str
    start: int
    end: int
    fields: dict[str, Any]
    counts: dict[str, Any]
    error: RecordError | None


def _span_counts() -> dict[str, Any]:
    return {
        "json_string_attributes": 0,
        "llm_spans_without_model": 0,
        "documents_from": {"gen_ai.retrieval.documents": 0, "retrieval.documents.N.document.*": 0},
    }


def read_span(span: Span, role: str) -> _SpanRead:
    """Read what the mapping needs from a GenAI span of ``role`` (see :class:`_SpanRead`)."""
    counts = _span_counts()
    fields: dict[str, Any] = {}
    error = None
    try:
        if role == LLM:
            fields["question"], fields["question_from"] = question_of(span, counts)
            fields["completions"], fields["completions_from"] = completions_of(span, counts)
            fields["model"], fields["settings"] = generator_of(span, counts)
            fields["conversation"] = (
                attribute_text(span, "gen_ai.conversation.id")
                or attribute_text(span, "session.id")
                or ""
            )
            fields["service"] = attribute_text(span, "service.name", span.resource)
        else:
            fields["documents"] = documents_of(span, counts)
            fields["query"] = attribute_text(span, "gen_ai.retrieval.query.text") or (
                attribute_text(span, "input.value")
            )
    except RecordError as exc:
        error = exc
    return _SpanRead(
        role, span.span_id, span.where, span.location, span.start, span.end, fields, counts, error
    )


def _use(read: _SpanRead, counters: dict[str, Any]) -> dict[str, Any]:
    """Return a used span's fields (raising its error) and add its counts to ``counters``."""
    if read.error is not None:
        raise read.error
    counters["json_string_attributes"] += read.counts["json_string_attributes"]
    counters["llm_spans_without_model"] += read.counts["llm_spans_without_model"]
    for name, n in read.counts["documents_from"].items():
        counters["documents_from"][name] += n
    return read.fields


def _sources(
    retrievals: list[_SpanRead], location: str, counters: dict[str, Any]
) -> list[dict[str, Any]]:
    """The documents of a trace's retrieval spans, ranked in span start order then as listed."""
    sources: list[dict[str, Any]] = []
    seen: dict[str, tuple[str, str]] = {}
    for read in retrievals:
        documents = _use(read, counters)["documents"]
        if not documents:
            counters["retrieval_spans_without_documents"] += 1
        for document in documents:
            document = dict(document)
            counters["documents"] += 1
            counters["documents_without_id"] += document.pop("generated_id")
            field = document.pop("field")
            counters["documents_without_score"] += "score" not in document
            if document["id"] in seen:
                text, first = seen[document["id"]]
                if text != document["text"]:
                    raise RecordError(
                        read.where,
                        field,
                        f"document {echo(document['id'])} repeats with another text (first in "
                        f"span {first})",
                    )
                counters["repeated_documents"] += 1
                continue
            seen[document["id"]] = (document["text"], read.span_id)
            sources.append({**document, "rank": len(sources) + 1})
    if not sources:
        raise RecordError(
            location,
            "retrieval.documents",
            f"no retrieval documents: the trace's {len(retrievals)} retrieval span(s) carry none "
            "(gen_ai.retrieval.documents or retrieval.documents.N.document.content)",
        )
    return sources


def trace_record(
    trace_id: str,
    spans: list[_SpanRead],
    splitter: ClaimSplitter,
    counters: dict[str, Any],
) -> dict[str, Any]:
    """Map the GenAI spans read of one trace (in file order) to a native record.

    Raises:
        RecordError: the trace cannot be mapped (see the module docstring), naming the span and
            attribute (or the trace, for a span that is missing).
    """
    location = f"{spans[0].location} trace {trace_id}"
    llms = [read for read in spans if read.role == LLM]
    retrievals = sorted((read for read in spans if read.role == RETRIEVAL), key=lambda r: r.start)
    if not llms:
        raise RecordError(
            location,
            "gen_ai.operation.name",
            "no LLM span (gen_ai.operation.name chat, text_completion or generate_content, or "
            "openinference.span.kind LLM): nothing gives the question and the answer",
        )
    if not retrievals:
        raise RecordError(
            location,
            "gen_ai.operation.name",
            "no retrieval span (gen_ai.operation.name retrieval, or openinference.span.kind "
            "RETRIEVER): nothing gives the sources",
        )
    # The answer is the generation that ends last (earlier ones rewrite the query, plan, ...).
    llm = max(reversed(llms), key=lambda read: read.end)
    answer = _use(llm, counters)
    sources = _sources(retrievals, location, counters)
    counters["retrieval_spans"] += len(retrievals)
    counters["llm_spans_ignored"] += len(llms) - 1
    _tally(counters, "question_from", answer["question_from"])
    _tally(counters, "completions_from", answer["completions_from"])
    counters["completions"] += len(answer["completions"])
    counters["traces"] += 1
    metadata: dict[str, Any] = {
        "format": "otel",
        "trace_id": trace_id,
        "llm_span_id": llm.span_id,
        "retrieval_span_ids": [read.span_id for read in retrievals],
    }
    if answer["service"] is not None:
        metadata["service_name"] = answer["service"]
    queries = [read.fields["query"] for read in retrievals if read.fields["query"] is not None]
    if queries:
        metadata["retrieval_query"] = queries[0]
    return {
        "external_id": f"otel:{trace_id}",
        "text": answer["question"],
        "group_key": answer["conversation"],
        "metadata": metadata,
        "sources": sources,
        "candidates": [
            {
                "id": f"{llm.span_id}:{n}",
                "text": completion["text"],
                "generator": answer["model"],
                "generator_settings": answer["settings"],
                "sample_index": n,
                "metadata": (
                    {"finish_reason": completion["finish_reason"]}
                    if completion["finish_reason"] is not None
                    else {}
                ),
                "claims": splitter.claims(completion["text"]),
            }
            for n, completion in enumerate(answer["completions"])
        ],
    }


def read_otel(
    stream: IO[bytes], splitter: ClaimSplitter, counters: dict[str, Any]
) -> Iterator[SourcedRecord]:
    """Yield one native record per GenAI trace of an OTLP JSON file, in order of first span.

    A trace's spans may be spread over the file (the exporter writes spans in batches as they
    end), so what the mapping needs of each GenAI span (its texts, ids and settings:
    :func:`read_span`) is kept until the file is read; the spans' JSON and every other span are
    dropped as they are read. The records are then written in chunks like any import's.
    Locations read ``"line 3 trace <traceId>"`` (the line of the trace's first GenAI span). A
    RecordError is yielded per malformed line (truncated JSON, a field in the wrong shape) and,
    once every line was read, per trace that cannot be mapped.
    """
    traces: dict[str, list[_SpanRead]] = {}
    seen_spans: set[tuple[str, str]] = set()
    other_traces: set[str] = set()
    failed = False
    for location, request in read_requests(stream):
        if isinstance(request, RecordError):
            failed = True
            yield location, request
            continue
        counters["requests"] += 1
        try:
            spans = request_spans(request, location)
            for span in spans:
                counters["spans"] += 1
                if (span.trace_id, span.span_id) in seen_spans:
                    raise RecordError(span.where, "spanId", "the span repeats in the file")
                seen_spans.add((span.trace_id, span.span_id))
                role = span_role(span)
                if role is None:
                    other_traces.add(span.trace_id)
                else:
                    traces.setdefault(span.trace_id, []).append(read_span(span, role))
        except RecordError as exc:
            failed = True
            yield location, exc
    if failed:
        return  # a trace may lack the spans of a line that failed: mapping it would mislead
    counters["traces_without_genai_spans"] += len(other_traces - traces.keys())
    for trace_id, reads in traces.items():
        try:
            yield (
                f"{reads[0].location} trace {trace_id}",
                trace_record(trace_id, reads, splitter, counters),
            )
        except RecordError as exc:
            yield exc.location, exc


def open_otel_with_options(
    stream: IO[bytes], filename: str, options: ImportOptions
) -> RecordSource:
    """Open an OTLP JSON trace file for import, lazily; ``options.splitter`` splits the claims."""
    counters = _new_counters(options.splitter)
    return RecordSource(read_otel(stream, options.splitter, counters), counters)


def open_otel(stream: IO[bytes], filename: str) -> RecordSource:
    """Open an OTLP JSON trace file with the default claim splitting (sentences)."""
    return open_otel_with_options(stream, filename, ImportOptions())


FORMAT = WorkloadFormat(
    "otel",
    "OpenTelemetry GenAI traces (OTLP JSON, the collector's file exporter): one question per "
    "trace, retrieval documents as sources, the LLM's completions as candidates",
    open_otel,
    open_with_options=open_otel_with_options,
)
