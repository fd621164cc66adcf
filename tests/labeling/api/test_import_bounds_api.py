"""Imports refuse unbounded input with a 400 naming the line and field, never a 500.

Each case is a reproduction that used to escape as an exception: an integer beyond 64 bits in
a number field (SQLite cannot bind it), values nested hundreds deep (pydantic's serialisation
depth, the parser's recursion), and a reason that repeated a 2,000,000-character value in full.
Each goes through the real upload endpoint and leaves every row count unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.importers.record_errors import ECHO_LIMIT, MAX_JSON_DEPTH
from labeling.models import Role
from tests.conftest import jsonl_bytes, native_record, row_counts

pytestmark = pytest.mark.django_db

URL = "/api/projects/study/imports/"
LABELS_URL = "/api/projects/study/evaluator-labels/"


def upload(data: bytes, name: str = "work.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def refused(api: Any, data: bytes, *, fmt: str = "native", name: str = "work.jsonl") -> list:
    client = api(Role.MANAGER)  # the manager's membership is a row: made before counting
    before = row_counts()
    response = client.post(URL, {"file": upload(data, name), "format": fmt}, format="multipart")
    assert response.status_code == 400, response.content[:300]
    assert row_counts() == before
    body = response.json()
    assert body["code"] == "import_failed"
    return [(e["location"], e["field"], e["reason"]) for e in body["errors"]]


@pytest.mark.parametrize("score", [2**64, -(2**70), 10**400])
def test_an_integer_beyond_64_bits_in_a_number_field_is_refused(api, project, score):
    record = native_record("q1")
    record["sources"][0]["score"] = score

    [(location, field, reason)] = refused(api, jsonl_bytes([record]))

    assert (location, field) == ("line 1", "sources[0].score")
    assert "fits 64 bits" in reason


def test_the_largest_64_bit_integer_is_a_number(api, project):
    record = native_record("q1")
    record["candidates"][0]["acceptance_score"] = 2**63 - 1

    response = api(Role.MANAGER).post(
        URL, {"file": upload(jsonl_bytes([record]))}, format="multipart"
    )

    assert response.status_code == 201


def test_generator_settings_nested_900_deep_is_refused(api, project):
    record = native_record("q1")
    record["candidates"][0]["generator_settings"] = nested(900)

    [(location, field, reason)] = refused(api, jsonl_bytes([record]))

    assert (location, field) == ("line 1", "candidates[0].generator_settings")
    assert f"deeper than {MAX_JSON_DEPTH}" in reason


def test_metadata_just_within_the_depth_is_imported(api, project):
    # the record is level 1, metadata level 2: MAX_JSON_DEPTH - 2 more objects fit
    record = native_record("q1", metadata=nested(MAX_JSON_DEPTH - 2))

    response = api(Role.MANAGER).post(
        URL, {"file": upload(jsonl_bytes([record]))}, format="multipart"
    )

    assert response.status_code == 201


# Deeper than the JSON parser goes (it has PARSER_DEPTH_HEADROOM above the recursion limit).
@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_a_native_line_nested_deeply_is_refused(api, project, depth):
    data = b"[" * depth + b"]" * depth + b"\n"

    [(location, field, _reason)] = refused(api, data)

    assert (location, field) == ("line 1", "(line)")


# Deeper than the JSON parser goes (it has PARSER_DEPTH_HEADROOM above the recursion limit).
@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_a_faithbench_file_nested_deeply_is_refused(api, project, depth):
    document = {"samples": []}
    text = json.dumps(document)
    data = (text[:-1] + ', "x": ' + "[" * depth + "]" * depth + "}").encode()

    [(location, field, reason)] = refused(api, data, fmt="faithbench", name="batch_1.json")

    assert location == "batch_1.json"
    assert field in {"(file)", "x"}
    assert "nested" in reason


@pytest.mark.parametrize(("fmt", "name"), [("expertqa", "x.jsonl"), ("gsm8k", "x.jsonl")])
def test_an_adapter_line_nested_deeply_is_refused(api, project, fmt, name):
    data = json.dumps({"question": "q", "deep": nested(900)}).encode() + b"\n"

    [(location, field, reason)] = refused(api, data, fmt=fmt, name=name)

    assert (location, field) == ("line 1", "deep")
    assert "nested" in reason


def test_an_evaluator_label_nested_deeply_is_refused(api, project, import_records):
    import_records([native_record("q1")])
    label = {"question": "q1", "candidate": "c0", "evaluator": "j", "version": "1"}
    data = json.dumps({**label, "score": 0.5, "raw": nested(900)}).encode() + b"\n"
    client = api(Role.MANAGER)
    before = row_counts()

    response = client.post(LABELS_URL, {"file": upload(data, "labels.jsonl")}, format="multipart")

    assert response.status_code == 400
    assert row_counts() == before
    [error] = response.json()["errors"]
    assert (error["location"], error["field"]) == ("line 1", "raw")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("candidates", 0, "prior_annotations"), "candidates[0].prior_annotations[0].answer_label"),
        (("candidates", 0, "evaluator_labels"), "candidates[0].evaluator_labels[0].label"),
    ],
)
def test_a_reason_echoes_at_most_40_code_points_of_a_2_000_000_character_label(
    api, project, path, field
):
    huge = "x" * 2_000_000
    record = native_record("q1")
    entry: dict[str, Any] = (
        {"annotator": "p1", "answer_label": huge}
        if path[-1] == "prior_annotations"
        else {"evaluator": "j", "version": "1", "label": huge}
    )
    record["candidates"][0][path[-1]] = [entry]

    [(location, got_field, reason)] = refused(api, jsonl_bytes([record]))

    assert (location, got_field) == ("line 1", field)
    assert "x" * (ECHO_LIMIT + 1) not in reason
    assert len(reason) < 200


def test_a_reason_echoes_at_most_40_code_points_of_an_unknown_source(api, project):
    record = native_record("q1")
    evidence = {"source": "s" * 255, "start": 0, "end": 3, "quote": "The"}
    record["candidates"][0]["prior_annotations"] = [
        {
            "annotator": "p1",
            "answer_label": "admissible",
            "claim_labels": [
                {"claim": 0, "label": "supported", "evidence": [evidence]},
                {"claim": 1, "label": "not_supported"},
            ],
        }
    ]

    [(location, field, reason)] = refused(api, jsonl_bytes([record]))

    assert location == "line 1"
    assert field == "candidates[0].prior_annotations[0].claim_labels[0].evidence[0].source"
    assert "'" + "s" * ECHO_LIMIT + "…'" in reason
    assert len(reason) < 200


SUMMARY = " First sentence here. Second one is this."


def faithbench_document(labels: list[str]) -> bytes:
    annotation = {
        "annot_id": 1,
        "annotator_id": "a1",
        "annotator_name": "Ada",
        "label": labels,
        "note": "why",
        "summary_span": SUMMARY[1:6],
        "summary_start": 1,
        "summary_end": 6,
        "source_span": None,
        "source_start": None,
        "source_end": None,
    }
    sample = {
        "sample_id": 0,
        "source": "The source passage. It says things.",
        "summary": SUMMARY,
        "annotations": [annotation],
        "metadata": {"summarizer": "org/model", "raw_sample_id": 100},
    }
    return json.dumps({"samples": [sample]}).encode()


def test_a_faithbench_label_of_2_000_000_characters_is_echoed_in_at_most_40(api, project):
    # the reason used to repeat the label in full: 2,000,127 characters
    data = faithbench_document(["Unwanted", "L" * 2_000_000])

    [(location, field, reason)] = refused(api, data, fmt="faithbench", name="batch_1.json")

    assert location == "batch_1.json sample 0"
    assert field.endswith("label[1]")
    assert "'" + "L" * ECHO_LIMIT + "…'" in reason
    assert len(reason) < 200
