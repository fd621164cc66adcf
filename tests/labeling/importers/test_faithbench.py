"""FaithBench adapter: README counts, every quirk of the dataset, the declared mapping rules."""

from __future__ import annotations

import hashlib
import io
import json
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import pysbd
import pytest
from django.core.management import CommandError, call_command
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.exceptions import WorkloadImportFailed
from labeling.importers import faithbench
from labeling.importers.record_errors import RecordError
from labeling.models import (
    CandidateAnswer,
    Claim,
    Evaluator,
    EvaluatorLabel,
    ImportBatch,
    LabelPolicy,
    PriorAnnotation,
    PriorClaimLabel,
    PriorSpan,
    Project,
    Question,
    SourceDocument,
    SourceVersion,
)
from labeling.policy_presets import preset_get
from labeling.services import workload_import
from tests.conftest import row_counts

BATCHES = range(1, 9)


def batch_paths(shared_data: Path) -> list[Path]:
    return [shared_data / "faithbench" / "data_for_release" / f"batch_{b}.json" for b in BATCHES]


def load_samples(shared_data: Path) -> dict[int, list[dict[str, Any]]]:
    return {
        b: json.loads(path.read_text("utf-8"))["samples"]
        for b, path in zip(BATCHES, batch_paths(shared_data), strict=True)
    }


def import_all(shared_data: Path, slug: str = "fb") -> None:
    call_command(
        "import_workload",
        *batch_paths(shared_data),
        "--project",
        slug,
        "--create",
        "--format",
        "faithbench",
        "--no-progress",
        stdout=io.StringIO(),
    )


def candidate(batch: int, sample_id: int) -> CandidateAnswer:
    return CandidateAnswer.objects.get(key=f"b{batch}-s{sample_id}")


# -- shared data: README counts -------------------------------------------------------------


@pytest.mark.django_db
def test_batches_1_to_8_give_the_readme_counts(shared_data):
    # given the 8 release batches, imported through the real command into one project
    samples = load_samples(shared_data)
    import_all(shared_data)

    # then one question per source passage, one candidate and item per summary
    assert Question.objects.count() == 40
    assert CandidateAnswer.objects.count() == 400
    assert row_counts()["Item"] == 400
    # one pinned source version per passage, shared by its 10 summaries
    assert SourceDocument.objects.count() == 40
    assert SourceVersion.objects.count() == 40
    for question in Question.objects.all():
        assert question.candidates.count() == 10
        assert question.retrievals.count() == 1
        assert question.text == faithbench.TASK
        assert question.slices == {"task": "summarization"}
    # every flagged span kept, with its source span where the annotator linked one
    assert PriorSpan.objects.count() == 1102
    assert PriorSpan.objects.filter(evidence_source_version__isnull=False).count() == 433
    # every annotator of a batch labels every sample of that batch
    expected_priors = sum(
        len(batch) * len({a["annotator_id"] for s in batch for a in s["annotations"]})
        for batch in samples.values()
    )
    assert expected_priors == 1100
    assert PriorAnnotation.objects.count() == expected_priors
    # every claim of every summary gets a label from every batch annotator
    assert PriorClaimLabel.objects.count() == sum(
        Claim.objects.filter(candidate=c).count() * c.prior_annotations.count()
        for c in CandidateAnswer.objects.all()
    )
    # 8 detectors, one label each per summary; the unavailable ones are counted, not verdicts
    assert sorted(Evaluator.objects.values_list("name", flat=True)) == sorted(
        faithbench.BINARY_JUDGES + faithbench.SCORE_DETECTORS
    )
    assert set(Evaluator.objects.values_list("version", flat=True)) == {"faithbench-cf89797"}
    assert EvaluatorLabel.objects.count() == 400 * 8
    nulls = sum(
        1
        for batch in samples.values()
        for s in batch
        for name in faithbench.BINARY_JUDGES + faithbench.SCORE_DETECTORS
        if s["metadata"].get(name) is None
    )
    assert nulls == 0  # quirk 10: the two null true_nli samples are in held-out batches
    assert EvaluatorLabel.objects.filter(available=False).count() == nulls
    # the batch reports carry the adapter's counters
    notes = [b.report["notes"] for b in ImportBatch.objects.order_by("pk")]
    total = {key: sum(n[key] for n in notes) for key in notes[0]}
    assert total["samples"] == 400
    assert total["samples_without_annotations"] == 104
    assert total["spans_with_evidence"] == 433
    assert total["contradictory_label_sets"] == 31
    assert total["empty_label_lists"] == 2
    assert total["leading_whitespace_summaries"] == 80
    assert total["non_nfc_samples"] == 20
    assert total["evaluator_values_unavailable"] == nulls
    assert total["sentence_gaps_filled"] == 0
    # the declared mapping's outcome on this data (a change of rule shows up here)
    claim_labels = Counter(PriorClaimLabel.objects.values_list("label", flat=True))
    assert claim_labels == {"supported": 3231, "not_supported": 690, "contradicted": 302}
    answers = Counter(PriorAnnotation.objects.values_list("answer_label", flat=True))
    assert answers == {"admissible": 667, "inadmissible": 433}


