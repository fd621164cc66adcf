"""Importing a certified release (``--format release``): every field restored, round trip.

Releases are built by hand here (:func:`write_release`), with a manifest whose sha256, sizes and
counts match, so the importer is tested without the exporter. The round trip uses the release
records of ``certification.services.releases.records`` to export the imported project again.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from labeling.exceptions import WorkloadImportFailed
from labeling.importers import formats
from labeling.models import (
    DEFAULT_ANSWER_LABELS,
    DEFAULT_CLAIM_LABELS,
    DEFAULT_UNAVAILABLE_REASONS,
    Claim,
    Disagreement,
    ImportBatch,
    Item,
    ItemStatus,
    LabelPolicy,
    PriorAnnotation,
    PriorClaimLabel,
    Project,
    Question,
    Resolution,
    Role,
    SkipReason,
    SourceVersion,
)
from labeling.release_format import (
    CONTENT_FILES,
    FORMAT_NAME,
    LABELS_JSONL,
    LEDGER,
    MANIFEST,
    SCHEMA_MAJOR,
    SCHEMA_VERSION,
    SOURCES_JSONL,
    canonical_json,
    label_counts,
    pretty_json,
    sha256_file,
)
from labeling.services import assignment_skip, item_claim_next, membership_set
from labeling.services.imports import workload_import_directory
from tests.conftest import row_counts
from tests.factories import UserFactory, start_labelling

pytestmark = pytest.mark.django_db

# -- building releases ---------------------------------------------------------------------------

POLICY_1 = {
    "version": 1,
    "guideline": "First guideline.",
    "evidence_relation": "source_relative",
    "answer_labels": list(DEFAULT_ANSWER_LABELS),
    "claim_labels": list(DEFAULT_CLAIM_LABELS),
    "unavailable_reasons": list(DEFAULT_UNAVAILABLE_REASONS),
}
POLICY_2 = {
    **POLICY_1,
    "version": 2,
    "guideline": "Second guideline: partial answers are their own label.",
    "answer_labels": [*DEFAULT_ANSWER_LABELS, "partial"],
}
PARTITION = {"seed": 2028, "proportions": {"dev": 0.2, "calibration": 0.4, "test": 0.4}}

# Version 2 of doc-a is cited first in labels.jsonl: numbering versions in order of first
# citation would swap them.
DOC_A_1 = (
    "Opening hours\r\nThe library opens at 9:00 \U0001f4da on weekdays.\r\nIt closes at 17:00."
)
DOC_A_2 = (
    "Opening hours\r\nThe library opens at 10:00 \U0001f4da on weekdays.\r\nIt closes at 18:00."
)
DOC_B = "DVDs are lent for 7 days and cannot be renewed."
DOC_C = "A document no question cites any more."


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def source_line(key: str, version: int, text: str, **extra: Any) -> dict[str, Any]:
    """A sources.jsonl record."""
    return {
        "id": key,
        "version": version,
        "sha256": _sha(text),
        "length": len(text),
        "uri": extra.get("uri", f"https://example.org/{key}"),
        "published_at": extra.get("published_at"),
        "observed_at": extra.get("observed_at"),
        "text": text,
    }


SOURCES = [
    source_line("doc-a", 1, DOC_A_1, published_at="2024-03-01T00:00:00+00:00"),
    source_line("doc-a", 2, DOC_A_2, published_at="2024-06-01T08:30:00+00:00", observed_at=None),
    source_line("doc-b", 1, DOC_B, observed_at="2024-06-02T11:31:00.250000+00:00"),
    source_line("doc-c", 1, DOC_C, uri=""),
]
TEXTS = {(s["id"], s["version"]): s["text"] for s in SOURCES}


def retrieved(key: str, version: int, rank: int | None, score: float | None) -> dict[str, Any]:
    """A question's source as labels.jsonl names it."""
    line = next(s for s in SOURCES if s["id"] == key and s["version"] == version)
    return {
        "id": key,
        "version": version,
        "sha256": line["sha256"],
        "rank": rank,
        "score": score,
        "published_at": line["published_at"],
        "observed_at": line["observed_at"],
    }


