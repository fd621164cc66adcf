"""claim_labels_write: the one writer of claim labels and their evidence (all three kinds).

claim_label_rows_insert and claim_label_values_write: the import's and the comparison's writers
of the same rows from plain values.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from labeling.models import (
    Claim,
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
from labeling.services.claim_labels import (
    Evidence,
    claim_label_rows_insert,
    claim_label_values_write,
    claim_labels_write,
)
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


def _span(version: SourceVersion, quote: str) -> Evidence:
    start = version.text.index(quote)
    return Evidence(version.pk, start, start + len(quote), quote)


def _resolution(project, item) -> Resolution:
    return Resolution.objects.create(
        item=item,
        number=1,
        status=ResolutionStatus.ADJUDICATED,
        policy=project.policies.order_by("-version").first(),
        answer_label="admissible",
        adjudicator_pseudonym="adjudicator-1",
    )


def test_writes_the_labels_in_order_then_their_evidence_in_two_queries(
    project, target, django_assert_num_queries
):
    item, claims, version = target
    resolution = _resolution(project, item)
    harbour = _span(version, "It spans the harbour")
    opened = _span(version, "The bridge opened in 1932")

    with django_assert_num_queries(2):
        rows, evidence = claim_labels_write(
            ResolvedEvidence,
            [
                (
                    ResolvedClaimLabel(resolution=resolution, claim=claims[1], label="supported"),
                    [harbour, opened],
                ),
                (
                    ResolvedClaimLabel(
                        resolution=resolution,
                        claim=claims[0],
                        label="evidence_unavailable",
                        reason="not_found",
                    ),
                    [],
                ),
            ],
        )

    assert [row.claim_id for row in rows] == [claims[1].pk, claims[0].pk]
    assert all(row.pk is not None for row in rows)
    assert list(
        ResolvedClaimLabel.objects.order_by("pk").values_list("claim__index", "label", "reason")
    ) == [(1, "supported", None), (0, "evidence_unavailable", "not_found")]
    assert list(
        ResolvedEvidence.objects.order_by("pk").values_list(
            "claim_label_id", "source_version_id", "start", "end", "quote"
        )
    ) == [
        (rows[0].pk, version.pk, 27, 47, "It spans the harbour"),
        (rows[0].pk, version.pk, 0, 25, "The bridge opened in 1932"),
    ]
    assert [(e.claim_label_id, e.start, e.end) for e in evidence] == [
        (rows[0].pk, 27, 47),
        (rows[0].pk, 0, 25),
    ]


def test_nothing_to_write_runs_no_query(django_assert_num_queries, db):
    with django_assert_num_queries(0):
        assert claim_labels_write(ResolvedEvidence, []) == ([], [])


def test_writes_a_prior_annotations_claim_labels_with_their_extra_fields(target):
    item, claims, version = target
    prior = PriorAnnotation.objects.create(
        candidate_id=item.candidate_id, annotator="expert-1", fingerprint="f" * 64
    )

    rows, evidence = claim_labels_write(
        PriorEvidence,
        [
            (
                PriorClaimLabel(
                    prior_annotation=prior,
                    claim=claims[0],
                    label="supported",
                    boundary_error=True,
                    raw_label={"support": "Complete"},
                ),
                [_span(version, "1932")],
            )
        ],
    )

    stored = PriorClaimLabel.objects.get()
    assert (stored.pk, stored.label, stored.boundary_error, stored.raw_label) == (
        rows[0].pk,
        "supported",
        True,
        {"support": "Complete"},
    )
    assert list(
        PriorEvidence.objects.values_list(
            "claim_label_id", "source_version_id", "start", "end", "quote"
        )
    ) == [(stored.pk, version.pk, 21, 25, "1932")]
    assert len(evidence) == 1


@pytest.mark.parametrize("writer", ["rows_insert", "values_write"])
def test_plain_rows_are_written_as_claim_labels_write_writes_them(
    project, target, writer, django_assert_num_queries
):
    item, claims, version = target
    resolution = _resolution(project, item)
    harbour = _span(version, "It spans the harbour")
    opened = _span(version, "The bridge opened in 1932")
    spans = [(s.source_version_id, s.start, s.end, s.quote) for s in (harbour, opened)]

    with transaction.atomic():
        if writer == "rows_insert":
            counts = claim_label_rows_insert(
                ResolvedClaimLabel,
                ("resolution_id", "claim_id", "label", "reason", "evidence_waived"),
                ResolvedEvidence,
                [
                    ((resolution.pk, claims[1].pk, "supported", None, False), spans),
                    ((resolution.pk, claims[0].pk, "evidence_unavailable", "not_found", False), []),
                ],
            )
        else:
            with django_assert_num_queries(2):  # the labels, then their evidence
                counts = claim_label_values_write(
                    ResolvedClaimLabel(),
                    ("resolution_id", "claim_id", "label", "reason"),
                    ResolvedEvidence,
                    [
                        ((resolution.pk, claims[1].pk, "supported", None), spans),
                        ((resolution.pk, claims[0].pk, "evidence_unavailable", "not_found"), []),
                    ],
                )

    assert counts == (2, 2)
    labels = list(
        ResolvedClaimLabel.objects.order_by("pk").values_list(
            "pk", "claim__index", "label", "reason", "evidence_waived"
        )
    )
    assert [row[1:] for row in labels] == [
        (1, "supported", None, False),
        (0, "evidence_unavailable", "not_found", False),
    ]
    assert list(
        ResolvedEvidence.objects.order_by("pk").values_list(
            "claim_label_id", "source_version_id", "start", "end", "quote"
        )
    ) == [
        (labels[0][0], version.pk, 27, 47, "It spans the harbour"),
        (labels[0][0], version.pk, 0, 25, "The bridge opened in 1932"),
    ]