@pytest.mark.django_db
def test_reimport_changes_no_row(shared_data):
    # given the 8 batches imported
    import_all(shared_data)
    before = row_counts()

    # when the same files are imported again through the command
    out = io.StringIO()
    call_command(
        "import_workload",
        *batch_paths(shared_data),
        "--project",
        "fb",
        "--format",
        "faithbench",
        "--no-progress",
        stdout=out,
    )
    assert out.getvalue().count("already imported") == 8
    # and the same records again as if from another file (compared row by row)
    project = Project.objects.get(slug="fb")
    for path in batch_paths(shared_data):
        with path.open("rb") as stream:
            source = faithbench.FORMAT.open(stream, path.name)
            result = workload_import(
                project=project,
                records=source,
                format="faithbench",
                filename=path.name,
                file_sha256="0" * 64,
            )
        assert result.batch is None and result.created == {}

    # then no row changed
    assert row_counts() == before


@pytest.mark.django_db
def test_policy_guideline_declares_task_and_mapping(shared_data):
    import_all(shared_data)
    policy = LabelPolicy.objects.get(project__slug="fb")
    assert policy.evidence_relation == "source_relative"
    assert faithbench.TASK in policy.guideline
    for rule in ("Unwanted.Intrinsic -> contradicted", "Benign", "most severe", "supported"):
        assert rule in policy.guideline


# -- shared data: quirks --------------------------------------------------------------------


@pytest.mark.django_db
def test_missing_annotation_means_nothing_flagged_by_every_batch_annotator(shared_data):
    # quirk 1: the 104 samples without annotations are labelled by every batch annotator
    samples = load_samples(shared_data)
    import_all(shared_data)
    empty = 0
    for b, batch in samples.items():
        annotators = {
            faithbench.pseudonym(a["annotator_id"]) for s in batch for a in s["annotations"]
        }
        for s in batch:
            priors = PriorAnnotation.objects.filter(candidate=candidate(b, s["sample_id"]))
            assert set(priors.values_list("annotator", flat=True)) == annotators
            if not s["annotations"]:
                empty += 1
                assert set(priors.values_list("answer_label", flat=True)) == {"admissible"}
                labels = PriorClaimLabel.objects.filter(prior_annotation__in=priors)
                assert set(labels.values_list("label", flat=True)) == {"supported"}
                assert not PriorSpan.objects.filter(prior_annotation__in=priors).exists()
    assert empty == 104


@pytest.mark.django_db
def test_annotators_are_pseudonymous_per_batch_and_names_never_stored(shared_data):
    # quirk 2: ids are per batch; names are real first names
    samples = load_samples(shared_data)
    import_all(shared_data)
    names = {a["annotator_name"] for b in samples.values() for s in b for a in s["annotations"]}
    ids = {a["annotator_id"] for b in samples.values() for s in b for a in s["annotations"]}
    stored = set(PriorAnnotation.objects.values_list("annotator", flat=True))
    assert stored == {faithbench.pseudonym(i) for i in ids}
    assert all(re.fullmatch(r"fb-[0-9a-f]{12}", a) for a in stored)
    assert faithbench.pseudonym("x") == "fb-" + hashlib.sha256(b"faithbench:x").hexdigest()[:12]
    raws = json.dumps(list(PriorAnnotation.objects.values_list("raw", flat=True)))
    for name in names:
        assert name not in stored and name not in raws
    assert not any(i in raws for i in ids)
    # annotator notes are stored verbatim; one of them addresses a colleague by first name
    notes = [b.report["notes"]["notes_naming_an_annotator"] for b in ImportBatch.objects.all()]
    assert sum(notes) == 1


