"""WiCE adapter: README counts, every quirk of the dataset, the declared mapping, refusals."""

from __future__ import annotations

import copy
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from labeling.importers import wice
from labeling.importers.record_errors import RecordError
from labeling.models import (
    CandidateAnswer,
    Claim,
    ImportBatch,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
    PriorSpan,
    Question,
    Role,
    SourceVersion,
)
from tests.conftest import jsonl_bytes, row_counts

CLAIMS = Path("wice/data/entailment_retrieval/claim/test.scored100.jsonl")
SUB_CLAIMS = Path("wice/data/non_supported_tokens/test.scored100.jsonl")
ORACLE_CHUNKS = Path(
    "wice/code_and_resources/entailment_inputs/oracle_chunks/claim/test.scored100.jsonl"
)
SCORES = Path(
    "wice/code_and_resources/model_outputs/entailment_classification/oracle_chunks/claim/"
    "retrieval=oracle,entailment=gpt-4-0613/test.entailment_score.json"
)


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def import_file(path: Path, slug: str = "wice", create: bool = True) -> str:
    out = io.StringIO()
    args = [path, "--project", slug, "--format", "wice", "--no-progress"]
    call_command("import_workload", *args, *(["--create"] if create else []), stdout=out)
    return out.getvalue()


def notes() -> dict[str, Any]:
    return ImportBatch.objects.order_by("pk").last().report["notes"]


def prior_of(claim_id: str) -> PriorAnnotation:
    return PriorAnnotation.objects.get(candidate__question__external_id=f"wice:{claim_id}")


# -- shared data -----------------------------------------------------------------------------


@pytest.mark.shared_data
@pytest.mark.django_db
def test_100_claims_give_the_readme_counts_and_labels(shared_data):
    records = load(shared_data / CLAIMS)
    import_file(shared_data / CLAIMS)

    assert Question.objects.count() == CandidateAnswer.objects.count() == 100
    assert Claim.objects.count() == PriorAnnotation.objects.count() == 100
    assert Counter(PriorClaimLabel.objects.values_list("raw_label", flat=True)) == {
        "partially_supported": 73,
        "supported": 22,
        "not_supported": 5,
    }
    # partially supported is not supported as a whole (the declared mapping)
    assert Counter(PriorClaimLabel.objects.values_list("label", flat=True)) == {
        "not_supported": 78,
        "supported": 22,
    }
    assert Counter(PriorAnnotation.objects.values_list("answer_label", flat=True)) == {
        "inadmissible": 78,
        "admissible": 22,
    }
    # one pinned version per distinct page; the claim is the whole sentence
    assert SourceVersion.objects.count() == len({tuple(r["evidence"]) for r in records})
    for record in records:
        question = Question.objects.get(external_id=f"wice:{record['meta']['id']}")
        candidate = question.candidates.get()
        assert candidate.text == record["claim"]
        assert question.group_key == record["meta"]["claim_title"]
        assert question.slices == {"claim_section": record["meta"]["claim_section"]}
        claim = candidate.claims.get()
        assert claim.text == record["claim"].strip()
        assert candidate.text[claim.start : claim.end] == claim.text
    assert notes()["empty_contexts"] == 13
    assert notes()["records_with_non_ascii"] == 75


@pytest.mark.shared_data
@pytest.mark.django_db
def test_evidence_cites_the_first_supporting_set_and_raw_keeps_every_set(shared_data):
    # quirk 1: alternative sets, up to 126 for one claim; not_supported uses [[]]
    records = load(shared_data / CLAIMS)
    import_file(shared_data / CLAIMS)

    assert max(len(r["supporting_sentences"]) for r in records) == 126
    assert notes()["most_supporting_sets"] == 126
    for record in records:
        prior = prior_of(record["meta"]["id"])
        assert prior.raw == {"supporting_sentences": record["supporting_sentences"]}
        cited = PriorEvidence.objects.filter(claim_label__prior_annotation=prior).order_by("start")
        quotes = [e.quote for e in cited]
        if record["label"] == "not_supported":
            assert quotes == []
        else:
            first = next(s for s in record["supporting_sentences"] if s)
            assert quotes == [record["evidence"][i] for i in first]
    # one not_supported claim lists [[], [9]]: still nothing cited
    odd = [
        r for r in records if r["label"] == "not_supported" and r["supporting_sentences"] != [[]]
    ]
    assert [r["supporting_sentences"] for r in odd] == [[[], [9]]]
    assert notes()["not_supported_with_a_supporting_set"] == 1