def evidence(key: str, version: int, quote: str, sha256: str | None = None) -> dict[str, Any]:
    """An evidence span of ``quote`` in a source version."""
    text = TEXTS[(key, version)]
    start = text.index(quote)
    return {
        "source": key,
        "version": version,
        "sha256": sha256 or _sha(text),
        "start": start,
        "end": start + len(quote),
        "quote": quote,
    }


def claim(index: int, answer: str, text: str, *, anchored: bool = True) -> dict[str, Any]:
    """A release claim of ``answer``; unanchored claims have null offsets."""
    start = answer.index(text) if anchored else None
    return {
        "index": index,
        "text": text,
        "start": start,
        "end": None if start is None else start + len(text),
        "machine_split": index == 1,
    }


def candidate(key: str, text: str, index: int, **fields: Any) -> dict[str, Any]:
    """A release candidate with every field."""
    return {
        "id": key,
        "text": text,
        "generator": fields.get("generator", "model-a"),
        "generator_settings": fields.get("generator_settings", {}),
        "sample_index": index,
        "canonical_form": fields.get("canonical_form"),
        "retrieval_score": fields.get("retrieval_score"),
        "confidence": fields.get("confidence"),
        "acceptance_score": fields.get("acceptance_score"),
        "frequency_rank": fields.get("frequency_rank"),
        "is_selected": fields.get("is_selected", False),
        "metadata": fields.get("metadata", {}),
    }


def annotation(annotator: str, answer_label: str | None, **fields: Any) -> dict[str, Any]:
    """A labels.jsonl annotation."""
    return {
        "annotator": annotator,
        "origin": fields.get("origin", "human"),
        "policy_version": fields.get("policy_version"),
        "labelled_at": fields.get("labelled_at"),
        "time_spent_seconds": fields.get("time_spent_seconds"),
        "answer_label": answer_label,
        "answer_reason": fields.get("answer_reason"),
        "comment": fields.get("comment", ""),
        "claim_labels": fields.get("claim_labels", []),
        "spans": fields.get("spans", []),
        "raw": fields.get("raw"),
    }


def claim_label(index: int, label: str | None, *spans: dict[str, Any], **fields: Any) -> dict:
    """An annotation's claim label (prior shape: boundary_error and raw_label)."""
    return {
        "claim": index,
        "label": label,
        "reason": fields.get("reason"),
        "boundary_error": fields.get("boundary_error", False),
        "raw_label": fields.get("raw_label"),
        "evidence": sorted(
            spans, key=lambda e: (e["source"], e["version"], e["start"], e["end"], e["quote"])
        ),
    }


def resolved_label(index: int, label: str, *spans: dict[str, Any], reason: str | None = None):
    """A resolution's claim label."""
    return {
        "claim": index,
        "label": label,
        "reason": reason,
        "evidence": sorted(
            spans, key=lambda e: (e["source"], e["version"], e["start"], e["end"], e["quote"])
        ),
    }


def resolution(status: str, answer_label: str | None, **fields: Any) -> dict[str, Any]:
    """A labels.jsonl resolution."""
    return {
        "status": status,
        "answer_label": answer_label,
        "answer_reason": fields.get("answer_reason"),
        "unresolved_reason": fields.get("unresolved_reason"),
        "rationale": fields.get("rationale", ""),
        "adjudicator": fields.get("adjudicator"),
        "resolved_at": fields.get("resolved_at", "2024-07-01T12:00:00+00:00"),
        "policy_version": fields.get("policy_version", 2),
        "claim_labels": fields.get("claim_labels", []),
    }


def evaluator_label(name: str, claim: int | None, label: str | None, score: float | None):
    """An evaluator label; no label and no score means unavailable."""
    available = label is not None or score is not None
    return {
        "evaluator": name,
        "version": "2024-06",
        "claim": claim,
        "label": label,
        "score": score,
        "available": available,
        "raw": {"verdict": label} if available else None,
    }


def question(key: str, partition: str | None, sources: list[dict], **fields: Any) -> dict:
    """A labels.jsonl question."""
    return {
        "id": key,
        "text": fields.get("text", f"Question {key}?"),
        "group_key": fields.get("group_key", ""),
        "partition": partition,
        "slices": fields.get("slices", {}),
        "metadata": fields.get("metadata", {}),
        "sources": sources,
    }


