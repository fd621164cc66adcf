"""project_labelling_start: freezes the policy, queues items, counts and compares prior votes."""

from __future__ import annotations

import random

import pytest

from labeling.exceptions import InvalidTransition, PermissionDenied
from labeling.models import (
    Disagreement,
    Item,
    ItemStatus,
    LabelPolicy,
    Partition,
    Question,
    ResolutionStatus,
    ServingOrder,
)
from labeling.services import (
    items_enqueue,
    policy_create,
    project_labelling_configure,
    project_labelling_start,
)
from labeling.services.labelling_queue import QueueRow, queue_order
from tests.conftest import native_record
from tests.factories import UserFactory


def _prior(annotator, answer_label, origin="human", claims=0):
    return {
        "annotator": annotator,
        "origin": origin,
        "answer_label": answer_label,
        "claim_labels": [{"claim": n, "label": "not_supported"} for n in range(claims)],
    }


def _with_priors(external_id, priors_c0, priors_c1=()):
    record = native_record(external_id)
    record["candidates"][0]["prior_annotations"] = list(priors_c0)
    record["candidates"][1]["prior_annotations"] = list(priors_c1)
    return record


def _queue(project):
    return list(
        Item.objects.filter(project=project)
        .order_by("queue_position", "pk")
        .values_list("candidate__question__external_id", "candidate__key")
    )


def test_freezes_the_newest_policy_and_records_the_start(project, member, import_records):
    # given a project with policy v1 and v2 and one question
    import_records([native_record("q1")])
    policy_create(project=project, guideline="v2 guideline")
    manager = member("manager")

    # when the manager starts labelling
    returned = project_labelling_start(project=project, actor=manager)

    # then v2 is frozen, v1 is not, and the start time is stored
    frozen = dict(LabelPolicy.objects.filter(project=project).values_list("version", "frozen_at"))
    assert frozen[1] is None
    assert frozen[2] is not None
    project.refresh_from_db()
    assert project.labelling_started_at == frozen[2]
    assert returned.labelling_started_at == project.labelling_started_at


def test_copies_the_project_overlap_into_every_item(project, member, import_records):
    # given overlap 3 set before the start
    import_records([native_record("q1"), native_record("q2")])
    manager = member("manager")
    project_labelling_configure(project=project, actor=manager, overlap=3)

    # when labelling starts
    project_labelling_start(project=project, actor=manager)

    # then every item has overlap 3, no assignment and no prior vote
    assert set(Item.objects.values_list("overlap", "assigned_count", "prior_votes")) == {(3, 0, 0)}


def test_partition_order_serves_calibration_then_test_dev_unpartitioned(
    project, member, import_records
):
    # given four questions, imported q1..q4, in dev, none, test, calibration
    import_records([native_record(f"q{i}") for i in range(1, 5)])
    for external_id, partition in [
        ("q1", Partition.DEV),
        ("q3", Partition.TEST),
        ("q4", Partition.CALIBRATION),
    ]:
        Question.objects.filter(external_id=external_id).update(partition=partition)

    # when labelling starts with the default serving order
    project_labelling_start(project=project, actor=member("manager"))

    # then calibration comes first, then test, dev and unpartitioned, each by sample index
    assert _queue(project) == [
        ("q4", "c0"),
        ("q4", "c1"),
        ("q3", "c0"),
        ("q3", "c1"),
        ("q1", "c0"),
        ("q1", "c1"),
        ("q2", "c0"),
        ("q2", "c1"),
    ]
    assert sorted(Item.objects.values_list("queue_position", flat=True)) == list(range(1, 9))


def test_seeded_random_order_is_the_seeded_shuffle_of_sorted_item_ids(
    project, member, import_records
):
    # given ten items and the seeded random order with seed 7
    import_records([native_record(f"q{i}") for i in range(5)])
    manager = member("manager")
    project_labelling_configure(
        project=project, actor=manager, serving_order=ServingOrder.SEEDED_RANDOM, serving_seed=7
    )

    # when labelling starts
    project_labelling_start(project=project, actor=manager)

    # then the queue is random.Random(7).shuffle over the ascending item ids
    expected = sorted(Item.objects.values_list("pk", flat=True))
    random.Random(7).shuffle(expected)
    served = list(Item.objects.order_by("queue_position").values_list("pk", flat=True))
    assert served == expected
    assert served != sorted(served)


def test_queue_order_is_deterministic_and_ties_break_on_item_id():
    rows = [
        QueueRow(item_id=5, partition=None, question_id=1, sample_index=0),
        QueueRow(item_id=3, partition="dev", question_id=2, sample_index=1),
        QueueRow(item_id=4, partition="dev", question_id=2, sample_index=0),
        QueueRow(item_id=2, partition="calibration", question_id=9, sample_index=0),
        QueueRow(item_id=1, partition="test", question_id=9, sample_index=0),
    ]
    assert queue_order(rows, serving_order="partition", seed=None) == [2, 1, 4, 3, 5]
    first = queue_order(rows, serving_order="seeded_random", seed=11)
    assert first == queue_order(reversed(rows), serving_order="seeded_random", seed=11)
    assert sorted(first) == [1, 2, 3, 4, 5]