@pytest.mark.django_db
def test_several_spans_of_one_annotator_in_one_sample_are_all_kept(shared_data):
    # quirk 3
    samples = load_samples(shared_data)
    import_all(shared_data)
    several = 0
    for b, batch in samples.items():
        for s in batch:
            per_annotator: dict[str, int] = {}
            for a in s["annotations"]:
                per_annotator[a["annotator_id"]] = per_annotator.get(a["annotator_id"], 0) + 1
            for annotator_id, n in per_annotator.items():
                prior = PriorAnnotation.objects.get(
                    candidate=candidate(b, s["sample_id"]),
                    annotator=faithbench.pseudonym(annotator_id),
                )
                assert prior.spans.count() == n
                several += n > 1
    assert several == 268
    total = sum(
        b.report["notes"]["annotator_samples_with_several_spans"] for b in ImportBatch.objects.all()
    )
    assert total == several


@pytest.mark.django_db
def test_contradictory_multi_labels_kept_raw_and_most_severe_wins(shared_data):
    # quirk 4: e.g. ["Questionable", "Unwanted", "Unwanted.Intrinsic"], ["Questionable", "Benign"]
    import_all(shared_data)
    mixed = [s for s in PriorSpan.objects.all() if faithbench.is_contradictory(s.labels)]
    assert len(mixed) == 31
    for span in mixed:
        labels = PriorClaimLabel.objects.filter(
            prior_annotation=span.prior_annotation,
            claim__start__lt=max(span.end, span.start + 1),
            claim__end__gt=span.start,
        )
        assert labels.exists()
        expected = "contradicted" if "Unwanted.Intrinsic" in span.labels else None
        for label in labels:
            assert span.labels in label.raw_label
            if expected:
                assert label.label == expected
            else:
                assert label.label in ("contradicted", "not_supported")
        if faithbench.UNWANTED.intersection(span.labels):
            assert span.prior_annotation.answer_label == "inadmissible"
    # a subtype without its parent, order as given
    assert PriorSpan.objects.filter(labels=["Questionable", "Unwanted.Intrinsic"]).count() == 2


@pytest.mark.django_db
def test_empty_label_lists_kept_as_spans_but_label_nothing(shared_data):
    # quirk 5: batch 3 sample 5 and batch 4 sample 36 carry label [] with a span (the README says
    # "and a note", but the note of batch 3 sample 5 is empty; batch 4 sample 36's note praises
    # the whole summary), so the declared rule keeps the span and lets it label nothing
    import_all(shared_data)
    spans = PriorSpan.objects.filter(labels=[])
    assert spans.count() == 2
    assert {s.prior_annotation.candidate.key for s in spans} == {"b3-s5", "b4-s36"}
    assert sorted(bool(s.note) for s in spans) == [False, True]
    for span in spans:
        labels = [
            label
            for label in PriorClaimLabel.objects.filter(prior_annotation=span.prior_annotation)
            if [] in label.raw_label
        ]
        assert labels
        for label in labels:
            # an empty list labels nothing: the claim keeps what its other spans say
            assert label.label == faithbench.claim_label(label.raw_label)
            if all(raw == [] for raw in label.raw_label):
                assert label.label == "supported"
        own = [s.labels for s in span.prior_annotation.spans.all()]
        assert span.prior_annotation.answer_label == faithbench.answer_label(own)


@pytest.mark.django_db
def test_leading_spaces_and_combining_marks_stored_unchanged_with_matching_offsets(shared_data):
    # quirks 6 and 7
    samples = load_samples(shared_data)
    import_all(shared_data)
    leading = combining = 0
    for b, batch in samples.items():
        for s in batch:
            row = candidate(b, s["sample_id"])
            assert row.text == s["summary"]
            source = SourceVersion.objects.get(
                document__key__endswith=faithbench.text_key(s["source"])
            )
            assert source.text == s["source"]
            assert source.length == len(s["source"])
            leading += s["summary"].startswith(" ")
            non_nfc = not all(
                unicodedata.is_normalized("NFC", t) for t in (s["summary"], s["source"])
            )
            combining += non_nfc
            for claim in row.claims.all():
                assert row.text[claim.start : claim.end] == claim.text
                assert claim.machine_split and not claim.unanchored
                assert claim.text == claim.text.strip()
            for span in PriorSpan.objects.filter(prior_annotation__candidate=row):
                assert row.text[span.start : span.end] == span.quote
                if span.evidence_source_version_id:
                    assert (
                        source.text[span.evidence_start : span.evidence_end] == span.evidence_quote
                    )
    assert leading == 80
    assert combining == 20
    # sample 0 of batch 1: the leading space is kept and the first sentence starts after it
    first = candidate(1, 0)
    assert first.text.startswith(" The film")
    assert first.claims.get(index=0).start == 1


