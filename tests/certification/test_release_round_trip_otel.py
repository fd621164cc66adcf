"""An OTel trace import round-trips through a release: otel -> release -> release import.

The two hand-written OTLP fixtures of the OTel adapter tests are imported, split and labelled by
a person (claims cite the first retrieved document), frozen into a release and restored into an
empty project with the release importer; that project's release must hold byte-identical
``labels.jsonl`` and ``sources.jsonl`` with the same counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from labeling.models import Claim, Project, RetrievalLink, Role
from labeling.offsets import UNIT_CODEPOINT
from labeling.services import item_claim_next, membership_set, partition_freeze
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput, EvidenceInput
from tests.certification.test_release_round_trip_real_data import _import, _round_trip
from tests.factories import UserFactory, start_labelling

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parents[1] / "labeling" / "importers" / "otel"


def test_otel_traces_round_trip_through_a_release(tmp_path):
    project = _import(
        [FIXTURES / "genai_traces.jsonl", FIXTURES / "phoenix_trace.json"], "traces", "otel"
    )
    partition_freeze(
        project=project, proportions={"dev": 0.2, "calibration": 0.4, "test": 0.4}, seed=5
    )
    project = start_labelling(project, overlap=1)
    annotator = UserFactory()
    membership_set(project=project, user=annotator, role=Role.ANNOTATOR)
    for turn in range(3):
        assignment = item_claim_next(project=project, actor=annotator)
        candidate = assignment.item.candidate
        link = (
            RetrievalLink.objects.filter(question_id=candidate.question_id)
            .select_related("source_version")
            .order_by("rank")
            .first()
        )
        text = link.source_version.text
        evidence = (EvidenceInput(link.source_version_id, 0, 10, text[:10], unit=UNIT_CODEPOINT),)
        claims = tuple(
            ClaimInput(claim_id=claim.pk, label="supported", evidence=evidence)
            if turn % 2 == 0
            else ClaimInput(claim_id=claim.pk, label="not_supported")
            for claim in Claim.objects.filter(candidate=candidate).order_by("index")
        )
        annotation_submit(
            project=project,
            assignment_id=assignment.pk,
            actor=annotator,
            data=AnnotationInput(answer_label="admissible", claims=claims, time_spent_seconds=3.0),
        )

    counts, _ = _round_trip(project, tmp_path)
    overall = counts["counts"]["overall"]
    assert overall["items"]["count"] == 4
    assert overall["annotations"]["count"] == 3
    copy = Project.objects.get(slug="traces-copy")
    assert copy.questions.count() == 3
    assert Claim.objects.filter(candidate__question__project=copy).count() == 6