@pytest.mark.shared_data
@pytest.mark.django_db
def test_the_page_is_pinned_whole_with_every_sentence_at_its_offsets(shared_data):
    # quirks 2 and 7: 1,465 sentences at most, Markdown headings, empty sentences, non-ASCII text
    records = load(shared_data / CLAIMS)
    import_file(shared_data / CLAIMS)

    assert notes()["most_evidence_sentences"] == 1465
    assert notes()["empty_evidence_sentences"] == 3
    for record in records:
        question = Question.objects.get(external_id=f"wice:{record['meta']['id']}")
        text = question.retrievals.get().source_version.text
        spans = question.metadata["sentence_spans"]
        assert [text[s:e] for s, e in spans] == record["evidence"]
    for evidence in PriorEvidence.objects.select_related("source_version"):
        assert evidence.source_version.text[evidence.start : evidence.end] == evidence.quote


@pytest.mark.shared_data
@pytest.mark.django_db
def test_sub_claims_share_the_page_and_their_flagged_tokens_become_spans(shared_data):
    # quirks 3 and 4: tokens do not round-trip; a sub-claim's context is not its parent's
    sub_claims = load(shared_data / SUB_CLAIMS)
    import_file(shared_data / CLAIMS)
    versions = SourceVersion.objects.count()

    import_file(shared_data / SUB_CLAIMS, create=False)

    assert Question.objects.count() == 139
    assert SourceVersion.objects.count() == versions  # the parents' pages, pinned once
    assert all(" ".join(r["claim_tokens"]) != r["claim"] for r in sub_claims)
    for record in sub_claims:
        prior = prior_of(record["meta"]["id"])
        question = prior.candidate.question
        assert question.metadata["claim_context"] == record["meta"]["claim_context"]
        spans = list(PriorSpan.objects.filter(prior_annotation=prior).order_by("start"))
        flagged = "".join(
            t
            for t, f in zip(record["claim_tokens"], record["non_supported_spans"], strict=True)
            if f
        )
        assert "".join(s.quote for s in spans).replace(" ", "") == flagged
        assert all(prior.candidate.text[s.start : s.end] == s.quote for s in spans)
        assert all(s.labels == ["non_supported"] for s in spans)
    parent = Question.objects.get(external_id="wice:test00561")
    child = Question.objects.get(external_id="wice:test00561-0")
    assert (parent.metadata["claim_context"], child.metadata["claim_context"]) == ("", " ")
    assert parent.group_key == child.group_key == "Irene Hervey"


@pytest.mark.shared_data
@pytest.mark.django_db
def test_reimport_changes_no_row(shared_data):
    import_file(shared_data / CLAIMS)
    before = row_counts()

    assert "already imported" in import_file(shared_data / CLAIMS, create=False)
    assert row_counts() == before


@pytest.mark.shared_data
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "reason_part"),
    [(ORACLE_CHUNKS, "oracle-chunk row"), (SCORES, "line 1")],
)
def test_the_other_wice_files_are_refused_and_nothing_is_written(shared_data, path, reason_part):
    # quirks 4-6: oracle chunks hold distractors, not the page; model scores are not claims
    import_file(shared_data / CLAIMS)
    before = row_counts()

    errors = io.StringIO()
    with pytest.raises(CommandError, match="nothing was written"):
        call_command(
            "import_workload",
            shared_data / path,
            "--project",
            "wice",
            "--format",
            "wice",
            "--no-progress",
            stdout=io.StringIO(),
            stderr=errors,
        )

    assert reason_part in errors.getvalue()
    assert row_counts() == before


# -- synthetic records -----------------------------------------------------------------------

RECORD: dict[str, Any] = {
    "label": "partially_supported",
    "supporting_sentences": [[1, 2], [1]],
    "claim": "Ana Díaz (born 1960) is a painter; she lives in Lyon.",
    "evidence": ["# Ana Díaz", "Díaz was born in 1960.", "", "She paints."],
    "meta": {
        "id": "t1",
        "claim_title": "Ana Díaz",
        "claim_section": "Abstract.",
        "claim_context": "",
    },
}
TOKENS = {
    "claim_tokens": ["Ana", "Díaz", "(", "born", "1960", ")", "is", "a", "painter", ";", "she"]
    + ["lives", "in", "Lyon", "."],
    "non_supported_spans": [False] * 10 + [True, True, True, True, False],
}


