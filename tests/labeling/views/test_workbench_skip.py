"""Skip asks for a reason (none pre-selected) and can be undone while the item is still the
annotator's: the service's rules and the pages (HTML and JSON)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling.exceptions import InvalidTransition, NotFound
from labeling.models import Assignment, AssignmentStatus, Item, ItemStatus
from labeling.services import assignment_skip, assignment_skip_undo
from tests.labeling.views.conftest import claim_next, form_url

JSON = {"HTTP_ACCEPT": "application/json"}


def skip_url(assignment: Assignment) -> str:
    return reverse("annotate-skip", args=["study", assignment.pk])


def undo_url(assignment: Assignment) -> str:
    return reverse("annotate-skip-undo", args=["study", assignment.pk])


def skipped(project, user) -> Assignment:
    assignment = claim_next(project, user)
    assignment_skip(
        project=project, assignment_id=assignment.pk, actor=user, reason="out_of_expertise"
    )
    assignment.refresh_from_db()
    return assignment


# --- the form ---------------------------------------------------------------------------------


def test_the_skip_reason_has_no_choice_pre_selected_and_is_required(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    content = client.get(form_url(assignment)).content.decode()

    select = content[content.index('<select name="reason" id="id_skip_reason" required>') :]
    select = select[: select.index("</select>")]
    assert select.count("<option") == 6 and " selected" not in select
    assert '<option value="">— choose a reason —</option>' in select


@pytest.mark.parametrize("headers", [{}, JSON], ids=["html", "json"])
def test_a_skip_without_a_reason_is_refused(client, started, annotator, headers):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    response = client.post(skip_url(assignment), {"reason": "", "note": ""}, **headers)

    assert response.status_code == 400
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.LEASED
    if headers:
        [problem] = response.json()["problems"]
        assert problem["message"] == "Skip reason — choose why you skip this item"


def test_a_json_skip_answers_the_next_item_with_an_undo_offer(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    response = client.post(skip_url(assignment), {"reason": "unclear_question"}, **JSON)

    assert response.status_code == 200
    body = response.json()
    assert body["skipped"] == {"assignment_id": assignment.pk, "undo_url": undo_url(assignment)}
    held = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.LEASED)
    assert body["next"]["assignment_id"] == held.pk
    html = body["next"]["html"]
    assert f'action="{undo_url(assignment)}" id="undo-skip-form"' in html
    assert "You skipped an item (the question is unclear)." in html
    assert '<span id="progress-skipped">1</span>' in html


# --- the service's rules ----------------------------------------------------------------------


def test_undo_gives_the_item_back_under_its_lease(started, annotator):
    assignment = skipped(started, annotator)
    item_count = Item.objects.get(pk=assignment.item_id).assigned_count

    undone = assignment_skip_undo(project=started, assignment_id=assignment.pk, actor=annotator)

    assert undone.status == AssignmentStatus.LEASED
    assert (undone.skip_reason, undone.skip_note, undone.ended_at) == ("", "", None)
    assert undone.lease_expires_at == assignment.lease_expires_at
    assert undone.slot == assignment.slot
    assert Item.objects.get(pk=assignment.item_id).assigned_count == item_count + 1


def test_undo_is_refused_when_the_lease_ran_out(started, annotator):
    assignment = skipped(started, annotator)
    Assignment.objects.filter(pk=assignment.pk).update(
        leased_at=timezone.now() - timedelta(hours=3),
        lease_expires_at=timezone.now() - timedelta(minutes=1),
    )

    with pytest.raises(InvalidTransition, match="lease of this item ran out"):
        assignment_skip_undo(project=started, assignment_id=assignment.pk, actor=annotator)
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.SKIPPED


def test_undo_is_refused_when_someone_took_the_place(started, annotator, member):
    assignment = skipped(started, annotator)
    # the item's places fill up meanwhile (overlap 2): two other annotators take it
    others = [member("annotator"), member("annotator")]
    taken = 0
    for other in others:
        held = claim_next(started, other)
        while held.item_id != assignment.item_id:
            assignment_skip(project=started, assignment_id=held.pk, actor=other, reason="other")
            held = claim_next(started, other)
        taken += 1
    assert Item.objects.get(pk=assignment.item_id).assigned_count == taken == 2

    with pytest.raises(InvalidTransition, match="another annotator took this item"):
        assignment_skip_undo(project=started, assignment_id=assignment.pk, actor=annotator)


def test_undo_is_refused_for_a_closed_item_or_an_assignment_not_skipped(started, annotator):
    assignment = claim_next(started, annotator)
    with pytest.raises(InvalidTransition, match="is not skipped"):
        assignment_skip_undo(project=started, assignment_id=assignment.pk, actor=annotator)
    assignment_skip(project=started, assignment_id=assignment.pk, actor=annotator, reason="other")
    Item.objects.filter(pk=assignment.item_id).update(status=ItemStatus.DISAGREEMENT)
    with pytest.raises(InvalidTransition, match="closed"):
        assignment_skip_undo(project=started, assignment_id=assignment.pk, actor=annotator)


def test_undo_of_another_annotators_skip_is_not_found(started, annotator, other_annotator):
    assignment = skipped(started, annotator)
    with pytest.raises(NotFound):
        assignment_skip_undo(project=started, assignment_id=assignment.pk, actor=other_annotator)


# --- the pages --------------------------------------------------------------------------------


def test_the_undo_page_reopens_the_item_and_a_refusal_says_why(client, started, annotator):
    client.force_login(annotator)
    assignment = skipped(started, annotator)

    response = client.post(undo_url(assignment))

    assert response.status_code == 302 and response["Location"] == form_url(assignment)
    assert Assignment.objects.get(pk=assignment.pk).status == AssignmentStatus.LEASED
    again = client.post(undo_url(assignment), **JSON)
    assert again.status_code == 409
    [problem] = again.json()["problems"]
    assert problem["message"].startswith("The skip cannot be undone: assignment")


def test_a_json_undo_answers_the_item_rendered(client, started, annotator):
    client.force_login(annotator)
    assignment = skipped(started, annotator)

    body = client.post(undo_url(assignment), **JSON).json()

    assert body["message"] == "The skip is undone: the item is yours again."
    assert body["next"]["assignment_id"] == assignment.pk
    assert body["next"]["url"] == form_url(assignment)
    assert 'id="undo-skip-form"' not in body["next"]["html"]
