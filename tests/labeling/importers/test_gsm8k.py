"""GSM8K adapter: README counts, every quirk of the dataset, the answer extraction rule."""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from labeling.importers import gsm8k
from labeling.importers.record_errors import RecordError
from labeling.models import (
    CandidateAnswer,
    Claim,
    ImportBatch,
    LabelPolicy,
    PriorAnnotation,
    Project,
    Question,
    SourceVersion,
)
from labeling.services import workload_import
from tests.conftest import row_counts


def data_path(shared_data: Path) -> Path:
    return (
        shared_data
        / "gsm8k-model-solutions"
        / "grade_school_math"
        / "data"
        / "example_model_solutions.first400.jsonl"
    )


def load(shared_data: Path) -> list[dict[str, Any]]:
    with data_path(shared_data).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def import_file(shared_data: Path, slug: str = "gsm") -> None:
    call_command(
        "import_workload",
        data_path(shared_data),
        "--project",
        slug,
        "--create",
        "--format",
        "gsm8k",
        "--no-progress",
        stdout=io.StringIO(),
    )


def forms_by_question() -> dict[int, list[str | None]]:
    forms: dict[int, list[str | None]] = defaultdict(list)
    for question_id, form in CandidateAnswer.objects.order_by(
        "question_id", "sample_index"
    ).values_list("question_id", "canonical_form"):
        forms[question_id].append(form)
    return forms


# -- shared data -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_400_questions_with_4_candidates_each(shared_data):
    records = load(shared_data)
    import_file(shared_data)
    assert Question.objects.count() == 400
    assert CandidateAnswer.objects.count() == 1600
    assert row_counts()["Item"] == 1600
    assert SourceVersion.objects.count() == 0 and Claim.objects.count() == 0
    for question in Question.objects.all():
        rows = list(question.candidates.order_by("sample_index"))
        assert [(c.sample_index, c.key, c.generator) for c in rows] == [
            (i, g, g) for i, g in enumerate(gsm8k.GENERATORS)
        ]
    for record in records:
        question = Question.objects.get(
            external_id="gsm8k:" + hashlib.sha256(record["question"].encode()).hexdigest()[:16]
        )
        assert question.text == record["question"]
        assert question.metadata["ground_truth"] == record["ground_truth"]
        for generator in gsm8k.GENERATORS:
            row = question.candidates.get(key=generator)
            assert row.text == record[generator]["solution"]
    policy = LabelPolicy.objects.get(project__slug="gsm")
    assert policy.evidence_relation == "external_truth"
    assert "last line that" in policy.guideline and "not human labels" in policy.guideline


@pytest.mark.django_db
def test_is_correct_imported_as_automatic_prior_label(shared_data):
    import_file(shared_data)
    priors = PriorAnnotation.objects.all()
    assert priors.count() == 1600
    assert set(priors.values_list("annotator", "origin").distinct()) == {
        ("gsm8k-is-correct", "automatic")
    }
    correct = Counter(
        priors.filter(answer_label="admissible").values_list("candidate__generator", flat=True)
    )
    assert correct == {
        "6b_finetuning": 89,
        "6b_verification": 156,
        "175b_finetuning": 146,
        "175b_verification": 224,
    }
    for prior in priors.select_related("candidate"):
        assert prior.raw == {"is_correct": prior.answer_label == "admissible"}
    # 137 questions have no correct sample (conformal score = infinity), 55 have all 4
    per_question = Counter(
        priors.filter(answer_label="admissible").values_list("candidate__question_id", flat=True)
    )
    assert 400 - len(per_question) == 137
    assert sum(1 for n in per_question.values() if n == 4) == 55
    # upstream's flag is the exact match of the extracted answer with the reference answer
    notes = ImportBatch.objects.get().report["notes"]
    assert notes["is_correct_differs_from_exact_match"] == 0
    assert notes["is_correct_true"] == 615