@pytest.mark.django_db
def test_sample_id_is_unique_only_per_batch(shared_data):
    # quirk 8
    samples = load_samples(shared_data)
    import_all(shared_data)
    for b, batch in samples.items():
        for s in batch:
            row = candidate(b, s["sample_id"])
            assert row.metadata == {
                "batch": b,
                "sample_id": s["sample_id"],
                "raw_sample_id": s["metadata"]["raw_sample_id"],
            }
            assert row.generator == s["metadata"]["summarizer"]
    assert CandidateAnswer.objects.filter(key__endswith="-s0").count() == 8
    # sample index = position among the source's summaries, in file order
    for question in Question.objects.all():
        assert sorted(question.candidates.values_list("sample_index", flat=True)) == list(range(10))


@pytest.mark.django_db
def test_evaluator_polarity_and_scores(shared_data):
    # quirk 9: 1 = consistent -> admissible; HHEM scores are scores only
    samples = load_samples(shared_data)
    import_all(shared_data)
    flagged_but_consistent = 0
    flagged = 0
    for b, batch in samples.items():
        for s in batch:
            labels = {
                e.evaluator.name: e
                for e in EvaluatorLabel.objects.filter(candidate=candidate(b, s["sample_id"]))
            }
            for name in faithbench.BINARY_JUDGES:
                value = s["metadata"][name]
                assert labels[name].label == {1: "admissible", 0: "inadmissible"}[value]
                assert labels[name].raw == value and labels[name].score is None
            for name in faithbench.SCORE_DETECTORS:
                assert labels[name].label is None
                assert labels[name].score == pytest.approx(s["metadata"][name])
            if any(faithbench.UNWANTED.intersection(a["label"]) for a in s["annotations"]):
                flagged += 1
                flagged_but_consistent += labels["gpt_4o"].label == "admissible"
    # detectors were chosen to disagree with humans: most Unwanted samples pass gpt_4o
    assert flagged_but_consistent > flagged / 2


@pytest.mark.django_db
def test_legacy_raw_export_refused_with_one_clear_error(shared_data):
    # quirk 11: the older export (bare list, 'annotator', meta_*, 'Unwanted.Instrinsic')
    path = shared_data / "faithbench" / "annot" / "batch_1_annotation.json"
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 error"):
        call_command(
            "import_workload",
            path,
            "--project",
            "fb",
            "--create",
            "--format",
            "faithbench",
            "--no-progress",
            stderr=err,
        )
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1
    assert "older FaithBench raw annotation export" in lines[0]
    assert "data_for_release/batch_N.json" in lines[0]
    assert not Project.objects.exists() and Question.objects.count() == 0


@pytest.mark.django_db
def test_csv_export_refused_as_not_a_batch_file(shared_data):
    # quirk 12 concerns FaithBench.csv, which this adapter does not read: it says which file to
    # import instead, not "invalid JSON"
    path = shared_data / "faithbench" / "FaithBench.csv"
    with path.open("rb") as stream:
        records = list(faithbench.FORMAT.open(stream, path.name))
    assert len(records) == 1
    error = records[0][1]
    assert isinstance(error, RecordError) and error.location == "FaithBench.csv"
    assert "FaithBench.csv, the summary table" in error.reason
    assert "data_for_release/batch_N.json" in error.reason
    assert "invalid JSON" not in error.reason


# -- synthetic: mapping rules ----------------------------------------------------------------

SUMMARY = " First sentence here. Second one is this.  Third."
#          0123456789012345678901234567890123456789012345678
# claims:   [1, 21)               [22, 41)                [43, 49)


def annotation(annotator: str, labels: list[str], start: int, end: int, **extra: Any) -> dict:
    return {
        "annot_id": extra.pop("annot_id", 1),
        "annotator_id": annotator,
        "annotator_name": extra.pop("name", "Ada"),
        "label": labels,
        "note": extra.pop("note", "why"),
        "summary_span": SUMMARY[start:end],
        "summary_start": start,
        "summary_end": end,
        "source_span": extra.pop("source_span", None),
        "source_start": extra.pop("source_start", None),
        "source_end": extra.pop("source_end", None),
    }


