"""item_claim_next: who gets which item, slots, second tabs, expired leases."""

from __future__ import annotations

from datetime import timedelta

import pytest

from labeling.exceptions import InvalidTransition, LeaseExpired, PermissionDenied
from labeling.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    Claim,
    Item,
    ItemStatus,
    Partition,
    Question,
)
from labeling.services import (
    item_claim_next,
    project_labelling_configure,
    project_labelling_start,
)
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput
from tests.conftest import native_record
from tests.factories import UserFactory


@pytest.fixture
def started(project, member, import_records):
    """Start labelling ``project`` with ``n`` questions (2 items each) and the given settings."""

    def start(n: int = 2, **settings):
        import_records([native_record(f"q{i}") for i in range(1, n + 1)])
        manager = member("manager")
        if settings:
            project_labelling_configure(project=project, actor=manager, **settings)
        project_labelling_start(project=project, actor=manager)
        return list(Item.objects.order_by("queue_position").values_list("pk", flat=True))

    return start


def submit(project, assignment, actor, answer_label="admissible"):
    claims = tuple(
        ClaimInput(claim_id=pk, label="not_supported")
        for pk in Claim.objects.filter(candidate__item=assignment.item_id).values_list(
            "pk", flat=True
        )
    )
    return annotation_submit(
        project=project,
        assignment_id=assignment.pk,
        actor=actor,
        data=AnnotationInput(answer_label=answer_label, claims=claims),
    )


def live_slots(item_id):
    return dict(
        Assignment.objects.filter(
            item_id=item_id, status__in=[AssignmentStatus.LEASED, AssignmentStatus.SUBMITTED]
        ).values_list("annotator__username", "slot")
    )


def test_leases_the_first_item_in_slot_1_for_the_lease_length(project, member, started, clock):
    # given a started project with a 20-minute lease
    queue = started(lease_minutes=20)
    annotator = member("annotator")

    # when the annotator asks for the next item
    assignment = item_claim_next(project=project, actor=annotator)

    # then they lease the first item, slot 1, until now + 20 minutes
    assignment.refresh_from_db()
    assert (assignment.item_id, assignment.annotator_id, assignment.slot) == (
        queue[0],
        annotator.pk,
        1,
    )
    assert assignment.status == AssignmentStatus.LEASED
    assert assignment.leased_at == clock.now
    assert assignment.lease_expires_at == clock.now + timedelta(minutes=20)
    item = Item.objects.get(pk=queue[0])
    assert (item.assigned_count, item.version) == (1, 1)


def test_a_second_tab_gets_the_same_assignment_without_extending_the_lease(
    project, member, started, clock
):
    # given an annotator holding a lease taken ten minutes ago
    started()
    annotator = member("annotator")
    first = item_claim_next(project=project, actor=annotator)
    clock.advance(minutes=10)

    # when they ask again (another tab)
    second = item_claim_next(project=project, actor=annotator)

    # then it is the same assignment, same lease end, and no second slot is taken
    assert second.pk == first.pk
    assert second.lease_expires_at == first.lease_expires_at
    assert Assignment.objects.count() == 1
    assert Item.objects.get(pk=first.item_id).assigned_count == 1


def test_an_item_goes_to_overlap_different_annotators_then_the_next_item(project, member, started):
    # given overlap 2 and three annotators
    queue = started()
    a1, a2, a3 = (member("annotator") for _ in range(3))

    # when each asks for an item
    got = [item_claim_next(project=project, actor=a) for a in (a1, a2, a3)]

    # then the first two share item 1 in slots 1 and 2, the third gets item 2
    assert [(g.item_id, g.slot) for g in got] == [(queue[0], 1), (queue[0], 2), (queue[1], 1)]
    assert live_slots(queue[0]) == {a1.username: 1, a2.username: 2}
    assert Item.objects.get(pk=queue[0]).assigned_count == 2


