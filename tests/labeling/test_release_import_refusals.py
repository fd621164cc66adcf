"""Importing a release: what is refused (nothing written), and the native fields it relies on."""

from __future__ import annotations

import io
import json
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from labeling.exceptions import WorkloadImportFailed
from labeling.importers.schema import PriorAnnotationIn, ResolutionIn
from labeling.models import (
    DEFAULT_ANSWER_LABELS,
    DEFAULT_CLAIM_LABELS,
    DEFAULT_UNAVAILABLE_REASONS,
    Claim,
    PriorAnnotation,
    Project,
    Role,
    UnresolvedReason,
)
from labeling.release_format import CONTENT_FILES, LABELS_JSONL, MANIFEST, SOURCES_JSONL
from labeling.services import project_create
from labeling.services.imports import (
    fingerprint,
    prior_fingerprint,
    workload_import_directory,
    workload_import_file,
)
from tests.conftest import native_record, row_counts
from tests.labeling.test_release_import import (
    SOURCES,
    annotation,
    candidate,
    claim,
    claim_label,
    evidence,
    full_records,
    import_release,
    line,
    question,
    resolution,
    resolved_label,
    retrieved,
    write_release,
    zip_release,
)

pytestmark = pytest.mark.django_db

# The policy project_create gives a project (the conftest ``project``): a release listing it
# alone is accepted by that project once it has questions.
DEFAULT_POLICY = {
    "version": 1,
    "guideline": "",
    "evidence_relation": "source_relative",
    "answer_labels": list(DEFAULT_ANSWER_LABELS),
    "claim_labels": list(DEFAULT_CLAIM_LABELS),
    "unavailable_reasons": list(DEFAULT_UNAVAILABLE_REASONS),
}
ANSWER = "It opens at 9:00."


def simple_records(partition: str | None = None, **q2: Any) -> list[dict[str, Any]]:
    """Two questions citing doc-a v1, each with one candidate (the first one resolved).

    ``q2_partition`` gives the second question another partition.
    """
    cite = evidence("doc-a", 1, "opens at 9:00")
    first = line(
        question("q1", partition, [retrieved("doc-a", 1, 0, 0.5)]),
        candidate("c0", ANSWER, 0),
        [claim(0, ANSWER, ANSWER)],
        [
            annotation(
                "r-aaaa",
                "admissible",
                policy_version=1,
                claim_labels=[claim_label(0, "supported", cite)],
            )
        ],
        resolution(
            "consensus",
            "admissible",
            policy_version=1,
            claim_labels=[resolved_label(0, "supported", cite)],
        ),
    )
    second = line(
        question("q2", q2.get("q2_partition", partition), [retrieved("doc-a", 1, 0, 0.5)]),
        candidate("c0", ANSWER, 0),
        [claim(0, ANSWER, ANSWER)],
    )
    return [first, second]


def refused_directory(project: Project, directory: Path) -> list[tuple[str, str, str]]:
    """Import ``directory`` into ``project``; assert it is refused with nothing written."""
    before = row_counts()
    with pytest.raises(WorkloadImportFailed) as info:
        workload_import_directory(project=project, directory=directory, format_name="release")
    assert row_counts() == before, "a refused import must write nothing"
    return [(e.location, e.field, e.reason) for e in info.value.errors]


@pytest.fixture
def empty_project(db: None) -> Project:
    return project_create(slug="empty", name="Empty")


# -- the release as a whole ---------------------------------------------------------------------


def test_unknown_major_schema_version_is_refused(empty_project, tmp_path):
    directory = write_release(tmp_path / "r", full_records(), schema_version="2.0")

    errors = refused_directory(empty_project, directory)

    assert errors == [
        (
            MANIFEST,
            "schema_version",
            "schema_version '2.0' has major 2; this certlabel reads major 1 only",
        )
    ]


def test_another_format_is_refused(empty_project, tmp_path):
    directory = write_release(tmp_path / "r", full_records(), format="some-other-tool")

    errors = refused_directory(empty_project, directory)

    assert errors == [
        (MANIFEST, "format", "format is 'some-other-tool', expected 'certlabel-release'")
    ]


