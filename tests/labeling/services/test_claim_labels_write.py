"""claim_labels_write: the one writer of claim labels and their evidence (all four kinds).

From plain values, by INSERT (a submit, a start) or by the import's bulk path (``copy``).
"""

from __future__ import annotations

import pytest
from django.db import transaction

from labeling.models import (
    Claim,
    GoldClaimLabel,
    GoldEvidence,
    Item,
    PriorAnnotation,
    PriorClaimLabel,
    PriorEvidence,
    Resolution,
    ResolutionStatus,
    ResolvedClaimLabel,
    ResolvedEvidence,
    SourceVersion,
)
from labeling.services.claim_labels import EvidenceValues, claim_labels_write, evidence_model
from tests.conftest import native_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def target(project, import_records):
    """The imported c0 (two claims), its item, the source version and its text."""
    import_records([native_record()])
    item = Item.objects.get(candidate__key="c0")
    claims = list(Claim.objects.filter(candidate_id=item.candidate_id).order_by("index"))
    version = SourceVersion.objects.get()
    return item, claims, version


def _span(version: SourceVersion, quote: str) -> EvidenceValues:
    start = version.text.index(quote)
    return (version.pk, start, start + len(quote), quote)


def _resolution(project, item) -> Resolution:
    return Resolution.objects.create(
        item=item,
        number=1,
        status=ResolutionStatus.ADJUDICATED,
        policy=project.policies.order_by("-version").first(),
        answer_label="admissible",
        adjudicator_pseudonym="adjudicator-1",
    )


def test_each_kind_of_claim_label_has_its_evidence_table():
    assert evidence_model(ResolvedClaimLabel) is ResolvedEvidence
    assert evidence_model(PriorClaimLabel) is PriorEvidence
    assert evidence_model(GoldClaimLabel) is GoldEvidence


@pytest.mark.parametrize("copy", [False, True])
def test_writes_the_labels_in_order_then_their_evidence_in_two_statements(
    project, target, copy, django_assert_max_num_queries
):
    item, claims, version = target
    resolution = _resolution(project, item)
    harbour = _span(version, "It spans the harbour")
    opened = _span(version, "The bridge opened in 1932")

    # Two inserts; the bulk path also reserves the ids of each table (and on PostgreSQL may
    # look the table's sequence up once per process).
    with transaction.atomic(), django_assert_max_num_queries(2 if not copy else 8):
        label_ids, evidence_ids = claim_labels_write(
            ResolvedClaimLabel,
            ("resolution_id", "claim_id", "label", "reason", "evidence_waived"),
            [
                ((resolution.pk, claims[1].pk, "supported", None, False), [harbour, opened]),
                ((resolution.pk, claims[0].pk, "evidence_unavailable", "not_found", False), []),
            ],
            copy=copy,
        )

    assert list(
        ResolvedClaimLabel.objects.order_by("pk").values_list(
            "pk", "claim__index", "label", "reason", "evidence_waived"
        )
    ) == [
        (label_ids[0], 1, "supported", None, False),
        (label_ids[1], 0, "evidence_unavailable", "not_found", False),
    ]
    assert list(
        ResolvedEvidence.objects.order_by("pk").values_list(
            "pk", "claim_label_id", "source_version_id", "start", "end", "quote"
        )
    ) == [
        (evidence_ids[0], label_ids[0], version.pk, 27, 47, "It spans the harbour"),
        (evidence_ids[1], label_ids[0], version.pk, 0, 25, "The bridge opened in 1932"),
    ]


def test_the_insert_writes_in_two_queries(project, target, django_assert_num_queries):
    item, claims, version = target
    resolution = _resolution(project, item)

    with django_assert_num_queries(2):
        claim_labels_write(
            ResolvedClaimLabel,
            ("resolution_id", "claim_id", "label"),
            [((resolution.pk, claims[0].pk, "supported"), [_span(version, "1932")])],
        )

    # The fields not given take the model's defaults.
    assert ResolvedClaimLabel.objects.get().evidence_waived is False


@pytest.mark.parametrize("copy", [False, True])
def test_nothing_to_write_runs_no_query(copy, django_assert_num_queries, db):
    with transaction.atomic(), django_assert_num_queries(0):
        assert claim_labels_write(ResolvedClaimLabel, ("label",), [], copy=copy) == ([], [])


def test_writes_a_prior_annotations_claim_labels_with_their_extra_fields(target):
    item, claims, version = target
    prior = PriorAnnotation.objects.create(
        candidate_id=item.candidate_id, annotator="expert-1", fingerprint="f" * 64
    )

    label_ids, evidence_ids = claim_labels_write(
        PriorClaimLabel,
        ("prior_annotation_id", "claim_id", "label", "boundary_error", "raw_label"),
        [
            (
                (prior.pk, claims[0].pk, "supported", True, '{"support": "Complete"}'),
                [_span(version, "1932")],
            )
        ],
    )

    stored = PriorClaimLabel.objects.get()
    assert (stored.pk, stored.label, stored.boundary_error, stored.raw_label) == (
        label_ids[0],
        "supported",
        True,
        {"support": "Complete"},
    )
    assert list(
        PriorEvidence.objects.values_list(
            "pk", "claim_label_id", "source_version_id", "start", "end", "quote"
        )
    ) == [(evidence_ids[0], stored.pk, version.pk, 21, 25, "1932")]
