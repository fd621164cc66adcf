"""The workbench's next item ahead: the reserve endpoint and the submit that shows a reserve.

The page asks ``annotate-ahead`` for the item after the one shown and keeps it rendered; its
submit names that reserve (``ahead``) and shows it at once. The server answers which item comes
next: the reserve (``"ahead": true``, no page, and the reserve after it) when it is the item
"next item" serves, else the item it does serve, rendered, as without a reserve.
"""

from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from labeling.models import Annotation, Assignment, AssignmentStatus, Item
from labeling.services import assignment_skip, item_claim_ahead
from tests.labeling.views.conftest import claim_next, form_url, labels_post

JSON = {"HTTP_ACCEPT": "application/json"}


def ahead_url(assignment: Assignment) -> str:
    return reverse("annotate-ahead", args=[assignment.item.project.slug, assignment.pk])


def leased(annotator) -> list[int]:
    return list(
        Assignment.objects.filter(annotator=annotator, status=AssignmentStatus.LEASED)
        .order_by("leased_at", "pk")
        .values_list("pk", flat=True)
    )


def test_the_page_of_an_item_being_labelled_says_where_to_reserve_the_next(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    content = client.get(form_url(assignment)).content.decode()

    assert f'data-ahead-url="{ahead_url(assignment)}"' in content


def test_a_revision_page_reserves_nothing(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    client.post(form_url(assignment), labels_post(assignment.item))

    content = client.get(form_url(assignment)).content.decode()

    assert "Revise your annotation" in content and "data-ahead-url" not in content


def test_the_reserve_is_claimed_and_answered_rendered_as_it_will_be_shown(
    client, started, annotator
):
    # given an annotator on the first item
    client.force_login(annotator)
    current = claim_next(started, annotator)

    # when the page asks for the next item ahead
    response = client.post(ahead_url(current), **JSON)

    # then the next item is leased to them and rendered: "Revise previous" opens the current
    # item (the one submitted before it is shown), its lease's remaining time is given
    assert response.status_code == 200
    reserve = response.json()["reserve"]
    [_, held] = leased(annotator)
    assert reserve["for"] == current.pk and reserve["assignment_id"] == held
    assert reserve["url"] == form_url(Assignment.objects.get(pk=held))
    assert f'data-assignment-id="{held}"' in reserve["html"]
    assert f'id="revise-previous" href="{form_url(current)}"' in reserve["html"]
    assert 0 < reserve["lease_seconds"] <= started.lease_minutes * 60
    assert Item.objects.get(pk=Assignment.objects.get(pk=held).item_id).assigned_count == 1


def test_two_tabs_asking_ahead_get_one_reserve(client, started, annotator):
    client.force_login(annotator)
    current = claim_next(started, annotator)

    first = client.post(ahead_url(current), **JSON).json()["reserve"]
    second = client.post(ahead_url(current), **JSON).json()["reserve"]
    # a second tab opens "next item": the current item, not the reserve
    tab = client.post(reverse("annotate-next", args=[started.slug]))

    assert first["assignment_id"] == second["assignment_id"]
    assert tab["Location"] == form_url(current)
    assert leased(annotator) == [current.pk, first["assignment_id"]]


def test_nothing_is_reserved_ahead_of_a_submitted_item(client, started, annotator):
    client.force_login(annotator)
    current = claim_next(started, annotator)
    client.post(form_url(current), labels_post(current.item))
    before = Assignment.objects.count()

    response = client.post(ahead_url(current), **JSON)

    assert response.status_code == 409
    [problem] = response.json()["problems"]
    assert "no longer yours" in problem["message"]
    assert Assignment.objects.count() == before


def test_someone_elses_assignment_is_not_found(client, started, annotator, other_annotator):
    theirs = claim_next(started, other_annotator)
    client.force_login(annotator)

    response = client.post(ahead_url(theirs), **JSON)

    assert response.status_code == 404
    assert not Assignment.objects.filter(annotator=annotator).exists()


def test_no_item_left_answers_no_reserve(client, project, import_records, member):
    from tests.factories import start_labelling, work_record

    record = work_record("q1")
    record["candidates"] = record["candidates"][:1]
    import_records([record])
    started = start_labelling(project, overlap=1)
    annotator = member("annotator")
    client.force_login(annotator)
    current = claim_next(started, annotator)

    response = client.post(ahead_url(current), **JSON)

    assert response.status_code == 200 and response.json() == {"reserve": None}


def test_a_submit_that_shows_its_reserve_is_confirmed_and_brings_the_reserve_after_it(
    client, started, annotator
):
    # given the page holds the reserve of the item shown
    client.force_login(annotator)
    current = claim_next(started, annotator)
    reserve = client.post(ahead_url(current), **JSON).json()["reserve"]

    # when the item is submitted naming the reserve it shows next
    data = labels_post(current.item, ahead=str(reserve["assignment_id"]))
    response = client.post(form_url(current), data, **JSON)

    # then the labels are saved, the reserve is confirmed as the next item (no page: the
    # browser has it), and the item after it comes reserved and rendered
    assert response.status_code == 200
    body = response.json()
    assert Annotation.objects.get(assignment=current).current.answer_label == "admissible"
    assert body["saved"]["assignment_id"] == current.pk and body["message"] == "Saved."
    shown = Assignment.objects.get(pk=reserve["assignment_id"])
    assert body["next"] == {
        "assignment_id": shown.pk,
        "url": form_url(shown),
        "ahead": True,
        "previous_url": form_url(current),  # overlap 2: one vote leaves the item open
    }
    following = body["reserve"]
    assert following["for"] == shown.pk
    assert following["assignment_id"] not in (current.pk, shown.pk)
    assert f'id="revise-previous" href="{form_url(shown)}"' in following["html"]
    # the annotator holds the item shown and one reserve: never a third
    assert leased(annotator) == [shown.pk, following["assignment_id"]]


def test_a_reserve_skipped_meanwhile_is_replaced_by_the_item_served_next(
    client, started, annotator
):
    # given the page holds a reserve, which another tab skips
    client.force_login(annotator)
    current = claim_next(started, annotator)
    reserve = client.post(ahead_url(current), **JSON).json()["reserve"]
    assignment_skip(
        project=started,
        assignment_id=reserve["assignment_id"],
        actor=annotator,
        reason="other",
        note="",
    )

    # when the item is submitted naming that reserve
    data = labels_post(current.item, ahead=str(reserve["assignment_id"]))
    body = client.post(form_url(current), data, **JSON).json()

    # then the answer carries the item served next, rendered, and it is not the skipped one
    assert "ahead" not in body["next"] and "reserve" not in body
    assert body["next"]["assignment_id"] != reserve["assignment_id"]
    assert f'data-assignment-id="{body["next"]["assignment_id"]}"' in body["next"]["html"]
    assert leased(annotator) == [body["next"]["assignment_id"]]


def test_a_reserve_whose_lease_ran_out_is_not_shown(client, started, annotator, other_annotator):
    # given the page holds a reserve whose lease has run out (not released yet)
    client.force_login(annotator)
    current = claim_next(started, annotator)
    reserve = client.post(ahead_url(current), **JSON).json()["reserve"]
    now = timezone.now()
    Assignment.objects.filter(pk=reserve["assignment_id"]).update(
        leased_at=now - timedelta(hours=2), lease_expires_at=now - timedelta(hours=1)
    )

    # when the item is submitted naming that reserve
    data = labels_post(current.item, ahead=str(reserve["assignment_id"]))
    body = client.post(form_url(current), data, **JSON).json()

    # then the reserve is released and another item is served, rendered
    assert Assignment.objects.get(pk=reserve["assignment_id"]).status == AssignmentStatus.EXPIRED
    assert body["next"]["assignment_id"] != reserve["assignment_id"] and body["next"]["html"]


def test_an_ahead_naming_no_reserve_of_the_annotator_is_answered_as_without_one(
    client, started, annotator
):
    client.force_login(annotator)
    current = claim_next(started, annotator)

    body = client.post(form_url(current), labels_post(current.item, ahead="999999"), **JSON).json()

    assert body["next"]["html"] and "reserve" not in body
    assert leased(annotator) == [body["next"]["assignment_id"]]


def test_a_refused_submit_keeps_the_reserve(client, started, annotator):
    # given the page holds a reserve and the current item's lease was released
    client.force_login(annotator)
    current = claim_next(started, annotator)
    reserve = item_claim_ahead(project=started, actor=annotator, assignment_id=current.pk)
    Assignment.objects.filter(pk=current.pk).update(status=AssignmentStatus.EXPIRED)

    # when the item is submitted naming the reserve
    response = client.post(
        form_url(current), labels_post(current.item, ahead=str(reserve.pk)), **JSON
    )

    # then it is refused (409, shown at the top) and the reserve is still the annotator's
    assert response.status_code == 409
    assert leased(annotator) == [reserve.pk]
