"""Releases of a RAGAS table and of RAGTruth round-trip: import -> release -> import -> release.

The hand-written fixtures of ``tests/labeling/importers/fixtures`` are imported with their
adapters, released, the release imported into an empty project, and that project's release
must hold byte-identical ``labels.jsonl`` and ``sources.jsonl`` with the same counts.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from labeling.models import Project
from labeling.services import partition_freeze
from tests.certification.test_release_round_trip_real_data import _import, _round_trip
from tests.factories import start_labelling

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parents[1] / "labeling" / "importers" / "fixtures"


def test_a_ragas_table_round_trips_with_its_scores_and_reference(tmp_path):
    call_command(
        "import_workload",
        str(FIXTURES / "ragas_eval.jsonl"),
        "--project",
        "rg",
        "--create",
        "--format",
        "ragas",
        "--evaluator-version",
        "ragas-0.2.6",
        "--no-progress",
        stdout=io.StringIO(),
    )
    project = Project.objects.get(slug="rg")
    partition_freeze(
        project=project, proportions={"dev": 0.2, "calibration": 0.4, "test": 0.4}, seed=3
    )
    project = start_labelling(project, overlap=2)
    counts, _ = _round_trip(project, tmp_path)
    overall = counts["counts"]["overall"]
    assert overall["items"]["count"] == 3
    assert overall["evaluator_labels"]["count"] == 6


def test_ragtruth_round_trips_with_its_split_and_prior_labels(tmp_path):
    project = _import([FIXTURES / "ragtruth"], "rt", "ragtruth")
    project = start_labelling(project, overlap=2)
    counts, _ = _round_trip(project, tmp_path)
    overall = counts["counts"]["overall"]
    assert overall["items"]["count"] == 6
    assert overall["annotations"]["count"] == 6
    assert counts["partition"]["seed"] == 0
