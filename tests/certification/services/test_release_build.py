"""Release builds: contents, pinned state, byte-identical rebuilds, verification."""

from __future__ import annotations

import copy
import csv
import hashlib
import hmac
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import TestCase

from certification.models import AgreementReport, BuildStatus, Release, ReleaseBuild
from certification.selectors import release_content_build
from certification.services import agreement_recompute
from certification.services.releases import (
    release_export,
    release_freeze,
    release_rebuild,
)
from certification.services.releases.files import QuestionEncodings, encode_record, table_row
from labeling.exceptions import InvalidInput
from labeling.models import Disagreement, Item, Project, Role, SourceVersion
from labeling.release_format import (
    LABELS_JSONL,
    TABLE_COLUMNS,
    ReleaseFormatError,
    canonical_json,
    canonical_json_bytes,
    label_counts,
)
from labeling.release_verify import verify_release
from labeling.services import (
    adjudication_mark_unresolved,
    adjudication_resolve,
    membership_set,
    partition_freeze,
)
from labeling.services.label_checks import ClaimInput, EvidenceInput
from tests.conftest import module_data, native_record
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _user(name: str) -> Any:
    return get_user_model().objects.get(username=name)


@pytest.fixture(scope="module")
def _demo_once(django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any) -> Any:
    """:func:`demo`, written once per module (``tests/conftest.py``: ``module_data``)."""
    location = tmp_path_factory.mktemp("demo-releases")
    with module_data(django_db_blocker, location, DEBUG=True) as write:
        yield write(_demo)


@pytest.fixture
def demo(_demo_once: Project, settings: Any, db: None) -> Project:
    """The demo project: 2 consensus items, 2 disagreements; one adjudicated, one unresolved.

    Written once per module; each test runs in a savepoint rolled back after it, on a copy.
    """
    settings.DEBUG = True  # as while demo_setup ran (it runs only in development)
    return copy.deepcopy(_demo_once)


def _demo() -> Project:
    call_command("demo_setup", stdout=io.StringIO(), stderr=io.StringIO())
    project = Project.objects.get(slug="demo")
    adjudicator = _user("adjudicator")
    first, second = Disagreement.objects.filter(item__project=project).order_by("pk")
    item = first.item
    claims = list(item.candidate.claims.order_by("index"))
    source = SourceVersion.objects.filter(retrievals__question=item.candidate.question).first()
    quote = source.text[:20]
    adjudication_resolve(
        project=project,
        item_id=item.pk,
        actor=adjudicator,
        expected_version=item.version,
        answer_label="inadmissible",
        claims=[
            ClaimInput(
                claim_id=claim.pk,
                label="contradicted",
                evidence=(EvidenceInput(source.pk, 0, 20, quote, unit="codepoint"),),
            )
            for claim in claims
        ],
        rationale="The source contradicts both claims.",
    )
    other = Item.objects.get(pk=second.item_id)
    adjudication_mark_unresolved(
        project=project,
        item_id=other.pk,
        actor=adjudicator,
        expected_version=other.version,
        reason="ambiguous_guideline",
        rationale="The guideline is silent on opening hours.",
    )
    return project


def _records(directory: Path) -> list[dict[str, Any]]:
    with (directory / LABELS_JSONL).open("rb") as stream:
        return [json.loads(line) for line in stream]


