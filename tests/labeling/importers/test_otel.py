"""OpenTelemetry GenAI traces (``--format otel``): mapping, counts, idempotence, refusals.

The fixtures in ``otel/`` are written by hand from the OTLP/JSON encoding and the GenAI
semantic conventions (``genai_traces.jsonl``: current conventions, the older OpenLLMetry
flattened attributes, an HTTP-only trace), and from OpenInference's attribute names
(``phoenix_trace.json``: one pretty-printed ExportTraceServiceRequest).
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from labeling.exceptions import WorkloadImportFailed
from labeling.importers import ImportOptions, otel
from labeling.importers.claims import WHOLE
from labeling.importers.record_errors import RecordError
from labeling.models import (
    CandidateAnswer,
    Claim,
    ImportBatch,
    Job,
    JobStatus,
    Project,
    Question,
    Role,
    SourceVersion,
)
from labeling.services import workload_import_file
from tests.conftest import row_counts

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent / "otel"
GENAI = FIXTURES / "genai_traces.jsonl"
PHOENIX = FIXTURES / "phoenix_trace.json"
TRACE_A = "5b8efff798038103d269b633813fc60c"
TRACE_C = "4bf92f3577b34da6a3ce929d0e0e4736"
NEWLINE = b"\n"
ANSWER_A0 = "The Eiffel Tower was completed in 1889. It was built for the World's Fair."


def lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in GENAI.read_text(encoding="utf-8").splitlines()]


def dump(requests: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in requests)


def spans_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    return request["resourceSpans"][0]["scopeSpans"][0]["spans"]


def attribute(span: dict[str, Any], key: str) -> dict[str, Any]:
    [found] = [a for a in span["attributes"] if a["key"] == key]
    return found


def run_import(data: bytes, project: Project, claims: str | None = None, name: str = "t.jsonl"):
    return workload_import_file(
        project=project,
        stream=io.BytesIO(data),
        format_name="otel",
        filename=name,
        actor=None,
        claims=claims,
    )


def refusals(data: bytes, project: Project) -> list[RecordError]:
    with pytest.raises(WorkloadImportFailed) as info:
        run_import(data, project)
    return info.value.errors


def test_the_command_imports_the_traces_with_their_counts(tmp_path):
    out = io.StringIO()
    call_command(
        "import_workload", str(GENAI), str(PHOENIX), "--project", "traces", "--create",
        "--format", "otel", "--no-progress", stdout=out,
    )  # fmt: skip
    assert out.getvalue().count("batch #") == 2
    project = Project.objects.get(slug="traces")
    # 3 GenAI traces (the GET /health trace is skipped), 4 completions, 6 distinct documents
    # (doc-eiffel is retrieved by two traces with one text: one version)
    assert Question.objects.filter(project=project).count() == 3
    assert CandidateAnswer.objects.filter(question__project=project).count() == 4
    assert SourceVersion.objects.filter(document__project=project).count() == 5
    # sentences: 2 + 1 (trace A), 1 (trace C), 2 (Phoenix)
    assert Claim.objects.filter(candidate__question__project=project).count() == 6
    first = ImportBatch.objects.filter(project=project).order_by("pk").first()
    assert first.report["created"]["questions"] == 2
    assert first.report["created"]["retrieval_links"] == 4
    notes = first.report["notes"]
    assert notes["traces"] == 2 and notes["traces_without_genai_spans"] == 1
    assert notes["spans"] == 6 and notes["requests"] == 3
    assert notes["documents_without_id"] == 1
    assert notes["question_from"] == {"gen_ai.input.messages": 1, "gen_ai.prompt.N.content": 1}
    assert notes["claim_splitting"]["mode"] == "sentences"
    assert notes["claim_splitting"]["claims"] == 4


def test_a_trace_maps_to_question_sources_samples_and_generator(project):
    run_import(GENAI.read_bytes(), project)
    question = Question.objects.get(external_id=f"otel:{TRACE_A}")
    assert question.text == "When was the Eiffel Tower completed?"
    assert question.group_key == "conv-7"
    assert question.metadata["retrieval_query"] == "When was the Eiffel Tower completed?"
    assert question.metadata["service_name"] == "rag-api"
    links = list(question.retrievals.order_by("rank").select_related("source_version__document"))
    assert [(link.source_version.document.key, link.rank, link.score) for link in links] == [
        ("doc-eiffel", 1, 0.91),
        ("doc-paris", 2, 0.0),
    ]
    first, second = question.candidates.order_by("sample_index")
    assert (first.key, first.sample_index, first.text) == (
        "eee19b7ec3c1b175:0",
        0,
        ANSWER_A0,
    )
    assert second.text == "It was completed in March 1889 \U0001f5fc."
    assert first.generator == "gpt-4o-mini"
    assert first.generator_settings == {
        "temperature": 0.7,
        "top_p": 1,
        "max_tokens": 256,
        "choice.count": 2,
        "response_model": "gpt-4o-mini-2024-07-18",
        "provider": "openai",
    }
    claims = list(first.claims.order_by("index"))
    assert [(c.start, c.end) for c in claims] == [(0, 39), (40, 74)]
    assert all(ANSWER_A0[c.start : c.end] == c.text for c in claims)
    # the astral emoji is one code point: the claim ends at len() of the text
    [claim] = second.claims.all()
    assert (claim.start, claim.end) == (0, 33) and len(second.text) == 33


def test_the_openinference_document_form(project):
    run_import(PHOENIX.read_bytes(), project, name="phoenix_trace.json")
    question = Question.objects.get()
    assert question.text == "What does pysbd do?"
    links = list(question.retrievals.order_by("rank").select_related("source_version__document"))
    assert [link.source_version.document.key for link in links] == ["kb-1", "42"]
    assert links[0].source_version.uri == "https://example.org/pysbd"
    [candidate] = question.candidates.all()
    assert candidate.generator == "gpt-4o"
    assert candidate.generator_settings == {
        "invocation_parameters": {"temperature": 0, "max_tokens": 200}
    }
    assert [c.text for c in candidate.claims.order_by("index")] == [
        "pysbd splits text into sentences with rules.",
        "Dr. Smith's abbreviations stay intact.",
    ]


def test_whole_answers_as_claims_are_recorded_in_the_report(project):
    result = run_import(GENAI.read_bytes(), project, claims=WHOLE)
    assert result.created["claims"] == 3
    assert result.notes["claim_splitting"] == {
        "mode": "whole",
        "splitter": "none",
        "answers": 3,
        "claims": 3,
        "answers_without_claims": 0,
        "sentence_gaps_filled": 0,
    }
    claim = Claim.objects.get(candidate__key="eee19b7ec3c1b175:0")
    assert (claim.start, claim.end, claim.text) == (0, len(ANSWER_A0), ANSWER_A0)
    assert ImportBatch.objects.get().report["notes"]["claim_splitting"]["mode"] == "whole"


def test_a_reimport_changes_no_row(project):
    data = GENAI.read_bytes()
    run_import(data, project)
    before = row_counts()
    again = run_import(data, project)
    assert again.already_imported
    # the same traces in another file (other bytes, other order of lines): nothing new
    reordered = b"\n".join(reversed(data.strip().split(b"\n"))) + b"\n\n"
    result = run_import(reordered, project, name="again.jsonl")
    assert result.batch is None and result.records == 2
    assert row_counts() == before


def test_the_other_claim_splitting_on_reimport_is_refused(project):
    run_import(GENAI.read_bytes(), project)
    with pytest.raises(WorkloadImportFailed) as info:
        run_import(GENAI.read_bytes() + b"\n", project, claims=WHOLE, name="whole.jsonl")
    assert info.value.errors[0].location == f"line 1 trace {TRACE_A}"
    assert info.value.errors[0].field.startswith("candidates[0]")


def test_truncated_json_names_its_line(project):
    data = GENAI.read_bytes()
    truncated = data[: data.index(b"\n", data.index(b"\n") + 1) - 40]  # line 2 cut short
    [error] = refusals(truncated, project)
    assert (error.location, error.field) == ("line 2", "(line)")
    assert error.reason.startswith("invalid JSON")
    document = PHOENIX.read_bytes()
    cut = document.index(b'"llm.model_name"')
    [error] = refusals(document[:cut], project)
    assert error.location == f"line {document[:cut].count(NEWLINE) + 1}"
    assert error.field == "(document)" and error.reason.startswith("invalid JSON")
    assert row_counts()["Question"] == 0


def test_a_trace_without_a_retrieval_span_is_refused_naming_it(project):
    requests = lines()[1:]  # line 1 held trace A's retrieval span
    [error] = refusals(dump(requests), project)
    assert error.location == f"line 1 trace {TRACE_A}"
    assert error.field == "gen_ai.operation.name"
    assert error.reason.startswith("no retrieval span")


def test_a_trace_without_an_llm_span_is_refused(project):
    requests = lines()
    spans_of(requests[2]).pop()  # trace C's LLM span
    [error] = refusals(dump(requests), project)
    assert (error.location, error.field) == (f"line 3 trace {TRACE_C}", "gen_ai.operation.name")
    assert error.reason.startswith("no LLM span")


def test_bad_attribute_types_are_refused_naming_span_and_attribute(project):
    requests = lines()
    chat = spans_of(requests[1])[0]
    attribute(chat, "gen_ai.request.temperature")["value"] = {"stringValue": "0.7"}
    attribute(chat, "gen_ai.request.max_tokens")["value"] = {"intValue": "256.5"}
    [error] = refusals(dump(requests), project)
    assert error.location == f"line 2 trace {TRACE_A} span eee19b7ec3c1b175"
    assert error.field == "gen_ai.request.temperature"
    assert error.reason == "expected a number (doubleValue or intValue), got stringValue"
    attribute(chat, "gen_ai.request.temperature")["value"] = {"doubleValue": 0.7}
    [error] = refusals(dump(requests), project)
    assert error.field == "gen_ai.request.max_tokens"
    assert error.reason == "intValue must be a decimal integer string, got '256.5'"
    attribute(chat, "gen_ai.request.max_tokens")["value"] = {"intValue": "256", "doubleValue": 1}
    [error] = refusals(dump(requests), project)
    assert error.field == "gen_ai.request.max_tokens"
    assert error.reason.startswith("expected exactly one of stringValue")


def test_a_document_without_text_is_refused(project):
    requests = lines()
    retrieval = spans_of(requests[0])[0]
    documents = attribute(retrieval, "gen_ai.retrieval.documents")["value"]["arrayValue"]
    pairs = documents["values"][1]["kvlistValue"]["values"]
    pairs[:] = [p for p in pairs if p["key"] != "content"]
    [error] = refusals(dump(requests), project)
    assert error.location == f"line 1 trace {TRACE_A} span eee19b7ec3c1b174"
    assert error.field == "gen_ai.retrieval.documents[1].content"
    assert "a document without text" in error.reason


def test_an_openinference_document_without_content_names_the_flattened_attribute(project):
    document = json.loads(PHOENIX.read_text(encoding="utf-8"))
    retriever = spans_of(document)[0]
    retriever["attributes"] = [
        a for a in retriever["attributes"] if a["key"] != "retrieval.documents.1.document.content"
    ]
    [error] = refusals(json.dumps(document, indent=2).encode(), project)
    assert error.field == "retrieval.documents.1.document.content"


def test_no_question_and_no_completion_are_refused(project):
    requests = lines()
    chat = spans_of(requests[1])[0]
    chat["attributes"] = [a for a in chat["attributes"] if a["key"] != "gen_ai.input.messages"]
    [error] = refusals(dump(requests), project)
    assert (error.location, error.field) == (
        f"line 2 trace {TRACE_A} span eee19b7ec3c1b175",
        "gen_ai.input.messages",
    )
    assert error.reason.startswith("no question")
    requests = lines()
    chat = spans_of(requests[1])[0]
    chat["attributes"] = [a for a in chat["attributes"] if a["key"] != "gen_ai.output.messages"]
    [error] = refusals(dump(requests), project)
    assert error.field == "gen_ai.output.messages" and error.reason.startswith("no completion")


def test_malformed_structure_names_the_path_and_a_bad_id(project):
    requests = lines()
    spans_of(requests[2])[0]["traceId"] = "not-hex"
    requests[0] = {"resourceMetrics": []}
    errors = refusals(dump(requests), project)
    assert [(e.location, e.field) for e in errors] == [
        ("line 1", "resourceSpans"),
        ("line 3", "resourceSpans[0].scopeSpans[0].spans[0].traceId"),
    ]
    assert errors[0].reason == "this is an OTLP metrics export, not traces"


FIRST_CHOICE = '{"role": "assistant", "content": "First."}'


def test_events_and_plain_prompt_conventions():
    # The older GenAI events on the span: gen_ai.user.message and gen_ai.choice (by index).
    requests = lines()
    chat = spans_of(requests[1])[0]
    chat["attributes"] = [
        a
        for a in chat["attributes"]
        if a["key"] not in ("gen_ai.input.messages", "gen_ai.output.messages")
    ]
    chat["events"] = [
        {"name": "gen_ai.user.message", "attributes": [
            {"key": "content", "value": {"stringValue": "When was it completed?"}}]},
        {"name": "gen_ai.choice", "attributes": [
            {"key": "index", "value": {"intValue": "1"}},
            {"key": "message", "value": {"kvlistValue": {"values": [
                {"key": "content", "value": {"stringValue": "Second."}}]}}}]},
        {"name": "gen_ai.choice", "attributes": [
            {"key": "index", "value": {"intValue": "0"}},
            {"key": "finish_reason", "value": {"stringValue": "stop"}},
            {"key": "message", "value": {"stringValue": FIRST_CHOICE}}]},
    ]  # fmt: skip
    source = otel.FORMAT.open(io.BytesIO(dump(requests)), "t.jsonl")
    records = {location: record for location, record in source}
    record = records[f"line 1 trace {TRACE_A}"]
    assert record["text"] == "When was it completed?"
    assert [c["text"] for c in record["candidates"]] == ["First.", "Second."]
    assert record["candidates"][0]["metadata"] == {"finish_reason": "stop"}
    assert source.notes()["completions_from"]["gen_ai.choice events"] == 1


def test_the_last_ending_llm_span_is_the_answer():
    requests = lines()
    rewrite = copy.deepcopy(spans_of(requests[1])[0])
    rewrite["spanId"] = "eee19b7ec3c1b176"
    rewrite["endTimeUnixNano"] = "1735689600050000000"
    attribute(rewrite, "gen_ai.output.messages")["value"] = {"stringValue": "[]"}
    spans_of(requests[1]).append(rewrite)
    source = otel.open_otel_with_options(io.BytesIO(dump(requests)), "t.jsonl", ImportOptions())
    [first, _] = [record for _, record in source]
    assert first["metadata"]["llm_span_id"] == "eee19b7ec3c1b175"
    assert source.notes()["llm_spans_ignored"] == 1


def test_the_upload_page_imports_otel_with_the_claims_choice(login, project):
    client = login(Role.MANAGER)
    page = client.get("/p/study/import/").content.decode()
    assert 'value="otel"' in page and 'name="claims"' in page
    upload = SimpleUploadedFile("traces.jsonl", GENAI.read_bytes())
    response = client.post(
        "/p/study/import/", {"file": upload, "format": "otel", "claims": "whole"}
    )
    assert response.status_code == 302
    assert Claim.objects.count() == 3
    assert ImportBatch.objects.get().report["notes"]["claim_splitting"]["mode"] == "whole"


def test_the_upload_page_refuses_claims_for_native_and_shows_otel_errors(login, project):
    client = login(Role.MANAGER)
    native = SimpleUploadedFile("w.jsonl", b'{"external_id": "q"}\n')
    response = client.post(
        "/p/study/import/", {"file": native, "format": "native", "claims": "sentences"}
    )
    assert response.status_code == 400
    assert "the native format gives its own claims" in response.content.decode()
    requests = lines()[1:]
    response = client.post(
        "/p/study/import/",
        {"file": SimpleUploadedFile("t.jsonl", dump(requests)), "format": "otel"},
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert f"line 1 trace {TRACE_A}" in html and "no retrieval span" in html
    assert row_counts()["Question"] == 0


def test_the_api_takes_the_claims_choice(api, project):
    client = api(Role.MANAGER)
    response = client.post(
        "/api/projects/study/imports/",
        {
            "file": SimpleUploadedFile("t.jsonl", GENAI.read_bytes()),
            "format": "otel",
            "claims": "whole",
        },
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert response.json()["notes"]["claim_splitting"]["mode"] == "whole"
    response = client.post(
        "/api/projects/study/imports/",
        {"file": SimpleUploadedFile("t.jsonl", b"{}\n"), "format": "native", "claims": "whole"},
        format="multipart",
    )
    assert response.status_code == 400
    assert "gives its own claims" in response.content.decode()


def test_the_command_refuses_a_bad_file_naming_file_line_and_field(tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_bytes(GENAI.read_bytes()[:500])
    err = io.StringIO()
    with pytest.raises(CommandError, match="nothing was written"):
        call_command(
            "import_workload", str(path), "--project", "p", "--create", "--format", "otel",
            "--no-progress", stdout=io.StringIO(), stderr=err,
        )  # fmt: skip
    # one line that is not JSON by itself is read as one document: still its line
    assert err.getvalue().startswith("cut.jsonl: line 1: field (document): invalid JSON")


def test_a_background_import_keeps_the_claims_choice(
    login, project, settings, django_capture_on_commit_callbacks
):
    settings.JOB_IMPORT_BYTES = 10
    client = login(Role.MANAGER)
    upload = SimpleUploadedFile("traces.jsonl", GENAI.read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/p/study/import/", {"file": upload, "format": "otel", "claims": "whole"}
        )
    job = Job.objects.get()
    assert response["Location"] == f"/p/study/jobs/{job.pk}/"
    job.refresh_from_db()
    assert job.status == JobStatus.DONE, job.error
    assert job.payload["claims"] == "whole"
    assert job.result["notes"]["claim_splitting"]["mode"] == "whole"
    assert Claim.objects.count() == 3


def test_a_document_id_repeated_with_another_text_in_one_trace_is_refused(project):
    requests = lines()
    retrieval = spans_of(requests[0])[0]
    documents = attribute(retrieval, "gen_ai.retrieval.documents")["value"]["arrayValue"]
    again = copy.deepcopy(documents["values"][0])
    again["kvlistValue"]["values"][2]["value"] = {"stringValue": "Another text."}
    documents["values"].append(again)
    [error] = refusals(dump(requests), project)
    assert error.location == f"line 1 trace {TRACE_A} span eee19b7ec3c1b174"
    assert error.field == "gen_ai.retrieval.documents[2].id"
    assert error.reason.startswith("document 'doc-eiffel' repeats with another text")
    # the same id and text twice is one source, counted
    again["kvlistValue"]["values"][2]["value"] = documents["values"][0]["kvlistValue"]["values"][2][
        "value"
    ]
    result = run_import(dump(requests), project)
    assert result.notes["repeated_documents"] == 1 and result.created["source_versions"] == 3
