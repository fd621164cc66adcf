"""The native import's ``gold`` field: reference labels that make a candidate's item gold."""

from __future__ import annotations

import copy

import pytest

from labeling.exceptions import WorkloadImportFailed
from labeling.models import GoldClaimLabel, GoldEvidence, GoldReference, Item, ItemStatus
from labeling.selectors.gold import project_gold
from labeling.services import item_claim_next
from tests.conftest import native_record, row_counts
from tests.factories import start_labelling

pytestmark = pytest.mark.django_db

SOURCE = "The bridge opened in 1932. It spans the harbour."


def gold_record(external_id="q1", **gold):
    record = native_record(external_id)
    record["candidates"][0]["gold"] = {
        "answer_label": "admissible",
        "rationale": "from the style guide",
        "claim_labels": [
            {
                "claim": 0,
                "label": "supported",
                "evidence": [
                    {"source": f"doc-{external_id}", "start": 0, "end": 26, "quote": SOURCE[:26]}
                ],
            },
            {"claim": 1, "label": "not_supported"},
        ],
        **gold,
    }
    return record


def refused(import_records, records):
    before = row_counts()
    with pytest.raises(WorkloadImportFailed) as info:
        import_records(records)
    assert row_counts() == before, "a refused import writes nothing"
    return [(e.location, e.field, e.reason) for e in info.value.errors]


def test_gold_makes_the_item_gold_with_its_reference(project, import_records):
    import_records([gold_record()])

    (gold,) = project_gold(project=project)
    item = Item.objects.get(pk=gold.item_id)
    assert item.status == ItemStatus.GOLD and item.candidate.key == "c0"
    assert gold.reference.answer == "admissible"
    assert sorted(gold.reference.claims.values()) == ["not_supported", "supported"]
    (spans,) = gold.reference.evidence.values()
    assert [(s.start, s.end) for s in spans] == [(0, 26)]
    reference = GoldReference.objects.get()
    assert reference.import_batch is not None and reference.rationale == "from the style guide"
    # The other candidate of the question stays a regular item
    assert Item.objects.filter(status=ItemStatus.OPEN).count() == 1


def test_a_reimport_writes_nothing_and_a_changed_gold_is_a_new_revision(project, import_records):
    import_records([gold_record()])
    before = row_counts()

    import_records([gold_record()])
    assert row_counts() == before

    import_records([gold_record(answer_label="inadmissible")])
    assert list(GoldReference.objects.values_list("number", "answer_label")) == [
        (1, "admissible"),
        (2, "inadmissible"),
    ]
    assert GoldClaimLabel.objects.count() == 4 and GoldEvidence.objects.count() == 2


def test_gold_after_labelling_started_for_an_unlabelled_item(project, import_records, member):
    import_records([native_record("q1")])
    start_labelling(project)

    import_records([gold_record("q1")])

    assert Item.objects.get(candidate__key="c0").status == ItemStatus.GOLD


def test_gold_for_an_item_already_given_out_is_refused(project, import_records, member):
    import_records([native_record("q1")])
    start_labelling(project)
    item_claim_next(project=project, actor=member("annotator"))  # q1/c0, first in the queue

    errors = refused(import_records, [gold_record("q1")])

    assert errors[0][1] == "candidates[0].gold"
    assert "given to an annotator" in errors[0][2]


def _bad(mutate):
    record = gold_record()
    mutate(record["candidates"][0]["gold"], record)
    return record


@pytest.mark.parametrize(
    ("mutate", "field", "reason"),
    [
        (
            lambda g, r: g["claim_labels"][1].update(label="maybe"),
            "candidates[0].gold.claim_labels[1].label",
            "maybe",
        ),
        (
            lambda g, r: g.update(answer_label="cannot_decide"),
            "candidates[0].gold.answer_label",
            "cannot_decide",
        ),
        (
            lambda g, r: g["claim_labels"][0].update(evidence=[]),
            "candidates[0].gold.claim_labels[0].evidence",
            "evidence",
        ),
        (
            lambda g, r: g["claim_labels"].pop(),
            "candidates[0].gold.claim_labels",
            "[1]",
        ),
        (
            lambda g, r: g["claim_labels"][1].update(claim=5),
            "candidates[0].gold.claim_labels[1].claim",
            "claim index 5",
        ),
        (
            lambda g, r: g["claim_labels"][0]["evidence"][0].update(quote="The bridge"),
            "candidates[0].gold.claim_labels[0].evidence[0]",
            "quote",
        ),
        (
            lambda g, r: r["candidates"][0].update(
                prior_annotations=[{"annotator": "a1", "answer_label": "admissible"}]
            ),
            "candidates[0].gold",
            "no votes",
        ),
        (lambda g, r: g.update(colour="gold"), "candidates[0].gold.colour", ""),
        (lambda g, r: g.update(answer_label=3), "candidates[0].gold.answer_label", ""),
    ],
)
def test_malformed_gold_is_refused_naming_the_line_and_field(
    project, import_records, mutate, field, reason
):
    records = [native_record("q0"), _bad(mutate)]

    errors = refused(import_records, records)

    location, got_field, got_reason = errors[0]
    assert location == "line 2"
    assert got_field.startswith(field), (got_field, got_reason)
    assert reason in got_reason


def test_gold_is_not_part_of_the_candidate_fingerprint(project, import_records):
    # Given a candidate imported without gold, a later import may add gold to it
    plain = gold_record()
    del plain["candidates"][0]["gold"]
    import_records([plain])

    import_records([copy.deepcopy(gold_record())])

    assert Item.objects.filter(status=ItemStatus.GOLD).count() == 1