def sample(sample_id: int, annotations: list[dict], **metadata: Any) -> dict:
    meta = {
        "summarizer": "org/model",
        "hhemv1": 0.5,
        "hhem-2.1": 0.25,
        "hhem-2.1-english": 1,
        "trueteacher": 1,
        "true_nli": 0,
        "gpt-3.5-turbo": 1,
        "gpt-4-turbo": 0,
        "gpt_4o": 1,
        "raw_sample_id": 100 + sample_id,
    }
    meta.update(metadata)
    return {
        "sample_id": sample_id,
        "source": "The source passage. It says things.",
        "summary": SUMMARY,
        "annotations": annotations,
        "metadata": meta,
    }


def read(document: Any, filename: str = "batch_9.json") -> tuple[list[tuple[str, Any]], dict]:
    data = json.dumps(document).encode() if not isinstance(document, bytes) else document
    source = faithbench.FORMAT.open(io.BytesIO(data), filename)
    records = list(source)
    return records, source.notes()


def prior(record: dict, candidate_index: int, annotator: str) -> dict:
    by = {p["annotator"]: p for p in record["candidates"][candidate_index]["prior_annotations"]}
    return by[faithbench.pseudonym(annotator)]


def test_sentences_are_code_point_spans_of_the_unchanged_text():
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    text = " Cafe\u0301 \U0001f551 opened. It closed in 1999.  \n"
    spans, filled = faithbench.split_sentences(text, segmenter)
    assert filled == 0
    assert [text[s:e] for s, e in spans] == ["Cafe\u0301 \U0001f551 opened.", "It closed in 1999."]
    assert spans[0] == (1, 16)
    assert faithbench.split_sentences("   ", segmenter) == ([], 0)
    assert faithbench.split_sentences("", segmenter) == ([], 0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            list("ab .!?()\"'\n\t:;-,1") + ["Mr. ", "e\u0301", "\U0001f551", "...", "U.S."]
        ),
        max_size=40,
    ).map("".join)
)
def test_sentences_cover_every_non_space_character_in_order(text):
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    spans, _ = faithbench.split_sentences(text, segmenter)
    covered = set()
    for start, end in spans:
        assert text[start:end] and text[start:end] == text[start:end].strip()
        covered.update(range(start, end))
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert all(ch.isspace() or i in covered for i, ch in enumerate(text))


def test_claims_split_and_anchored_with_trailing_whitespace_trimmed():
    records, _ = read({"samples": [sample(0, [])]})
    [(location, record)] = records
    assert location == "batch_9.json source 1 (samples 0)"
    claims = record["candidates"][0]["claims"]
    assert [(c["start"], c["end"]) for c in claims] == [(1, 21), (22, 41), (43, 49)]
    assert all(c["machine_split"] and SUMMARY[c["start"] : c["end"]] == c["text"] for c in claims)


def test_record_per_source_with_shared_source_and_keys():
    other = sample(7, [])
    other["source"] = "Another passage."
    records, _ = read({"samples": [sample(3, []), other, sample(5, [])]})
    assert len(records) == 2
    record = records[0][1]
    key = hashlib.sha256(b"The source passage. It says things.").hexdigest()[:16]
    assert record["external_id"] == f"faithbench:{key}" and record["group_key"] == key
    assert record["sources"] == [
        {"id": f"faithbench-source:{key}", "text": "The source passage. It says things."}
    ]
    assert [(c["id"], c["sample_index"]) for c in record["candidates"]] == [
        ("b9-s3", 0),
        ("b9-s5", 1),
    ]
    assert records[1][1]["candidates"][0]["id"] == "b9-s7"