@pytest.mark.django_db
def test_truncated_samples_have_no_answer(shared_data):
    # quirk 1: 5 solutions without an "A:" line
    records = load(shared_data)
    import_file(shared_data)
    truncated = [
        (r["question"], g)
        for r in records
        for g in gsm8k.GENERATORS
        if not any(line.startswith("A:") for line in r[g]["solution"].split("\n"))
    ]
    assert len(truncated) == 5
    empty = CandidateAnswer.objects.filter(canonical_form__isnull=True)
    assert empty.count() == 5
    assert {(c.question.text, c.key) for c in empty} == set(truncated)
    assert set(empty.values_list("frequency_rank", flat=True)) == {None}
    assert ImportBatch.objects.get().report["notes"]["no_answer"] == 5
    assert any(c.text.endswith("3333") for c in empty)


@pytest.mark.django_db
def test_surface_forms_canonicalised(shared_data):
    # quirk 2: thousands separators removed, negatives and long floats kept
    import_file(shared_data)
    forms = set(CandidateAnswer.objects.values_list("canonical_form", flat=True))
    assert "90000" in forms and "90,000" not in forms
    assert "2000000" in forms
    assert "-129025" in forms
    assert not any("," in f or "$" in f for f in forms if f)
    row = CandidateAnswer.objects.filter(text__endswith="A: 90,000").first()
    assert row.canonical_form == "90000"
    notes = ImportBatch.objects.get().report["notes"]
    assert notes["thousands_separators_removed"] == 9
    assert notes["negative_answers"] == 17


@pytest.mark.django_db
def test_distinct_answers_histogram_reproduced_from_stored_forms(shared_data):
    import_file(shared_data)
    forms = forms_by_question()
    # the README's histogram counts "no answer" as one more distinct value
    with_none = Counter(len(set(f)) for f in forms.values())
    assert dict(with_none) == {1: 57, 2: 80, 3: 112, 4: 151}
    without_none = Counter(len({x for x in f if x is not None}) for f in forms.values())
    assert dict(without_none) == {1: 57, 2: 82, 3: 112, 4: 149}
    # frequency ranks computed by the importer from the canonical forms: rank 1 = most frequent,
    # ties broken by the lower sample index, no answer = no rank
    for question in Question.objects.all():
        rows = list(question.candidates.order_by("sample_index"))
        counts = Counter(c.canonical_form for c in rows if c.canonical_form is not None)
        first = {}
        for c in rows:
            if c.canonical_form is not None:
                first.setdefault(c.canonical_form, c.sample_index)
        order = sorted(counts, key=lambda f: (-counts[f], first[f]))
        expected = [
            None if c.canonical_form is None else order.index(c.canonical_form) + 1 for c in rows
        ]
        assert [c.frequency_rank for c in rows] == expected


@pytest.mark.django_db
def test_question_whitespace_and_typographic_quotes_kept(shared_data):
    # quirk 4: double spaces in 95 questions, U+2019 in 15
    records = load(shared_data)
    import_file(shared_data)
    texts = list(Question.objects.values_list("text", flat=True))
    assert sum("  " in t for t in texts) == 95
    assert sum("\u2019" in t for t in texts) == 15
    assert sorted(texts) == sorted(r["question"] for r in records)
    assert Question.objects.filter(text__contains="fiber.  How many").exists()


@pytest.mark.django_db
def test_reimport_changes_no_row(shared_data):
    import_file(shared_data)
    before = row_counts()
    out = io.StringIO()
    call_command(
        "import_workload",
        data_path(shared_data),
        "--project",
        "gsm",
        "--format",
        "gsm8k",
        "--no-progress",
        stdout=out,
    )
    assert "already imported" in out.getvalue()
    with data_path(shared_data).open("rb") as stream:
        result = workload_import(
            project=Project.objects.get(slug="gsm"),
            records=gsm8k.FORMAT.open(stream, "again.jsonl"),
            format="gsm8k",
            filename="again.jsonl",
            file_sha256="0" * 64,
        )
    assert result.batch is None and result.created == {}
    assert row_counts() == before


# -- synthetic ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("solution", "answer"),
    [
        ("x\nA: 3", "3"),
        ("A: 90,000", "90000"),
        ("A: $1,200.50", "1200.50"),
        ("A: -129025", "-129025"),
        ("A:  10.833333333333332  ", "10.833333333333332"),
        ("A: 1\nmore\nA: 2", "2"),
        ("A: 7\nthen more text", "7"),
        ("A: 10+John's age", "10+John's age"),
        ("For the thirteenth glass 5 * 1", None),
        ("x\n A: 3", None),  # the line must start with "A:"
        ("x\nA:", None),
        ("A: $", None),
        ("", None),
        ("x\r\nA: 3\r\n", "3"),
    ],
)
def test_extract_answer(solution, answer):
    assert gsm8k.extract_answer(solution) == answer