def test_overlap_three_gives_the_item_to_three_annotators(project, member, started):
    queue = started(overlap=3)
    got = [item_claim_next(project=project, actor=member("annotator")) for _ in range(4)]
    assert [(g.item_id, g.slot) for g in got] == [
        (queue[0], 1),
        (queue[0], 2),
        (queue[0], 3),
        (queue[1], 1),
    ]


def test_an_annotator_never_gets_an_item_they_submitted(project, member, started):
    # given overlap 3 and an annotator who submitted item 1 (which still needs two more)
    queue = started(overlap=3)
    annotator = member("annotator")
    submit(project, item_claim_next(project=project, actor=annotator), annotator)

    # when they ask for the next item
    assignment = item_claim_next(project=project, actor=annotator)

    # then they get item 2, not item 1 again
    assert assignment.item_id == queue[1]
    assert Annotation.objects.filter(annotator=annotator).count() == 1


def test_returns_none_when_the_annotator_has_no_work_left(project, member, started):
    # given one question (two items) that the annotator has both submitted
    started(n=1)
    annotator = member("annotator")
    for _ in range(2):
        submit(project, item_claim_next(project=project, actor=annotator), annotator)

    # when they ask again, then there is nothing for them (the items wait for someone else)
    assert item_claim_next(project=project, actor=annotator) is None
    assert Assignment.objects.filter(annotator=annotator).count() == 2


def test_items_that_left_the_open_state_are_not_served(project, member, started):
    # given overlap 2 and item 1 annotated by two annotators (now resolved or disputed)
    queue = started(n=1)
    for _ in range(2):
        actor = member("annotator")
        submit(project, item_claim_next(project=project, actor=actor), actor)
    assert Item.objects.get(pk=queue[0]).status != ItemStatus.OPEN

    # when a third annotator asks, then they get item 2
    assert item_claim_next(project=project, actor=member("annotator")).item_id == queue[1]


def test_prior_votes_take_slots(project, member, import_records):
    # given overlap 2 and item q1/c0 carrying one imported prior vote
    record = native_record("q1")
    record["candidates"][0]["prior_annotations"] = [
        {"annotator": "p1", "answer_label": "abstained"}
    ]
    import_records([record])
    project_labelling_start(project=project, actor=member("manager"))
    c0 = Item.objects.get(candidate__key="c0")

    # when two annotators ask
    first = item_claim_next(project=project, actor=member("annotator"))
    second = item_claim_next(project=project, actor=member("annotator"))

    # then only one of them gets c0 (slot 1 of its single free slot)
    assert (first.item_id, first.slot) == (c0.pk, 1)
    assert second.item_id != c0.pk


def test_serves_calibration_items_first(project, member, import_records):
    import_records([native_record("q1"), native_record("q2")])
    Question.objects.filter(external_id="q2").update(partition=Partition.CALIBRATION)
    project_labelling_start(project=project, actor=member("manager"))

    assignment = item_claim_next(project=project, actor=member("annotator"))

    assert assignment.item.candidate.question.external_id == "q2"
    assert assignment.item.candidate.key == "c0"


def test_an_expired_lease_is_given_to_another_annotator_in_the_same_slot(
    project, member, started, clock
):
    # given overlap 2, a1 and a2 hold item 1 (slots 1, 2) and a1's 30-minute lease runs out
    queue = started(n=1)
    a1, a2, a3 = (member("annotator") for _ in range(3))
    old = item_claim_next(project=project, actor=a1)
    clock.advance(minutes=20)
    item_claim_next(project=project, actor=a2)
    clock.advance(minutes=11)

    # when a3 asks for an item
    new = item_claim_next(project=project, actor=a3)

    # then a1's lease is expired and a3 holds item 1 in a1's old slot
    old.refresh_from_db()
    assert (old.status, old.ended_at) == (AssignmentStatus.EXPIRED, clock.now)
    assert (new.item_id, new.slot) == (queue[0], 1)
    assert live_slots(queue[0]) == {a2.username: 2, a3.username: 1}
    assert Item.objects.get(pk=queue[0]).assigned_count == 2

    # and a1's late submit is refused and writes nothing: never a third annotation
    with pytest.raises(LeaseExpired, match="lease expired"):
        submit(project, old, a1)
    assert not Annotation.objects.filter(item_id=queue[0]).exists()
    submit(project, new, a3)
    assert Annotation.objects.filter(item_id=queue[0]).count() == 1


