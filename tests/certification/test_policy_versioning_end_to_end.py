"""Policy versioning end to end: label under v1, publish v2 with a changed label set, label
under v2; agreement, calibration inputs and the release count both versions apart."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import TestCase

from certification.models import BuildStatus
from certification.selectors import agreement_report_get, release_content_build
from certification.selectors.calibration import calibration_inputs
from certification.services import agreement_recompute
from certification.services.releases import release_export, release_freeze, release_rebuild
from labeling.models import Item, ItemStatus, PriorAnnotation, Resolution, Role
from labeling.release_format import LABELS_JSONL, MANIFEST
from labeling.release_verify import verify_release
from labeling.selectors.policies import policy_description_data
from labeling.selectors.review import labelling_policy_get
from labeling.services import membership_set, partition_freeze
from labeling.services.policy_versions import Resolved, policy_version_publish
from tests.factories import UserFactory, make_spec, start_labelling, work_record
from tests.labeling.services.test_policy_versions import vote
from tests.labeling.test_release_import import import_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(project, import_records, member) -> dict[str, Any]:
    import_records([work_record()])
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    # every question in the calibration partition, so calibration reads both items
    partition_freeze(
        project=project,
        actor=manager,
        seed=1,
        proportions={"dev": 0.0, "calibration": 1.0, "test": 0.0},
    )
    start_labelling(project, overlap=2)
    return {
        "project": project,
        "manager": manager,
        "ann": [member(Role.ANNOTATOR), member(Role.ANNOTATOR)],
        "c0": Item.objects.get(candidate__key="c0"),
        "c1": Item.objects.get(candidate__key="c1"),
    }


def publish_v2(study: dict[str, Any]) -> None:
    data = policy_description_data(labelling_policy_get(project=study["project"]))
    data["answer_labels"] = [r for r in data["answer_labels"] if r["value"] != "abstained"]
    policy_version_publish(
        project=study["project"],
        actor=study["manager"],
        content=data,
        note="abstained is no longer an answer label",
        based_on_version=1,
        resolved=Resolved.KEEP,
    )


def test_both_versions_are_counted_apart_everywhere(study, tmp_path):
    # given: c0 resolved by consensus under v1 ("abstained"); c1 one vote under v1
    vote(study, 0, study["c0"], answer="abstained")
    vote(study, 1, study["c0"], answer="abstained")
    vote(study, 0, study["c1"], answer="abstained")
    # when v2 drops "abstained" and both annotators label c1 under it
    publish_v2(study)
    vote(study, 0, study["c1"], answer="inadmissible")
    vote(study, 1, study["c1"], answer="inadmissible")
    assert Item.objects.get(pk=study["c1"].pk).status == ItemStatus.RESOLVED

    # agreement: one row per version, never pooled
    agreement_recompute(project_id=study["project"].pk)
    view = agreement_report_get(project=study["project"], actor=study["manager"])
    assert [v.policy_version for v in view.versions] == [1, 2]
    answer = {v.policy_version: v.levels[0] for v in view.versions}
    assert (answer[1].n_votes, answer[1].n_units) == (3, 2)
    assert dict(answer[1].label_counts) == {"abstained": 3}
    assert (answer[2].n_votes, answer[2].n_units) == (2, 1)
    assert dict(answer[2].label_counts) == {"inadmissible": 2}
    assert view.policy_version == 2 and view.levels[0].n_votes == 2

    # calibration inputs: the resolved candidates per version, flagged as mixed
    inputs = calibration_inputs(spec=make_spec(study["project"]))
    assert inputs["policy_versions"]["calibration"] == {"1": 1, "2": 1}
    assert inputs["mixed_policy_versions"] is True
    versions = {
        c["item"]: c["policy_version"] for q in inputs["calibration"] for c in q["candidates"]
    }
    assert versions == {study["c0"].pk: 1, study["c1"].pk: 2}

    # the release: per-version counts in the manifest, every annotation with its version
    with TestCase.captureOnCommitCallbacks(execute=True):
        release = release_freeze(
            project=study["project"], actor=study["manager"], version="1", run_ids=[]
        )
    assert release_content_build(release).status == BuildStatus.DONE
    directory = release_export(release=release, directory=tmp_path)
    manifest = json.loads((directory / MANIFEST).read_text("utf-8"))
    per_version = manifest["counts"]["per_policy_version"]
    assert list(per_version) == ["1", "2"]
    assert per_version["1"]["annotations"] == {"count": 3, "denominator": 5, "of": "annotations"}
    assert per_version["2"]["annotations"] == {"count": 2, "denominator": 5, "of": "annotations"}
    assert per_version["1"]["consensus"]["count"] == per_version["2"]["consensus"]["count"] == 1
    assert [p["version"] for p in manifest["policies"]] == [1, 2]
    records = {
        r["candidate"]["id"]: r
        for r in map(json.loads, (directory / LABELS_JSONL).read_text("utf-8").splitlines())
    }
    c1 = next(r for key, r in records.items() if key.endswith("c1"))
    assert sorted(a["policy_version"] for a in c1["annotations"]) == [1, 2, 2]
    assert c1["resolution"]["policy_version"] == 2
    assert "v1: 3 annotations" in (directory / "README.md").read_text("utf-8")
    verify_release(directory)

    # restored from the release, a person's two votes of c1 are kept, one per version
    restored = import_release(directory)
    priors = sorted(
        PriorAnnotation.objects.filter(
            candidate__question__project=restored, candidate__key="c1"
        ).values_list("policy__version", "answer_label")
    )
    assert priors == [(1, "abstained"), (2, "inadmissible"), (2, "inadmissible")]
    assert (
        Resolution.objects.get(item__project=restored, item__candidate__key="c1").policy.version
        == 2
    )

    # a rebuild is byte-identical
    with TestCase.captureOnCommitCallbacks(execute=True):
        rebuild = release_rebuild(release=release, actor=study["manager"])
    rebuild.refresh_from_db()
    assert rebuild.matches is True, rebuild.mismatches