def line(q: dict, c: dict, claims=(), annotations=(), res=None, evaluators=()) -> dict:
    """One labels.jsonl record."""
    return {
        "question": q,
        "candidate": c,
        "claims": list(claims),
        "annotations": sorted(annotations, key=lambda a: a["annotator"]),
        "resolution": res,
        "evaluator_labels": list(evaluators),
    }


R_A, R_B, R_C, R_D = (f"r-{c * 16}" for c in "abcd")
Q1_C0 = "The library opens at 10:00 \U0001f4da. It closes at 18:00."
Q1_C1 = "It opens at noon.\r\nOn weekdays."
Q2_C0 = "It opens at 9:00."
Q3_C0 = "DVDs: 7 days \U0001f4c0, no renewal."


def full_records(partitions: bool = True) -> list[dict[str, Any]]:
    """A release's labels.jsonl records using every field (see the module tests)."""
    part = (lambda p: p) if partitions else (lambda p: None)
    q1 = question(
        "q1",
        part("test"),
        [retrieved("doc-a", 2, 0, 0.93)],
        text="When does the library open?\r\nAnd close? \U0001f914",
        slices={"domain": "library"},
        metadata={"reference": "10:00", "weights": [1.0, 2]},
    )
    q2 = question("q2", part("test"), [retrieved("doc-a", 1, None, None)])
    q3 = question("q3", part("calibration"), [retrieved("doc-b", 1, 1, 0.5)], group_key="loans")
    q4 = question("q4", part("calibration"), [], group_key="loans")
    opens = evidence("doc-a", 2, "The library opens at 10:00 \U0001f4da on weekdays.")
    opens_short = evidence("doc-a", 2, "opens at 10:00")
    closes = evidence("doc-a", 2, "It closes at 18:00.")
    return [
        line(
            q1,
            candidate(
                "c0",
                Q1_C0,
                0,
                generator_settings={"temperature": 0.7, "prompt": "Answer briefly."},
                canonical_form="10:00",
                retrieval_score=0.93,
                confidence=1.0,
                acceptance_score=-2.5,
                frequency_rank=1,
                is_selected=True,
                metadata={"run": 3},
            ),
            [
                claim(0, Q1_C0, "The library opens at 10:00 \U0001f4da."),
                claim(1, Q1_C0, "It closes at 18:00."),
            ],
            [
                annotation(
                    R_A,
                    "admissible",
                    policy_version=2,
                    labelled_at="2024-06-30T09:00:00+00:00",
                    time_spent_seconds=12.5,
                    comment="Clear.\r\nBoth claims hold \U0001f44d",
                    claim_labels=[
                        claim_label(0, "supported", opens),
                        claim_label(1, "supported", closes, boundary_error=True),
                    ],
                ),
                annotation(
                    R_B,
                    "admissible",
                    policy_version=2,
                    labelled_at="2024-06-30T09:05:00.125000+00:00",
                    time_spent_seconds=30.0,
                    claim_labels=[
                        claim_label(0, "supported", opens_short),
                        claim_label(1, "supported", closes),
                    ],
                ),
            ],
            resolution(
                "consensus",
                "admissible",
                claim_labels=[
                    resolved_label(0, "supported", opens, opens_short),
                    resolved_label(1, "supported", closes),
                ],
            ),
            [
                evaluator_label("judge-lm", None, "admissible", 0.97),
                evaluator_label("judge-lm", 0, "supported", None),
                evaluator_label("judge-lm", 1, None, None),
                evaluator_label("nli", None, None, 0.25),
            ],
        ),
        line(
            q1,
            candidate("c1", Q1_C1, 1, canonical_form="noon", frequency_rank=2),
            [claim(0, Q1_C1, "It opens at midnight.", anchored=False), claim(1, Q1_C1, "noon")],
            [
                annotation(
                    R_A,
                    "cannot_decide",
                    policy_version=2,
                    labelled_at="2024-06-30T10:00:00+00:00",
                    claim_labels=[
                        claim_label(0, "cannot_decide"),
                        claim_label(1, "evidence_unavailable", reason="not_found"),
                    ],
                ),
                annotation(
                    R_B,
                    "partial",
                    policy_version=2,
                    labelled_at="2024-06-30T10:01:00+00:00",
                    claim_labels=[
                        claim_label(0, "contradicted", opens_short),
                        claim_label(1, "contradicted", opens),
                    ],
                ),
            ],
            resolution(
                "adjudicated",
                "inadmissible",
                adjudicator=R_C,
                rationale="The source says 10:00.\r\nNot noon.",
                resolved_at="2024-07-02T08:00:00.500000+00:00",
                claim_labels=[
                    resolved_label(0, "contradicted", opens_short),
                    resolved_label(1, "evidence_unavailable", reason="blocked"),
                ],
            ),
            [evaluator_label("judge-lm", None, "inadmissible", None)],
        ),
        line(
            q2,
            candidate("c0", Q2_C0, 0),
            [claim(0, Q2_C0, "It opens at 9:00.")],
            [
                annotation(
                    "exact-match",
                    "admissible",
                    origin="automatic",
                    raw={"is_correct": True, "weights": [1.0, 0.5]},
                    comment="upstream check",
                    claim_labels=[
                        claim_label(
                            0,
                            "supported",
                            evidence("doc-a", 1, "opens at 9:00"),
                            raw_label=["ok", 1.0],
                        )
                    ],
                    spans=[
                        {
                            "start": 3,
                            "end": 8,
                            "quote": "opens",
                            "labels": ["Benign"],
                            "note": "fine",
                            "evidence": evidence("doc-a", 1, "opens"),
                        },
                        {
                            "start": 12,
                            "end": 12,
                            "quote": "",
                            "labels": [],
                            "note": "",
                            "evidence": None,
                        },
                    ],
                )
            ],
            resolution(
                "unresolved",
                None,
                adjudicator=R_C,
                unresolved_reason="ambiguous_guideline",
                rationale="Which year?",
                policy_version=1,
            ),
        ),
        line(
            q3,
            candidate("c0", Q3_C0, 0, canonical_form="7 days", frequency_rank=1),
            [claim(0, Q3_C0, "DVDs: 7 days \U0001f4c0,")],
            [
                annotation(
                    R_A,
                    "admissible",
                    policy_version=1,
                    labelled_at="2024-06-29T00:00:00+00:00",
                    claim_labels=[
                        claim_label(0, "supported", evidence("doc-b", 1, "DVDs are lent"))
                    ],
                ),
                annotation(
                    R_D,
                    "cannot_decide",
                    policy_version=1,
                    labelled_at="2024-06-29T00:10:00+00:00",
                    time_spent_seconds=0.0,
                    claim_labels=[claim_label(0, "cannot_decide")],
                ),
            ],
        ),
        line(
            q3,
            candidate("c1", "Fourteen days.", 1),
            [],
            [],
            None,
            [evaluator_label("judge-lm", None, None, None)],
        ),
        line(
            q4,
            candidate("c0", "I do not know.", 0),
            [],
            [],
            None,
            [evaluator_label("nli", None, None, 0.5)],
        ),
    ]