def test_counts_every_prior_annotation_with_an_answer_label_as_a_vote(
    project, member, import_records
):
    # given priors: q1/c0 one human vote and a human note without a label; q1/c1 an automatic vote
    import_records(
        [
            _with_priors(
                "q1",
                [_prior("p1", "admissible"), _prior("p2", None)],
                [_prior("exact-match", "inadmissible", origin="automatic")],
            )
        ]
    )

    # when labelling starts with overlap 2
    project_labelling_start(project=project, actor=member("manager"))

    # then each item counts one vote and stays open for one more annotation
    votes = dict(Item.objects.values_list("candidate__key", "prior_votes"))
    assert votes == {"c0": 1, "c1": 1}
    assert set(Item.objects.values_list("status", flat=True)) == {ItemStatus.OPEN}


def test_items_whose_prior_votes_reach_the_overlap_are_compared_at_once(
    project, member, import_records
):
    # given (overlap 2) q1/c0 with two agreeing priors and q1/c1 with two disagreeing priors,
    # and q2 with a single prior vote
    import_records(
        [
            _with_priors(
                "q1",
                # c0 has two claims, both voted the same
                [_prior("p1", "admissible", claims=2), _prior("p2", "admissible", claims=2)],
                [_prior("p1", "admissible"), _prior("p2", "inadmissible")],
            ),
            _with_priors("q2", [_prior("p1", "admissible")]),
        ]
    )

    # when labelling starts
    project_labelling_start(project=project, actor=member("manager"))

    # then the agreeing item is resolved by consensus, the other is in the disagreement queue,
    # and the item with one vote still waits for an annotator
    items = {
        (i.candidate.question.external_id, i.candidate.key): i
        for i in Item.objects.select_related("candidate__question", "resolution")
    }
    agreed = items[("q1", "c0")]
    assert agreed.status == ItemStatus.RESOLVED
    assert agreed.resolution.status == ResolutionStatus.CONSENSUS
    assert agreed.resolution.answer_label == "admissible"
    differing = items[("q1", "c1")]
    assert differing.status == ItemStatus.DISAGREEMENT
    assert Disagreement.objects.filter(item=differing, closed_at__isnull=True).count() == 1
    assert items[("q2", "c0")].status == ItemStatus.OPEN
    assert items[("q2", "c0")].prior_votes == 1


def test_refused_when_already_started(project, member, import_records):
    # given a started project
    import_records([native_record("q1")])
    manager = member("manager")
    project_labelling_start(project=project, actor=manager)
    started = Item.objects.values_list("pk", "queue_position")

    # when it is started again, then it is refused and nothing changes
    with pytest.raises(InvalidTransition, match="already started"):
        project_labelling_start(project=project, actor=manager)
    assert list(Item.objects.values_list("pk", "queue_position")) == list(started)


@pytest.mark.parametrize("role", ["annotator", "adjudicator", "nonmember"])
def test_only_a_manager_starts_labelling(project, member, import_records, role):
    import_records([native_record("q1")])
    actor = UserFactory() if role == "nonmember" else member(role)
    with pytest.raises(PermissionDenied):
        project_labelling_start(project=project, actor=actor)
    project.refresh_from_db()
    assert project.labelling_started_at is None
    assert not LabelPolicy.objects.filter(frozen_at__isnull=False).exists()


def test_a_staff_user_who_is_not_a_member_acts_as_manager(project, import_records):
    import_records([native_record("q1")])
    project_labelling_start(project=project, actor=UserFactory(is_staff=True))
    project.refresh_from_db()
    assert project.labelling_started_at is not None


def test_items_imported_after_the_start_are_queued_after_the_others(
    project, member, import_records
):
    # given a started project with q1 in calibration
    import_records([native_record("q1")])
    Question.objects.filter(external_id="q1").update(partition=Partition.DEV)
    manager = member("manager")
    project_labelling_configure(project=project, actor=manager, overlap=3)
    project_labelling_start(project=project, actor=manager)

    # when q2 (calibration) is imported afterwards and enqueued
    import_records([native_record("q2")])
    Question.objects.filter(external_id="q2").update(partition=Partition.CALIBRATION)
    new = list(
        Item.objects.filter(candidate__question__external_id="q2").values_list("pk", flat=True)
    )
    assert items_enqueue(project=project, item_ids=new) == 2

    # then q2's items come after q1's, with the project's overlap
    assert _queue(project) == [("q1", "c0"), ("q1", "c1"), ("q2", "c0"), ("q2", "c1")]
    assert set(Item.objects.values_list("overlap", flat=True)) == {3}