def read(*records: dict[str, Any]) -> list[tuple[str, Any]]:
    return list(wice.read_wice(io.BytesIO(jsonl_bytes(records)), {**wice._new_counters()}))


def test_a_record_maps_to_one_claim_citing_its_sentences_by_offset():
    [(location, record)] = read({**RECORD, **TOKENS})

    assert location == "line 1"
    source = record["sources"][0]
    assert source["text"] == "# Ana Díaz\nDíaz was born in 1960.\n\nShe paints."
    candidate = record["candidates"][0]
    [label] = candidate["prior_annotations"][0]["claim_labels"]
    assert (label["label"], label["raw_label"]) == ("not_supported", "partially_supported")
    assert [(e["start"], e["end"], e["quote"]) for e in label["evidence"]] == [
        (11, 33, "Díaz was born in 1960."),
        (34, 34, ""),
    ]
    [span] = candidate["prior_annotations"][0]["spans"]
    assert (span["start"], span["end"], span["quote"]) == (35, 52, "she lives in Lyon")


def _with(path: str, value: Any) -> dict[str, Any]:
    record = copy.deepcopy({**RECORD, **TOKENS})
    *parents, last = path.split(".")
    target = record
    for key in parents:
        target = target[key]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return record


@pytest.mark.parametrize(
    ("record", "field", "reason_part"),
    [
        (_with("label", "refuted"), "label", "unknown WiCE label 'refuted'"),
        (_with("supporting_sentences", [[1, 4]]), "supporting_sentences[0][1]", "0 to 3"),
        (_with("supporting_sentences", [[True]]), "supporting_sentences[0][0]", "True"),
        (_with("evidence", ["a", 3]), "evidence[1]", "expected str"),
        (_with("evidence", ["a\nb"]), "evidence[0]", "line break"),
        (_with("claim", "  "), "claim", "empty claim"),
        (_with("meta.id", None), "meta.id", "got missing"),
        (_with("meta.claim_context", 7), "meta.claim_context", "expected str"),
        (
            _with("claim_tokens", ["Ana", "Diaz"] + TOKENS["claim_tokens"][2:]),
            "claim_tokens[1]",
            "'Diaz' is not the next text",
        ),
        (_with("non_supported_spans", [True]), "non_supported_spans", "1 flags for 15"),
        (_with("non_supported_spans", [0] * 15), "non_supported_spans[0]", "true or false"),
        (
            {**_with("label", "supported"), "supporting_sentences": [[]]},
            "supporting_sentences",
            "no supporting set",
        ),
        ({"prompt": "…", "response": "<answer>supported</answer>"}, "(record)", "model output"),
        (_with("meta.chunk_idx", [0, 2]), "meta.chunk_idx", "oracle-chunk row"),
    ],
)
def test_a_record_in_the_wrong_shape_is_named_by_line_and_field(record, field, reason_part):
    [_, (location, error)] = read(RECORD, record)

    assert isinstance(error, RecordError)
    assert (location, error.field) == ("line 2", field)
    assert reason_part in error.reason


@pytest.mark.django_db
def test_an_api_upload_with_one_bad_line_writes_nothing_and_names_it(api, project):
    bad = _with("supporting_sentences", [[9]])
    upload = SimpleUploadedFile("wice.jsonl", jsonl_bytes([RECORD, bad]))
    manager = api(Role.MANAGER)
    before = row_counts()

    response = manager.post(
        "/api/projects/study/imports/", {"file": upload, "format": "wice"}, format="multipart"
    )

    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [(e["location"], e["field"]) for e in errors] == [
        ("line 2", "supporting_sentences[0][0]")
    ]
    assert row_counts() == before
    good = SimpleUploadedFile("wice.jsonl", jsonl_bytes([RECORD]))
    created = manager.post(
        "/api/projects/study/imports/", {"file": good, "format": "wice"}, format="multipart"
    )
    assert created.status_code == 201, created.content
    assert PriorEvidence.objects.count() == 2
