"""workload_import on the native format: atomic, idempotent, exact texts, clear errors."""

from __future__ import annotations

import copy
import hashlib
import io
import json

import pytest
from django.db import connection

from labeling.exceptions import WorkloadImportFailed
from labeling.importers.native import read_jsonl
from labeling.importers.schema import CandidateIn
from labeling.models import (
    CandidateAnswer,
    Claim,
    EvaluatorLabel,
    ImportBatch,
    Item,
    PriorAnnotation,
    PriorEvidence,
    Question,
    SourceDocument,
    SourceVersion,
)
from labeling.services import workload_import
from labeling.services.imports import fingerprint, frequency_ranks
from labeling.services.imports import service as import_service
from tests.conftest import jsonl_bytes, native_record, row_counts
from tests.factories import start_labelling

pytestmark = pytest.mark.django_db


def import_bytes(project, data: bytes, sha: str | None = None):
    return workload_import(
        project=project,
        records=read_jsonl(io.BytesIO(data)),
        format="native",
        filename="x.jsonl",
        file_sha256=sha or fingerprint(data.hex()),
    )


def refused(project, data: bytes) -> list[tuple[str, str, str]]:
    before = row_counts()
    with pytest.raises(WorkloadImportFailed) as info:
        import_bytes(project, data)
    assert row_counts() == before, "a refused import must write nothing"
    return [(e.location, e.field, e.reason) for e in info.value.errors]


# -- happy path -----------------------------------------------------------------------------


def test_imports_question_with_sources_candidates_claims_and_items(project, import_records):
    # given a record with one source, two candidates, one of them with two claims
    result = import_records([native_record()])

    # then every row exists and claims are anchored at code-point offsets
    assert result.created == {
        "candidates": 2,
        "claims": 2,
        "items": 2,
        "questions": 1,
        "retrieval_links": 1,
        "source_documents": 1,
        "source_versions": 1,
    }
    claims = list(Claim.objects.order_by("index").values_list("start", "end", "unanchored"))
    assert claims == [(0, 18, False), (19, 40, False)]
    version = SourceVersion.objects.get()
    assert version.length == len(version.text)
    assert version.sha256 == hashlib.sha256(version.text.encode("utf-8")).hexdigest()


def test_frequency_rank_computed_from_canonical_forms_with_declared_tie_rule():
    # given forms b, a, a, b, c, none: a and b tie on count 2, b is first seen (index 0)
    forms = ["b", "a", "a", "b", "c", None]
    candidates = [CandidateIn(id=f"c{i}", text="t", canonical_form=f) for i, f in enumerate(forms)]
    assert frequency_ranks(candidates) == [1, 2, 2, 1, 3, None]


def test_frequency_rank_given_in_record_is_kept(project, import_records):
    record = native_record()
    record["candidates"][1]["frequency_rank"] = 7
    import_records([record])
    assert CandidateAnswer.objects.get(key="c1").frequency_rank == 7
    assert CandidateAnswer.objects.get(key="c0").frequency_rank == 1


