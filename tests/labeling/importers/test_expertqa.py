"""ExpertQA adapter: README counts, every quirk of the dataset, the declared mapping rules."""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from labeling.importers import expertqa
from labeling.importers.record_errors import RecordError
from labeling.models import (
    CandidateAnswer,
    Claim,
    ImportBatch,
    LabelPolicy,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
    Project,
    Question,
    RetrievalLink,
    SourceDocument,
    SourceVersion,
)
from labeling.services import workload_import
from tests.conftest import row_counts

ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def data_path(shared_data: Path) -> Path:
    return shared_data / "expertqa" / "data" / "lfqa" / "domain_test.first120.jsonl"


def load(shared_data: Path) -> list[dict[str, Any]]:
    with data_path(shared_data).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def claims_of(records: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [
        (system, answer, claim)
        for r in records
        for system, answer in r["answers"].items()
        for claim in answer["claims"]
    ]


def split(item: str) -> tuple[str, str | None]:
    # independent of the adapter: "[n] URL" or "[n] URL\n\npassage"
    body = item.split("] ", 1)[1]
    if "\n\n" not in body:
        return body, None
    url, passage = body.split("\n\n", 1)
    return url, passage


def import_file(shared_data: Path, slug: str = "eq") -> None:
    call_command(
        "import_workload",
        data_path(shared_data),
        "--project",
        slug,
        "--create",
        "--format",
        "expertqa",
        "--no-progress",
        stdout=io.StringIO(),
    )


def notes() -> dict[str, Any]:
    return ImportBatch.objects.get().report["notes"]


# -- shared data -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_first_120_records_give_the_readme_counts(shared_data):
    records = load(shared_data)
    import_file(shared_data)

    assert Question.objects.count() == 120
    assert CandidateAnswer.objects.count() == 120
    assert Claim.objects.count() == 721
    assert PriorAnnotation.objects.count() == 120
    assert PriorClaimLabel.objects.count() == 721
    # one source version per distinct (URL, passage); computed here by parsing the file
    passages = {
        split(item)
        for _, _, claim in claims_of(records)
        for item in claim["evidence"]
        if split(item)[1] is not None
    }
    assert len(passages) == 394
    assert SourceVersion.objects.count() == len(passages)
    assert SourceDocument.objects.count() == len(passages)
    assert {(v.uri, v.text) for v in SourceVersion.objects.all()} == passages
    # different passages from one URL are different documents
    urls = Counter(url for url, _ in passages)
    assert sum(1 for n in urls.values() if n > 1) == 23
    # systems and slices
    systems = Counter(CandidateAnswer.objects.values_list("generator", flat=True))
    assert systems == {
        "rr_gs_gpt4": 27,
        "bing_chat": 25,
        "rr_sphere_gpt4": 22,
        "post_hoc_sphere_gpt4": 22,
        "post_hoc_gs_gpt4": 16,
        "gpt4": 8,
    }
    for record in records:
        question = Question.objects.get(
            external_id="expertqa:" + hashlib.sha256(record["question"].encode()).hexdigest()[:16]
        )
        assert question.text == record["question"]
        assert question.slices == record["metadata"]
    assert notes()["claims_with_no_evidence"] == 130
    assert notes()["url_only_evidence_items"] == 206


@pytest.mark.django_db
def test_reimport_changes_no_row(shared_data):
    import_file(shared_data)
    before = row_counts()
    out = io.StringIO()
    call_command(
        "import_workload",
        data_path(shared_data),
        "--project",
        "eq",
        "--format",
        "expertqa",
        "--no-progress",
        stdout=out,
    )
    assert "already imported" in out.getvalue()
    with data_path(shared_data).open("rb") as stream:
        result = workload_import(
            project=Project.objects.get(slug="eq"),
            records=expertqa.FORMAT.open(stream, "again.jsonl"),
            format="expertqa",
            filename="again.jsonl",
            file_sha256="0" * 64,
        )
    assert result.batch is None and result.created == {}
    assert row_counts() == before


@pytest.mark.django_db
def test_claims_not_in_the_answer_are_stored_unanchored(shared_data):
    # quirk 1: 111 of 721 claim strings are not substrings of the answer
    records = load(shared_data)
    import_file(shared_data)
    expected = sum(
        claim["claim_string"] not in answer["answer_string"]
        for _, answer, claim in claims_of(records)
    )
    assert expected == 111
    assert Claim.objects.filter(unanchored=True).count() == expected
    assert notes()["unanchored_claims"] == expected
    assert ImportBatch.objects.get().report["created"]["unanchored_claims"] == expected
    for claim in Claim.objects.filter(unanchored=False).select_related("candidate"):
        assert claim.candidate.text[claim.start : claim.end] == claim.text
        assert not claim.machine_split
    # texts are kept as given: 78 unanchored claims start with a space
    assert Claim.objects.filter(unanchored=True, text__startswith=" ").count() == 78


@pytest.mark.django_db
def test_two_claim_schema_variants_import_and_keep_their_extra_keys(shared_data):
    # quirk 2: post_hoc_gs_gpt4 claims carry source_reliability and revised_claim_string
    records = load(shared_data)
    import_file(shared_data)
    variants = [c for _, _, c in claims_of(records) if "revised_claim_string" in c]
    assert len(variants) == 120
    assert {s for s, _, c in claims_of(records) if "revised_claim_string" in c} == {
        "post_hoc_gs_gpt4"
    }
    assert notes()["schema_variant_claims"] == len(variants)
    prior = PriorAnnotation.objects.filter(candidate__generator="post_hoc_gs_gpt4").first()
    assert {"source_reliability", "revised_claim_string"} <= prior.raw["claims"][0].keys()


@pytest.mark.django_db
def test_support_vocabulary_mapped_and_raw_value_kept(shared_data):
    # quirk 3: Partial and Incomplete mean the same; N/A has no label
    records = load(shared_data)
    import_file(shared_data)
    raw = Counter(PriorClaimLabel.objects.values_list("raw_label", flat=True))
    assert raw == {"Complete": 416, "Missing": 130, "Incomplete": 98, "Partial": 44, "N/A": 33}
    assert notes()["support_values"] == dict(raw)

    def expected(claim: dict[str, Any]) -> str | None:
        items = [split(e) for e in claim["evidence"]]
        if items and all(p is None for _, p in items):
            return "evidence_unavailable"
        return {"Complete": "supported", "N/A": None}.get(claim["support"], "not_supported")

    want = Counter(expected(c) for _, _, c in claims_of(records))
    got = Counter(PriorClaimLabel.objects.values_list("label", flat=True))
    assert got == want
    assert got == {
        "supported": 416 - 82,
        "not_supported": 130 + 98 - 15 + 44 - 5,
        "evidence_unavailable": 115,
        None: 33 - 13,
    }
    for raw_label in ("Partial", "Incomplete", "Missing"):
        labels = set(
            PriorClaimLabel.objects.filter(raw_label=raw_label).values_list("label", flat=True)
        )
        assert labels <= {"not_supported", "evidence_unavailable"}
    assert set(PriorClaimLabel.objects.filter(raw_label="N/A").values_list("label", flat=True)) <= {
        None,
        "evidence_unavailable",
    }


@pytest.mark.django_db
def test_url_only_evidence_is_unavailable_and_passages_are_whole_passage_spans(shared_data):
    # quirk 4: the URL and the passage share one string; URL-only items are no evidence
    import_file(shared_data)
    unavailable = PriorClaimLabel.objects.filter(label="evidence_unavailable")
    assert unavailable.count() == 115 == notes()["claims_with_url_only_evidence"]
    assert set(unavailable.values_list("reason", flat=True)) == {"not_found"}
    assert not PriorEvidence.objects.filter(claim_label__in=unavailable).exists()
    for label in PriorClaimLabel.objects.filter(label="supported"):
        evidence = list(label.evidence.select_related("source_version"))
        assert evidence
        for ev in evidence:
            text = ev.source_version.text
            assert (ev.start, ev.end, ev.quote) == (0, len(text), text)
    assert PriorEvidence.objects.count() == 511
    # ranks follow the order of first appearance in the record, from 1
    for question in Question.objects.all():
        ranks = list(RetrievalLink.objects.filter(question=question).values_list("rank", flat=True))
        assert sorted(ranks) == list(range(1, len(ranks) + 1))


@pytest.mark.django_db
def test_closed_book_gpt4_urls_are_not_sources(shared_data):
    # quirk 5: gpt4 "evidence" is URLs the model produced, never retrieved text
    import_file(shared_data)
    gpt4 = Question.objects.filter(candidates__generator="gpt4")
    assert gpt4.count() == 8
    assert not RetrievalLink.objects.filter(question__in=gpt4).exists()
    labels = PriorClaimLabel.objects.filter(claim__candidate__generator="gpt4")
    assert set(labels.values_list("label", flat=True)) <= {"evidence_unavailable", "not_supported"}


@pytest.mark.django_db
def test_astral_character_kept_and_offsets_in_code_points(shared_data):
    # quirk 6: U+1F551 in one record's evidence passage
    import_file(shared_data)
    assert notes()["records_with_astral_characters"] == 1
    [version] = [v for v in SourceVersion.objects.all() if ASTRAL.search(v.text)]
    assert version.text.startswith("  \U0001f551 Reading time")
    assert version.length == len(version.text)
    assert version.sha256 == hashlib.sha256(version.text.encode("utf-8")).hexdigest()
    for ev in PriorEvidence.objects.filter(source_version=version):
        assert ev.end == len(version.text)  # code points, not UTF-16 units
        assert ev.end < len(version.text.encode("utf-16-le")) // 2
    question = Question.objects.get(text__startswith="How do bridge architects")
    assert question.retrievals.filter(source_version=version).exists()


@pytest.mark.django_db
def test_expert_is_pseudonymous_and_answer_judgements_kept_raw(shared_data):
    # quirks 7-9: revised answers, annotation time, one expert = the question author
    records = load(shared_data)
    import_file(shared_data)
    ids = {r["annotator_id"] for r in records}
    assert len(ids) == 105
    stored = set(PriorAnnotation.objects.values_list("annotator", flat=True))
    assert stored == {expertqa.pseudonym(i) for i in ids}
    assert all(re.fullmatch(r"eq-[0-9a-f]{12}", a) for a in stored)
    everything = json.dumps(
        [
            list(Question.objects.values_list("metadata", flat=True)),
            list(PriorAnnotation.objects.values_list("raw", flat=True)),
            list(CandidateAnswer.objects.values_list("metadata", flat=True)),
        ]
    )
    assert not any(i in everything for i in ids)
    assert notes()["validator_is_question_author"] == 120
    for record in records:
        [(system, answer)] = record["answers"].items()
        prior = PriorAnnotation.objects.get(
            candidate__key=system, candidate__text=answer["answer_string"]
        )
        assert prior.answer_label is None and prior.origin == "human"
        assert prior.raw["usefulness"] == answer["usefulness"]
        assert prior.raw["annotation_time"] == answer["annotation_time"]
        assert prior.raw["revised_answer_string"] == answer["revised_answer_string"]
    differ = sum(
        a["revised_answer_string"] != a["answer_string"]
        for r in records
        for a in r["answers"].values()
    )
    assert differ == 118


@pytest.mark.django_db
def test_policy_is_source_relative_with_declared_mapping(shared_data):
    import_file(shared_data)
    policy = LabelPolicy.objects.get(project__slug="eq")
    assert policy.evidence_relation == "source_relative"
    assert "Partial, Incomplete" in policy.guideline and "not_found" in policy.guideline


# -- synthetic ------------------------------------------------------------------------------


def claim(text: str, support: Any = "Complete", evidence: list[str] | None = None, **extra):
    return {
        "claim_string": text,
        "evidence": evidence if evidence is not None else ["[1] https://a.org\n\nPassage A."],
        "support": support,
        "reason_missing_support": "",
        "informativeness": "Very relevant",
        "worthiness": "Yes",
        "correctness": "Definitely correct",
        "reliability": "Reliable",
        "revised_claim": "",
        "revised_evidence": "",
        **extra,
    }


def record(claims: list[dict], **answer_extra: Any) -> dict:
    answer = {
        "answer_string": "It is blue [1]. It is round [2].",
        "attribution": ["[1] https://a.org"],
        "claims": claims,
        "revised_answer_string": "It is blue.",
        "usefulness": "Useful",
        "annotation_time": 63953,
        "annotator_id": "expert-1",
        **answer_extra,
    }
    return {
        "question": "What  colour is it\u2019s sky?",
        "annotator_id": "expert-1",
        "answers": {"sys_a": answer},
        "metadata": {"question_type": "A|B", "field": "Science", "specific_field": "Physics"},
    }


def read(*records: dict | bytes) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    data = b"".join(
        (r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records
    )
    source = expertqa.FORMAT.open(io.BytesIO(data), "x.jsonl")
    return list(source), source.notes()


def test_record_maps_question_sources_candidate_and_claims():
    claims = [
        claim(
            "It is blue [1].",
            evidence=["[1] https://a.org\n\nPassage A.", "[2] https://a.org\n\nPassage B."],
        ),
        claim("It is round", "Partial", ["[3] https://a.org\n\nPassage A."]),
    ]
    [(location, native)], counters = read(record(claims))
    assert location == "line 1"
    assert (
        native["external_id"]
        == "expertqa:" + hashlib.sha256("What  colour is it\u2019s sky?".encode()).hexdigest()[:16]
    )
    assert native["text"] == "What  colour is it\u2019s sky?"
    assert native["slices"] == {
        "question_type": "A|B",
        "field": "Science",
        "specific_field": "Physics",
    }
    key_a = hashlib.sha256(b"https://a.org\n\nPassage A.").hexdigest()[:16]
    key_b = hashlib.sha256(b"https://a.org\n\nPassage B.").hexdigest()[:16]
    assert native["sources"] == [
        {"id": f"expertqa:{key_a}", "text": "Passage A.", "uri": "https://a.org", "rank": 1},
        {"id": f"expertqa:{key_b}", "text": "Passage B.", "uri": "https://a.org", "rank": 2},
    ]
    [candidate] = native["candidates"]
    assert (candidate["id"], candidate["generator"]) == ("sys_a", "sys_a")
    assert candidate["claims"] == [{"text": "It is blue [1]."}, {"text": "It is round"}]
    [prior] = candidate["prior_annotations"]
    assert prior["annotator"] == expertqa.pseudonym("expert-1")
    assert prior["answer_label"] is None
    first, second = prior["claim_labels"]
    assert (first["label"], first["raw_label"]) == ("supported", "Complete")
    assert [e["source"] for e in first["evidence"]] == [f"expertqa:{key_a}", f"expertqa:{key_b}"]
    assert first["evidence"][0] == {
        "source": f"expertqa:{key_a}",
        "start": 0,
        "end": 10,
        "quote": "Passage A.",
    }
    assert (second["label"], second["raw_label"]) == ("not_supported", "Partial")
    assert counters["unanchored_claims"] == 0


@pytest.mark.parametrize(
    ("support", "evidence", "label", "reason"),
    [
        ("Complete", None, "supported", None),
        ("Partial", None, "not_supported", None),
        ("Incomplete", None, "not_supported", None),
        ("Missing", [], "not_supported", None),
        ("N/A", None, None, None),
        (None, None, None, None),
        (
            "Complete",
            ["[1] https://a.org", "[2] https://b.org"],
            "evidence_unavailable",
            "not_found",
        ),
        ("Missing", ["[1] https://a.org"], "evidence_unavailable", "not_found"),
        ("N/A", ["[1] https://a.org"], "evidence_unavailable", "not_found"),
        ("Complete", [], "evidence_unavailable", "not_found"),
        ("Complete", ["[1] https://a.org\n\n  "], "evidence_unavailable", "not_found"),
    ],
)
def test_support_mapping(support, evidence, label, reason):
    [(_, native)], counters = read(record([claim("It is blue", support, evidence)]))
    [got] = native["candidates"][0]["prior_annotations"][0]["claim_labels"]
    assert got["label"] == label
    assert got.get("reason") == reason
    assert got["raw_label"] == support
    assert ("evidence" in got) == (label in ("supported", "not_supported"))
    assert counters["support_values"] == {str(support): 1}


def test_mixed_evidence_cites_only_passages_and_counts():
    evidence = ["[1] https://a.org", "[2] https://b.org\n\nB text"]
    [(_, native)], counters = read(record([claim("x", "Complete", evidence)]))
    [got] = native["candidates"][0]["prior_annotations"][0]["claim_labels"]
    assert got["label"] == "supported" and len(got["evidence"]) == 1
    assert counters["claims_with_mixed_evidence"] == 1
    assert counters["url_only_evidence_items"] == 1


def test_counters_for_unanchored_claims_variants_and_astral_text():
    claims = [
        claim(" It is blue [1]."),
        claim("It is round", source_reliability="x", revised_claim_string="y"),
        claim("\U0001f551 late", "Missing", []),
    ]
    [(_, native)], counters = read(record(claims))
    assert counters["unanchored_claims"] == 2
    assert counters["schema_variant_claims"] == 1
    assert counters["claims_with_no_evidence"] == 1
    assert counters["records_with_astral_characters"] == 1
    raw = native["candidates"][0]["prior_annotations"][0]["raw"]["claims"]
    assert raw[1]["source_reliability"] == "x" and "source_reliability" not in raw[0]


@pytest.mark.django_db
def test_synthetic_record_imports_with_unanchored_claims_and_reimports_unchanged(project):
    claims = [claim(" It is blue [1]."), claim("It is round", "Incomplete")]
    data = json.dumps(record(claims)).encode() + b"\n"

    def run(sha: str):
        source = expertqa.FORMAT.open(io.BytesIO(data), "x.jsonl")
        return workload_import(
            project=project,
            records=source,
            format="expertqa",
            filename="x.jsonl",
            file_sha256=sha,
            notes=source.notes,
        )

    result = run("a" * 64)
    assert result.created["unanchored_claims"] == 1 == result.notes["unanchored_claims"]
    claims_rows = list(Claim.objects.order_by("index"))
    assert claims_rows[0].unanchored and claims_rows[0].start is None
    assert (claims_rows[1].start, claims_rows[1].end) == (16, 27)
    before = row_counts()
    assert run("b" * 64).created == {}
    assert row_counts() == before


@pytest.mark.parametrize(
    ("mutate", "field", "reason_part"),
    [
        (lambda r: r["answers"].update(other={}), "answers", "exactly one system key, got 2 keys"),
        (lambda r: r.update(answers={}), "answers", "got 0 keys"),
        (lambda r: r.update(answers=[]), "answers", "got list"),
        (lambda r: r.pop("question"), "question", "missing"),
        (
            lambda r: r["answers"]["sys_a"]["claims"][0].update(support="Maybe"),
            "answers.sys_a.claims[0].support",
            "unknown support value 'Maybe'",
        ),
        (
            lambda r: r["answers"]["sys_a"]["claims"][0].update(support=["Complete"]),
            "answers.sys_a.claims[0].support",
            "unknown support value",
        ),
        (
            lambda r: r["answers"]["sys_a"]["claims"][0].update(evidence=["https://a.org"]),
            "answers.sys_a.claims[0].evidence[0]",
            '"[n] URL"',
        ),
        (
            lambda r: r["answers"]["sys_a"]["claims"][0].update(evidence=None),
            "answers.sys_a.claims[0].evidence",
            "expected a list",
        ),
        (
            lambda r: r["answers"]["sys_a"]["claims"][0].update(claim_string=""),
            "answers.sys_a.claims[0].claim_string",
            "empty claim",
        ),
        (
            lambda r: r["answers"]["sys_a"].pop("annotator_id"),
            "answers.sys_a.annotator_id",
            "missing",
        ),
        (lambda r: r["metadata"].update(field=3), "metadata.field", "expected str or null"),
    ],
)
def test_wrong_shape_gives_error_naming_line_and_field(mutate, field, reason_part):
    bad = record([claim("It is blue")])
    mutate(bad)
    records, _ = read(record([claim("ok")]), bad)
    assert not isinstance(records[0][1], RecordError)
    location, error = records[1]
    assert isinstance(error, RecordError)
    assert (location, error.location, error.field) == ("line 2", "line 2", field)
    assert reason_part in error.reason


def test_broken_json_line_gives_error():
    records, _ = read(b"{oops")
    [(location, error)] = records
    assert location == "line 1" and isinstance(error, RecordError)
    assert error.reason.startswith("invalid JSON")


def test_null_metadata_slice_is_omitted():
    bad = record([claim("It is blue")])
    bad["metadata"]["field"] = None
    [(_, native)], _ = read(bad)
    assert native["slices"] == {"question_type": "A|B", "specific_field": "Physics"}