def test_a_flipped_byte_is_refused_and_the_command_creates_nothing(tmp_path):
    directory = write_release(tmp_path / "r", full_records())
    path = directory / LABELS_JSONL
    data = bytearray(path.read_bytes())
    data[data.index(b'"q1"') + 2] = ord("9")  # same size, other bytes
    path.write_bytes(bytes(data))
    before = row_counts()
    err = io.StringIO()

    with pytest.raises(CommandError, match="nothing was written"):
        call_command(
            "import_workload",
            str(directory),
            "--project",
            "restored",
            "--create",
            "--format",
            "release",
            "--no-progress",
            stdout=io.StringIO(),
            stderr=err,
        )

    assert "labels.jsonl: field sha256: sha256 is" in err.getvalue()
    assert "the manifest says" in err.getvalue()
    assert row_counts() == before
    assert not Project.objects.filter(slug="restored").exists()


def test_a_file_other_than_labels_that_changed_is_refused_too(empty_project, tmp_path):
    directory = write_release(tmp_path / "r", full_records())
    (directory / "report.json").write_text("changed\n", encoding="utf-8")

    errors = refused_directory(empty_project, directory)

    assert {(location, field) for location, field, _ in errors} == {
        ("report.json", "sha256"),
        ("report.json", "size"),
    }


def test_zip_with_a_member_leaving_the_archive_is_refused(api, project, tmp_path):
    directory = write_release(tmp_path / "r", full_records())
    data = zip_release(directory, extra={"../evil.txt": b"outside"})
    client = api(Role.MANAGER)
    before = row_counts()

    response = client.post(
        f"/api/projects/{project.slug}/imports/",
        {"file": SimpleUploadedFile("release.zip", data), "format": "release"},
        format="multipart",
    )

    assert response.status_code == 400
    assert "zip member '../evil.txt': not a file of the release" in json.dumps(response.json())
    assert row_counts() == before
    assert not (tmp_path / "evil.txt").exists()


class _MeasuredDirectory(tempfile.TemporaryDirectory):
    """A temporary directory that records how many bytes it holds when it is removed."""

    held: list[int] = []

    def cleanup(self) -> None:
        root = Path(self.name)
        if root.exists():
            self.held.append(sum(p.stat().st_size for p in root.rglob("*") if p.is_file()))
        super().cleanup()


def _cap(directory: Path) -> int:
    """The most a release's extraction may write: the manifest and the sizes it lists."""
    manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    return (directory / MANIFEST).stat().st_size + sum(f["size"] for f in manifest["files"])


def _import_zip(project: Project, path: Path) -> list[tuple[str, str, str]]:
    """Import the zip at ``path``; assert it is refused with nothing written."""
    before = row_counts()
    with path.open("rb") as stream, pytest.raises(WorkloadImportFailed) as info:
        workload_import_file(
            project=project, stream=stream, format_name="release", filename="release.zip"
        )
    assert row_counts() == before
    return [(e.location, e.field, e.reason) for e in info.value.errors]


def test_a_zip_bomb_member_the_manifest_does_not_list_is_refused_unwritten(
    empty_project, tmp_path, monkeypatch
):
    # 2 GiB of zeros compress to a few MB: the member is refused before a byte of it is written
    monkeypatch.setattr(tempfile, "TemporaryDirectory", _MeasuredDirectory)
    monkeypatch.setattr(_MeasuredDirectory, "held", [])
    directory = write_release(tmp_path / "r", full_records())
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name in (MANIFEST, *CONTENT_FILES):
            archive.write(directory / name, name)
        with archive.open("padding.bin", "w", force_zip64=True) as member:
            block = bytes(1 << 20)
            for _ in range(2048):
                member.write(block)
    assert path.stat().st_size < 20 * 2**20

    errors = _import_zip(empty_project, path)

    assert errors == [
        (
            "release.zip",
            "(archive)",
            "zip member 'padding.bin': not a file the manifest lists",
        )
    ]
    assert len(_MeasuredDirectory.held) == 1
    assert _MeasuredDirectory.held[0] <= _cap(directory)