def test_texts_stored_exactly_emoji_combining_marks_crlf_and_leading_space(project, import_records):
    # given texts with an astral emoji, a decomposed combining mark, CRLF and surrounding spaces
    source_text = " Cafe\u0301 \U0001f551 opened\r\nin 1932.  "
    answer = " \U0001f551 Cafe\u0301 opened in 1932.\r\n"
    record = native_record(
        sources=[{"id": "d", "text": source_text}],
        candidates=[
            {
                "id": "c0",
                "text": answer,
                # the claim starts after the emoji: code point 3, not UTF-16 unit 4
                "claims": [{"text": "Cafe\u0301 opened", "start": 3, "end": 15}],
                "prior_annotations": [
                    {
                        "annotator": "p1",
                        "claim_labels": [
                            {
                                "claim": 0,
                                "label": "supported",
                                "evidence": [
                                    {
                                        "source": "d",
                                        "start": 1,
                                        "end": 8,
                                        "quote": "Cafe\u0301 \U0001f551",
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        ],
    )
    import_records([record])

    # then nothing was stripped or normalised
    assert SourceVersion.objects.get().text == source_text
    assert CandidateAnswer.objects.get().text == answer
    claim = Claim.objects.get()
    assert answer[claim.start : claim.end] == "Cafe\u0301 opened"
    assert PriorEvidence.objects.get().quote == "Cafe\u0301 \U0001f551"


def test_unanchored_claim_kept_and_flagged(project, import_records):
    record = native_record()
    record["candidates"][0]["claims"].append({"text": "It is made of steel."})
    result = import_records([record])
    claim = Claim.objects.get(index=2)
    assert (claim.unanchored, claim.start, claim.end) == (True, None, None)
    assert result.created["unanchored_claims"] == 1


def test_claim_located_after_previous_claim_when_text_repeats(project, import_records):
    record = native_record(
        candidates=[
            {"id": "c0", "text": "Yes. No. Yes.", "claims": [{"text": "No."}, {"text": "Yes."}]}
        ]
    )
    import_records([record])
    assert list(Claim.objects.order_by("index").values_list("start", "end")) == [(5, 8), (9, 13)]


def test_evaluator_labels_unavailable_is_not_a_verdict(project, import_records):
    record = native_record()
    record["candidates"][0]["evaluator_labels"] = [
        {"evaluator": "judge", "version": "v1", "label": "admissible", "score": 0.9},
        {"evaluator": "judge", "version": "v1", "claim": 1, "label": "contradicted"},
        {"evaluator": "nli", "version": "2024", "available": False},
    ]
    import_records([record])
    unavailable = EvaluatorLabel.objects.get(evaluator__name="nli")
    assert (unavailable.available, unavailable.label, unavailable.score) == (False, None, None)
    assert EvaluatorLabel.objects.get(claim__index=1).label == "contradicted"


# -- idempotency and versions ----------------------------------------------------------------


def test_reimporting_the_same_file_changes_no_row(project):
    data = jsonl_bytes([native_record("q1"), native_record("q2")])
    first = import_bytes(project, data, sha="a" * 64)
    before = row_counts()
    again = import_bytes(project, data, sha="a" * 64)
    assert again.already_imported and again.batch == first.batch
    assert row_counts() == before


def test_reimporting_same_records_from_another_file_changes_no_row(project):
    import_bytes(project, jsonl_bytes([native_record("q1"), native_record("q2")]))
    before = row_counts()
    # same content, different order and an extra blank line: a different file
    result = import_bytes(project, b"\n" + jsonl_bytes([native_record("q2"), native_record("q1")]))
    assert result.batch is None and result.created == {}
    assert row_counts() == before


def test_changed_source_text_becomes_new_version_never_an_edit(project, import_records):
    import_records([native_record("q1")])
    old = SourceVersion.objects.get()
    changed = native_record("q2")
    changed["sources"][0] = {"id": "doc-q1", "text": "The bridge opened in 1933."}
    import_records([changed])

    assert SourceDocument.objects.count() == 1
    versions = SourceVersion.objects.order_by("pk")
    assert versions.count() == 2
    assert versions[0].text == old.text and versions[0].sha256 == old.sha256
    assert versions[1].text == "The bridge opened in 1933."


def test_existing_question_gains_a_new_source_version_and_evaluator_labels(project, import_records):
    import_records([native_record("q1")])
    record = native_record("q1")
    record["sources"].append({"id": "doc-new", "text": "Opened 1932."})
    record["candidates"][1]["evaluator_labels"] = [
        {"evaluator": "j", "version": "1", "label": "inadmissible"}
    ]
    result = import_records([record])
    assert result.created == {
        "evaluator_labels": 1,
        "evaluators": 1,
        "retrieval_links": 1,
        "source_documents": 1,
        "source_versions": 1,
    }
    assert Question.objects.get().retrievals.count() == 2


def test_duplicate_question_in_one_file_is_imported_once(project, import_records):
    result = import_records([native_record("q1"), native_record("q1")])
    assert result.created["questions"] == 1 and CandidateAnswer.objects.count() == 2


def test_source_version_text_cannot_be_updated_in_the_database(project, import_records):
    from django.db import DatabaseError, transaction

    import_records([native_record()])
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        SourceVersion.objects.update(text="tampered")
    assert SourceVersion.objects.get().text.startswith("The bridge opened in 1932")


# -- refusals: line, field, reason, nothing written -------------------------------------------


def test_broken_json_refused_with_line(project):
    data = jsonl_bytes([native_record("q1")]) + b'{"external_id": "q2", "text": \n'
    assert refused(project, data) == [
        ("line 2", "(line)", "invalid JSON: Expecting value at column 31")
    ]


def test_missing_required_field_refused(project):
    record = native_record("q2")
    del record["text"]
    errors = refused(project, jsonl_bytes([native_record("q1"), record]))
    assert errors == [("line 2", "text", "Field required")]


def test_span_past_the_end_refused(project):
    record = native_record()
    record["candidates"][0]["claims"][0] = {"text": "It opened in 1932.", "start": 30, "end": 99}
    [(location, field, reason)] = refused(project, jsonl_bytes([record]))
    assert (location, field) == ("line 1", "candidates[0].claims[0]")
    assert reason == "span end 99 is past the end of the answer (40 code points)"


def test_quote_mismatch_refused_without_echoing_the_record(project):
    record = native_record()
    record["candidates"][0]["prior_annotations"] = [
        {
            "annotator": "p",
            "claim_labels": [
                {
                    "claim": 0,
                    "label": "supported",
                    "evidence": [
                        {"source": "doc-q1", "start": 0, "end": 10, "quote": "The bridgE"}
                    ],
                }
            ],
        }
    ]
    [(location, field, reason)] = refused(project, jsonl_bytes([record]))
    assert field == "candidates[0].prior_annotations[0].claim_labels[0].evidence[0]"
    assert reason == (
        "quote 'The bridgE' differs from the text of source 'doc-q1' at [0:10], "
        "which is 'The bridge'"
    )
    assert "harbour" not in reason  # the record is never echoed


def test_quote_offsets_in_utf16_units_are_refused(project):
    # a browser would count the emoji as 2 units; code points count it as 1
    record = native_record(
        sources=[{"id": "d", "text": "\U0001f551 at noon"}],
        candidates=[
            {
                "id": "c0",
                "text": "noon",
                "prior_annotations": [
                    {
                        "annotator": "p",
                        "spans": [
                            {
                                "start": 0,
                                "end": 4,
                                "quote": "noon",
                                "evidence": {"source": "d", "start": 6, "end": 10, "quote": "noon"},
                            }
                        ],
                    }
                ],
            }
        ],
    )
    [(_, field, reason)] = refused(project, jsonl_bytes([record]))
    assert field == "candidates[0].prior_annotations[0].spans[0].evidence"
    assert reason == "span end 10 is past the end of the text of source 'd' (9 code points)"


def test_duplicate_external_id_with_different_text_refused(project):
    other = native_record("q1", text="Another question?")
    errors = refused(project, jsonl_bytes([native_record("q1"), other]))
    assert errors == [
        (
            "line 2",
            "text",
            "question 'q1' was imported before (earlier in this file or in an earlier import) "
            "with a different text; questions are immutable (use a new external_id)",
        )
    ]


def test_duplicate_external_id_against_stored_question_refused(project, import_records):
    import_records([native_record("q1")])
    errors = refused(project, jsonl_bytes([native_record("q1", text="Changed?")]))
    assert errors[0][:2] == ("line 1", "text")


def test_changed_candidate_refused(project, import_records):
    import_records([native_record("q1")])
    record = native_record("q1")
    record["candidates"][1]["text"] = "1930."
    [(_, field, reason)] = refused(project, jsonl_bytes([record]))
    assert field == "candidates[1]" and "immutable" in reason


def test_changed_evaluator_verdict_refused_as_new_version_needed(project, import_records):
    record = native_record()
    record["candidates"][0]["evaluator_labels"] = [
        {"evaluator": "j", "version": "1", "label": "admissible"}
    ]
    import_records([record])
    changed = copy.deepcopy(record)
    changed["candidates"][0]["evaluator_labels"][0]["label"] = "inadmissible"
    [(_, field, reason)] = refused(project, jsonl_bytes([changed]))
    assert field == "candidates[0].evaluator_labels[0]" and "new evaluator version" in reason


@pytest.mark.parametrize(
    ("mutate", "field", "reason_part"),
    [
        (lambda r: r.update(external_id=5), "external_id", "Input should be a valid string"),
        (
            lambda r: r["candidates"][0].update(confidence=1.5),
            "candidates[0].confidence",
            "less than or equal to 1",
        ),
        (
            lambda r: r["candidates"][0].update(sample_index="1"),
            "candidates[0].sample_index",
            "valid integer",
        ),
        (lambda r: r.update(colour="red"), "colour", "Extra inputs are not permitted"),
        (lambda r: r.update(candidates=[]), "candidates", "at least 1 item"),
        (
            lambda r: r["sources"][0].update(observed_at="2024-01-01T00:00:00"),
            "sources[0].observed_at",
            "timezone info",
        ),
        (
            lambda r: r["sources"][0].update(published_at="yesterday"),
            "sources[0].published_at",
            "ISO 8601",
        ),
        (lambda r: r["candidates"][1].update(id="c0"), "candidates[1].id", "repeats"),
        (
            lambda r: r["candidates"][0]["claims"][0].update(end=None),
            "candidates[0].claims[0]",
            "both start and end",
        ),
        (lambda r: r["candidates"][0].update(text="bad \x00 nul"), "candidates[0].text", "NUL"),
        (lambda r: r.update(text="lone \ud83d surrogate"), "text", "lone surrogate U+D83D"),
        (
            lambda r: r["candidates"][0].update(
                evaluator_labels=[{"evaluator": "j", "version": "1", "label": "great"}]
            ),
            "candidates[0].evaluator_labels[0].label",
            "is not one of",
        ),
        (
            lambda r: r["candidates"][0].update(
                evaluator_labels=[{"evaluator": "j", "version": "1"}]
            ),
            "candidates[0].evaluator_labels[0]",
            "give a label or a score",
        ),
        (
            lambda r: r["candidates"][0].update(
                prior_annotations=[
                    {"annotator": "p", "claim_labels": [{"claim": 9, "label": "supported"}]}
                ]
            ),
            "candidates[0].prior_annotations[0].claim_labels[0].claim",
            "claim index 9 but 2 claims",
        ),
        (
            lambda r: r["candidates"][0].update(
                prior_annotations=[
                    {
                        "annotator": "p",
                        "claim_labels": [
                            {
                                "claim": 0,
                                "label": "supported",
                                "evidence": [
                                    {"source": "nope", "start": 0, "end": 1, "quote": "T"}
                                ],
                            }
                        ],
                    }
                ]
            ),
            "candidates[0].prior_annotations[0].claim_labels[0].evidence[0].source",
            "unknown source 'nope'",
        ),
    ],
)
def test_invalid_field_refused_with_its_path(project, mutate, field, reason_part):
    record = native_record()
    mutate(record)
    [(location, got_field, reason)] = refused(project, jsonl_bytes([record]))
    assert (location, got_field) == ("line 1", field)
    assert reason_part in reason


def test_strict_json_refuses_nan_duplicate_keys_non_objects_and_bad_utf8(project):
    good = jsonl_bytes([native_record("q1")])
    data = (
        good
        + b'{"external_id": "q2", "external_id": "q3"}\n'
        + b"[1, 2]\n"
        + b'{"external_id": NaN}\n'
        + b'{"external_id": "\xff"}\n'
    )
    errors = refused(project, data)
    assert [(loc, reason) for loc, _, reason in errors] == [
        ("line 2", "invalid JSON: duplicate key 'external_id'"),
        ("line 3", "expected a JSON object, got list"),
        ("line 4", "invalid JSON: NaN is not valid JSON"),
        ("line 5", "not valid UTF-8 at byte 17"),
    ]


def test_errors_after_the_first_are_all_reported_up_to_the_cap(project):
    lines = b"".join(b"{broken\n" for _ in range(50))
    errors = refused(project, lines)
    assert len(errors) == 20 and errors[0][0] == "line 1" and errors[-1][0] == "line 20"


def test_an_error_late_in_the_file_rolls_back_earlier_chunks(project):
    # given 1,200 valid records (three chunks) and one invalid record at the end
    records = [native_record(f"q{i}") for i in range(1200)]
    bad = native_record("bad")
    bad["candidates"][0]["claims"][0]["end"] = 999
    errors = refused(project, jsonl_bytes([*records, bad]))
    assert errors[0][0] == "line 1201"
    assert Question.objects.count() == 0 and ImportBatch.objects.count() == 0


def test_source_dates_parsed_from_iso_strings_with_offset(project, import_records):
    record = native_record()
    record["sources"][0].update(
        published_at="2024-03-01T10:00:00+02:00", observed_at="2024-05-01T00:00:00Z"
    )
    import_records([record])
    version = SourceVersion.objects.get()
    assert version.published_at.isoformat() == "2024-03-01T08:00:00+00:00"
    assert version.observed_at.isoformat() == "2024-05-01T00:00:00+00:00"


def test_bom_and_crlf_line_endings_accepted(project):
    data = b"\xef\xbb\xbf" + json.dumps(native_record()).encode() + b"\r\n"
    result = import_bytes(project, data)
    assert result.created["questions"] == 1


def test_new_question_refused_after_partition_frozen(project, import_records):
    from labeling.services import partition_freeze

    import_records([native_record("q1")])
    partition_freeze(
        project=project, proportions={"dev": 0, "calibration": 0.5, "test": 0.5}, seed=1
    )
    errors = refused(project, jsonl_bytes([native_record("q1"), native_record("q2")]))
    assert errors[0][:2] == ("line 2", "external_id") and "frozen" in errors[0][2]


def test_prior_annotations_from_two_annotators_and_rerun_is_idempotent(project, import_records):
    record = native_record()
    record["candidates"][0]["prior_annotations"] = [
        {"annotator": "a1", "answer_label": "admissible"},
        {"annotator": "a2", "answer_label": "inadmissible", "note": "wrong year"},
    ]
    import_records([record])
    assert PriorAnnotation.objects.count() == 2
    before = row_counts()
    import_records([record])
    assert row_counts() == before


def test_overlong_line_refused_without_parsing_it():
    # given a tiny limit, a line over it is skipped and reported; the next line is still read
    data = b'{"a": "' + b"x" * 3000 + b'"}\n' + jsonl_bytes([native_record("q1")])
    got = list(read_jsonl(io.BytesIO(data), max_line_bytes=1000))
    assert got[0][0] == "line 1" and got[0][1].reason == "longer than the limit of 1000 bytes"
    assert got[1][0] == "line 2" and got[1][1]["external_id"] == "q1"


def test_nul_or_lone_surrogate_anywhere_in_a_record_is_refused(project):
    record = native_record(metadata={"note": "a\udc00b"})
    [(location, field, reason)] = refused(project, jsonl_bytes([record]))
    assert (location, field) == ("line 1", "metadata.note")
    assert reason == "contains a lone surrogate U+DC00 at code point 1"
    record = native_record()
    record["candidates"][0]["generator"] = "gen\x00"
    [(_, field, reason)] = refused(project, jsonl_bytes([record]))
    assert field == "candidates[0].generator" and "NUL" in reason


def test_timestamps_must_be_strings_not_unix_times(project):
    record = native_record()
    record["sources"][0]["published_at"] = 1700000000
    [(_, field, reason)] = refused(project, jsonl_bytes([record]))
    assert field == "sources[0].published_at" and "ISO 8601 string" in reason


def test_same_numbers_written_differently_are_the_same_record(project, import_records):
    record = native_record(metadata={"x": 2})
    record["candidates"][0]["confidence"] = 1
    import_records([record])
    before = row_counts()
    again = copy.deepcopy(record)
    again["metadata"]["x"] = 2.0
    again["candidates"][0]["confidence"] = 1.0
    assert import_records([again]).created == {}
    assert row_counts() == before


def test_after_freeze_a_question_may_gain_a_new_version_but_not_a_new_document(
    project, import_records
):
    from labeling.services import partition_freeze

    import_records([native_record("q1"), native_record("q2")])
    partition_freeze(project=project, proportions={"calibration": 0.5, "test": 0.5}, seed=3)
    # a new version of a document q1 already cites is fine
    changed = native_record("q1")
    changed["sources"][0]["text"] = "The bridge opened in 1932 (revised)."
    assert import_records([changed]).created["source_versions"] == 1
    # citing q2's document would join the two questions' groups across partitions
    joined = native_record("q1")
    joined["sources"].append(native_record("q2")["sources"][0])
    [(location, field, reason)] = refused(project, jsonl_bytes([joined]))
    assert (location, field) == ("line 1", "sources[1].id")
    assert "did not cite when the partition was frozen" in reason


def test_out_of_range_number_refused(project):
    data = jsonl_bytes([native_record()]).replace(b'"score": 0.91', b'"score": 1e400')
    assert refused(project, data) == [
        ("line 1", "(line)", "invalid JSON: number 1e400 is out of range")
    ]


@pytest.mark.parametrize(
    ("mutate", "field", "reason_part"),
    [
        (
            lambda r: r["sources"][0].update(published_at="1700000000"),
            "sources[0].published_at",
            "ISO 8601",
        ),
        (
            lambda r: r["sources"][0].update(published_at="0001-01-01T00:00:00+01:00"),
            "sources[0].published_at",
            "outside the years 1 to 9999",
        ),
        (
            lambda r: r["candidates"][0].update(sample_index=2**31),
            "candidates[0].sample_index",
            "less than or equal",
        ),
        (lambda r: r["sources"][0].update(rank=2**31), "sources[0].rank", "less than or equal"),
        (
            lambda r: r["candidates"][0].update(acceptance_score=10**400),
            "candidates[0].acceptance_score",
            "finite",
        ),
    ],
)
def test_values_the_database_cannot_hold_are_refused(project, mutate, field, reason_part):
    record = native_record()
    mutate(record)
    [(location, got_field, reason)] = refused(project, jsonl_bytes([record]))
    assert (location, got_field) == ("line 1", field)
    assert reason_part in reason


def test_timestamps_are_stored_in_utc_whatever_the_offset(project, import_records):
    record = native_record()
    record["sources"][0]["published_at"] = "2024-01-01T00:00:00+23:59"
    import_records([record])
    assert SourceVersion.objects.get().published_at.isoformat() == "2023-12-31T00:01:00+00:00"


def test_deeply_nested_json_refused_cleanly(project):
    deep = b'{"external_id": "q", "metadata": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n"
    [(location, field, reason)] = refused(project, deep)
    assert (location, field, reason) == ("line 1", "(line)", "JSON nested too deeply")


def test_field_path_escapes_an_unprintable_key(project):
    record = native_record(metadata={"k\udc00\n": 1})
    [(_, field, reason)] = refused(project, jsonl_bytes([record]))
    assert field == "metadata.k\\udc00\\n"
    assert "lone surrogate" in reason
    field.encode("utf-8")  # an error can always be rendered


def test_undecodable_file_name_is_stored_readably(project):
    data = jsonl_bytes([native_record()])
    result = workload_import(
        project=project,
        records=read_jsonl(io.BytesIO(data)),
        format="native",
        filename="bad\udcffname.jsonl",
        file_sha256="f" * 64,
    )
    assert result.batch.filename == "bad?name.jsonl"


def test_pinned_source_metadata_and_retrieval_rank_cannot_change_silently(project, import_records):
    import_records([native_record("q1")])
    moved = native_record("q1")
    moved["sources"][0]["uri"] = "https://example.org/elsewhere"
    [(_, field, reason)] = refused(project, jsonl_bytes([moved]))
    assert field == "sources[0].uri" and "pinned with its text" in reason
    reranked = native_record("q1")
    reranked["sources"][0]["rank"] = 7
    [(_, field, reason)] = refused(project, jsonl_bytes([reranked]))
    assert field == "sources[0]" and "different rank or score" in reason


def test_a_new_prior_annotation_is_refused_once_labelling_started(project, import_records):
    # given a workload imported and labelling started (prior votes are counted at the start)
    import_records([native_record("q1")])
    start_labelling(project)
    before = row_counts()
    # when a re-import brings a prior annotation for an existing candidate
    record = native_record("q1")
    record["candidates"][0]["prior_annotations"] = [
        {"annotator": "late", "answer_label": "admissible"}
    ]
    with pytest.raises(WorkloadImportFailed) as refused:
        import_records([record])
    # then nothing is written and the error names the record and field
    assert row_counts() == before
    error = refused.value.errors[0]
    assert error.field == "candidates[0].prior_annotations[0]"
    assert "labelling has started" in error.reason


def test_items_imported_after_labelling_started_join_the_end_of_the_queue(project, import_records):
    # given labelling started with overlap 3 on one question (no partition frozen)
    import_records([native_record("q1")])
    start_labelling(project, overlap=3)
    last = max(Item.objects.filter(project=project).values_list("queue_position", flat=True))
    # when a new question is imported
    import_records([native_record("q2")])
    # then its items take the project's overlap and are served after every earlier item
    new = Item.objects.filter(project=project, candidate__question__external_id="q2")
    assert new.count() == 2
    assert {item.overlap for item in new} == {3}
    assert min(item.queue_position for item in new) > last


@pytest.mark.parametrize("annotator", ["alice@example.com", "Alice Smith"])
def test_an_annotator_that_is_not_a_pseudonym_is_refused(project, annotator):
    # An e-mail address or a name would be republished in every release of the project.
    record = native_record()
    record["candidates"][0]["prior_annotations"] = [
        {"annotator": annotator, "answer_label": "admissible"}
    ]

    errors = refused(project, jsonl_bytes([record]))

    assert [(field, "pattern" in reason or "match" in reason) for _, field, reason in errors] == [
        ("candidates[0].prior_annotations[0].annotator", True)
    ]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner statistics")
def test_a_large_import_refreshes_the_statistics_of_its_tables_before_it_commits(
    project, monkeypatch
):
    # given an import large enough to refresh them (the threshold lowered for the test)
    monkeypatch.setattr(import_service, "ANALYZE_ROWS", 1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'labeling_question'")
        before = cursor.fetchone()[0]
    records = [native_record(f"q{i}") for i in range(30)]
    import_bytes(project, jsonl_bytes(records))
    # then the planner counts the rows the import wrote (inside its own transaction)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'labeling_question'")
        after = cursor.fetchone()[0]
    assert after >= 30 > before