def sample(solution: str = "1+1=<<1+1=2>>2\nA: 2", correct: bool = True) -> dict[str, Any]:
    return {"is_correct": correct, "solution": solution}


def record(**overrides: Any) -> dict[str, Any]:
    data = {
        "question": "What is 1+1?  Say it\u2019s value.",
        "ground_truth": "1+1=<<1+1=2>>2\nA: 2",
        "6b_finetuning": sample("A: 3", False),
        "6b_verification": sample(),
        "175b_finetuning": sample("no answer line", False),
        "175b_verification": sample("A: 2.0", False),
    }
    data.update(overrides)
    return data


def read(*records: dict | bytes) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    data = b"".join(
        (r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records
    )
    source = gsm8k.FORMAT.open(io.BytesIO(data), "x.jsonl")
    return list(source), source.notes()


def test_record_maps_candidates_in_fixed_order():
    [(location, native)], counters = read(record())
    assert location == "line 1"
    assert native["external_id"].startswith("gsm8k:") and "sources" not in native
    assert native["metadata"]["ground_truth_answer"] == "2"
    assert [(c["id"], c["sample_index"], c["canonical_form"]) for c in native["candidates"]] == [
        ("6b_finetuning", 0, "3"),
        ("6b_verification", 1, "2"),
        ("175b_finetuning", 2, None),
        ("175b_verification", 3, "2.0"),
    ]
    labels = [c["prior_annotations"][0]["answer_label"] for c in native["candidates"]]
    assert labels == ["inadmissible", "admissible", "inadmissible", "inadmissible"]
    assert counters["no_answer"] == 1
    # "2.0" is not an exact match of "2": upstream's flag says false, and so does the rule
    assert counters["is_correct_differs_from_exact_match"] == 0


@pytest.mark.django_db
def test_synthetic_record_imports_with_ranks_and_no_answer(project):
    data = json.dumps(record()).encode() + b"\n"

    def run(sha: str):
        source = gsm8k.FORMAT.open(io.BytesIO(data), "x.jsonl")
        return workload_import(
            project=project,
            records=source,
            format="gsm8k",
            filename="x.jsonl",
            file_sha256=sha,
            notes=source.notes,
        )

    run("a" * 64)
    rows = list(CandidateAnswer.objects.order_by("sample_index"))
    assert [(c.canonical_form, c.frequency_rank) for c in rows] == [
        ("3", 1),
        ("2", 2),
        (None, None),
        ("2.0", 3),
    ]
    assert Question.objects.get().text == "What is 1+1?  Say it\u2019s value."
    before = row_counts()
    assert run("b" * 64).created == {}
    assert row_counts() == before


@pytest.mark.parametrize(
    ("overrides", "field", "reason_part"),
    [
        ({"175b_verification": None}, "175b_verification", "expected an object, got NoneType"),
        (
            {"6b_finetuning": {"is_correct": "yes", "solution": "A: 1"}},
            "6b_finetuning.is_correct",
            "true or false",
        ),
        (
            {"6b_finetuning": {"is_correct": 1, "solution": "A: 1"}},
            "6b_finetuning.is_correct",
            "true or false",
        ),
        ({"6b_verification": {"is_correct": True}}, "6b_verification.solution", "expected str"),
        ({"question": 3}, "question", "expected str, got int"),
    ],
)
def test_wrong_shape_gives_error_naming_line_and_field(overrides, field, reason_part):
    records, _ = read(record(), record(**overrides))
    location, error = records[1]
    assert isinstance(error, RecordError)
    assert (location, error.field) == ("line 2", field)
    assert reason_part in error.reason


def test_missing_generator_key_named():
    bad = record()
    del bad["6b_verification"]
    [(_, error)], _ = read(bad)
    assert isinstance(error, RecordError)
    assert (error.field, error.reason) == ("6b_verification", "expected an object, got missing")