def write_release(
    directory: Path,
    records: list[dict[str, Any]],
    *,
    sources: list[dict[str, Any]] = SOURCES,
    policies: list[dict[str, Any]] | None = None,
    partition: dict[str, Any] | None = PARTITION,
    **manifest_fields: Any,
) -> Path:
    """Write a release directory whose manifest verifies (files, sizes, counts)."""
    policies = [POLICY_1, POLICY_2] if policies is None else policies
    directory.mkdir(parents=True, exist_ok=True)
    (directory / LABELS_JSONL).write_bytes(
        b"".join(canonical_json(r).encode("utf-8") + b"\n" for r in records)
    )
    (directory / SOURCES_JSONL).write_bytes(
        b"".join(canonical_json(s).encode("utf-8") + b"\n" for s in sources)
    )
    # the ledgers of the certified runs: none (the manifest certifies nothing)
    (directory / LEDGER).write_text(pretty_json([]), encoding="utf-8")
    for name in CONTENT_FILES:
        if not (directory / name).exists():
            (directory / name).write_text(f"placeholder {name}\n", encoding="utf-8")
    files = []
    for name in CONTENT_FILES:
        sha256, size = sha256_file(directory / name)
        files.append({"name": name, "sha256": sha256, "size": size})
    manifest = {
        "format": FORMAT_NAME,
        "schema_version": "1.0",
        "project": {"slug": "origin", "name": "Origin"},
        "release": {"version": "1", "parent": None},
        "policies": policies,
        "policy": {"version": policies[-1]["version"]},
        "partition": {"frozen": False, "seed": None, "proportions": None}
        if partition is None
        else {"frozen": True, **partition},
        "files": files,
        "counts": {**label_counts(records), "sources": len(sources)},
        **manifest_fields,
    }
    (directory / MANIFEST).write_text(pretty_json(manifest), encoding="utf-8")
    return directory


