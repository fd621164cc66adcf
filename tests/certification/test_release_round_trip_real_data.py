"""Releases of real data round-trip: FaithBench and ExpertQA from ../shared/data.

Each project is labelled the way a team would: imported annotators' labels count as votes,
disagreements are adjudicated (FaithBench: the declared worst-label rule of the calibration
worked example) or marked unresolved, and on ExpertQA a person adds their own labels with
evidence through the real services. The release is then frozen, built, imported into an empty
project with the release importer, and that project's release must hold byte-identical
``labels.jsonl`` and ``sources.jsonl`` with the same counts.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import TestCase

from certification.models import BuildStatus
from certification.selectors import release_content_build
from certification.services.releases import (
    release_export,
    release_freeze,
)
from labeling.models import Claim, Item, ItemStatus, Project, RetrievalLink, Role
from labeling.offsets import UNIT_CODEPOINT
from labeling.release_format import LABELS_JSONL, SOURCES_JSONL
from labeling.release_verify import verify_release
from labeling.services import (
    adjudication_mark_unresolved,
    item_claim_next,
    membership_set,
    partition_freeze,
)
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput
from tests.certification.test_real_data_calibration import _adjudicate_worst
from tests.factories import UserFactory, start_labelling

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]


def _import(paths: list[Path], slug: str, fmt: str) -> Project:
    call_command(
        "import_workload",
        *paths,
        "--project",
        slug,
        "--create",
        "--format",
        fmt,
        "--no-progress",
        stdout=io.StringIO(),
    )
    return Project.objects.get(slug=slug)


def _manager(project: Project) -> Any:
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    return manager


def _release(project: Project, out: Path) -> Path:
    """Freeze, build and export a release of ``project``; return its directory."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        release = release_freeze(project=project, actor=_manager(project), version="1")
    build = release_content_build(release)
    assert build.status == BuildStatus.DONE, build.error
    return release_export(release=release, directory=out)


def _round_trip(project: Project, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    original = _release(project, tmp_path / "original")
    call_command(
        "import_workload",
        str(original / "release.zip"),
        "--project",
        f"{project.slug}-copy",
        "--create",
        "--format",
        "release",
        "--no-progress",
        stdout=io.StringIO(),
    )
    copy = Project.objects.get(slug=f"{project.slug}-copy")
    again = _release(copy, tmp_path / "copy")
    for name in (LABELS_JSONL, SOURCES_JSONL):
        assert (again / name).read_bytes() == (original / name).read_bytes(), name
    first, second = verify_release(original), verify_release(again)
    assert second["counts"] == first["counts"]
    assert second["policies"] == first["policies"]
    assert second["partition"] == first["partition"]
    return first, second


def test_faithbench_release_round_trips_with_adjudicated_and_unresolved_items(
    shared_data, tmp_path
):
    paths = [
        shared_data / "faithbench" / "data_for_release" / f"batch_{b}.json" for b in range(1, 9)
    ]
    project = _import(paths, "fb", "faithbench")
    partition_freeze(
        project=project, proportions={"dev": 0.2, "calibration": 0.4, "test": 0.4}, seed=7
    )
    project = start_labelling(project, overlap=2)
    # 30 disagreements are left unresolved by an adjudicator; the others get the worst label.
    adjudicator = UserFactory()
    membership_set(project=project, user=adjudicator, role=Role.ADJUDICATOR)
    for item in Item.objects.filter(project=project, status=ItemStatus.DISAGREEMENT).order_by("pk")[
        :30
    ]:
        adjudication_mark_unresolved(
            project=project,
            item_id=item.pk,
            actor=adjudicator,
            expected_version=item.version,
            reason="ambiguous_guideline",
            rationale="Benign and Questionable flags disagree with the guideline.",
        )
    adjudicated = _adjudicate_worst(project)
    assert adjudicated == 265 - 30

    counts, _ = _round_trip(project, tmp_path)
    overall = counts["counts"]["overall"]
    assert overall["items"]["count"] == 400
    assert overall["consensus"]["count"] == 135
    assert overall["adjudicated"]["count"] == 235
    assert overall["unresolved"]["count"] == 30
    assert overall["annotations"]["count"] == 1100  # every batch annotator's labels, kept
    assert overall["evaluator_labels"]["count"] == 3200


def test_expertqa_release_round_trips_with_people_s_labels_and_pending_items(shared_data, tmp_path):
    path = shared_data / "expertqa" / "data" / "lfqa" / "domain_test.first120.jsonl"
    project = _import([path], "eq", "expertqa")
    partition_freeze(
        project=project, proportions={"dev": 0.2, "calibration": 0.4, "test": 0.4}, seed=11
    )
    project = start_labelling(project, overlap=2)
    # A person adds the second vote on 40 items, citing the first passage for supported claims.
    annotator = UserFactory()
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    for turn in range(40):
        assignment = item_claim_next(project=project, actor=annotator)
        candidate = assignment.item.candidate
        link = (
            RetrievalLink.objects.filter(question_id=candidate.question_id)
            .select_related("source_version")
            .order_by("rank", "pk")
            .first()
        )
        claims = []
        for claim in Claim.objects.filter(candidate=candidate).order_by("index"):
            if link is not None and turn % 2 == 0:
                text = link.source_version.text
                quote = text[: min(len(text), 40)]
                evidence = (
                    EvidenceInput(
                        link.source_version_id, 0, len(quote), quote, unit=UNIT_CODEPOINT
                    ),
                )
                claims.append(ClaimInput(claim_id=claim.pk, label="supported", evidence=evidence))
            else:
                claims.append(ClaimInput(claim_id=claim.pk, label="not_supported"))
        annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=annotator,
            data=AnnotationInput(
                answer_label="admissible",
                claims=tuple(claims),
                comment=f"turn {turn}",
                time_spent_seconds=12.5,
            ),
        )

    counts, _ = _round_trip(project, tmp_path)
    overall = counts["counts"]["overall"]
    assert overall["items"]["count"] == 120
    assert overall["annotations"]["count"] == 120 + 40  # the expert on all, the person on 40
    assert overall["pending"]["count"] >= 80  # items still waiting for their second vote