def test_a_holder_whose_lease_ran_out_gets_their_row_back_with_a_new_lease(
    project, member, started, clock
):
    # given a1 leased item 1 and let the lease run out
    queue = started(n=1, lease_minutes=5)
    a1 = member("annotator")
    old = item_claim_next(project=project, actor=a1)
    clock.advance(minutes=6)

    # when a1 asks again
    again = item_claim_next(project=project, actor=a1)

    # then the same row is revived for item 1 with a fresh lease; the count is still one
    assert again.pk == old.pk
    again.refresh_from_db()
    assert (again.item_id, again.slot, again.status) == (queue[0], 1, AssignmentStatus.LEASED)
    assert again.leased_at == clock.now
    assert again.lease_expires_at == clock.now + timedelta(minutes=5)
    assert again.ended_at is None
    assert Item.objects.get(pk=queue[0]).assigned_count == 1


def test_a_new_lease_length_applies_to_later_leases(project, member, started, clock):
    started()
    manager = member("manager")
    first = item_claim_next(project=project, actor=member("annotator"))
    project_labelling_configure(project=project, actor=manager, lease_minutes=5)

    second = item_claim_next(project=project, actor=member("annotator"))

    assert first.lease_expires_at == clock.now + timedelta(minutes=30)
    assert second.lease_expires_at == clock.now + timedelta(minutes=5)


def test_refused_before_labelling_starts(project, member, import_records):
    import_records([native_record("q1")])
    with pytest.raises(InvalidTransition, match="not started"):
        item_claim_next(project=project, actor=member("annotator"))
    assert not Assignment.objects.exists()


@pytest.mark.parametrize("role", ["manager", "adjudicator", "nonmember", "staff", "anonymous"])
def test_only_annotators_claim_items(project, member, started, role):
    from django.contrib.auth.models import AnonymousUser

    started()
    actor = {
        "nonmember": UserFactory,
        "staff": lambda: UserFactory(is_staff=True),
        "anonymous": AnonymousUser,
    }.get(role, lambda: member(role))()
    with pytest.raises(PermissionDenied):
        item_claim_next(project=project, actor=actor)
    assert not Assignment.objects.exists()


def test_an_annotator_of_another_project_gets_nothing_here(project, member, started):
    from labeling.services import membership_set, project_create

    started()
    other = project_create(slug="other", name="Other")
    outsider = UserFactory()
    membership_set(project=other, user=outsider, role="annotator")
    with pytest.raises(PermissionDenied):
        item_claim_next(project=project, actor=outsider)


# ---------------------------------------------------------------------------------------------
# Abandoned leases: the abandoner is not given the same item again while others could take it
# ---------------------------------------------------------------------------------------------