def test_a_listed_member_larger_than_its_manifest_size_is_refused_at_the_cap(
    empty_project, tmp_path, monkeypatch
):
    monkeypatch.setattr(tempfile, "TemporaryDirectory", _MeasuredDirectory)
    monkeypatch.setattr(_MeasuredDirectory, "held", [])
    directory = write_release(tmp_path / "r", full_records())
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.write(directory / MANIFEST, MANIFEST)
        with archive.open(LABELS_JSONL, "w", force_zip64=True) as member:
            member.write((directory / LABELS_JSONL).read_bytes())
            block = b"\n" * (1 << 20)
            for _ in range(64):
                member.write(block)
        for name in CONTENT_FILES:
            if name != LABELS_JSONL:
                archive.write(directory / name, name)
    size = (directory / LABELS_JSONL).stat().st_size

    errors = _import_zip(empty_project, path)

    assert errors == [
        (
            "release.zip",
            "(archive)",
            f"zip member '{LABELS_JSONL}': larger than the manifest says ({size} B)",
        )
    ]
    assert _MeasuredDirectory.held and _MeasuredDirectory.held[0] <= _cap(directory)


def _link(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


@pytest.mark.parametrize(
    ("members", "problem"),
    [
        (
            lambda files: (
                [f for f in files if f[0].filename != "ledger.json"]
                + [_link("ledger.json", "/etc/passwd")]
            ),
            "zip member 'ledger.json': a link",
        ),
        (
            lambda files: (
                [(zipfile.ZipInfo(f"a/{i.filename}"), data) for i, data in files[:2]]
                + [(zipfile.ZipInfo(f"b/{i.filename}"), data) for i, data in files[2:]]
            ),
            "the zip holds more than one folder: a release is one folder or none",
        ),
        (
            lambda files: [(zipfile.ZipInfo(f"a/b/{i.filename}"), d) for i, d in files],
            "zip member 'a/b/manifest.json': not a file of the release",
        ),
        (
            lambda files: [f for f in files if f[0].filename != MANIFEST],
            "no manifest.json in the zip",
        ),
    ],
)
def test_zip_members_outside_the_release_are_refused(empty_project, tmp_path, members, problem):
    directory = write_release(tmp_path / "r", full_records())
    files = [
        (zipfile.ZipInfo(name), (directory / name).read_bytes())
        for name in (MANIFEST, *CONTENT_FILES)
    ]
    path = tmp_path / "release.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for info, data in members(files):
            archive.writestr(info, data)

    errors = _import_zip(empty_project, path)

    assert errors == [("release.zip", "(archive)", problem)]


def test_the_temporary_copy_of_a_zip_is_removed_whatever_the_outcome(
    project, tmp_path, monkeypatch
):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    good = write_release(tmp_path / "good", full_records())
    records = full_records()
    records[0]["resolution"]["adjudicator"] = "r-someone"  # a consensus has no adjudicator
    bad = write_release(tmp_path / "bad", records)
    empty = project_create(slug="other", name="Other")

    with pytest.raises(WorkloadImportFailed):
        workload_import_file(
            project=project,
            stream=io.BytesIO(zip_release(bad)),
            format_name="release",
            filename="release.zip",
        )
    result = workload_import_file(
        project=empty,
        stream=io.BytesIO(zip_release(good)),
        format_name="release",
        filename="release.zip",
    )

    assert result.created["questions"] == 4
    assert list(scratch.iterdir()) == []


def test_a_file_that_is_not_a_zip_is_refused(api, project):
    response = api(Role.MANAGER).post(
        f"/api/projects/{project.slug}/imports/",
        {"file": SimpleUploadedFile("release.zip", b"{}\n"), "format": "release"},
        format="multipart",
    )

    assert response.status_code == 400
    assert "not a zip archive" in json.dumps(response.json())


# -- records ------------------------------------------------------------------------------------


def test_evidence_with_another_sha256_is_refused(empty_project, tmp_path):
    records = simple_records()
    cited = records[0]["annotations"][0]["claim_labels"][0]["evidence"][0]
    cited["sha256"] = "0" * 64
    directory = write_release(tmp_path / "r", records, policies=[DEFAULT_POLICY], partition=None)

    errors = refused_directory(empty_project, directory)

    assert errors == [
        (
            f"{LABELS_JSONL} line 1",
            "annotations[0].claim_labels[0].evidence[0].sha256",
            "differs from the sha256 of version 1 of 'doc-a'",
        )
    ]


def test_evidence_in_a_version_the_question_does_not_retrieve_is_refused(empty_project, tmp_path):
    records = simple_records()
    records[0]["resolution"]["claim_labels"][0]["evidence"] = [
        evidence("doc-a", 2, "opens at 10:00")
    ]
    directory = write_release(tmp_path / "r", records, policies=[DEFAULT_POLICY], partition=None)

    errors = refused_directory(empty_project, directory)

    assert errors == [
        (
            f"{LABELS_JSONL} line 1",
            "resolution.claim_labels[0].evidence[0].version",
            "cites version 2 of 'doc-a', which the question does not retrieve",
        )
    ]


def test_source_text_that_does_not_match_its_sha256_is_refused(empty_project, tmp_path):
    sources = [dict(s) for s in SOURCES]
    sources[0]["sha256"] = "f" * 64
    records = simple_records()
    for record in records:
        record["question"]["sources"][0]["sha256"] = "f" * 64
    records[0]["annotations"][0]["claim_labels"][0]["evidence"][0]["sha256"] = "f" * 64
    records[0]["resolution"]["claim_labels"][0]["evidence"][0]["sha256"] = "f" * 64
    directory = write_release(
        tmp_path / "r", records, sources=sources, policies=[DEFAULT_POLICY], partition=None
    )

    errors = refused_directory(empty_project, directory)

    assert [(location, field) for location, field, _ in errors] == [
        (f"{SOURCES_JSONL} line 1", "sha256")
    ]


def test_source_versions_out_of_order_are_refused(empty_project, tmp_path):
    # the first text of doc-a written is its version 1, whatever the line says
    sources = [SOURCES[1], SOURCES[0], *SOURCES[2:]]
    directory = write_release(
        tmp_path / "r", simple_records(), sources=sources, policies=[DEFAULT_POLICY], partition=None
    )

    errors = refused_directory(empty_project, directory)

    assert errors[0][:2] == (f"{SOURCES_JSONL} line 1", "version")
    assert "is version 1 of its document in this project, not 2" in errors[0][2]


@pytest.mark.parametrize("partition", [None, "test"])
def test_a_release_into_a_project_holding_questions_is_refused(
    project, import_records, tmp_path, partition
):
    import_records([native_record("n1")])
    directory = write_release(
        tmp_path / "r",
        simple_records(partition),
        policies=[DEFAULT_POLICY],
        partition=None if partition is None else {"seed": 1, "proportions": {"test": 1.0}},
    )

    errors = refused_directory(project, directory)

    assert errors == [
        (
            "r",
            "project",
            "project 'study' already holds questions; the release format imports into an "
            "empty project only (import it into a new project)",
        )
    ]


def test_records_with_and_without_partition_are_refused(empty_project, tmp_path):
    records = simple_records("test", q2_partition=None)
    directory = write_release(tmp_path / "r", records, policies=[DEFAULT_POLICY])

    errors = refused_directory(empty_project, directory)

    assert errors == [
        (
            f"{LABELS_JSONL} line 2",
            "partition",
            f"the first record ({LABELS_JSONL} line 1) gives partition: give every record a "
            "partition, or none",
        )
    ]


def test_questions_sharing_a_source_in_two_partitions_are_refused(empty_project, tmp_path):
    records = simple_records("test", q2_partition="calibration")
    directory = write_release(tmp_path / "r", records, policies=[DEFAULT_POLICY])

    errors = refused_directory(empty_project, directory)

    assert errors == [
        (
            f"{LABELS_JSONL} line 2",
            "partition",
            "question 'q2' is in 'calibration' but shares source document 'doc-a' with question "
            "'q1' in 'test'; questions sharing a group_key or a source document are in one "
            "partition",
        )
    ]


def test_a_corrected_release_into_the_project_of_its_parent_is_refused(tmp_path):
    # the same release again is "already imported"; a corrected one is another release
    first = write_release(tmp_path / "first", full_records())
    project = import_release(first)
    records = full_records()
    records[1]["resolution"]["rationale"] = "Another rationale."
    directory = write_release(tmp_path / "second", records)

    again = workload_import_file(
        project=project,
        stream=io.BytesIO(zip_release(first)),
        format_name="release",
        filename="release.zip",
    )
    errors = refused_directory(project, directory)

    assert again.already_imported
    assert errors == [
        (
            "second",
            "project",
            "project 'restored' already holds questions; the release format imports into an "
            "empty project only (import it into a new project)",
        )
    ]


def test_a_policy_version_the_release_does_not_list_is_refused(empty_project, tmp_path):
    records = simple_records()
    records[0]["annotations"][0]["policy_version"] = 3
    directory = write_release(tmp_path / "r", records, policies=[DEFAULT_POLICY], partition=None)

    errors = refused_directory(empty_project, directory)

    assert errors == [
        (
            f"{LABELS_JSONL} line 1",
            "candidates[0].prior_annotations[0].policy_version",
            "policy version 3 is not a label policy version of the project (versions [1])",
        )
    ]


def test_lines_of_one_question_that_are_not_consecutive_are_refused(empty_project, tmp_path):
    records = simple_records()
    again = json.loads(json.dumps(records[0]))
    again["candidate"]["id"] = "c9"
    directory = write_release(
        tmp_path / "r", [*records, again], policies=[DEFAULT_POLICY], partition=None
    )

    errors = refused_directory(empty_project, directory)

    assert (f"{LABELS_JSONL} line 3", "question.id") in [(loc, f) for loc, f, _ in errors]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (
            lambda r: r[0]["annotations"][0].pop("comment"),
            "not a release record: missing 'comment'",
        ),
        (
            lambda r: r[0]["annotations"][0]["claim_labels"][0]["evidence"][0].update(
                source=["doc-a"]
            ),
            "not a release record: a value has the wrong type",
        ),
    ],
)
def test_malformed_release_records_are_refused(empty_project, tmp_path, damage, reason):
    records = simple_records()
    damage(records)
    directory = write_release(tmp_path / "r", records, policies=[DEFAULT_POLICY], partition=None)

    errors = refused_directory(empty_project, directory)

    assert errors == [(f"{LABELS_JSONL} line 1", "(record)", reason)]