@pytest.mark.parametrize(
    ("labels", "claim_label", "answer_label"),
    [
        (["Unwanted", "Unwanted.Intrinsic"], "contradicted", "inadmissible"),
        (["Unwanted", "Unwanted.Extrinsic"], "not_supported", "inadmissible"),
        (["Unwanted"], "not_supported", "inadmissible"),
        (["Unwanted.Intrinsic"], "contradicted", "inadmissible"),
        (["Questionable"], "not_supported", "admissible"),
        (["Benign"], "not_supported", "admissible"),
        ([], "supported", "admissible"),
        (["Benign", "Unwanted.Intrinsic"], "contradicted", "inadmissible"),
        (["Questionable", "Benign"], "not_supported", "admissible"),
        (["Unwanted", "Unwanted.Extrinsic", "Unwanted.Intrinsic"], "contradicted", "inadmissible"),
    ],
)
def test_label_mapping_most_severe_wins(labels, claim_label, answer_label):
    records, notes = read({"samples": [sample(0, [annotation("a1", labels, 7, 15)])]})
    record = records[0][1]
    got = prior(record, 0, "a1")
    assert [c["label"] for c in got["claim_labels"]] == [claim_label, "supported", "supported"]
    assert got["claim_labels"][0]["raw_label"] == [labels]
    assert got["claim_labels"][1]["raw_label"] == []
    assert "evidence" not in got["claim_labels"][0]
    assert got["answer_label"] == answer_label
    assert notes["empty_label_lists"] == (labels == [])
    assert notes["contradictory_label_sets"] == faithbench.is_contradictory(labels)


def test_contradictory_label_sets_counted():
    assert faithbench.is_contradictory(["Benign", "Unwanted.Intrinsic"])
    assert faithbench.is_contradictory(["Questionable", "Benign"])
    assert faithbench.is_contradictory(["Unwanted", "Unwanted.Extrinsic", "Unwanted.Intrinsic"])
    assert not faithbench.is_contradictory(["Unwanted", "Unwanted.Intrinsic"])
    assert not faithbench.is_contradictory(["Unwanted.Extrinsic"])
    assert not faithbench.is_contradictory([])


def test_span_over_two_claims_labels_both_and_zero_length_span_labels_one():
    spans = [
        annotation("a1", ["Unwanted", "Unwanted.Extrinsic"], 15, 30, annot_id=1),
        annotation("a2", ["Unwanted.Intrinsic"], 22, 22, annot_id=2),
        annotation("a2", ["Benign"], 21, 22, annot_id=3),  # whitespace between two claims
    ]
    records, notes = read({"samples": [sample(0, spans)]})
    record = records[0][1]
    a1 = prior(record, 0, "a1")
    assert [c["label"] for c in a1["claim_labels"]] == [
        "not_supported",
        "not_supported",
        "supported",
    ]
    a2 = prior(record, 0, "a2")
    # the zero-length span at 22 belongs to the claim [22, 41) only
    assert [c["label"] for c in a2["claim_labels"]] == ["supported", "contradicted", "supported"]
    assert len(a2["spans"]) == 2 and a2["raw"] == {"annot_ids": [2, 3]}
    assert notes["spans_outside_claims"] == 1
    assert notes["annotator_samples_with_several_spans"] == 1


def test_annotator_without_flags_gets_admissible_and_supported_on_every_sample():
    records, notes = read(
        {"samples": [sample(0, [annotation("a1", ["Unwanted"], 1, 6)]), sample(1, [])]}
    )
    record = records[0][1]
    for index in (0, 1):
        assert len(record["candidates"][index]["prior_annotations"]) == 1
    second = prior(record, 1, "a1")
    assert second["answer_label"] == "admissible" and second["spans"] == []
    assert {c["label"] for c in second["claim_labels"]} == {"supported"}
    assert notes["implicit_nothing_flagged"] == 1
    assert notes["samples_without_annotations"] == 1


def test_source_span_becomes_span_evidence_on_the_shared_source():
    span = annotation("a1", ["Benign"], 1, 6, source_span="source", source_start=4, source_end=10)
    records, _ = read({"samples": [sample(0, [span])]})
    record = records[0][1]
    [got] = prior(record, 0, "a1")["spans"]
    assert got["evidence"] == {
        "source": record["sources"][0]["id"],
        "start": 4,
        "end": 10,
        "quote": "source",
    }
    assert got["labels"] == ["Benign"] and got["quote"] == "First"