def _freeze(project: Project, version: str = "1", **kwargs: Any) -> Release:
    """Freeze a release as the demo manager; its build runs when the freeze commits."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        return release_freeze(project=project, actor=_user("manager"), version=version, **kwargs)


def test_release_holds_every_label_with_pseudonyms_and_exact_evidence(demo, tmp_path):
    release = _freeze(demo, notes="first cut")
    build = release_content_build(release)
    assert build.status == BuildStatus.DONE, build.error
    directory = release_export(release=release, directory=tmp_path)
    records = _records(directory)
    assert len(records) == 26
    by_status: dict[str, int] = {}
    for record in records:
        status = record["resolution"]["status"] if record["resolution"] else "pending"
        by_status[status] = by_status.get(status, 0) + 1
    assert by_status == {"consensus": 2, "adjudicated": 1, "unresolved": 1, "pending": 22}

    # Record order: question id, then sample index.
    keys = [(r["question"]["id"], r["candidate"]["sample_index"]) for r in records]
    assert keys == sorted(keys)

    # Every quote is the exact code-point slice of the pinned source version it names.
    sources = {
        (s["id"], s["version"]): s
        for s in map(json.loads, (directory / "sources.jsonl").read_text("utf-8").splitlines())
    }
    spans = 0
    for record in records:
        labels = [label for a in record["annotations"] for label in a["claim_labels"]]
        labels += record["resolution"]["claim_labels"] if record["resolution"] else []
        for label in labels:
            for span in label["evidence"]:
                source = sources[(span["source"], span["version"])]
                assert source["text"][span["start"] : span["end"]] == span["quote"]
                assert span["sha256"] == source["sha256"]
                assert hashlib.sha256(source["text"].encode()).hexdigest() == source["sha256"]
                spans += 1
    assert spans >= 10

    # People appear under the HMAC pseudonym only; no username anywhere in any file.
    key = demo.pseudonym_key
    expected = {
        "r-" + hmac.new(key.encode(), f"user:{_user(n).pk}".encode(), "sha256").hexdigest()[:16]
        for n in ("annotator1", "annotator2")
    }
    annotators = {a["annotator"] for r in records for a in r["annotations"]}
    assert annotators == expected
    adjudicated = next(r for r in records if (r["resolution"] or {}).get("status") == "adjudicated")
    assert adjudicated["resolution"]["adjudicator"] == (
        "r-"
        + hmac.new(key.encode(), f"user:{_user('adjudicator').pk}".encode(), "sha256").hexdigest()[
            :16
        ]
    )
    assert adjudicated["resolution"]["rationale"] == "The source contradicts both claims."
    for path in directory.iterdir():
        if path.suffix in {".jsonl", ".json", ".jsonld", ".csv", ".md"}:
            text = path.read_text("utf-8")
            if path.suffix == ".csv":
                text = text.split("\n", 1)[1]  # the header names an "adjudicator" column
            for name in ("annotator1", "annotator2", "adjudicator", "manager"):
                assert not re.search(rf'"{name}"(?!:)', text), (path.name, name)
            assert "user:" not in text

    # The three times are kept apart.
    labelled = records[[i for i, r in enumerate(records) if r["annotations"]][0]]
    assert labelled["annotations"][0]["labelled_at"].endswith("+00:00")
    assert (
        labelled["question"]["sources"][0]["published_at"]
        != labelled["question"]["sources"][0]["observed_at"]
    )

    # Manifest counts equal those recomputed independently from the labels file.
    manifest = verify_release(directory)
    assert manifest["counts"]["overall"] == label_counts(records)["overall"]
    assert manifest["counts"]["overall"]["unresolved"] == {
        "count": 1,
        "denominator": 26,
        "of": "items",
    }
    assert manifest["release"] == {
        "version": "1",
        "parent": None,
        "policy_version": 1,
        "notes": "first cut",
    }
    assert manifest["counts"]["sources"] == len(sources)


def test_csv_and_parquet_hold_the_same_rows_as_the_jsonl(demo, tmp_path):
    directory = release_export(release=_freeze(demo), directory=tmp_path)
    records = _records(directory)
    # Each line is the canonical JSON of its record (sorted keys, no spaces, UTF-8).
    lines = (directory / LABELS_JSONL).read_text("utf-8").splitlines()
    assert lines == [canonical_json(r) for r in records]
    expected = [table_row(r) for r in records]
    table = pq.read_table(directory / "labels.parquet")
    assert table.column_names == [name for name, _ in TABLE_COLUMNS]
    assert table.to_pylist() == expected
    with (directory / "labels.csv").open(encoding="utf-8", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected, strict=True):
        assert row["candidate_id"] == want["candidate_id"]
        assert row["status"] == want["status"]
        assert json.loads(row["annotations_json"]) == json.loads(want["annotations_json"])
        assert row["is_selected"] == ("true" if want["is_selected"] else "false")


def test_rebuild_is_byte_identical_and_later_labels_stay_out(demo, tmp_path):
    release = _freeze(demo)
    first = release_content_build(release)
    # Labels made after the freeze: an unresolved item is corrected into an adjudication.
    item = Item.objects.get(resolution__status="unresolved")
    adjudication_mark_unresolved(
        project=demo,
        item_id=item.pk,
        actor=_user("adjudicator"),
        expected_version=item.version,
        reason="source_problem",
        rationale="Changed my mind after the freeze.",
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        rebuild = release_rebuild(release=release, actor=_user("manager"))
    rebuild.refresh_from_db()
    assert rebuild.status == BuildStatus.DONE
    assert rebuild.matches is True, rebuild.mismatches
    assert rebuild.files == first.files and rebuild.archive_sha256 == first.archive_sha256

    old = _records(release_export(release=release, directory=tmp_path / "old"))
    assert "Changed my mind" not in json.dumps(old)
    newer = _freeze(demo, version="2", parent=release)
    new = _records(release_export(release=newer, directory=tmp_path / "new"))
    assert "Changed my mind" in json.dumps(new)


def test_zip_holds_the_same_bytes(demo, tmp_path):
    release = _freeze(demo)
    build = release_content_build(release)
    directory = release_export(release=release, directory=tmp_path)
    with zipfile.ZipFile(directory / "release.zip") as archive:
        names = archive.namelist()
        assert names[-1] == "demo-1/manifest.json"  # the manifest comes last
        for entry in build.files:
            data = archive.read(f"demo-1/{entry['name']}")
            assert hashlib.sha256(data).hexdigest() == entry["sha256"]
            assert (directory / entry["name"]).read_bytes() == data
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_verify_release_finds_a_flipped_byte_and_a_changed_count(demo, tmp_path):
    directory = release_export(release=_freeze(demo), directory=tmp_path)
    labels = directory / LABELS_JSONL
    data = bytearray(labels.read_bytes())
    original = bytes(data)
    index = data.index(b'"admissible"') + 2
    data[index] ^= 0x01  # "admissible" -> "`dmissible"
    labels.write_bytes(bytes(data))
    with pytest.raises(ReleaseFormatError) as caught:
        verify_release(directory)
    assert any(p.startswith("labels.jsonl: sha256 is") for p in caught.value.problems)

    labels.write_bytes(original)
    manifest_path = directory / "manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8"))
    manifest["counts"]["overall"]["consensus"]["count"] = 3
    manifest_path.write_text(json.dumps(manifest), "utf-8")
    with pytest.raises(ReleaseFormatError) as caught:
        verify_release(directory)
    assert any("consensus.count: manifest 3, recomputed 2" in p for p in caught.value.problems)


def test_report_and_provenance(demo, tmp_path):
    agreement_recompute(project_id=demo.pk)
    first = _freeze(demo)
    second = _freeze(demo, version="1.1.0", parent=first)
    directory = release_export(release=second, directory=tmp_path)
    report = json.loads((directory / "report.json").read_text("utf-8"))
    stored = AgreementReport.objects.get(project=demo)
    assert report["agreement"]["answer"]["alpha"] == stored.answer["alpha"]
    assert "user:" not in json.dumps(report)  # raters pseudonymised
    assert "user:" in json.dumps(stored.answer)
    prov = json.loads((directory / "provenance.jsonld").read_text("utf-8"))
    assert prov["@context"]["prov"] == "http://www.w3.org/ns/prov#"
    nodes = {node["@id"]: node for node in prov["@graph"]}
    release = nodes["urn:certlabel:demo:release:1.1.0"]
    assert release["prov:wasRevisionOf"] == {"@id": "urn:certlabel:demo:release:1"}
    derived = {ref["@id"] for ref in release["prov:wasDerivedFrom"]}
    assert "urn:certlabel:demo:release:1" in derived
    assert (
        sum(1 for d in derived if ":source:" in d)
        == SourceVersion.objects.filter(document__project=demo).count()
    )
    activities = [n for n in prov["@graph"] if n.get("@type") == "prov:Activity"]
    assert {a["rdfs:label"].split(" by ")[0] for a in activities} >= {
        "labelling",
        "adjudication",
        "evaluation",
    }


def test_version_rules(demo):
    first = _freeze(demo, version="2")
    for version, parent, field in [
        ("2", None, "version"),  # taken
        ("1", first, "version"),  # not above its parent
        ("1.2", None, "version"),  # neither integer nor MAJOR.MINOR.PATCH
        ("v3", None, "version"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            _freeze(demo, version=version, parent=parent)
        assert caught.value.field == field
    assert _freeze(demo, version="2.0.1", parent=first).parent == first
    assert ReleaseBuild.objects.filter(release__project=demo, status=BuildStatus.DONE).count() == 2


def test_hugging_face_datasets_loads_the_release(demo, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    directory = release_export(release=_freeze(demo), directory=tmp_path / "out")
    loaded = datasets.load_dataset(str(directory), cache_dir=str(tmp_path / "cache"))
    train = loaded["train"]
    assert train.num_rows == 26
    assert sorted(set(train["partition"])) == ["calibration", "dev", "test"]
    assert train.features["sample_index"].dtype == "int64"


def test_renaming_the_project_or_freezing_its_split_later_changes_no_byte(
    project, import_records, tmp_path
):
    # A project without a frozen split: its release keeps the questions unpartitioned even
    # after the split is frozen, and a rename after the freeze changes nothing either.
    import_records([native_record(f"q{n}") for n in range(4)])
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    slug = project.slug
    with TestCase.captureOnCommitCallbacks(execute=True):
        release = release_freeze(project=project, actor=manager, version="1")
    partition_freeze(project=project, proportions={"dev": 0.5, "calibration": 0.5}, seed=3)
    Project.objects.filter(pk=project.pk).update(name="Renamed", slug="renamed")
    release.refresh_from_db()
    with TestCase.captureOnCommitCallbacks(execute=True):
        rebuild = release_rebuild(release=release, actor=manager)
    rebuild.refresh_from_db()
    assert rebuild.matches is True, rebuild.mismatches
    records = _records(release_export(release=release, directory=tmp_path))
    assert {r["question"]["partition"] for r in records} == {None}
    assert (tmp_path / f"{slug}-1").is_dir()


def test_an_abandoned_build_is_started_again(demo):
    from datetime import timedelta

    from django.utils import timezone

    from labeling.engine import lapse

    with TestCase.captureOnCommitCallbacks(execute=False):  # the task message is "lost"
        release = release_freeze(project=demo, actor=_user("manager"), version="1")
    build = release.builds.get()
    # A worker took it and died: its lease has had no heartbeat for longer than the lapse.
    dead = timezone.now() - lapse() - timedelta(seconds=1)
    ReleaseBuild.objects.filter(pk=build.pk).update(
        status=BuildStatus.RUNNING,
        started_at=dead,
        heartbeat_at=dead,
        lease_owner="elsewhere:1:dead-task",
        attempts=1,
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        again = release_rebuild(release=release, actor=_user("manager"))
    again.refresh_from_db()
    assert again.pk == build.pk
    assert again.status == BuildStatus.DONE, again.error
    assert again.lease_owner == "" and again.attempts == 2


def test_verify_release_checks_the_zip_extra_files_and_the_ledger(demo, tmp_path):
    directory = release_export(release=_freeze(demo), directory=tmp_path)
    verify_release(directory)  # the exported directory holds release.zip too, and it matches

    (directory / "notes.txt").write_text("mine")
    with pytest.raises(ReleaseFormatError) as caught:
        verify_release(directory)
    assert caught.value.problems == [
        "notes.txt: not part of the release (the manifest does not list it)"
    ]
    (directory / "notes.txt").unlink()

    # A zip whose labels differ from the files beside it.
    archive = directory / "release.zip"
    with zipfile.ZipFile(archive) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(archive, "w") as target:
        for info, data in members:
            target.writestr(
                info,
                data.replace(b"admissible", b"Admissible")
                if "labels.jsonl" in info.filename
                else data,
            )
    with pytest.raises(ReleaseFormatError) as caught:
        verify_release(directory)
    assert caught.value.problems == [
        "release.zip: member 'demo-1/labels.jsonl' differs from labels.jsonl"
    ]


def _rewrite_with_manifest(directory: Path, name: str, data: bytes) -> None:
    """Replace a file and make the manifest agree with it (a consistent tampering)."""
    (directory / name).write_bytes(data)
    manifest = json.loads((directory / "manifest.json").read_text("utf-8"))
    for entry in manifest["files"]:
        if entry["name"] == name:
            entry["sha256"] = hashlib.sha256(data).hexdigest()
            entry["size"] = len(data)
    (directory / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    (directory / "release.zip").unlink(missing_ok=True)  # it would no longer match


def test_verify_release_parses_strictly(demo, tmp_path):
    directory = release_export(release=_freeze(demo), directory=tmp_path)
    labels = (directory / LABELS_JSONL).read_bytes()
    _rewrite_with_manifest(
        directory, LABELS_JSONL, labels.replace(b"}\n", b',"resolution":null}\n', 1)
    )
    with pytest.raises(ReleaseFormatError) as caught:
        verify_release(directory)
    assert any("key 'resolution' repeats" in p for p in caught.value.problems)

    _rewrite_with_manifest(directory, LABELS_JSONL, labels)
    sources = (directory / "sources.jsonl").read_bytes()
    _rewrite_with_manifest(
        directory, "sources.jsonl", sources.replace(b"}\n", b',"x":Infinity}\n', 1)
    )
    with pytest.raises(ReleaseFormatError) as caught:
        verify_release(directory)
    assert any(p.startswith("sources.jsonl line 1: not JSON") for p in caught.value.problems)


def test_verify_release_refuses_a_zip_beside_the_files_with_more_members(demo, tmp_path):
    directory = release_export(release=_freeze(demo), directory=tmp_path)
    labels = (directory / LABELS_JSONL).read_bytes()
    with (
        zipfile.ZipFile(directory / "release.zip", "a") as archive,
        pytest.warns(UserWarning, match="Duplicate name"),
    ):
        archive.writestr("demo-1/labels.jsonl", labels)  # a second copy, same bytes
        archive.writestr("other/README.md", b"x")
    with pytest.raises(ReleaseFormatError) as caught:
        verify_release(directory)
    assert "release.zip: member 'demo-1/labels.jsonl' appears twice" in caught.value.problems
    assert any("more than one folder" in p for p in caught.value.problems)


def test_the_exporter_writes_exactly_the_keys_the_format_defines(demo, tmp_path):
    # One definition of the record (labeling/release_format.py) for the exporter and the
    # importer, which refuses any other key.
    from labeling import release_format as rf

    directory = release_export(release=_freeze(demo), directory=tmp_path)
    seen: set[str] = set()

    def exactly(obj: dict, keys: tuple[str, ...], what: str) -> None:
        assert set(obj) == set(keys), what
        seen.add(what)

    for record in _records(directory):
        exactly(record, rf.LABEL_RECORD_KEYS, "record")
        exactly(record["question"], rf.QUESTION_KEYS, "question")
        for source in record["question"]["sources"]:
            exactly(source, rf.QUESTION_SOURCE_KEYS, "question source")
        exactly(record["candidate"], rf.CANDIDATE_KEYS, "candidate")
        for claim in record["claims"]:
            exactly(claim, rf.CLAIM_KEYS, "claim")
        for annotation in record["annotations"]:
            exactly(annotation, rf.ANNOTATION_KEYS, "annotation")
            for label in annotation["claim_labels"]:
                exactly(label, rf.ANNOTATION_CLAIM_LABEL_KEYS, "annotation claim label")
                for span in label["evidence"]:
                    exactly(span, rf.EVIDENCE_KEYS, "evidence")
        if record["resolution"] is not None:
            exactly(record["resolution"], rf.RESOLUTION_RECORD_KEYS, "resolution")
            for label in record["resolution"]["claim_labels"]:
                exactly(label, rf.RESOLVED_CLAIM_LABEL_KEYS, "resolved claim label")
        for label in record["evaluator_labels"]:
            exactly(label, rf.EVALUATOR_LABEL_KEYS, "evaluator label")
    for line in (directory / "sources.jsonl").read_text("utf-8").splitlines():
        exactly(json.loads(line), rf.SOURCE_LINE_KEYS, "source line")
    assert len(seen) == 12  # every kind of object occurs in the demo release (spans aside)


def _encoded_record(**changes: Any) -> dict[str, Any]:
    """A labels.jsonl record (every key the flat row reads), with ``changes`` merged in."""
    record: dict[str, Any] = {
        "question": {
            "id": "q-1",
            "text": "What is the capital?",
            "group_key": "g",
            "partition": "test",
            "slices": {"domain": "geo"},
            "metadata": {"b": 1, "a": [0.5, None]},
            "sources": [{"id": "doc", "version": 1, "rank": 1, "score": 0.25}],
        },
        "candidate": {
            "id": "c-1",
            "text": "Paris.",
            "generator": "gen",
            "generator_settings": {"temperature": 0.7},
            "sample_index": 0,
            "canonical_form": "paris",
            "retrieval_score": 1e-05,
            "confidence": None,
            "acceptance_score": 0.5,
            "frequency_rank": 1,
            "is_selected": True,
            "metadata": {},
        },
        "claims": [{"index": 0, "text": "Paris.", "start": 0, "end": 6}],
        "annotations": [{"annotator": "r-1", "answer_label": "correct"}],
        "resolution": {
            "status": "consensus",
            "answer_label": "correct",
            "claim_labels": [{"claim": 0, "label": "supported"}],
        },
        "evaluator_labels": [],
    }
    for path, value in changes.items():
        part, key = path.split("__")
        record[part][key] = value
    return record


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"candidate__text": "Paris\u2028France"},
        {"question__text": "Capital?\u2029"},
        {"question__metadata": {"n": 2**70}},
        {"candidate__generator_settings": {"seed": -(2**65)}},
        {"question__slices": {"x": "\u2028"}, "candidate__metadata": {"n": 2**64}},
    ],
    ids=[
        "plain",
        "u2028-candidate",
        "u2029-question",
        "bigint-question",
        "bigint-candidate",
        "both",
    ],
)
def test_encode_record_gives_the_canonical_bytes(changes: dict[str, Any]) -> None:
    # The fast path (orjson alone) must give what the canonical encoder gives value by value,
    # and fall back to it where orjson refuses (integers beyond 64 bits) or the canonical form
    # escapes (U+2028, U+2029): the line, and every JSON column of the row.
    record = _encoded_record(**changes)
    line, row = encode_record(record, QuestionEncodings())
    # Each top-level value as canonical_json_bytes encodes it, in key order (the whole record
    # at once would differ where one value needs the standard library: its floats).
    values = [
        b'"%s":%s' % (key.encode(), canonical_json_bytes(record[key])) for key in sorted(record)
    ]
    assert line == b"{" + b",".join(values) + b"}"
    beyond_64_bits = any(
        isinstance(number, int) and abs(number) >= 2**63
        for value in changes.values()
        if isinstance(value, dict)
        for number in value.values()
    )
    if not beyond_64_bits:
        assert line == canonical_json_bytes(record)
    assert b"\xe2\x80\xa8" not in line and b"\xe2\x80\xa9" not in line
    question, candidate = record["question"], record["candidate"]
    assert row["claims_json"] == canonical_json(record["claims"])
    assert row["annotations_json"] == canonical_json(record["annotations"])
    assert row["evaluator_labels_json"] == canonical_json(record["evaluator_labels"])
    assert row["resolved_claim_labels_json"] == canonical_json(record["resolution"]["claim_labels"])
    assert row["sources_json"] == canonical_json(question["sources"])
    assert row["slices_json"] == canonical_json(question["slices"])
    assert row["question_metadata_json"] == canonical_json(question["metadata"])
    assert row["generator_settings_json"] == canonical_json(candidate["generator_settings"])
    assert row["candidate_metadata_json"] == canonical_json(candidate["metadata"])
