"""evaluator_labels_import: strict, atomic, idempotent import of labels of imported targets."""

from __future__ import annotations

import io
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from labeling.exceptions import PermissionDenied, WorkloadImportFailed
from labeling.importers.native import read_jsonl
from labeling.models import Evaluator, EvaluatorLabel, ImportBatch, Role
from labeling.services import evaluator_labels_import, evaluator_labels_import_file
from tests.conftest import jsonl_bytes, native_record, row_counts

pytestmark = pytest.mark.django_db


def label(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "question": "q1",
        "candidate": "c0",
        "evaluator": "judge",
        "version": "v2",
        "label": "inadmissible",
        "score": 0.9,
    }
    record.update(overrides)
    return {k: v for k, v in record.items() if v is not None}


@pytest.fixture
def imported(project, import_records):
    import_records([native_record("q1"), native_record("q2")])
    return project


def run(project, records, actor=None, filename="labels.jsonl"):
    data = jsonl_bytes(records)
    return evaluator_labels_import_file(
        project=project, stream=io.BytesIO(data), filename=filename, actor=actor
    )


def test_valid_import_creates_evaluator_labels_and_a_batch(imported):
    records = [
        label(),
        label(candidate="c1", label=None, score=0.1),
        label(claim=1, label="contradicted", score=None),
        label(question="q2", unavailable=True, label=None, score=None),
    ]

    result = run(imported, records)

    assert result.created == {"evaluator_labels": 4, "evaluators": 1}
    assert result.batch.format == "evaluator_labels"
    assert result.batch.report["created"] == {"evaluator_labels": 4, "evaluators": 1}
    evaluator = Evaluator.objects.get(name="judge", version="v2")
    assert evaluator.labels.count() == 4
    on_claim = EvaluatorLabel.objects.get(claim__isnull=False)
    assert (on_claim.claim.index, on_claim.label) == (1, "contradicted")
    unavailable = EvaluatorLabel.objects.get(candidate__question__external_id="q2")
    assert (unavailable.available, unavailable.label, unavailable.score) == (False, None, None)


def test_reimport_of_the_same_labels_writes_nothing(imported):
    run(imported, [label(), label(claim=0, label="supported")])
    before = row_counts()

    # the same labels in another file (other order, score 0.9 written as is)
    again = run(imported, [label(claim=0, label="supported"), label(score=0.9)], filename="b")
    same_file = run(imported, [label(), label(claim=0, label="supported")])

    assert again.batch is None and again.created == {}
    assert same_file.already_imported
    assert row_counts() == before


def test_a_new_version_of_the_judge_is_a_new_evaluator(imported):
    run(imported, [label()])

    result = run(imported, [label(version="v3", label="admissible")])

    assert result.created == {"evaluator_labels": 1, "evaluators": 1}
    assert Evaluator.objects.filter(name="judge").count() == 2


def test_a_different_label_for_the_same_version_and_target_is_refused(imported):
    run(imported, [label()])
    before = row_counts()

    with pytest.raises(WorkloadImportFailed) as exc:
        run(imported, [label(candidate="c1"), label(label="admissible")])

    (error,) = exc.value.errors
    assert (error.location, error.field) == ("line 2", "label")
    assert "new evaluator version" in error.reason
    assert row_counts() == before


def test_a_conflict_within_one_file_is_refused(imported):
    with pytest.raises(WorkloadImportFailed) as exc:
        run(imported, [label(), label(score=0.5)])

    assert exc.value.errors[0].location == "line 2"
    assert not EvaluatorLabel.objects.exists()


def test_unavailable_with_a_label_is_refused(imported):
    before = row_counts()

    with pytest.raises(WorkloadImportFailed) as exc:
        run(imported, [label(candidate="c1"), label(unavailable=True, score=None)])

    (error,) = exc.value.errors
    assert (error.location, error.field) == ("line 2", "label")
    assert "unavailable" in error.reason
    assert row_counts() == before


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"candidate": "nope"}, "candidate"),
        ({"question": "q9"}, "question"),
        ({"claim": 5, "label": "supported"}, "claim"),
    ],
)
def test_unknown_target_is_refused_naming_the_line(imported, overrides, field):
    before = row_counts()

    with pytest.raises(WorkloadImportFailed) as exc:
        run(imported, [label(), label(candidate="c1"), label(**overrides)])

    (error,) = exc.value.errors
    assert (error.location, error.field) == ("line 3", field)
    assert row_counts() == before  # nothing half-written: not the two valid lines either
    assert not ImportBatch.objects.filter(format="evaluator_labels").exists()


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({**label(), "score": "0.9"}, "score"),
        ({**label(), "verdict": "x"}, "verdict"),
        (label(label="supported"), "label"),  # a claim label on a candidate
        (label(label=None, score=None), "label"),
        ({k: v for k, v in label().items() if k != "version"}, "version"),
    ],
)
def test_invalid_records_name_line_and_field(imported, record, field):
    with pytest.raises(WorkloadImportFailed) as exc:
        run(imported, [record])

    error = exc.value.errors[0]
    # pydantic names the union member tried: "score.float"
    assert (error.location, error.field.split(".")[0]) == ("line 1", field)
    assert not EvaluatorLabel.objects.exists()


def test_several_errors_are_reported_together(imported):
    with pytest.raises(WorkloadImportFailed) as exc:
        run(imported, [label(candidate="x"), label(score="1"), label(question="y")])

    assert sorted(e.location for e in exc.value.errors) == ["line 1", "line 2", "line 3"]


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR])
def test_only_managers_import(imported, member, role):
    with pytest.raises(PermissionDenied):
        run(imported, [label()], actor=member(role))

    assert not EvaluatorLabel.objects.exists()


def test_a_manager_imports_and_is_recorded(imported, member):
    manager = member(Role.MANAGER)

    result = run(imported, [label()], actor=manager)

    assert result.batch.created_by == manager


def test_records_from_any_iterable(imported):
    data = jsonl_bytes([label()])

    result = evaluator_labels_import(
        project=imported, records=read_jsonl(io.BytesIO(data)), actor=None, filename="x"
    )

    assert result.created["evaluator_labels"] == 1


def test_command_imports_and_reports(imported, tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(jsonl_bytes([label()]))
    out = StringIO()

    call_command("import_evaluator_labels", str(path), "--project", "study", stdout=out)

    assert '"evaluator_labels": 1' in out.getvalue()
    assert EvaluatorLabel.objects.count() == 1


def test_command_refusal_names_the_line(imported, tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(jsonl_bytes([label(), label(candidate="zz")]))
    err = StringIO()

    with pytest.raises(CommandError, match="nothing was written"):
        call_command("import_evaluator_labels", str(path), "--project", "study", stderr=err)

    assert "line 2: field candidate" in err.getvalue()
    assert not EvaluatorLabel.objects.exists()


def test_unstorable_text_is_refused(imported):
    with pytest.raises(WorkloadImportFailed) as exc:
        evaluator_labels_import(
            project=imported,
            records=[("record 1", label(raw={"why": "a\x00b"}))],
            actor=None,
            filename="x",
        )

    assert exc.value.errors[0].field == "raw.why"
