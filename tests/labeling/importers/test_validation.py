"""validated_stream: the one stream validator every import uses, and its error cap."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, StrictInt

from labeling.exceptions import WorkloadImportFailed
from labeling.importers.native import read_jsonl
from labeling.importers.record_errors import RecordError
from labeling.importers.validation import MAX_ERRORS, validated_stream
from labeling.models import EvaluatorLabel, ImportBatch, Question
from labeling.services import evaluator_labels_import
from tests.conftest import jsonl_bytes, native_record


class _Number(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: StrictInt


def _parse(location: str, raw: Any) -> int:
    value = _Number.model_validate(raw).n
    if value < 0:
        raise RecordError(location, "n", "negative")
    return value


class _Counted:
    """The records, counting how many the validator pulled."""

    def __init__(self, records: list[tuple[str, Any]]) -> None:
        self.records = records
        self.pulled = 0

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        for record in self.records:
            self.pulled += 1
            yield record


def test_yields_the_valid_records_and_collects_every_kind_of_error():
    errors: list[RecordError] = []
    unreadable = RecordError("line 2", "(line)", "invalid JSON")
    records = [
        ("line 1", {"n": 1}),
        ("line 2", unreadable),
        ("line 3", {"n": "2"}),
        ("line 4", {"n": -1}),
        ("line 5", {"n": 5}),
    ]

    valid = list(validated_stream(records, _parse, errors))

    assert valid == [("line 1", 1), ("line 5", 5)]
    assert errors[0] is unreadable
    assert (errors[1].location, errors[1].field) == ("line 3", "n")
    assert errors[1].reason == "Input should be a valid integer"
    assert (errors[2].location, errors[2].field, errors[2].reason) == ("line 4", "n", "negative")
    assert len(errors) == 3


def test_a_record_nested_too_deeply_is_an_error_not_a_crash():
    def deep(_location: str, _raw: Any) -> int:
        raise RecursionError

    errors: list[RecordError] = []

    assert list(validated_stream([("line 7", {})], deep, errors)) == []
    assert [(e.location, e.field, e.reason) for e in errors] == [
        ("line 7", "(record)", "nested too deeply")
    ]


def test_stops_reading_once_max_errors_are_collected():
    records = _Counted([(f"line {i}", {"n": -i}) for i in range(1, 31)])
    errors: list[RecordError] = []

    assert list(validated_stream(records, _parse, errors)) == []

    assert MAX_ERRORS == 20
    assert [e.location for e in errors] == [f"line {i}" for i in range(1, 21)]
    # the 21st record is pulled only to learn the stream goes on; it is not checked
    assert records.pulled == 21


def test_errors_the_caller_appended_count_towards_the_limit():
    errors = [RecordError("line 0", "x", "written earlier")] * 3
    records = _Counted([(f"line {i}", {"n": -i}) for i in range(1, 10)] + [("line 10", {"n": 10})])

    valid = list(validated_stream(records, _parse, errors, limit=5))

    assert valid == []
    assert [e.location for e in errors[3:]] == ["line 1", "line 2"]
    assert records.pulled == 3


def test_valid_records_after_errors_are_still_yielded_below_the_limit():
    records = [("line 1", {"n": -1}), ("line 2", {"n": 2}), ("line 3", {"n": 3})]
    errors: list[RecordError] = []

    assert list(validated_stream(records, _parse, errors, limit=2)) == [
        ("line 2", 2),
        ("line 3", 3),
    ]
    assert [e.location for e in errors] == ["line 1"]


@pytest.mark.django_db
def test_the_evaluator_label_import_reports_at_most_max_errors(project, import_records):
    import_records([native_record()])
    bad = [
        {"question": "q1", "candidate": "c0", "evaluator": "judge", "version": "v1", "label": 3}
        for _ in range(MAX_ERRORS + 5)
    ]
    batches = ImportBatch.objects.count()

    with pytest.raises(WorkloadImportFailed) as exc:
        evaluator_labels_import(
            project=project,
            records=read_jsonl(io.BytesIO(jsonl_bytes(bad))),
            actor=None,
            filename="labels.jsonl",
        )

    assert [e.location for e in exc.value.errors] == [f"line {i}" for i in range(1, 21)]
    assert {e.field for e in exc.value.errors} == {"label"}
    assert EvaluatorLabel.objects.count() == 0
    assert ImportBatch.objects.count() == batches
    assert Question.objects.count() == 1
