"""item_claim_ahead: the next item reserved while the annotator works on the current one.

The rules (labeling.services.assignments, "Next item ahead"): a reserve only for the actor's
valid lease; at most one reserve besides it (asked again, or from a second tab, the same one);
an ordinary lease counted toward exactly N (slot, ``assigned_count``), never extended, released
when it runs out, given back by a skip; "next item" serves the oldest valid lease, so the
reserve once the current item is done. Also: a lease that ran out is released by the claim
that meets it (the project's, before looking), so its item is served in its turn.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.db.models import Count, Q
from django.utils import timezone

from labeling.exceptions import InvalidTransition, LeaseExpired, NotFound
from labeling.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    Claim,
    Item,
    ItemStatus,
    LabelPolicy,
)
from labeling.services import (
    assignment_skip,
    assignments_release_expired,
    item_claim_ahead,
    item_claim_next,
    project_labelling_configure,
    project_labelling_start,
)
from labeling.services.annotations import annotation_submit
from labeling.services.label_checks import AnnotationInput, ClaimInput
from tests.conftest import native_record


@pytest.fixture
def started(project, member, import_records):
    """Start labelling with ``n`` questions (2 items each); return the item ids in queue order."""

    def start(n: int = 3, **settings):
        import_records([native_record(f"q{i}") for i in range(1, n + 1)])
        manager = member("manager")
        if settings:
            project_labelling_configure(project=project, actor=manager, **settings)
        project_labelling_start(project=project, actor=manager)
        return list(Item.objects.order_by("queue_position").values_list("pk", flat=True))

    return start


def submit(project, assignment, actor):
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
        data=AnnotationInput(answer_label="admissible", claims=claims),
    )


def valid_leases(actor):
    return list(
        Assignment.objects.filter(
            annotator=actor,
            status=AssignmentStatus.LEASED,
            lease_expires_at__gt=timezone.now(),
        )
        .order_by("leased_at", "pk")
        .values_list("pk", flat=True)
    )


def assert_exactly_n_holds(project):
    """Every item: live assignments == assigned_count <= overlap - prior votes, distinct slots."""
    rows = (
        Item.objects.filter(project=project)
        .annotate(
            live=Count(
                "assignments",
                filter=Q(
                    assignments__status__in=[AssignmentStatus.LEASED, AssignmentStatus.SUBMITTED]
                ),
            ),
            slots=Count(
                "assignments__slot",
                distinct=True,
                filter=Q(
                    assignments__status__in=[AssignmentStatus.LEASED, AssignmentStatus.SUBMITTED]
                ),
            ),
        )
        .values_list("pk", "live", "slots", "assigned_count", "overlap", "prior_votes")
    )
    wrong = [row for row in rows if not (row[1] == row[2] == row[3] and row[3] <= row[4] - row[5])]
    assert wrong == []


def test_a_reserve_is_the_next_item_leased_like_any_other(project, member, started, clock):
    # given an annotator working on the first item (20-minute leases, overlap 2)
    queue = started(lease_minutes=20, overlap=2)
    annotator = member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    clock.advance(minutes=3)

    # when the page asks for the item after it
    reserve = item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)

    # then the second item in serving order is leased to them, in slot 1, from now, counted
    reserve.refresh_from_db()
    assert (reserve.item_id, reserve.slot, reserve.status) == (
        queue[1],
        1,
        AssignmentStatus.LEASED,
    )
    assert (reserve.leased_at, reserve.lease_expires_at) == (
        clock.now,
        clock.now + timedelta(minutes=20),
    )
    assert Item.objects.get(pk=queue[1]).assigned_count == 1
    assert valid_leases(annotator) == [current.pk, reserve.pk]
    assert_exactly_n_holds(project)


def test_asked_again_or_from_a_second_tab_it_is_the_same_reserve_and_never_a_third(
    project, member, started, clock
):
    # given an annotator with a current item and its reserve
    started()
    annotator = member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    reserve = item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)
    clock.advance(minutes=10)

    # when a second tab opens "next item" and asks for the reserve again, twice
    tab = item_claim_next(project=project, actor=annotator)
    again = item_claim_ahead(project=project, actor=annotator, assignment_id=tab.pk)
    third = item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)

    # then the tab gets the current item and the same reserve: nothing more is claimed, and no
    # lease is extended
    assert tab.pk == current.pk
    assert again.pk == third.pk == reserve.pk
    assert again.lease_expires_at == reserve.lease_expires_at
    assert Assignment.objects.filter(annotator=annotator).count() == 2
    assert valid_leases(annotator) == [current.pk, reserve.pk]
    assert_exactly_n_holds(project)


def test_the_reserve_of_the_reserve_is_the_current_item(project, member, started):
    # given a current item and its reserve
    started()
    annotator = member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    reserve = item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)

    # when a tab showing the reserve asks for the item after it
    after = item_claim_ahead(project=project, actor=annotator, assignment_id=reserve.pk)

    # then it is the other valid lease, the current item: still two leases, never three
    assert after.pk == current.pk
    assert Assignment.objects.filter(annotator=annotator).count() == 2


def test_once_the_current_item_is_submitted_next_serves_the_reserve_and_a_new_one_follows(
    project, member, started
):
    # given a current item and its reserve
    queue = started()
    annotator = member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    reserve = item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)

    # when the current item is submitted
    submit(project, current, annotator)

    # then "next item" serves the reserve (not a third item), and the item after it is reserved
    assert item_claim_next(project=project, actor=annotator).pk == reserve.pk
    following = item_claim_ahead(project=project, actor=annotator, assignment_id=reserve.pk)
    assert following.item_id == queue[2]
    assert valid_leases(annotator) == [reserve.pk, following.pk]
    # and nothing is reserved ahead of the item already submitted
    with pytest.raises(InvalidTransition, match="no longer yours"):
        item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)
    assert_exactly_n_holds(project)


def test_skipping_the_reserve_gives_its_slot_back_and_next_serves_another_item(
    project, member, started
):
    # given overlap 1: a current item and its reserve
    queue = started(overlap=1)
    annotator, other = member("annotator"), member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    reserve = item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)
    assert Item.objects.get(pk=queue[1]).assigned_count == 1

    # when the reserve is skipped (from a tab that showed it)
    assignment_skip(
        project=project, assignment_id=reserve.pk, actor=annotator, reason="other", note=""
    )

    # then its slot is free: another annotator gets that item, and after the current item
    # the annotator is served a new one, not the skipped reserve
    assert Item.objects.get(pk=queue[1]).assigned_count == 0
    assert item_claim_next(project=project, actor=other).item_id == queue[1]
    submit(project, current, annotator)
    after = item_claim_next(project=project, actor=annotator)
    assert after.item_id == queue[2]
    assert_exactly_n_holds(project)


def test_skipping_the_current_item_serves_the_reserve_next(project, member, started):
    # given a current item and its reserve
    started()
    annotator = member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    reserve = item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)

    # when the current item is skipped
    assignment_skip(
        project=project, assignment_id=current.pk, actor=annotator, reason="other", note=""
    )

    # then the reserve is served next, and one new reserve may follow it
    assert item_claim_next(project=project, actor=annotator).pk == reserve.pk
    with pytest.raises(InvalidTransition):
        item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)
    following = item_claim_ahead(project=project, actor=annotator, assignment_id=reserve.pk)
    assert following.pk not in (current.pk, reserve.pk)
    assert valid_leases(annotator) == [reserve.pk, following.pk]


def test_a_reserve_whose_lease_ran_out_is_released_and_never_served(
    project, member, started, clock
):
    # given overlap 1, 10-minute leases: a current item and its reserve, claimed at once
    queue = started(overlap=1, lease_minutes=10)
    annotator, other = member("annotator"), member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    reserve = item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)

    # when both leases run out and the beat task runs
    clock.advance(minutes=11)
    assert assignments_release_expired() == 2

    # then both slots are free; the reserve's item goes to someone else; a late submit of the
    # current item is refused; and the abandoned items are not served back to the annotator
    # while another annotator could take them
    reserve.refresh_from_db()
    assert reserve.status == AssignmentStatus.EXPIRED
    assert Item.objects.get(pk=queue[1]).assigned_count == 0
    with pytest.raises(InvalidTransition):
        item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)
    with pytest.raises(LeaseExpired):
        submit(project, current, annotator)
    assert item_claim_next(project=project, actor=other).item_id == queue[0]
    mine = item_claim_next(project=project, actor=annotator)
    assert mine.item_id not in (queue[0], queue[1])
    assert_exactly_n_holds(project)


def test_a_reserve_that_ran_out_unreleased_is_not_the_next_item(project, member, started, clock):
    # given a reserve claimed at once with the current item, 10-minute leases, and another
    # annotator who could take the reserve's item
    queue = started(overlap=1, lease_minutes=10)
    annotator = member("annotator")
    member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    reserve = item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk)

    # when the annotator submits the current item after 11 minutes (not released yet)
    clock.advance(minutes=11)
    submit(project, current, annotator)

    # then "next item" releases the reserve that ran out and serves another item (the
    # abandoned one goes to someone else first)
    after = item_claim_next(project=project, actor=annotator)
    reserve.refresh_from_db()
    assert reserve.status == AssignmentStatus.EXPIRED
    assert after.item_id == queue[2]
    assert Item.objects.get(pk=queue[1]).assigned_count == 0
    assert_exactly_n_holds(project)


def test_nothing_is_reserved_ahead_of_someone_elses_or_an_unknown_assignment(
    project, member, started
):
    started()
    annotator, other = member("annotator"), member("annotator")
    theirs = item_claim_next(project=project, actor=other)
    item_claim_next(project=project, actor=annotator)
    for assignment_id in (theirs.pk, 10**9):
        with pytest.raises(NotFound):
            item_claim_ahead(project=project, actor=annotator, assignment_id=assignment_id)
    assert Assignment.objects.filter(annotator=annotator).count() == 1


def test_no_reserve_when_no_other_item_needs_the_annotator(project, member, started):
    # given overlap 1 and one question (two items): the annotator holds one, another the other
    started(n=1, overlap=1)
    annotator, other = member("annotator"), member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    item_claim_next(project=project, actor=other)

    # then nothing is reserved
    assert item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk) is None
    assert valid_leases(annotator) == [current.pk]


def test_no_reserve_while_the_qualification_is_pending(project, member, started):
    # given a policy that requires qualification on gold items, none recorded yet
    queue = started(overlap=1)
    LabelPolicy.objects.filter(project=project).update(qualification_required=True)
    Item.objects.filter(pk__in=queue[:2]).update(status=ItemStatus.GOLD)
    annotator = member("annotator")
    current = item_claim_next(project=project, actor=annotator)
    assert current is not None and current.gold

    # then no reserve: what comes next depends on the gold item being labelled
    assert item_claim_ahead(project=project, actor=annotator, assignment_id=current.pk) is None
    assert Assignment.objects.filter(annotator=annotator).count() == 1


def test_a_lease_that_ran_out_is_released_by_the_next_claim_and_its_item_served_in_turn(
    project, member, started, clock
):
    # given overlap 1: a1 leased item 1 and let the lease run out (not released yet)
    queue = started(n=2, overlap=1, lease_minutes=5)
    a1, a2 = member("annotator"), member("annotator")
    abandoned = item_claim_next(project=project, actor=a1)
    clock.advance(minutes=6)

    # when a2 asks for an item
    taken = item_claim_next(project=project, actor=a2)

    # then a1's lease is released and a2 gets item 1, first in serving order, in its slot
    abandoned.refresh_from_db()
    assert abandoned.status == AssignmentStatus.EXPIRED
    assert (taken.item_id, taken.slot) == (queue[0], 1)
    assert Item.objects.get(pk=queue[0]).assigned_count == 1
    assert_exactly_n_holds(project)


def test_exactly_n_annotations_per_item_when_every_annotator_works_with_a_reserve(
    project, member, started, clock
):
    # given 6 questions (12 items), overlap 2, three annotators who each keep a reserve, one
    # of whom skips every fifth item and lets every seventh lease run out
    queue = started(n=6, overlap=2, lease_minutes=30)
    people = [member("annotator") for _ in range(3)]
    current: dict[int, Assignment | None] = {
        p.pk: item_claim_next(project=project, actor=p) for p in people
    }
    turns = Counter()
    for _ in range(200):
        busy = False
        for person in people:
            held = current[person.pk]
            if held is None:
                continue
            busy = True
            turns[person.pk] += 1
            # the page asks for the reserve, twice (a second tab)
            item_claim_ahead(project=project, actor=person, assignment_id=held.pk)
            item_claim_ahead(project=project, actor=person, assignment_id=held.pk)
            assert len(valid_leases(person)) <= 2
            assert_exactly_n_holds(project)
            n = turns[person.pk]
            if person is people[0] and n % 7 == 0:
                Assignment.objects.filter(pk=held.pk).update(
                    lease_expires_at=clock.now - timedelta(seconds=1),
                    leased_at=clock.now - timedelta(minutes=31),
                )
                assignments_release_expired()
            elif person is people[0] and n % 5 == 0:
                assignment_skip(
                    project=project, assignment_id=held.pk, actor=person, reason="other", note=""
                )
            else:
                submit(project, held, person)
            current[person.pk] = item_claim_next(project=project, actor=person)
        if not busy:
            break
        clock.advance(minutes=1)

    # then every item is resolved with exactly two annotations by two different people,
    # and nobody holds anything
    assert set(Item.objects.filter(pk__in=queue).values_list("status", flat=True)) <= {
        ItemStatus.RESOLVED,
        ItemStatus.DISAGREEMENT,
    }
    per_item = dict(
        Annotation.objects.filter(item__project=project)
        .values("item")
        .annotate(n=Count("pk"), people=Count("annotator", distinct=True))
        .values_list("item", "people")
    )
    assert per_item == {pk: 2 for pk in queue}
    assert Annotation.objects.filter(item__project=project).count() == 2 * len(queue)
    assert not Assignment.objects.filter(status=AssignmentStatus.LEASED).exists()
    assert_exactly_n_holds(project)