# -- fields the format does not define ---------------------------------------------------------

UNKNOWN = (
    "unknown field: release schema 1.0 does not define it (only a newer minor schema version "
    "may add fields, which are then ignored)"
)


def _copy(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records without objects shared between lines (one change, one place)."""
    return json.loads(json.dumps(records))


@pytest.mark.parametrize(
    ("line", "path", "field"),
    [
        (1, lambda r: r[0], "extra"),
        (1, lambda r: r[0]["question"], "question.extra"),
        (1, lambda r: r[0]["question"]["sources"][0], "question.sources[0].extra"),
        (1, lambda r: r[0]["candidate"], "candidate.extra"),
        (1, lambda r: r[0]["claims"][1], "claims[1].extra"),
        (1, lambda r: r[0]["annotations"][1], "annotations[1].extra"),
        (
            1,
            lambda r: r[0]["annotations"][0]["claim_labels"][1],
            "annotations[0].claim_labels[1].extra",
        ),
        (
            1,
            lambda r: r[0]["annotations"][0]["claim_labels"][0]["evidence"][0],
            "annotations[0].claim_labels[0].evidence[0].extra",
        ),
        (3, lambda r: r[2]["annotations"][0]["spans"][1], "annotations[0].spans[1].extra"),
        (
            3,
            lambda r: r[2]["annotations"][0]["spans"][0]["evidence"],
            "annotations[0].spans[0].evidence.extra",
        ),
        (1, lambda r: r[0]["resolution"], "resolution.extra"),
        (1, lambda r: r[0]["resolution"]["claim_labels"][1], "resolution.claim_labels[1].extra"),
        (
            1,
            lambda r: r[0]["resolution"]["claim_labels"][0]["evidence"][1],
            "resolution.claim_labels[0].evidence[1].extra",
        ),
        (1, lambda r: r[0]["evaluator_labels"][2], "evaluator_labels[2].extra"),
    ],
)
def test_a_field_the_format_does_not_define_is_refused(empty_project, tmp_path, line, path, field):
    records = _copy(full_records())
    path(records)["extra"] = None
    directory = write_release(tmp_path / "r", records)

    errors = refused_directory(empty_project, directory)

    assert errors == [(f"{LABELS_JSONL} line {line}", field, UNKNOWN)]


def test_a_sources_line_with_a_field_the_format_does_not_define_is_refused(empty_project, tmp_path):
    sources = [dict(s) for s in SOURCES]
    sources[2]["licence"] = "CC-BY"
    directory = write_release(tmp_path / "r", full_records(), sources=sources)

    errors = refused_directory(empty_project, directory)

    assert errors == [(f"{SOURCES_JSONL} line 3", "licence", UNKNOWN)]


def test_an_unknown_field_of_a_newer_major_is_not_reached(empty_project, tmp_path):
    # 2.0 is refused as a whole, before any line is read
    records = _copy(full_records())
    records[0]["extra"] = 1
    directory = write_release(tmp_path / "r", records, schema_version="2.0")

    errors = refused_directory(empty_project, directory)

    assert [field for _, field, _ in errors] == ["schema_version"]


# -- resolutions against the record -------------------------------------------------------------


def _unavailable(label: dict[str, Any], reason: str) -> None:
    label.update(label="evidence_unavailable", reason=reason, evidence=[])


@pytest.mark.parametrize(
    ("damage", "field", "reason"),
    [
        (
            lambda r: r[0].update(annotations=[]),
            "resolution.status",
            "a consensus resolution is the agreement of the record's annotations, but it has none",
        ),
        (
            lambda r: [a.update(answer_label=None) for a in r[0]["annotations"]],
            "resolution.status",
            "a consensus resolution is the agreement of the record's annotations, but it has "
            "no annotation with an answer label (only those are votes)",
        ),
        (
            lambda r: r[0]["annotations"][1].update(answer_label="inadmissible"),
            "annotations[1].answer_label",
            "differs from the answer_label of the consensus resolution (a consensus is the "
            "agreement of every vote)",
        ),
        (
            lambda r: r[0]["annotations"][0].update(answer_label="cannot_decide"),
            "annotations[0].answer_label",
            "cannot_decide never agrees, but the resolution is a consensus",
        ),
        (
            lambda r: [
                x.update(answer_label="evidence_unavailable", answer_reason=reason)
                for x, reason in zip(
                    [r[0]["resolution"], *r[0]["annotations"]],
                    ["blocked", "blocked", "not_found"],
                    strict=True,
                )
            ],
            "annotations[1].answer_reason",
            "differs from the answer_reason of the consensus resolution (with "
            "evidence_unavailable the reason is part of the vote)",
        ),
        (
            lambda r: r[0]["annotations"][1]["claim_labels"][1].update(label="not_supported"),
            "annotations[1].claim_labels[1].label",
            "differs from the consensus resolution's label of claim 1 (a consensus is the "
            "agreement of every vote)",
        ),
        (
            lambda r: r[0]["annotations"][1]["claim_labels"].pop(),
            "annotations[1].claim_labels",
            "no label for claim 1, but the resolution is a consensus (every vote labels every "
            "claim alike)",
        ),
        (
            lambda r: r[0]["annotations"][0]["claim_labels"][0].update(
                label="cannot_decide", evidence=[]
            ),
            "annotations[0].claim_labels[0].label",
            "cannot_decide never agrees, but the resolution is a consensus",
        ),
        (
            lambda r: r[0]["annotations"][0]["claim_labels"][0].update(label=None, evidence=[]),
            "annotations[0].claim_labels[0].label",
            "no label never agrees, but the resolution is a consensus",
        ),
        (
            lambda r: [
                _unavailable(label, reason)
                for label, reason in zip(
                    [
                        r[0]["resolution"]["claim_labels"][1],
                        r[0]["annotations"][0]["claim_labels"][1],
                        r[0]["annotations"][1]["claim_labels"][1],
                    ],
                    ["not_found", "blocked", "not_found"],
                    strict=True,
                )
            ],
            "annotations[0].claim_labels[1].reason",
            "differs from the consensus resolution's reason for claim 1 (with "
            "evidence_unavailable the reason is part of the vote)",
        ),
        (
            lambda r: r[0]["resolution"]["claim_labels"].pop(),
            "resolution.claim_labels",
            "a consensus resolution labels every claim of the candidate; no label for claim 1",
        ),
    ],
)
def test_a_consensus_the_annotations_do_not_agree_on_is_refused(
    empty_project, tmp_path, damage, field, reason
):
    records = _copy(full_records())
    damage(records)
    directory = write_release(tmp_path / "r", records)

    errors = refused_directory(empty_project, directory)

    assert errors == [(f"{LABELS_JSONL} line 1", field, reason)]


def test_an_adjudicated_resolution_without_a_label_for_every_claim_is_refused(
    empty_project, tmp_path
):
    records = _copy(full_records())
    records[1]["resolution"]["claim_labels"].pop(0)
    directory = write_release(tmp_path / "r", records)

    errors = refused_directory(empty_project, directory)

    assert errors == [
        (
            f"{LABELS_JSONL} line 2",
            "resolution.claim_labels",
            "an adjudicated resolution labels every claim of the candidate; no label for claim 0",
        )
    ]


# -- the native fields a release relies on ------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "field", "reason"),
    [
        (
            {"status": "consensus", "answer_label": "admissible", "adjudicator": "r-x"},
            "adjudicator",
            "a consensus resolution has no adjudicator",
        ),
        (
            {"status": "adjudicated", "answer_label": "admissible"},
            "adjudicator",
            "an adjudicated resolution names its adjudicator (a pseudonym)",
        ),
        (
            {"status": "unresolved", "adjudicator": "r-x"},
            "unresolved_reason",
            "an unresolved resolution needs an unresolved_reason",
        ),
        (
            {"status": "unresolved", "adjudicator": "r-x", "unresolved_reason": "bored"},
            "unresolved_reason",
            f"'bored' is not one of {sorted(UnresolvedReason.values)}",
        ),
        (
            {
                "status": "unresolved",
                "adjudicator": "r-x",
                "unresolved_reason": "other",
                "answer_label": "admissible",
            },
            "answer_label",
            "an unresolved resolution has no answer_label",
        ),
        (
            {"status": "adjudicated", "adjudicator": "r-x"},
            "answer_label",
            "a adjudicated resolution needs an answer_label",
        ),
        (
            {"status": "consensus", "answer_label": "cannot_decide"},
            "answer_label",
            f"'cannot_decide' is not one of {sorted(DEFAULT_ANSWER_LABELS)}",
        ),
        (
            {
                "status": "consensus",
                "answer_label": "admissible",
                "claim_labels": [
                    {
                        "claim": 0,
                        "label": "supported",
                        "evidence": [{"source": "doc-q1", "start": 4, "end": 4, "quote": ""}],
                    }
                ],
            },
            "claim_labels[0].evidence[0].end",
            "resolved evidence cites at least one code point",
        ),
    ],
)
def test_native_resolution_mirrors_the_database_constraints(
    project, import_records, given, field, reason
):
    record = native_record()
    record["candidates"][0]["resolution"] = given
    before = row_counts()

    with pytest.raises(WorkloadImportFailed) as info:
        import_records([record])

    assert [(e.field, e.reason) for e in info.value.errors] == [
        (f"candidates[0].resolution.{field}", reason)
    ]
    assert row_counts() == before


def test_native_resolution_after_labelling_started_is_refused_for_stored_items(
    project, import_records
):
    from tests.factories import start_labelling

    import_records([native_record()])
    start_labelling(project)
    record = native_record()
    record["candidates"][1]["resolution"] = {"status": "consensus", "answer_label": "admissible"}

    with pytest.raises(WorkloadImportFailed) as info:
        import_records([record])

    assert info.value.errors[0].field == "candidates[1].resolution"
    assert "labelling has started" in info.value.errors[0].reason


def test_unanchored_claim_with_offsets_is_refused(project, import_records):
    record = native_record()
    record["candidates"][0]["claims"][0]["unanchored"] = True

    with pytest.raises(WorkloadImportFailed) as info:
        import_records([record])

    assert [(e.field, e.reason) for e in info.value.errors] == [
        ("candidates[0].claims[0].unanchored", "an unanchored claim has no start and end")
    ]


def test_unanchored_claim_is_not_located_even_when_its_text_occurs(project, import_records):
    record = native_record()
    record["candidates"][0]["claims"][1]["unanchored"] = True

    result = import_records([record])

    stored = Claim.objects.get(candidate__key="c0", index=1)
    assert (stored.unanchored, stored.start, stored.end) == (True, None, None)
    assert result.created["unanchored_claims"] == 1


def test_prior_provenance_fields_are_stored(project, import_records):
    record = native_record()
    record["candidates"][0]["prior_annotations"] = [
        {
            "annotator": "ann-1",
            "answer_label": "cannot_decide",
            "labelled_at": "2024-05-01T12:00:00+02:00",
            "policy_version": 1,
            "time_spent_seconds": 3,
            "claim_labels": [{"claim": 0, "label": "cannot_decide", "boundary_error": True}],
        }
    ]

    import_records([record])

    prior = PriorAnnotation.objects.get()
    assert prior.labelled_at.isoformat() == "2024-05-01T10:00:00+00:00"
    assert (prior.policy.version, prior.time_spent_seconds) == (1, 3.0)
    assert prior.claim_labels.get().boundary_error is True


def test_prior_fingerprint_without_provenance_is_unchanged():
    # a prior imported before the provenance fields existed keeps its fingerprint
    prior = PriorAnnotationIn(annotator="ann-1", answer_label="admissible")
    old = prior.model_dump(
        mode="json", exclude={"labelled_at", "policy_version", "time_spent_seconds"}
    )

    assert prior_fingerprint(prior) == fingerprint(old)


def test_native_partition_needs_a_seed_from_the_format(project, import_records):
    before = row_counts()

    with pytest.raises(WorkloadImportFailed) as info:
        import_records([native_record(partition="dev")])

    assert [(e.field, e.reason) for e in info.value.errors] == [
        (
            "partition",
            "the records give partitions but the input gives no seed and proportions to freeze "
            "the split with",
        )
    ]
    assert row_counts() == before


def test_resolution_model_defaults():
    resolution = ResolutionIn(status="consensus", answer_label="admissible")

    assert (resolution.resolved_at, resolution.policy_version, resolution.claim_labels) == (
        None,
        None,
        [],
    )


def test_native_literals_match_the_model_choices():
    from typing import get_args

    from labeling.importers.schema import PolicyIn, WorkloadRecord
    from labeling.models import EvidenceRelation, Partition, ResolutionStatus

    def literal(model: Any, name: str) -> set[str]:
        args = get_args(model.model_fields[name].annotation)
        return {a for arg in args for a in (get_args(arg) or (arg,)) if isinstance(a, str)}

    assert literal(WorkloadRecord, "partition") == set(Partition.values)
    assert literal(ResolutionIn, "status") == set(ResolutionStatus.values)
    assert literal(PolicyIn, "evidence_relation") == set(EvidenceRelation.values)


def test_an_empty_unknown_key_is_named_as_a_field(empty_project, tmp_path):
    # found by the import fuzz test: the error's field was the empty string
    records = full_records()
    records[0][""] = 1
    directory = write_release(tmp_path / "r", records)

    with pytest.raises(WorkloadImportFailed) as refused:
        workload_import_directory(project=empty_project, directory=directory, format_name="release")

    [error] = refused.value.data["errors"]
    assert (error["location"], error["field"]) == ("labels.jsonl line 1", '""')
