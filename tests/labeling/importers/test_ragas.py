"""RAGAS adapter: JSONL, CSV, Parquet, Arrow and a Hugging Face datasets folder; refusals.

The fixtures (``fixtures/ragas_eval.jsonl``, ``fixtures/ragas_eval.csv``) are written by hand
from the RAGAS documentation's evaluation-set schema: ``user_input``, ``retrieved_contexts``,
``response``, ``reference`` (0.2) and ``question``, ``contexts``, ``answer``, ``ground_truth``
(0.1), with metric columns added by an evaluation.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from labeling.exceptions import InvalidInput, WorkloadImportFailed
from labeling.models import (
    CandidateAnswer,
    Claim,
    EvaluatorLabel,
    ImportBatch,
    Project,
    Question,
    RetrievalLink,
    Role,
    SourceVersion,
)
from labeling.services import workload_import_file
from labeling.services.imports import workload_import_directory
from tests.conftest import jsonl_bytes, native_record, row_counts

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent / "fixtures"
JSONL = FIXTURES / "ragas_eval.jsonl"
CSV = FIXTURES / "ragas_eval.csv"
VERSION = "ragas-0.2.6"


def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in JSONL.read_text(encoding="utf-8").splitlines()]


def command(path: Path, slug: str = "rg", *extra: str) -> str:
    """Run the command; the progress bar (on stderr) stays on, as a user runs it."""
    out = io.StringIO()
    call_command(
        "import_workload",
        str(path),
        "--project",
        slug,
        "--create",
        "--format",
        "ragas",
        "--evaluator-version",
        VERSION,
        *extra,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def import_bytes(project: Project, data: bytes, name: str, version: str | None = VERSION) -> Any:
    return workload_import_file(
        project=project,
        stream=io.BytesIO(data),
        format_name="ragas",
        filename=name,
        evaluator_version=version,
    )


def refusal(project: Project, data: bytes, name: str, **kwargs: Any) -> list[tuple[str, str]]:
    before = row_counts()
    with pytest.raises(WorkloadImportFailed) as caught:
        import_bytes(project, data, name, **kwargs)
    assert row_counts() == before
    return [(e.location, e.field) for e in caught.value.errors]


def table() -> pa.Table:
    """The JSONL fixture as an Arrow table, with the types a datasets table has."""
    schema = pa.schema(
        [
            ("user_input", pa.string()),
            ("retrieved_contexts", pa.list_(pa.string())),
            ("response", pa.string()),
            ("reference", pa.string()),
            ("faithfulness", pa.float64()),
            ("answer_relevancy", pa.float64()),
        ]
    )
    data = rows()
    return pa.table({name: [row.get(name) for row in data] for name in schema.names}, schema)


def write_dataset(folder: Path) -> Path:
    """Write ``folder`` as ``Dataset.save_to_disk`` does: Arrow stream file, state, info."""
    folder.mkdir(parents=True)
    data = table()
    with ipc.new_stream(folder / "data-00000-of-00001.arrow", data.schema) as writer:
        for batch in data.to_batches(max_chunksize=2):
            writer.write_batch(batch)
    (folder / "state.json").write_text(
        json.dumps(
            {
                "_data_files": [{"filename": "data-00000-of-00001.arrow"}],
                "_fingerprint": "0f0c8a7e5d1b2c3a",
                "_format_columns": None,
                "_format_kwargs": {},
                "_format_type": None,
                "_output_all_columns": False,
                "_split": None,
            }
        )
    )
    features = {
        "user_input": {"dtype": "string", "_type": "Value"},
        "retrieved_contexts": {
            "feature": {"dtype": "string", "_type": "Value"},
            "_type": "Sequence",
        },
        "response": {"dtype": "string", "_type": "Value"},
        "reference": {"dtype": "string", "_type": "Value"},
        "faithfulness": {"dtype": "float64", "_type": "Value"},
        "answer_relevancy": {"dtype": "float64", "_type": "Value"},
    }
    (folder / "dataset_info.json").write_text(
        json.dumps({"citation": "", "description": "", "features": features, "homepage": ""})
    )
    return folder


def imported() -> dict[str, Any]:
    """What the database holds, by question text (for comparing formats)."""
    out = {}
    for question in Question.objects.order_by("external_id"):
        candidate = question.candidates.get()
        out[question.text] = {
            "external_id": question.external_id,
            "reference": question.metadata.get("reference"),
            "sources": [
                link.source_version.text
                for link in RetrievalLink.objects.filter(question=question).order_by("rank")
            ],
            "answer": candidate.text,
            "claims": [
                (c.text, c.start, c.end)
                for c in Claim.objects.filter(candidate=candidate).order_by("index")
            ],
            "scores": sorted(
                (e.evaluator.name, e.evaluator.version, e.score, e.available)
                for e in EvaluatorLabel.objects.filter(candidate=candidate).select_related(
                    "evaluator"
                )
            ),
        }
    return out


# -- JSONL -----------------------------------------------------------------------------------


def test_jsonl_rows_become_questions_sources_candidates_and_scores():
    report = command(JSONL)
    data = rows()
    assert Question.objects.count() == 3 and CandidateAnswer.objects.count() == 3
    # 4 contexts, one of them retrieved by two questions: one pinned document
    assert SourceVersion.objects.count() == 3
    assert RetrievalLink.objects.count() == 4
    got = imported()
    first = got[data[0]["user_input"]]
    key = json.dumps(
        [data[0]["user_input"], data[0]["retrieved_contexts"], data[0]["response"]],
        ensure_ascii=False,
    )
    assert first["external_id"] == "ragas:" + hashlib.sha256(key.encode()).hexdigest()[:16]
    assert first["reference"] == "It was completed in 1889."
    assert first["sources"] == data[0]["retrieved_contexts"]
    assert first["claims"] == [
        ("The Eiffel Tower was completed in 1889.", 0, 39),
        ("It was designed by Gustave Eiffel's company.", 40, 84),
    ]
    assert first["scores"] == [
        ("answer_relevancy", VERSION, 0.93, True),
        ("faithfulness", VERSION, 1.0, True),
    ]
    # a null score is unavailable, never a verdict
    second = got[data[1]["user_input"]]
    assert ("answer_relevancy", VERSION, None, False) in second["scores"]
    assert got[data[2]["user_input"]]["reference"] is None
    assert got[data[2]["user_input"]]["sources"] == []
    notes = ImportBatch.objects.get().report["notes"]
    assert notes["rows"] == 3 and notes["scores_unavailable"] == 1
    assert notes["score_columns"] == {"faithfulness": 3, "answer_relevancy": 2}
    assert notes["rows_without_contexts"] == 1 and notes["rows_without_reference"] == 1
    assert notes["claim_splitting"]["mode"] == "sentences"
    assert "3 records" in report


def test_reimport_of_the_same_rows_changes_no_row(tmp_path):
    command(JSONL)
    before = row_counts()
    # other bytes (CRLF, a blank line), the same rows: matched by natural keys
    copy = tmp_path / "again.jsonl"
    copy.write_bytes(JSONL.read_bytes().replace(b"\n", b"\r\n") + b"\r\n")
    report = command(copy)
    assert row_counts() == before
    assert "nothing new" in report
    assert "already imported" in command(JSONL)


def test_whole_answers_as_claims_are_recorded_in_the_report(tmp_path):
    command(JSONL, "rg", "--claims", "whole")
    assert Claim.objects.count() == 3
    assert ImportBatch.objects.get().report["notes"]["claim_splitting"]["mode"] == "whole"


# -- CSV, Parquet, Arrow, datasets folder ----------------------------------------------------


def test_csv_with_json_encoded_contexts_and_ragas_0_1_names():
    command(CSV)
    got = imported()
    rag = got["What does RAG stand for?"]
    assert rag["sources"] == [
        "Retrieval-augmented generation (RAG) combines retrieval with generation.",
        "RAG was introduced by Lewis et al. in 2020.",
    ]
    # a quoted cell keeps its line break; the empty cell is unavailable
    assert (
        rag["answer"]
        == "RAG stands for retrieval-augmented generation.\nIt was introduced in 2020."
    )
    assert rag["reference"] == "Retrieval-augmented generation"
    assert rag["scores"] == [
        ("context_precision", VERSION, 0.5, True),
        ("faithfulness", VERSION, None, False),
    ]
    assert got["What is the capital of France?"]["scores"] == [
        ("context_precision", VERSION, 1.0, True),
        ("faithfulness", VERSION, 1.0, True),
    ]
    notes = ImportBatch.objects.get().report["notes"]
    assert notes["rows_with_0_1_names"] == 2


def test_parquet_arrow_and_datasets_folder_give_the_rows_of_the_jsonl(tmp_path, project):
    import_bytes(project, JSONL.read_bytes(), "eval.jsonl")
    expected = imported()
    before = row_counts()
    buffer = io.BytesIO()
    pq.write_table(table(), buffer)
    # the same rows in Parquet match the stored questions: nothing new
    result = import_bytes(project, buffer.getvalue(), "eval.parquet")
    assert result.batch is None and result.records == 3
    folder = write_dataset(tmp_path / "eval_dataset")
    arrow = (folder / "data-00000-of-00001.arrow").read_bytes()
    assert import_bytes(project, arrow, "data.arrow").records == 3
    buffer = io.BytesIO()
    with ipc.new_file(buffer, table().schema) as writer:
        writer.write_table(table())
    assert import_bytes(project, buffer.getvalue(), "eval.feather").records == 3
    result = workload_import_directory(
        project=project, directory=folder, format_name="ragas", evaluator_version=VERSION
    )
    assert result.records == 3 and result.batch is None
    assert row_counts() == before and imported() == expected


def test_a_datasets_folder_imports_from_the_command_line_and_zipped(tmp_path, project):
    folder = write_dataset(tmp_path / "eval_dataset")
    command(folder)
    assert Question.objects.filter(project__slug="rg").count() == 3
    assert ImportBatch.objects.get().filename == "eval_dataset"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, f"eval_dataset/{path.name}")
    result = import_bytes(project, buffer.getvalue(), "eval_dataset.zip")
    assert result.records == 3 and result.created["questions"] == 3


def test_a_dataset_dict_folder_is_refused_naming_the_split_folders(tmp_path, project):
    write_dataset(tmp_path / "dd" / "train")
    (tmp_path / "dd" / "dataset_dict.json").write_text('{"splits": ["train"]}')
    with pytest.raises(WorkloadImportFailed) as caught:
        workload_import_directory(
            project=project,
            directory=tmp_path / "dd",
            format_name="ragas",
            evaluator_version=VERSION,
        )
    assert "import the folder of one split" in caught.value.errors[0].reason


# -- refusals --------------------------------------------------------------------------------


def test_a_missing_context_column_is_refused_once_naming_row_and_field(project):
    data = b"question,answer\nWhat is 2 + 2?,4\nWhat is 3 + 3?,6\n"
    assert refusal(project, data, "no_contexts.csv") == [("row 1", "retrieved_contexts")]


def test_contexts_that_are_not_a_list_are_refused(project):
    good, bad = rows()[0], dict(rows()[1], retrieved_contexts="one context")
    assert refusal(project, jsonl_bytes([good, bad]), "e.jsonl") == [
        ("line 2", "retrieved_contexts")
    ]
    csv_bad = b'question,contexts,answer\nQ?,"not json",An answer.\nQ2?,"[1, 2]",A.\n'
    assert refusal(project, csv_bad, "e.csv") == [("row 1", "contexts"), ("row 2", "contexts[0]")]


def test_an_empty_answer_and_a_non_numeric_score_are_refused(project):
    data = rows()
    data[0]["response"] = "  "
    data[2]["faithfulness"] = "high"
    assert refusal(project, jsonl_bytes(data), "e.jsonl") == [
        ("line 1", "response"),
        ("line 3", "faithfulness"),
    ]
    csv_bad = b"question,contexts,answer,faithfulness\nQ?,[],An answer.,0.9\nQ2?,[],A.,n/a\n"
    assert refusal(project, csv_bad, "e.csv") == [("row 2", "faithfulness")]
    assert refusal(project, b"question,contexts,answer,faithfulness\nQ?,[],A.,inf\n", "i.csv") == [
        ("row 1", "faithfulness")
    ]


def test_score_columns_need_a_declared_evaluator_version(project):
    errors = refusal(project, JSONL.read_bytes(), "e.jsonl", version=None)
    assert errors == [("line 1", "faithfulness")]
    # a table without score columns needs none
    plain = [
        {k: v for k, v in r.items() if k not in ("faithfulness", "answer_relevancy")}
        for r in rows()
    ]
    assert import_bytes(project, jsonl_bytes(plain), "plain.jsonl", version=None).records == 3


def test_an_evaluator_version_for_a_format_without_scores_is_refused(project):
    with pytest.raises(InvalidInput) as caught:
        workload_import_file(
            project=project,
            stream=io.BytesIO(jsonl_bytes([native_record("q1")])),
            format_name="native",
            filename="n.jsonl",
            evaluator_version=VERSION,
        )
    assert caught.value.field == "evaluator_version"
    with pytest.raises(CommandError, match="evaluator version"):
        call_command(
            "import_workload",
            str(JSONL),
            "--project",
            "x",
            "--create",
            "--format",
            "gsm8k",
            "--evaluator-version",
            VERSION,
            "--no-progress",
            stdout=io.StringIO(),
        )


def test_an_unstorable_character_from_csv_is_refused_naming_the_field(project):
    data = b'question,contexts,answer\nQ?,"[]","An\x00answer."\n'
    assert refusal(project, data, "nul.csv") == [("row 1", "candidates[0].text")]


# -- upload page -----------------------------------------------------------------------------


def test_the_upload_page_imports_a_csv_with_its_evaluator_version(login, project):
    client = login(Role.MANAGER)
    page = client.get(f"/p/{project.slug}/import/").content.decode()
    assert 'value="ragas"' in page and 'name="evaluator_version"' in page
    upload = SimpleUploadedFile("eval.csv", CSV.read_bytes(), content_type="text/csv")
    response = client.post(
        f"/p/{project.slug}/import/",
        {"file": upload, "format": "ragas", "evaluator_version": VERSION, "claims": "whole"},
    )
    assert response.status_code == 302
    assert Question.objects.filter(project=project).count() == 2
    assert set(EvaluatorLabel.objects.values_list("evaluator__version", flat=True)) == {VERSION}
    # without the version: 400, the row and the column named, nothing written
    upload = SimpleUploadedFile("eval2.csv", CSV.read_bytes() + b"\n", content_type="text/csv")
    before = row_counts()
    response = client.post(f"/p/{project.slug}/import/", {"file": upload, "format": "ragas"})
    assert response.status_code == 400
    assert [(e.location, e.field) for e in response.context["errors"]] == [
        ("row 1", "faithfulness")
    ]
    assert row_counts() == before


def test_the_api_takes_the_evaluator_version_and_refuses_it_for_native(api, project):
    client = api(Role.MANAGER)
    url = f"/api/projects/{project.slug}/imports/"
    upload = SimpleUploadedFile("eval.jsonl", JSONL.read_bytes())
    response = client.post(
        url, {"file": upload, "format": "ragas", "evaluator_version": VERSION}, format="multipart"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["created"]["evaluator_labels"] == 6
    upload = SimpleUploadedFile("n.jsonl", jsonl_bytes([native_record("q9")]))
    response = client.post(
        url, {"file": upload, "format": "native", "evaluator_version": VERSION}, format="multipart"
    )
    assert response.status_code == 400
    body = response.json()
    assert [e["field"] for e in body["errors"]] == ["evaluator_version"], body


def test_a_large_upload_is_imported_by_a_job_with_its_evaluator_version(
    login, project, settings, django_capture_on_commit_callbacks
):
    settings.JOB_IMPORT_BYTES = 10
    client = login(Role.MANAGER)
    upload = SimpleUploadedFile("eval.jsonl", JSONL.read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/p/{project.slug}/import/",
            {"file": upload, "format": "ragas", "evaluator_version": VERSION},
        )
    assert response.status_code == 302 and "/jobs/" in response["Location"]
    assert set(EvaluatorLabel.objects.values_list("evaluator__version", flat=True)) == {VERSION}


def test_the_upload_page_refuses_an_evaluator_version_for_native_on_its_field(login, project):
    upload = SimpleUploadedFile("n.jsonl", jsonl_bytes([native_record("q1")]))
    response = login(Role.MANAGER).post(
        f"/p/{project.slug}/import/",
        {"file": upload, "format": "native", "evaluator_version": VERSION},
    )
    assert response.status_code == 400
    assert "carries no evaluator scores" in response.context["form"].errors["evaluator_version"][0]
    assert not Question.objects.exists()


def test_the_command_reads_parquet_and_a_zipped_folder_through_its_progress_bar(tmp_path):
    # the command wraps the file to count the bytes read: pyarrow and zipfile read through it
    pq.write_table(table(), tmp_path / "eval.parquet")
    assert "3 records" in command(tmp_path / "eval.parquet", "pq")
    folder = write_dataset(tmp_path / "eval_dataset")
    with zipfile.ZipFile(tmp_path / "eval_dataset.zip", "w") as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, path.name)
    assert "3 records" in command(tmp_path / "eval_dataset.zip", "zipped")
    assert Question.objects.filter(project__slug="zipped").count() == 3


def test_csv_written_by_pandas_with_python_list_cells_is_read(project, tmp_path):
    # given the rows written as RAGAS writes its CSV (EvaluationDataset.to_csv() and
    # result.to_pandas().to_csv() both call pandas): list cells become str(list), Python literals
    import pandas as pd

    data = [
        {k: row.get(k, "") for k in ("user_input", "retrieved_contexts", "response", "reference")}
        for row in rows()
    ]
    data[0]["retrieved_contexts"] = ["Water boils at 100 °C.", 'It\'s "hot", they said.']
    path = tmp_path / "ragas.csv"
    pd.DataFrame(data).to_csv(path, index=False)
    assert "['Water boils at 100 °C.'," in path.read_text("utf-8")
    # when it is imported
    import_bytes(project, path.read_bytes(), "ragas.csv", version=None)
    # then every row's contexts are its sources, in order
    got = imported()
    for row in data:
        assert got[row["user_input"]]["sources"] == row["retrieved_contexts"]


@pytest.mark.parametrize(
    "cell",
    ["['a', 1]", "[print('x')]", "__import__('os').getcwd()", "['a'] + ['b']", "[b'bytes']"],
)
def test_a_python_cell_that_is_not_a_list_of_strings_is_refused_unevaluated(project, cell):
    data = f'question,contexts,answer\nQ?,"{cell}",An answer.\n'.encode()
    assert refusal(project, data, "e.csv", version=None) == [("row 1", "contexts")]