def zip_release(directory: Path, extra: dict[str, bytes] | None = None) -> bytes:
    """The release's files as a zip (flat), plus ``extra`` members."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in (MANIFEST, *CONTENT_FILES):
            archive.write(directory / name, name)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


def import_release(directory: Path, slug: str = "restored") -> Project:
    """Import ``directory`` with the command into a new project (``--create``)."""
    call_command(
        "import_workload",
        str(directory),
        "--project",
        slug,
        "--create",
        "--format",
        "release",
        "--no-progress",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    return Project.objects.get(slug=slug)


def export_lines(project: Project) -> tuple[bytes, bytes, list[dict[str, Any]]]:
    """Export ``project`` with the release records: (labels.jsonl, sources.jsonl, policies)."""
    from certification.services.releases.records import ReleaseReader

    everything = 2**62
    release = SimpleNamespace(
        project=project,
        partition={"frozen": Project.objects.get(pk=project.pk).partition_frozen_at is not None},
        cutoff={
            key: everything
            for key in (
                "annotation_revision",
                "resolution",
                "prior_annotation",
                "evaluator_label",
                "candidate",
                "source_version",
                "label_policy",
            )
        },
    )
    reader = ReleaseReader(release)  # type: ignore[arg-type]
    labels = b"".join(
        canonical_json(r).encode("utf-8") + b"\n" for r in reader.records(reader.candidate_ids())
    )
    sources = b"".join(canonical_json(s).encode("utf-8") + b"\n" for s in reader.source_records())
    return labels, sources, reader.policy_records()


@pytest.fixture
def release_dir(tmp_path: Path) -> Path:
    return write_release(tmp_path / "release", full_records())


# -- round trip ----------------------------------------------------------------------------------


def test_release_is_a_registered_format_reading_directories():
    fmt = formats()["release"]

    assert fmt.open_directory is not None


def test_round_trip_gives_the_same_labels_sources_and_policies(release_dir):
    project = import_release(release_dir)

    labels, sources, policies = export_lines(project)

    assert labels == (release_dir / LABELS_JSONL).read_bytes()
    assert sources == (release_dir / SOURCES_JSONL).read_bytes()
    assert policies == [POLICY_1, POLICY_2]


def test_policies_partition_and_source_versions_are_restored(release_dir):
    project = import_release(release_dir)

    assert list(project.policies.order_by("version").values_list("version", "guideline")) == [
        (1, POLICY_1["guideline"]),
        (2, POLICY_2["guideline"]),
    ]
    assert LabelPolicy.objects.get(project=project, version=2).previous.version == 1
    assert project.partition_seed == 2028
    assert project.partition_proportions == {"dev": 0.2, "calibration": 0.4, "test": 0.4}
    assert project.partition_frozen_at is not None
    assert dict(
        Question.objects.filter(project=project).values_list("external_id", "partition")
    ) == {
        "q1": "test",
        "q2": "test",
        "q3": "calibration",
        "q4": "calibration",
    }
    versions = list(
        SourceVersion.objects.filter(document__key="doc-a", document__project=project)
        .order_by("pk")
        .values_list("text", flat=True)
    )
    assert versions == [DOC_A_1, DOC_A_2]
    assert SourceVersion.objects.filter(document__project=project).count() == 4


def test_claims_keep_offsets_and_unanchored_claims_stay_unanchored(release_dir):
    project = import_release(release_dir)

    claims = Claim.objects.filter(candidate__question__project=project)
    unanchored = claims.get(candidate__question__external_id="q1", candidate__key="c1", index=0)
    anchored = claims.get(candidate__question__external_id="q1", candidate__key="c1", index=1)
    assert (unanchored.unanchored, unanchored.start, unanchored.end) == (True, None, None)
    assert (anchored.start, anchored.end) == (Q1_C1.index("noon"), Q1_C1.index("noon") + 4)


def test_annotations_become_prior_annotations_with_their_provenance(release_dir):
    project = import_release(release_dir)

    prior = PriorAnnotation.objects.get(
        candidate__question__project=project,
        candidate__question__external_id="q1",
        candidate__key="c0",
        annotator=R_A,
    )
    assert prior.policy.version == 2
    assert prior.labelled_at.isoformat() == "2024-06-30T09:00:00+00:00"
    assert prior.time_spent_seconds == 12.5
    assert prior.note == "Clear.\r\nBoth claims hold \U0001f44d"
    boundary = PriorClaimLabel.objects.get(prior_annotation=prior, claim__index=1)
    assert boundary.boundary_error is True
    undecided = PriorAnnotation.objects.get(
        candidate__question__project=project,
        candidate__question__external_id="q1",
        candidate__key="c1",
        annotator=R_A,
    )
    assert undecided.answer_label == "cannot_decide"


def test_resolutions_are_imported_and_their_items_resolved(release_dir):
    project = import_release(release_dir)

    items = {
        (i.candidate.question.external_id, i.candidate.key): i
        for i in Item.objects.filter(project=project).select_related(
            "candidate__question", "resolution"
        )
    }
    batch = ImportBatch.objects.get(project=project)
    adjudicated = items[("q1", "c1")].resolution
    assert items[("q1", "c1")].status == ItemStatus.RESOLVED
    assert adjudicated.number == 1
    assert adjudicated.adjudicator_pseudonym == R_C
    assert adjudicated.adjudicator is None
    assert adjudicated.import_batch == batch
    assert adjudicated.created_at.isoformat() == "2024-07-02T08:00:00.500000+00:00"
    assert items[("q2", "c0")].resolution.status == "unresolved"
    assert items[("q2", "c0")].resolution.policy.version == 1
    assert items[("q1", "c0")].resolution.status == "consensus"
    assert items[("q1", "c0")].resolution.claim_labels.get(claim__index=0).evidence.count() == 2
    pending = [key for key, item in items.items() if item.status == ItemStatus.OPEN]
    assert sorted(pending) == [("q3", "c0"), ("q3", "c1"), ("q4", "c0")]


def test_resolved_items_are_never_served_nor_compared_after_labelling_starts(release_dir):
    project = import_release(release_dir)
    start_labelling(project, overlap=2)
    annotator = UserFactory()
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)

    served = []
    while (assignment := item_claim_next(project=project, actor=annotator)) is not None:
        served.append(
            (assignment.item.candidate.question.external_id, assignment.item.candidate.key)
        )
        assignment_skip(
            project=project,
            assignment_id=assignment.pk,
            actor=annotator,
            reason=SkipReason.OTHER,
        )

    # q3/c0 has two prior votes, one cannot_decide: compared at the start, it disagrees
    assert sorted(served) == [("q3", "c1"), ("q4", "c0")]
    disputed = Item.objects.get(
        project=project, candidate__question__external_id="q3", candidate__key="c0"
    )
    assert disputed.status == ItemStatus.DISAGREEMENT
    assert Disagreement.objects.filter(item__project=project).count() == 1
    assert Resolution.objects.filter(item__project=project).count() == 3
    assert not Resolution.objects.filter(item__project=project, number__gt=1).exists()


def test_reimport_of_the_same_release_is_a_no_op(release_dir):
    project = import_release(release_dir)
    before = ImportBatch.objects.count()

    result = workload_import_directory(
        project=project, directory=release_dir, format_name="release"
    )

    assert result.already_imported
    assert ImportBatch.objects.count() == before


def test_another_release_into_the_project_of_the_first_is_refused(release_dir, tmp_path):
    # a release restores a project: only the very release imported before is recognised
    project = import_release(release_dir)
    again = write_release(
        tmp_path / "again", full_records(), release={"version": "2", "parent": "1"}
    )
    before = row_counts()

    with pytest.raises(WorkloadImportFailed) as info:
        workload_import_directory(project=project, directory=again, format_name="release")

    assert [(e.location, e.field, e.reason) for e in info.value.errors] == [
        (
            "again",
            "project",
            "project 'restored' already holds questions; the release format imports into an "
            "empty project only (import it into a new project)",
        )
    ]
    assert row_counts() == before


def test_a_newer_minor_schema_version_may_add_fields_which_are_ignored_and_counted(tmp_path):
    records = json.loads(json.dumps(full_records()))  # no object shared between lines
    records[0]["novelty"] = 1
    records[0]["question"]["novelty"] = 2  # repeated on line 2: counted twice
    records[1]["question"]["novelty"] = 2
    records[0]["annotations"][0]["claim_labels"][0]["evidence"][0]["novelty"] = 3
    records[2]["annotations"][0]["spans"][0]["novelty"] = 4
    records[0]["resolution"]["claim_labels"][0]["novelty"] = 5
    sources = [dict(s) for s in SOURCES]
    sources[0]["novelty"] = 6
    # one minor version past the reader's (the reader is at 1.1 since the CSV escaping)
    newer = f"{SCHEMA_MAJOR}.{int(SCHEMA_VERSION.split('.')[1]) + 1}"
    directory = write_release(tmp_path / "r", records, sources=sources, schema_version=newer)

    project = import_release(directory)

    notes = ImportBatch.objects.get(project=project).report["notes"]
    assert notes["schema_version"] == newer
    assert notes["unknown_fields_ignored"] == 7
    labels, _, _ = export_lines(project)
    assert labels == (write_release(tmp_path / "plain", full_records()) / LABELS_JSONL).read_bytes()


def test_a_release_of_this_minor_version_notes_no_ignored_fields(release_dir):
    project = import_release(release_dir)

    assert "unknown_fields_ignored" not in ImportBatch.objects.get(project=project).report["notes"]


def test_a_consensus_counts_only_votes_and_the_reason_only_of_evidence_unavailable(tmp_path):
    # the comparison's rule: an annotation without answer label is no vote; evidence and a
    # reason beside another label are not compared
    records = full_records()
    votes = records[0]["annotations"]
    votes[1]["answer_reason"] = "not_found"  # beside "admissible": not part of the vote
    votes[1]["claim_labels"][1]["evidence"] = []
    votes.append(
        annotation(
            "x-expert",
            None,
            claim_labels=[claim_label(0, None)],  # no answer label: not a vote
        )
    )
    records[0]["resolution"]["claim_labels"][1] = resolved_label(
        1, "evidence_unavailable", reason="blocked"
    )
    for vote in votes[:2]:
        vote["claim_labels"][1].update(label="evidence_unavailable", reason="blocked")
        vote["claim_labels"][1]["evidence"] = []
    directory = write_release(tmp_path / "r", records)

    project = import_release(directory)

    resolved = Item.objects.get(
        project=project, candidate__question__external_id="q1", candidate__key="c0"
    )
    assert resolved.resolution.status == "consensus"
    labels, _, _ = export_lines(project)
    assert labels == (directory / LABELS_JSONL).read_bytes()


def test_the_demo_release_imports_into_an_empty_project_and_round_trips(settings, tmp_path):
    # real consensus (people's votes compared by the service), adjudication and unresolved
    from django.contrib.auth import get_user_model
    from django.test import TestCase

    from certification.services.releases import release_export, release_freeze
    from labeling.models import Disagreement
    from labeling.services import adjudication_mark_unresolved, adjudication_resolve
    from labeling.services.label_checks import ClaimInput, EvidenceInput

    settings.DEBUG = True  # demo_setup runs only in development
    call_command("demo_setup", stdout=io.StringIO(), stderr=io.StringIO())
    demo = Project.objects.get(slug="demo")
    adjudicator = get_user_model().objects.get(username="adjudicator")
    first, second = Disagreement.objects.filter(item__project=demo).order_by("pk")
    item = first.item
    source = SourceVersion.objects.filter(retrievals__question=item.candidate.question).first()
    adjudication_resolve(
        project=demo,
        item_id=item.pk,
        actor=adjudicator,
        expected_version=item.version,
        answer_label="inadmissible",
        claims=[
            ClaimInput(
                claim_id=c.pk,
                label="contradicted",
                evidence=(EvidenceInput(source.pk, 0, 20, source.text[:20], unit="codepoint"),),
            )
            for c in item.candidate.claims.order_by("index")
        ],
        rationale="The source contradicts both claims.",
    )
    other = Item.objects.get(pk=second.item_id)
    adjudication_mark_unresolved(
        project=demo,
        item_id=other.pk,
        actor=adjudicator,
        expected_version=other.version,
        reason="ambiguous_guideline",
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        release = release_freeze(
            project=demo, actor=get_user_model().objects.get(username="manager"), version="1"
        )
    exported = release_export(release=release, directory=tmp_path / "demo")

    project = import_release(exported, slug="demo-copy")

    statuses = sorted(
        Resolution.objects.filter(item__project=project).values_list("status", flat=True)
    )
    assert statuses == ["adjudicated", "consensus", "consensus", "unresolved"]
    labels, _, _ = export_lines(project)
    assert labels == (exported / LABELS_JSONL).read_bytes()


def test_unpartitioned_release_leaves_the_split_unfrozen(tmp_path):
    directory = write_release(tmp_path / "r", full_records(partitions=False), partition=None)

    project = import_release(directory)

    assert project.partition_frozen_at is None
    assert not Question.objects.filter(project=project, partition__isnull=False).exists()
    labels, _, _ = export_lines(project)
    assert labels == (directory / LABELS_JSONL).read_bytes()


def test_zip_imports_through_the_api_and_is_the_same_import_as_its_directory(
    api, project, release_dir
):
    # the fixture project is empty: its default policy v1 takes the release's content
    data = zip_release(release_dir)
    client = api(Role.MANAGER)
    url = f"/api/projects/{project.slug}/imports/"

    first = client.post(
        url,
        {"file": SimpleUploadedFile("release.zip", data), "format": "release"},
        format="multipart",
    )
    again = client.post(
        url,
        {"file": SimpleUploadedFile("copy.zip", data), "format": "release"},
        format="multipart",
    )
    directory = workload_import_directory(
        project=project, directory=release_dir, format_name="release"
    )

    assert first.status_code == 201, first.json()
    assert first.json()["created"]["resolutions"] == 3
    assert again.status_code == 200 and again.json()["already_imported"] is True
    assert directory.already_imported
    labels, _, _ = export_lines(project)
    assert labels == (release_dir / LABELS_JSONL).read_bytes()


def test_the_command_reads_a_release_zip(release_dir, tmp_path):
    path = tmp_path / "release.zip"
    path.write_bytes(zip_release(release_dir))
    out = io.StringIO()

    call_command(
        "import_workload",
        str(path),
        "--project",
        "from-zip",
        "--create",
        "--format",
        "release",
        "--no-progress",
        stdout=out,
        stderr=io.StringIO(),
    )

    assert "release.zip: batch #" in out.getvalue()
    labels, _, _ = export_lines(Project.objects.get(slug="from-zip"))
    assert labels == (release_dir / LABELS_JSONL).read_bytes()


def test_zip_with_the_files_in_one_directory_imports_on_the_web_page(login, project, release_dir):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in (MANIFEST, *CONTENT_FILES):
            archive.write(release_dir / name, f"release-1/{name}")
    client = login(Role.MANAGER)

    response = client.post(
        f"/p/{project.slug}/import/",
        {"file": SimpleUploadedFile("release.zip", buffer.getvalue()), "format": "release"},
    )

    assert response.status_code == 302
    assert Question.objects.filter(project=project).count() == 4


# -- the restored project's manager ------------------------------------------------------------


def test_a_staff_user_restoring_a_release_becomes_its_manager(release_dir, client):
    staff = UserFactory(is_staff=True)
    project = Project.objects.create(slug="restored", name="Restored")
    LabelPolicy.objects.create(project=project, version=1, guideline="")
    before = project.memberships.count()

    workload_import_directory(
        project=project, directory=release_dir, format_name="release", actor=staff
    )

    assert before == 0
    assert project.memberships.get(user=staff).role == Role.MANAGER
    # once not staff any more, the importer still reaches the project as its manager
    staff.is_staff = False
    staff.save()
    client.force_login(staff)
    assert client.get("/p/restored/members/").status_code == 200


def test_the_command_makes_the_manager_of_the_project_it_creates(release_dir):
    UserFactory(username="keeper")

    call_command(
        "import_workload",
        str(release_dir),
        "--project",
        "restored-cli",
        "--create",
        "--manager",
        "keeper",
        "--format",
        "release",
        "--no-progress",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )

    project = Project.objects.get(slug="restored-cli")
    assert list(project.memberships.values_list("user__username", "role")) == [
        ("keeper", Role.MANAGER)
    ]
