"""The labelling workbench's submit: JSON answers for the page script, every problem at once in
the page's words (JSON and the HTML fallback alike), the next item rendered in the answer, and
the query budget of a JSON submit."""

from __future__ import annotations

import json

from django.urls import reverse

from labeling.models import Annotation, Assignment, AssignmentStatus
from labeling.services.vote_tally import vote_tally_fold
from tests.labeling.views.conftest import claim_next, form_url, labels_post

JSON = {"HTTP_ACCEPT": "application/json"}


def test_a_json_submit_answers_what_was_saved_and_the_next_item_rendered(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    response = client.post(form_url(assignment), labels_post(assignment.item), **JSON)

    assert response.status_code == 200
    body = response.json()
    annotation = Annotation.objects.get(assignment=assignment)
    assert body["saved"] == {
        "assignment_id": assignment.pk,
        "annotation_id": annotation.pk,
        "revision": 1,
        "answer_label": "admissible",
        "revise_url": form_url(assignment),
    }
    assert body["message"] == "Saved."
    held = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.LEASED)
    assert body["next"]["assignment_id"] == held.pk
    assert body["next"]["url"] == form_url(held)
    html = body["next"]["html"]
    assert f'data-assignment-id="{held.pk}"' in html
    assert 'id="labelling-form"' in html and 'name="csrfmiddlewaretoken"' in html
    # the next item offers to revise the one just saved, and counts it as done
    assert f'id="revise-previous" href="{form_url(assignment)}"' in html
    assert '<strong id="progress-done">1</strong>' in html


def test_a_json_submit_with_several_problems_lists_them_all_in_the_page_words(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    item = assignment.item
    first, second = item.candidate.claims.order_by("index")
    data = labels_post(item, claim_labels=("supported", "evidence_unavailable"))
    # claim 1 "supported" without its evidence, claim 2 without a reason, no answer label
    data = {k: v for k, v in data.items() if "-evidence-" not in k}
    data["answer_label"] = ""

    response = client.post(form_url(assignment), data, **JSON)

    assert response.status_code == 400
    problems = response.json()["problems"]
    assert [p["message"] for p in problems] == [
        "The answer — choose a label",
        "Claim 1 — 'supported' needs evidence: select text in a source and press c",
        "Claim 2 — 'evidence unavailable' needs a reason: choose why the evidence is unavailable",
    ]
    assert [(p["target"], p["claim_position"], p["field"]) for p in problems] == [
        ("answer", None, "answer_label"),
        ("claim", 0, "claims[0].evidence"),
        ("claim", 1, "claims[1].reason"),
    ]
    assert not Annotation.objects.exists()


def test_the_html_fallback_shows_every_problem_next_to_its_field_and_in_a_summary(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    item = assignment.item
    first, second = item.candidate.claims.order_by("index")
    data = labels_post(item)
    data = {k: v for k, v in data.items() if "-evidence-" not in k}
    data[f"claim-{second.pk}-label"] = ""

    response = client.post(form_url(assignment), data)

    assert response.status_code == 400
    content = response.content.decode()
    summary = content[content.index('id="problem-summary"') :]
    summary = summary[: summary.index("</div>")]
    assert "2 problems to fix:" in summary
    assert (
        "Claim 1 — &#x27;supported&#x27; needs evidence: select text in a source and press c"
        in summary
    )
    assert "Claim 2 — choose a label" in summary
    assert 'href="#claim-row-1"' in summary
    row = content[content.index('id="claim-row-1"') :]
    row = row[: row.index("</fieldset>")]
    assert '<p class="errorlist claim-error" role="alert">choose a label</p>' in row
    # the internal field paths and tokens stay out of the page
    # (outside the guideline, whose own text may say "cite at least one evidence span")
    start = content.index('id="guideline-panel"')
    outside = content[:start] + content[content.index("</details>", start) :]
    assert "claims[0]" not in outside and "at least one evidence span" not in outside


# The JSON submit's queries: the session and the user; the project, the assignment and its form
# view; the write (with its savepoint): the item's lock, the policy read under it (a new version
# refuses a stale form), the labels check, the lease's compare-and-set, the vote tally's three
# (the item's votes with those last counted, the counted votes, the change); the next claim
# (with its savepoints; the membership's lock and its project are two statements); the next
# item's form view; its progress and undoable skip. The answer's "saved" part and the "Revise
# previous" link is read (one query: the vote may have closed the item just saved).
# The gold rule adds three reads: the labelling policy and the actor's qualification in the
# claim, and the labelling policy in the queue count (does it serve gold items?).
BUDGET = 49
# PostgreSQL adds one: the shared advisory lock a label write takes against a release freeze.
FREEZE_LOCK = {"postgresql": 1}


def test_a_json_submit_stays_within_its_query_budget(
    client, started, annotator, django_assert_num_queries
):
    client.force_login(annotator)
    vote_tally_fold(project=started)  # counted: the vote writes its change of the counts
    assignment = claim_next(started, annotator)
    data = labels_post(assignment.item)
    client.get(form_url(assignment))  # session and user rows warm; the budget is the submit's

    # the submit (validate, lock, write, compare check), the next claim, and the next item's
    # page (its form view, progress, previous and undoable-skip reads)
    from django.db import connection

    with django_assert_num_queries(BUDGET + FREEZE_LOCK.get(connection.vendor, 0)):
        response = client.post(form_url(assignment), data, **JSON)
    assert response.status_code == 200 and response.json()["next"] is not None


def test_the_last_submit_answers_where_to_go_and_says_so_there(
    client, project, import_records, member
):
    from tests.factories import start_labelling, work_record

    record = work_record("q1")
    record["candidates"] = record["candidates"][:1]
    import_records([record])
    started = start_labelling(project, overlap=1)
    annotator = member("annotator")
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    response = client.post(form_url(assignment), labels_post(assignment.item), **JSON)

    body = response.json()
    assert body["next"] is None
    assert body["url"] == reverse("annotate-next", args=["study"])
    page = client.get(body["url"]).content.decode()
    assert "Saved." in page and "No items are waiting for you right now" in page


def test_a_json_revision_returns_to_the_item_held_now(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    client.post(form_url(assignment), labels_post(assignment.item))
    held = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.LEASED)

    response = client.post(
        form_url(assignment),
        labels_post(assignment.item, comment="on reflection", revision="1"),
        **JSON,
    )

    body = response.json()
    assert body["saved"]["revision"] == 2
    assert body["next"]["assignment_id"] == held.pk


def test_a_json_submit_of_a_lost_lease_is_a_409_problem_at_the_top(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    Assignment.objects.filter(pk=assignment.pk).update(status=AssignmentStatus.EXPIRED)

    response = client.post(form_url(assignment), labels_post(assignment.item), **JSON)

    assert response.status_code == 409
    [problem] = response.json()["problems"]
    assert problem["target"] == "general" and problem["message"]
    assert json.dumps(problem)  # JSON-serialisable as given
