"""RAGTruth adapter: the mapping of spans to prior labels, the split, refusals, the upload page.

The RAGTruth data files are not available here. ``fixtures/ragtruth/`` was written by hand from
the schema in the ParticleMedia/RAGTruth README and the paper (Niu et al., 2024): three prompts
(QA over two passages, a news summary, Yelp data), six responses (ids 1-6) with all four label
types, an ``implicit_true`` and a ``due_to_null`` span, an incorrect refusal and a truncated
response; the responses of one prompt are not consecutive in the file.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from labeling.exceptions import WorkloadImportFailed
from labeling.importers import ragtruth
from labeling.models import (
    CandidateAnswer,
    ImportBatch,
    LabelPolicy,
    PriorAnnotation,
    PriorClaimLabel,
    PriorSpan,
    Project,
    Question,
    RetrievalLink,
    Role,
)
from labeling.services import workload_import_file
from tests.conftest import row_counts

pytestmark = pytest.mark.django_db

FOLDER = Path(__file__).parent / "fixtures" / "ragtruth"


def responses() -> list[dict[str, Any]]:
    lines = (FOLDER / ragtruth.RESPONSES).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def zipped(response_lines: list[dict[str, Any]] | None = None, folder: str = "") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        body = (FOLDER / ragtruth.RESPONSES).read_bytes()
        if response_lines is not None:
            body = "".join(
                json.dumps(r, ensure_ascii=False) + "\n" for r in response_lines
            ).encode()
        archive.writestr(folder + ragtruth.RESPONSES, body)
        archive.write(FOLDER / ragtruth.SOURCES, folder + ragtruth.SOURCES)
    return buffer.getvalue()


def command(path: Path, slug: str = "rt", *extra: str) -> str:
    out = io.StringIO()
    call_command(
        "import_workload",
        str(path),
        "--project",
        slug,
        "--create",
        "--format",
        "ragtruth",
        *extra,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def prior(response_id: str) -> PriorAnnotation:
    return PriorAnnotation.objects.get(candidate__key=response_id)


def claim_labels(response_id: str) -> list[tuple[str, str | None]]:
    return [
        (label.claim.text, label.label)
        for label in PriorClaimLabel.objects.filter(prior_annotation=prior(response_id))
        .select_related("claim")
        .order_by("claim__index")
    ]


def test_prompts_become_questions_with_their_responses_sources_and_split():
    command(FOLDER)
    assert Question.objects.count() == 3 and CandidateAnswer.objects.count() == 6
    qa = Question.objects.get(external_id="ragtruth:s-qa-1")
    assert qa.text == "how to cook beets and beet greens"
    assert (qa.slices, qa.partition) == ({"task_type": "QA", "source": "MARCO"}, "test")
    passages = [
        (link.source_version.document.key, link.rank, link.source_version.text)
        for link in RetrievalLink.objects.filter(question=qa).order_by("rank")
    ]
    assert passages == [
        (
            "ragtruth:s-qa-1:passage-1",
            1,
            "Preheat the oven to 200 degrees Celsius. Roast the beets for 45 minutes.",
        ),
        (
            "ragtruth:s-qa-1:passage-2",
            2,
            "Beet greens can be sauteed in olive oil with garlic for two minutes.",
        ),
    ]
    # the responses of one prompt, in file order although not consecutive
    assert list(qa.candidates.order_by("sample_index").values_list("key", "generator")) == [
        ("1", "gpt-4-0613"),
        ("2", "llama-2-7b-chat"),
        ("3", "mistral-7B-instruct"),
    ]
    assert qa.candidates.get(key="2").generator_settings == {"temperature": 0.925}
    summary = Question.objects.get(external_id="ragtruth:s-sum-1")
    assert summary.text == "Summarize the following news within 50 words:"
    assert summary.partition == "calibration"
    data = Question.objects.get(external_id="ragtruth:s-d2t-1")
    assert data.text.endswith("Don't make up information.")
    [link] = RetrievalLink.objects.filter(question=data)
    assert json.loads(link.source_version.text)["name"] == "Café Lumière"
    project = Project.objects.get(slug="rt")
    assert project.partition_frozen_at is not None and project.partition_seed == 0
    assert project.partition_proportions == pytest.approx(
        {"dev": 0.0, "calibration": 2 / 3, "test": 1 / 3}
    )
    policy = LabelPolicy.objects.get(project=project)
    assert "Evident Conflict and Subtle Conflict -> contradicted" in policy.guideline


def test_span_labels_map_to_claim_and_answer_labels():
    command(FOLDER)
    assert claim_labels("1") == [
        ("Roast the beets at 200 degrees Celsius for 45 minutes.", "supported"),
        ("Saute the greens in olive oil with garlic.", "supported"),
    ]
    assert prior("1").answer_label == "admissible"
    assert claim_labels("2") == [
        ("Roast the beets at 180 degrees for an hour.", "contradicted"),
        ("Boil the greens in salted water for ten minutes.", "not_supported"),
    ]
    assert prior("2").answer_label == "inadmissible"
    # an incorrect refusal abstains; its claim is left unlabelled
    assert prior("3").answer_label == "abstained"
    assert claim_labels("3") == [("Unable to answer based on given passages.", None)]
    assert claim_labels("5")[1] == ("It opens in 2025.", "contradicted")
    # implicit_true is still not supported by the sources, but alone keeps the answer admissible
    labels = claim_labels("6")
    assert [label for _, label in labels] == ["supported", "not_supported", "not_supported"]
    assert prior("6").answer_label == "inadmissible"  # the due_to_null span is a hallucination
    spans = {
        s.quote: (s.labels, s.note)
        for s in PriorSpan.objects.filter(prior_annotation=prior("6")).order_by("start")
    }
    assert spans == {
        "and outdoor seating": (
            ["Evident Baseless Info", "due_to_null"],
            "OutdoorSeating is null.",
        ),
        "baked daily since 1990": (
            ["Evident Baseless Info", "implicit_true"],
            "Not in the data, but true according to the owner's site.",
        ),
    }
    assert set(PriorSpan.objects.values_list("evidence_source_version", flat=True)) == {None}
    assert PriorSpan.objects.count() == 6
    assert set(PriorAnnotation.objects.values_list("annotator", flat=True)) == {"ragtruth"}
    notes = ImportBatch.objects.get().report["notes"]
    assert notes["label_types"] == {
        "Evident Conflict": 1,
        "Subtle Conflict": 1,
        "Evident Baseless Info": 3,
        "Subtle Baseless Info": 1,
    }
    assert notes["quality"] == {"good": 4, "incorrect_refusal": 1, "truncated": 1}
    assert notes["partition"] == {"calibration": 2, "test": 1}
    assert (notes["implicit_true_spans"], notes["due_to_null_spans"]) == (1, 1)


def test_only_implicit_true_spans_keep_the_answer_admissible():
    assert ragtruth.answer_label([{"implicit_true": True}], "good") == "admissible"
    assert ragtruth.answer_label([{"implicit_true": False}], "good") == "inadmissible"
    assert ragtruth.answer_label([], "incorrect_refusal") == "abstained"
    assert ragtruth.claim_label(["Subtle Baseless Info", "Subtle Conflict"]) == "contradicted"


def test_whole_responses_as_claims(tmp_path):
    command(FOLDER, "rt", "--claims", "whole")
    assert claim_labels("2") == [
        (responses()[1]["response"], "contradicted"),
    ]
    assert ImportBatch.objects.get().report["notes"]["claim_splitting"]["mode"] == "whole"


def test_the_zip_and_the_directory_give_the_same_rows_and_a_reimport_changes_none(project):
    command(FOLDER, project.slug)
    before = row_counts()
    result = workload_import_file(
        project=project,
        stream=io.BytesIO(zipped(folder="RAGTruth/")),
        format_name="ragtruth",
        filename="ragtruth.zip",
    )
    assert result.batch is None and result.records == 3
    assert "already imported" in command(FOLDER, project.slug)
    assert row_counts() == before


def _refused(project: Project, lines: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    before = row_counts()
    with pytest.raises(WorkloadImportFailed) as caught:
        workload_import_file(
            project=project,
            stream=io.BytesIO(zipped(lines)),
            format_name="ragtruth",
            filename="bad.zip",
        )
    assert row_counts() == before
    return [(e.location, e.field, e.reason) for e in caught.value.errors]


def test_a_label_span_past_the_end_of_the_response_is_refused(project):
    lines = responses()
    length = len(lines[1]["response"])
    lines[1]["labels"][1]["end"] = length + 5
    [(location, field, reason)] = _refused(project, lines)
    assert (location, field) == ("response.jsonl line 2", "labels[1].end")
    assert f"past the end of the response ({length} code points)" in reason


def test_a_label_whose_text_differs_from_the_response_is_refused(project):
    lines = responses()
    lines[2]["labels"][0]["text"] = "paid by the city"
    [(location, field, reason)] = _refused(project, lines)
    assert (location, field) == ("response.jsonl line 3", "labels[0].text")
    assert "'paid by the region'" in reason


def test_unknown_label_type_split_disagreement_and_missing_source_are_refused(project):
    lines = responses()
    lines[0]["labels"] = [
        dict(responses()[1]["labels"][0], label_type="Wrong", start=0, end=0, text="")
    ]
    errors = _refused(project, lines)
    assert [(loc, field) for loc, field, _ in errors] == [
        ("response.jsonl line 1", "labels[0].label_type")
    ]
    lines = responses()
    lines[3]["split"] = "train"  # prompt s-qa-1's other responses are in test
    assert [(loc, f) for loc, f, _ in _refused(project, lines)] == [
        ("response.jsonl line 4", "split")
    ]
    lines = responses()
    lines[0]["source_id"] = "s-unknown"
    assert [(loc, f) for loc, f, _ in _refused(project, lines)] == [
        ("response.jsonl line 1", "source_id")
    ]


def test_a_zip_without_the_two_files_is_refused(project):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("response.jsonl", "")
    with pytest.raises(WorkloadImportFailed) as caught:
        workload_import_file(
            project=project, stream=buffer, format_name="ragtruth", filename="one.zip"
        )
    assert "source_info.jsonl" in caught.value.errors[0].reason


def test_the_upload_page_imports_the_zip(login, project):
    client = login(Role.MANAGER)
    assert 'value="ragtruth"' in client.get(f"/p/{project.slug}/import/").content.decode()
    upload = SimpleUploadedFile("ragtruth.zip", zipped(), content_type="application/zip")
    response = client.post(
        f"/p/{project.slug}/import/", {"file": upload, "format": "ragtruth", "claims": "sentences"}
    )
    assert response.status_code == 302
    assert Counter(
        Question.objects.filter(project=project).values_list("partition", flat=True)
    ) == {
        "calibration": 2,
        "test": 1,
    }
    lines = responses()
    lines[1]["labels"][1]["end"] = 999
    upload = SimpleUploadedFile("bad.zip", zipped(lines), content_type="application/zip")
    response = client.post(f"/p/{project.slug}/import/", {"file": upload, "format": "ragtruth"})
    assert response.status_code == 400
    assert [(e.location, e.field) for e in response.context["errors"]] == [
        ("response.jsonl line 2", "labels[1].end")
    ]


def test_the_command_reads_the_zip_through_its_progress_bar(tmp_path):
    (tmp_path / "ragtruth.zip").write_bytes(zipped(folder="RAGTruth/"))
    assert "3 records" in command(tmp_path / "ragtruth.zip")
    assert CandidateAnswer.objects.count() == 6


def test_the_test_split_alone_imports_its_prompts_and_counts_the_others(project):
    lines = [r for r in responses() if r["split"] == "test"]
    result = workload_import_file(
        project=project,
        stream=io.BytesIO(zipped(lines)),
        format_name="ragtruth",
        filename="test-split.zip",
    )
    assert result.records == 1 and result.created["candidates"] == 3
    assert result.notes["sources_without_responses"] == 2
    project.refresh_from_db()
    assert project.partition_proportions == {"dev": 0.0, "calibration": 0.0, "test": 1.0}