@pytest.mark.django_db
def test_null_judge_verdict_is_unavailable_not_a_verdict(project):
    document = {"samples": [sample(0, [], true_nli=None, hhemv1=None)]}
    records, notes = read(document)
    labels = {e["evaluator"]: e for e in records[0][1]["candidates"][0]["evaluator_labels"]}
    assert labels["true_nli"] == {
        "evaluator": "true_nli",
        "version": "faithbench-cf89797",
        "available": False,
        "raw": None,
    }
    assert labels["gpt_4o"]["label"] == "admissible" and labels["gpt_4o"]["raw"] == 1
    assert labels["gpt-4-turbo"]["label"] == "inadmissible"
    assert labels["hhem-2.1-english"]["score"] == 1 and "label" not in labels["hhem-2.1-english"]
    assert notes["evaluator_values_unavailable"] == 2

    # and the service stores it as unavailable, with no label and no score
    data = json.dumps(document).encode()
    workload_import(
        project=project,
        records=faithbench.FORMAT.open(io.BytesIO(data), "batch_9.json"),
        format="faithbench",
        filename="batch_9.json",
        file_sha256="f" * 64,
    )
    row = EvaluatorLabel.objects.get(evaluator__name="true_nli")
    assert (row.available, row.label, row.score, row.raw) == (False, None, None, None)
    assert EvaluatorLabel.objects.filter(available=True).count() == 6


@pytest.mark.django_db
def test_synthetic_batch_imports_and_reimports_without_change(project):
    spans = [
        annotation("a1", ["Unwanted", "Unwanted.Intrinsic"], 7, 15),
        annotation("a2", [], 1, 6),
    ]
    data = json.dumps({"samples": [sample(0, spans), sample(1, [])]}).encode()

    def run(sha: str):
        source = faithbench.FORMAT.open(io.BytesIO(data), "batch_9.json")
        return workload_import(
            project=project,
            records=source,
            format="faithbench",
            filename="batch_9.json",
            file_sha256=sha,
            notes=source.notes,
        )

    result = run("a" * 64)
    assert result.created["prior_annotations"] == 4
    assert result.notes["empty_label_lists"] == 1
    before = row_counts()
    assert run("b" * 64).created == {}
    assert row_counts() == before


# -- synthetic: files in the wrong shape ---------------------------------------------------


@pytest.mark.parametrize(
    ("document", "filename", "field", "reason_part"),
    [
        (b"{not json", "batch_1.json", "(file)", "invalid JSON"),
        (b"\xff\xfe", "batch_1.json", "(file)", "not valid UTF-8"),
        ([{"sample_id": 0}], "batch_1.json", "(file)", 'expected a JSON object {"samples"'),
        (
            [{"sample_id": 0, "meta_model": "m", "annotations": []}],
            "batch_1_annotation.json",
            "(file)",
            "older FaithBench raw annotation export",
        ),
        ({"items": []}, "batch_1.json", "samples", "missing or not a list"),
        ({"samples": []}, "batch.json", "(file name)", "batch_N.json"),
        ("text", "batch_1.json", "(file)", "got str"),
    ],
)
def test_file_in_wrong_shape_gives_one_error(document, filename, field, reason_part):
    records, _ = read(document, filename)
    assert len(records) == 1
    location, error = records[0]
    assert isinstance(error, RecordError)
    assert location == error.location == filename
    assert error.field == field and reason_part in error.reason


def _broken(mutate) -> dict:
    document = {"samples": [sample(0, [annotation("a1", ["Benign"], 1, 6)])]}
    mutate(document["samples"][0])
    return document


@pytest.mark.parametrize(
    ("mutate", "location", "field", "reason_part"),
    [
        (lambda s: s.pop("summary"), "batch_9.json sample 0", "summary", "missing"),
        (lambda s: s.update(sample_id="0"), "batch_9.json sample #0", "sample_id", "got str"),
        (
            lambda s: s["annotations"][0].update(label=["Unwanted.Instrinsic"]),
            "batch_9.json sample 0",
            "annotations[0].label[0]",
            "unknown FaithBench label 'Unwanted.Instrinsic'",
        ),
        (
            lambda s: s["annotations"][0].update(label=[["Benign"]]),
            "batch_9.json sample 0",
            "annotations[0].label[0]",
            "unknown FaithBench label",
        ),
        (
            lambda s: s["annotations"][0].update(source_start=3),
            "batch_9.json sample 0",
            "annotations[0].source_end",
            "expected int",
        ),
        (
            lambda s: s["annotations"][0].pop("annotator_id"),
            "batch_9.json sample 0",
            "annotations[0].annotator_id",
            "missing",
        ),
        (
            lambda s: s["metadata"].update(gpt_4o=2),
            "batch_9.json sample 0",
            "metadata.gpt_4o",
            "0, 1",
        ),
        (
            lambda s: s["metadata"].update(true_nli=True),
            "batch_9.json sample 0",
            "metadata.true_nli",
            "0, 1",
        ),
        (
            lambda s: s["metadata"].update(hhemv1="0.3"),
            "batch_9.json sample 0",
            "metadata.hhemv1",
            "a number",
        ),
        (
            lambda s: s["metadata"].pop("summarizer"),
            "batch_9.json sample 0",
            "metadata.summarizer",
            "missing",
        ),
    ],
)
def test_malformed_sample_gives_error_naming_sample_and_field(mutate, location, field, reason_part):
    records, _ = read(_broken(mutate))
    errors = [r for _, r in records if isinstance(r, RecordError)]
    assert len(errors) == 1
    assert (errors[0].location, errors[0].field) == (location, field)
    assert reason_part in errors[0].reason