def _others_could_take(item_id, abandoner):
    """Whether an annotator other than ``abandoner`` holds no non-expired row of the item."""
    from labeling.models import Membership

    blocked = set(
        Assignment.objects.filter(item_id=item_id)
        .exclude(status=AssignmentStatus.EXPIRED)
        .values_list("annotator_id", flat=True)
    )
    return (
        Membership.objects.filter(role="annotator")
        .exclude(user=abandoner)
        .exclude(user_id__in=blocked)
        .exists()
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_abandoner_cannot_hold_an_item_and_every_item_reaches_overlap(
    project, member, started, clock, seed
):
    import random

    # given overlap 2, 5-minute leases, 8 items, two honest annotators and an abandoner who
    # claims, never submits, and asks again the moment each lease runs out
    queue = started(n=4, overlap=2, lease_minutes=5)
    honest = [member("annotator"), member("annotator")]
    abandoner = member("annotator")
    rng = random.Random(seed)
    held = None  # the abandoner's current assignment
    expiries_across = []  # (previous item, next item, others could take it)
    for _minute in range(400):
        clock.advance(minutes=1)
        if held is not None and held.lease_expires_at <= clock.now:
            # right after the expiry, the abandoner asks again
            previous = held.item_id
            could = _others_could_take(previous, abandoner)
            held = item_claim_next(project=project, actor=abandoner)
            expiries_across.append((previous, held.item_id if held else None, could))
        elif held is None:
            held = item_claim_next(project=project, actor=abandoner)
        # the honest annotators work at their own pace: each minute, each acts with p = 0.5
        for annotator in rng.sample(honest, len(honest)):
            if rng.random() < 0.5:
                continue
            mine = item_claim_next(project=project, actor=annotator)
            if mine is not None:
                submit(project, mine, annotator)
        if not Item.objects.filter(pk__in=queue, status=ItemStatus.OPEN).exists():
            break

    # then every item reached its two votes (none stayed open at 1 of 2)
    assert not Item.objects.filter(pk__in=queue, status=ItemStatus.OPEN).exists()
    for item_id in queue:
        assert Annotation.objects.filter(item_id=item_id).count() == 2
    # and the abandoner never got the same item back across an expiry while another could take it
    assert expiries_across, "the abandoner's leases never ran out"
    for previous, following, could in expiries_across:
        if could:
            assert following != previous
    # and no annotation is the abandoner's
    assert not Annotation.objects.filter(annotator=abandoner).exists()


def test_an_abandoned_item_goes_back_to_its_abandoner_after_one_lease_length(
    project, member, started, clock
):
    # given one item left, a1 let its lease run out and a2 (who could take it) is idle
    queue = started(n=1, overlap=2, lease_minutes=5)
    a1, a2 = member("annotator"), member("annotator")
    first = item_claim_next(project=project, actor=a1)
    clock.advance(minutes=6)

    # when a1 asks at once, a1 gets the other item, not the abandoned one
    second = item_claim_next(project=project, actor=a1)
    assert first.item_id == queue[0]
    assert second.item_id == queue[1]
    first.refresh_from_db()
    assert first.status == AssignmentStatus.EXPIRED
    # and a2 is given the abandoned item first
    assert item_claim_next(project=project, actor=a2).item_id == queue[0]
    submit(project, Assignment.objects.get(item_id=queue[0], annotator=a2), a2)
    submit(project, second, a1)

    # when the cool-down (one lease length after the expiry) has passed
    clock.advance(minutes=6)
    again = item_claim_next(project=project, actor=a1)

    # then a1 gets its row of the item back with a fresh lease
    assert (again.pk, again.item_id, again.status) == (first.pk, queue[0], AssignmentStatus.LEASED)


def test_the_last_annotator_who_could_label_the_item_gets_it_back_at_once(
    project, member, started, clock
):
    # given overlap 3 and three annotators: a2 and a3 submitted item 1, a1 let its lease run out
    queue = started(n=1, overlap=3, lease_minutes=5)
    a1, a2, a3 = (member("annotator") for _ in range(3))
    first = item_claim_next(project=project, actor=a1)
    for other in (a2, a3):
        submit(project, item_claim_next(project=project, actor=other), other)
    clock.advance(minutes=6)

    # when a1 asks right after the expiry (nobody else could take item 1)
    assert first.item_id == queue[0]
    again = item_claim_next(project=project, actor=a1)

    # then a1 gets item 1 back and can finish it
    assert (again.pk, again.item_id) == (first.pk, queue[0])
    submit(project, again, a1)
    assert Annotation.objects.filter(item_id=queue[0]).count() == 3
