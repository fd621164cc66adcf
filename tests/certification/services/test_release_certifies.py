"""Releases say which runs certify and hold each run's per-question decisions on its test set.

One run certifies (t = 0.9, M* = 1); another (alpha 0.01 over one threshold) finds no certified
operating point. The release names both, each with its verdict, in the manifest, the dataset
card and the release page; ``report.json`` holds the decisions of every test question under
each run's certificate, and a rebuild stays byte-identical.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import TestCase

from certification.certificates.ledger import ledger_sha256
from certification.models import BuildStatus
from certification.services.releases import release_export, release_freeze, release_rebuild
from labeling.models import Role
from labeling.release_verify import verify_release
from labeling.services import membership_set, project_create
from tests.certification.apply_world import apply_project, apply_run
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> dict[str, Any]:
    project = apply_project(project_create(slug="study", name="Study"))
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    certified = apply_run(project)
    nothing = apply_run(project, method="selective_risk", alpha="0.01", thresholds=[0.5])
    with TestCase.captureOnCommitCallbacks(execute=True):
        release = release_freeze(
            project=project, actor=manager, version="1", run_ids=[certified.pk, nothing.pk]
        )
    return {
        "project": project,
        "manager": manager,
        "release": release,
        "certified": certified,
        "nothing": nothing,
    }


def test_the_manifest_and_card_say_which_runs_certify(world, tmp_path):
    directory = release_export(release=world["release"], directory=tmp_path / "out")
    manifest = json.loads((directory / "manifest.json").read_text("utf-8"))
    assert manifest["schema_version"] == "1.4"
    verdicts = {e["run"]["id"]: (e["certified"], e["reason"]) for e in manifest["certifies"]}
    reason = world["nothing"].result["selective_risk"]["reason"]
    assert verdicts == {
        world["certified"].pk: (True, None),
        world["nothing"].pk: (False, f"no certified operating point: {reason}"),
    }
    card = (directory / "README.md").read_text("utf-8")
    assert ": certifies." in card
    assert f": certifies nothing (no certified operating point: {reason})." in card
    verify_release(directory)  # raises ReleaseFormatError on any difference


def test_report_holds_the_test_decisions_matching_the_heldout_report(world, tmp_path):
    directory = release_export(release=world["release"], directory=tmp_path / "out")
    report = json.loads((directory / "report.json").read_text("utf-8"))
    by_run = {entry["run"]["id"]: entry for entry in report["heldout"]}
    entry = by_run[world["certified"].pk]
    decisions = entry["decisions"]["records"]
    assert len(decisions) == 30
    accepted = [
        d
        for r in decisions
        for d in r["selective_risk"]["decisions"]
        if d["decision"] == "accept" and d["excluded"] is None
    ]
    metrics = {m["name"]: m for m in entry["heldout"]["report"]["metrics"]}
    assert len(accepted) == metrics["answer_rate"]["numerator"] == 25
    assert sum(d["loss"] for d in accepted) == metrics["emitted_answer_risk"]["numerator"] == 0
    covers = [r["prediction_set"]["set_covers"] for r in decisions]
    assert sum(covers) == metrics["set_coverage"]["numerator"] == 25
    assert {r["prediction_set"]["size"] for r in decisions} == {1}
    reference = entry["decisions"]["certificate"]
    assert reference["run"] == world["certified"].pk
    assert reference["ledger_sha256"] == ledger_sha256(world["certified"].result["ledger"])
    assert "certificate" not in decisions[0]
    # the run without an operating point abstains everywhere (fail closed)
    closed = by_run[world["nothing"].pk]["decisions"]["records"]
    assert {d["reason"] for r in closed for d in r["selective_risk"]["decisions"]} == {
        "no_certified_operating_point"
    }


def test_a_rebuild_with_decisions_is_byte_identical(world):
    with TestCase.captureOnCommitCallbacks(execute=True):
        rebuild = release_rebuild(release=world["release"], actor=world["manager"])
    rebuild.refresh_from_db()
    assert rebuild.status == BuildStatus.DONE
    assert rebuild.matches is True, rebuild.mismatches


def test_the_release_page_marks_the_run_that_certifies_nothing(world, client):
    client.force_login(world["manager"])
    release = world["release"]
    page = client.get(f"/p/study/releases/{release.pk}/").content.decode()
    assert page.count('data-certified="yes"') == 1
    assert page.count('data-certified="no"') == 1
    assert "<strong>no</strong>: no certified operating point" in page
    listing = client.get("/p/study/releases/").content.decode()
    assert f"(run {world['nothing'].pk}: certifies nothing)" in listing
    assert f"(run {world['certified'].pk})" in listing


def test_a_both_run_whose_selective_half_certifies_nothing_lists_each_half(tmp_path, client):
    # given a both spec whose t = 0.5 certifies nothing (p = 0.3) while M* = 1 holds
    project = apply_project(project_create(slug="halves", name="Halves"))
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    run = apply_run(project, thresholds=[0.5])
    with TestCase.captureOnCommitCallbacks(execute=True):
        release = release_freeze(project=project, actor=manager, version="1", run_ids=[run.pk])
    # when it is exported
    directory = release_export(release=release, directory=tmp_path / "out")
    manifest = json.loads((directory / "manifest.json").read_text("utf-8"))
    [entry] = manifest["certifies"]
    # then the run certifies nothing as a whole, and each half says its own verdict
    reason = f"no certified operating point: {run.result['selective_risk']['reason']}"
    assert (entry["certified"], entry["reason"]) == (False, reason)
    assert entry["methods"] == {
        "selective_risk": {"certified": False, "reason": reason},
        "conformal_set": {"certified": True, "reason": None},
    }
    card = (directory / "README.md").read_text("utf-8")
    assert f": certifies conformal_set only ({reason})." in card
    verify_release(directory)
    # and the release list names the half that certifies
    client.force_login(manager)
    listing = client.get("/p/halves/releases/").content.decode()
    assert f"(run {run.pk}: certifies conformal_set only)" in listing
    assert "certifies nothing" not in listing