def test_repeated_sample_id_refused():
    records, _ = read({"samples": [sample(4, []), sample(4, [])]})
    errors = [r for _, r in records if isinstance(r, RecordError)]
    assert [(e.location, e.field) for e in errors] == [("batch_9.json sample 4", "sample_id")]


@pytest.mark.django_db
def test_span_quote_mismatch_refused_by_the_service_with_its_path(project):
    bad = annotation("a1", ["Benign"], 1, 6)
    bad["summary_span"] = "Firsx"
    data = json.dumps({"samples": [sample(0, [bad])]}).encode()
    before = row_counts()
    with pytest.raises(WorkloadImportFailed) as info:
        workload_import(
            project=project,
            records=faithbench.FORMAT.open(io.BytesIO(data), "batch_9.json"),
            format="faithbench",
            filename="batch_9.json",
            file_sha256="c" * 64,
        )
    [error] = info.value.errors
    assert error.location == "batch_9.json source 1 (samples 0)"
    assert error.field == "candidates[0].prior_annotations[0].spans[0]"
    assert row_counts() == before


@pytest.mark.django_db
def test_command_creates_project_with_the_faithbench_policy(tmp_path):
    path = tmp_path / "batch_9.json"
    path.write_text(json.dumps({"samples": [sample(0, [annotation("a1", ["Benign"], 1, 6)])]}))
    out = io.StringIO()
    call_command(
        "import_workload",
        path,
        "--project",
        "p",
        "--create",
        "--format",
        "faithbench",
        "--no-progress",
        stdout=out,
    )
    assert "batch_9.json: batch #" in out.getvalue()
    policy = LabelPolicy.objects.get(project__slug="p")
    assert policy.guideline == preset_get("faithbench").description.guideline
    assert policy.evidence_relation == "source_relative"
    batch = ImportBatch.objects.get()
    assert batch.format == "faithbench" and batch.report["notes"]["samples"] == 1


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"source": " \n\t"}, "source", "only whitespace"),
        ({"summary": "   "}, "summary", "only whitespace"),
        ({"annot_id": 1.5}, "annotations[0].annot_id", "expected int, got float"),
        ({"annotator_id": "\ufeffa1"}, "annotations[0].annotator_id", "byte-order mark"),
    ],
    ids=["blank source", "blank summary", "fractional annot_id", "BOM id"],
)
def test_a_blank_text_a_fractional_annot_id_and_a_bom_id_are_refused(change, field, reason):
    # given one valid sample with one of its fields spoilt
    doc_sample = sample(0, [annotation("a1", ["Unwanted"], 1, 21)])
    if field.startswith("annotations"):
        doc_sample["annotations"][0].update(change)
    else:
        doc_sample.update(change)
    # when the batch is read
    records, _ = read({"samples": [doc_sample]})
    # then the sample is refused, naming the record and the field
    [(location, error)] = records
    assert isinstance(error, RecordError)
    assert (error.location, error.field) == ("batch_9.json sample 0", field)
    assert reason in error.reason


def test_the_summary_csv_is_named_with_the_file_to_import_instead():
    # the first bytes of FaithBench.csv, as the dataset ships it
    data = b'source,summary,LLM,worst-label,best-label\n"A source."," A summary.",org/m,Benign,\n'
    [(_, error)] = read(data, "FaithBench.csv")[0]
    assert isinstance(error, RecordError)
    assert error.field == "(file)"
    assert "import the release files data_for_release/batch_N.json instead" in error.reason
