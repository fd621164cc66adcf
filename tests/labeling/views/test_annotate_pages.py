"""Annotator pages: next item, labelling form, submit, errors, skip, own annotations, revise."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    EvidenceSpan,
    Item,
    Role,
    SourceVersion,
)
from labeling.services import assignments_release_expired
from tests.factories import WORK_SOURCE, start_labelling, work_record
from tests.labeling.views.conftest import claim_next, evidence_fields, form_url, labels_post

pytestmark = pytest.mark.django_db


def next_url(slug: str = "study") -> str:
    return reverse("annotate-next", args=[slug])


def source_div(content: str, version_id: int) -> str:
    match = re.search(
        rf'<div class="source-text" id="source-{version_id}"[^>]*>(.*?)</div>', content, re.S
    )
    assert match, "source container not found"
    return match.group(1)


# --- next item -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "status"),
    [(Role.ANNOTATOR, 200), (Role.ADJUDICATOR, 403), (Role.MANAGER, 403), ("nonmember", 404)],
)
def test_next_item_page_by_role(login, started, role, status):
    response = login(role).get(next_url())

    assert response.status_code == status


def test_next_item_post_claims_and_redirects_to_the_form(client, started, annotator):
    client.force_login(annotator)

    response = client.post(next_url())

    assignment = Assignment.objects.get(annotator=annotator)
    assert assignment.status == AssignmentStatus.LEASED
    assert response.status_code == 302
    assert response["Location"] == form_url(assignment)


def test_next_item_get_never_claims(client, started, annotator):
    client.force_login(annotator)

    response = client.get(next_url())

    assert response.status_code == 200
    assert b'id="next-item"' in response.content
    assert not Assignment.objects.exists()


def test_second_tab_gets_the_same_item_and_the_page_offers_to_continue_it(
    client, started, annotator
):
    client.force_login(annotator)
    first = client.post(next_url())

    second = client.post(next_url())
    page = client.get(next_url())

    assert first["Location"] == second["Location"]
    assert Assignment.objects.filter(annotator=annotator).count() == 1
    assert b'id="current-lease"' in page.content
    assert first["Location"].encode() in page.content


def test_empty_queue_is_a_friendly_page_not_an_error(client, project, import_records, annotator):
    record = work_record("q1")
    record["candidates"] = record["candidates"][:1]
    import_records([record])
    start_labelling(project, overlap=1)
    client.force_login(annotator)
    assignment = claim_next(project, annotator)
    client.post(form_url(assignment), labels_post(assignment.item))

    response = client.post(next_url())

    assert response.status_code == 200
    assert b'id="queue-empty"' in response.content
    assert b"No items are waiting for you" in response.content


def test_before_labelling_starts_the_page_says_so(login, project, import_records):
    import_records([work_record("q1")])
    client = login(Role.ANNOTATOR)

    page = client.get(next_url())
    claim = client.post(next_url())

    assert b'id="not-started"' in page.content
    assert b'id="next-item"' not in page.content
    assert claim.status_code == 409
    assert b"has not started" in claim.content


# --- the form --------------------------------------------------------------------------------


def test_form_shows_question_answer_claims_sources_and_controls(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    item = assignment.item
    claims = list(item.candidate.claims.order_by("index"))
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)

    response = client.get(form_url(assignment))

    assert response.status_code == 200
    content = response.content.decode()
    assert html.escape(item.candidate.question.text, quote=False) in content
    # each claim highlighted at its code-point span, keyed by claim id
    for claim in claims:
        assert f'data-claim-ids="{claim.pk}">{claim.text}</mark>' in content
        assert f'class="claim-row label-group" data-claim-id="{claim.pk}"' in content
        for label in ("supported", "contradicted", "not_supported", "evidence_unavailable"):
            assert f'name="claim-{claim.pk}-label" value="{label}"' in content
        assert f'name="claim-{claim.pk}-label" value="cannot_decide"' in content
        assert f'name="claim-{claim.pk}-reason"' in content
        assert f'name="claim-{claim.pk}-boundary_error"' in content
    for label in ("admissible", "inadmissible", "abstained", "evidence_unavailable"):
        assert f'name="answer_label" value="{label}"' in content
    for control in ('id="cite"', 'id="submit"', 'id="skip-form"', 'name="time_spent_seconds"'):
        assert control in content
    assert 'name="comment"' in content and 'id="help-dialog"' in content
    assert "labeling/workbench.js" in content and "labeling/annotate.js" in content
    # the source in full, CR written as a character reference so the DOM keeps it
    rendered = source_div(content, version.pk)
    assert "\r" not in rendered
    assert html.unescape(rendered.replace("\r\n", "\n")) == WORK_SOURCE
    assert rendered.count("&#13;\n") == WORK_SOURCE.count("\r\n")


def test_form_of_another_annotators_assignment_is_404(client, started, annotator, other_annotator):
    assignment = claim_next(started, annotator)
    client.force_login(other_annotator)

    assert client.get(form_url(assignment)).status_code == 404
    assert client.post(form_url(assignment), labels_post(assignment.item)).status_code == 404
    assert not Annotation.objects.exists()


# --- submit ----------------------------------------------------------------------------------


def test_submit_stores_code_point_offsets_for_a_source_with_emoji_accent_and_crlf(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    item = assignment.item
    first, second = item.candidate.claims.order_by("index")
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)
    # quotes after the emoji (2 code points, 4 UTF-16 units), across a CRLF and with an accent
    quote_one = "opened in 1932"
    quote_two = ".\r\nIt spans the harbour of Sydney; cafe\u0301s"
    data = {
        "answer_label": "admissible",
        "comment": "clear",
        "time_spent_seconds": "42.5",
        f"claim-{first.pk}-label": "supported",
        f"claim-{second.pk}-label": "supported",
        f"claim-{second.pk}-boundary_error": "on",
        **evidence_fields(first, 0, version, quote_one),
        **evidence_fields(second, 3, version, quote_two),
    }

    response = client.post(form_url(assignment), data)

    assert response.status_code == 302
    annotation = Annotation.objects.get(assignment=assignment)
    revision = annotation.current
    assert (revision.answer_label, revision.comment, revision.time_spent_seconds) == (
        "admissible",
        "clear",
        42.5,
    )
    spans = {s.quote: s for s in EvidenceSpan.objects.filter(claim_label__revision=revision)}
    for quote in (quote_one, quote_two):
        start = WORK_SOURCE.index(quote)
        assert (spans[quote].start, spans[quote].end) == (start, start + len(quote))
        assert WORK_SOURCE[spans[quote].start : spans[quote].end] == quote
    # UTF-16 offsets differ from code points after the emoji: the conversion happened
    assert int(data[f"claim-{second.pk}-evidence-3-start"]) != spans[quote_two].start
    assert revision.claim_labels.get(claim=second).boundary_error is True
    # then the next item is served
    next_assignment = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.LEASED)
    assert response["Location"] == form_url(next_assignment)


def test_cannot_decide_and_evidence_unavailable_with_reason_are_accepted(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    data = labels_post(
        assignment.item,
        answer="evidence_unavailable",
        claim_labels=("cannot_decide", "evidence_unavailable"),
        answer_reason="blocked",
    )
    second = assignment.item.candidate.claims.get(index=1)
    data[f"claim-{second.pk}-reason"] = "not_found"

    response = client.post(form_url(assignment), data)

    assert response.status_code == 302
    revision = Annotation.objects.get(assignment=assignment).current
    assert (revision.answer_label, revision.answer_reason) == ("evidence_unavailable", "blocked")
    assert sorted(revision.claim_labels.values_list("label", "reason")) == [
        ("cannot_decide", None),
        ("evidence_unavailable", "not_found"),
    ]


def test_a_mismatched_quote_is_refused_next_to_its_claim_with_the_input_kept(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    item = assignment.item
    first, second = item.candidate.claims.order_by("index")
    data = labels_post(item, comment="my careful comment")
    # the second claim's quote does not match its offsets
    data[f"claim-{second.pk}-evidence-0-quote_json"] = json.dumps("It spans the harbouR")

    response = client.post(form_url(assignment), data)

    assert response.status_code == 400
    content = response.content.decode()
    row = content[content.index(f'data-claim-id="{second.pk}"') :]
    row = row[: row.index("</fieldset>")]
    assert 'class="errorlist claim-error"' in row
    # in the page's words, not the field path
    assert "evidence 1 no longer matches its source text: remove it and cite the text again" in row
    # the input is kept: labels checked, evidence chips re-rendered, comment
    assert f'name="claim-{first.pk}-label" value="supported" checked' in content
    assert 'value="admissible" checked' in content
    assert "my careful comment" in content
    assert html.escape(json.dumps("It spans the harbouR")) in row
    assert f'name="claim-{first.pk}-evidence-0-start"' in content
    assert not Annotation.objects.exists()


def test_a_missing_reason_is_shown_at_the_answer(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    response = client.post(
        form_url(assignment), labels_post(assignment.item, answer="evidence_unavailable")
    )

    assert response.status_code == 400
    assert b'id="answer-error"' in response.content
    assert b"answer_reason" in response.content


def test_a_malformed_offset_is_refused_naming_the_field(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    data = labels_post(assignment.item)
    first = assignment.item.candidate.claims.get(index=0)
    data[f"claim-{first.pk}-evidence-0-start"] = "twelve"

    response = client.post(form_url(assignment), data)

    assert response.status_code == 400
    assert b"claims[0].evidence[0].start" in response.content


def test_a_submit_after_the_lease_expired_and_the_slot_was_given_back_shows_a_conflict(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    Assignment.objects.filter(pk=assignment.pk).update(
        leased_at=timezone.now() - timedelta(hours=2),
        lease_expires_at=timezone.now() - timedelta(hours=1),
    )
    assignments_release_expired()

    response = client.post(form_url(assignment), labels_post(assignment.item, comment="kept"))

    assert response.status_code == 409
    assert b"your lease expired" in response.content
    assert b"kept" in response.content
    assert not Annotation.objects.exists()


# --- skip ------------------------------------------------------------------------------------


def test_skip_with_a_reason_frees_the_slot_and_serves_the_next_item(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    response = client.post(
        reverse("annotate-skip", args=["study", assignment.pk]),
        {"reason": "out_of_expertise", "note": "not my field"},
    )

    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.SKIPPED
    assert (assignment.skip_reason, assignment.skip_note) == ("out_of_expertise", "not my field")
    assert response.status_code == 302
    following = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.LEASED)
    assert following.item_id != assignment.item_id
    assert response["Location"] == form_url(following)


def test_skip_without_a_valid_reason_is_refused(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)

    response = client.post(
        reverse("annotate-skip", args=["study", assignment.pk]), {"reason": "bored"}
    )

    assert response.status_code == 400
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.LEASED


# --- my annotations and revise --------------------------------------------------------------


def test_my_annotations_lists_own_work_with_a_revise_link_prefilled_form(
    client, started, annotator, other_annotator
):
    # given the annotator and another one both submitted
    mine = claim_next(started, annotator)
    client.force_login(annotator)
    client.post(form_url(mine), labels_post(mine.item, comment="mine-comment"))
    theirs = claim_next(started, other_annotator)
    client.force_login(other_annotator)
    client.post(form_url(theirs), labels_post(theirs.item, answer="inadmissible", comment="THEIRS"))
    client.force_login(annotator)

    listing = client.get(reverse("my-annotations", args=["study"]))
    form = client.get(form_url(mine))

    assert listing.status_code == 200
    assert list(listing.context["annotations"]) == [Annotation.objects.get(assignment=mine)]
    assert form_url(mine).encode() in listing.content
    assert b"THEIRS" not in listing.content
    content = form.content.decode()
    assert "Revise your annotation" in content
    assert 'value="admissible" checked' in content
    assert "mine-comment" in content
    # stored evidence comes back in code points
    first = mine.item.candidate.claims.get(index=0)
    start = WORK_SOURCE.index("opened in 1932")
    assert f'name="claim-{first.pk}-evidence-0-start" value="{start}"' in content
    assert f'name="claim-{first.pk}-evidence-0-unit" value="codepoint"' in content
    assert "THEIRS" not in content


def test_revising_creates_a_new_revision_and_returns_to_the_item_held_now(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    client.post(form_url(assignment), labels_post(assignment.item))
    annotation = Annotation.objects.get(assignment=assignment)

    # the pre-filled form posted back unchanged is idempotent
    again = client.post(form_url(assignment), labels_post(assignment.item, revision="1"))
    changed = client.post(
        form_url(assignment), labels_post(assignment.item, comment="on reflection", revision="1")
    )

    annotation.refresh_from_db()
    assert again.status_code == changed.status_code == 302
    # the first submit claimed the next item: a revision goes back to it
    held = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.LEASED)
    assert changed["Location"] == form_url(held)
    assert annotation.revision_count == 2
    assert annotation.current.comment == "on reflection"
    assert list(annotation.revisions.values_list("number", flat=True)) == [1, 2]


def test_revising_a_resolved_item_is_refused_without_saying_how_it_was_resolved(
    client, started, annotator, other_annotator
):
    first = claim_next(started, annotator)
    client.force_login(annotator)
    client.post(form_url(first), labels_post(first.item))
    second = claim_next(started, other_annotator)
    assert second.item_id == first.item_id
    client.force_login(other_annotator)
    client.post(form_url(second), labels_post(second.item))
    assert Item.objects.get(pk=first.item_id).status == "resolved"
    client.force_login(annotator)

    response = client.post(form_url(first), labels_post(first.item, comment="late change"))

    assert response.status_code == 409
    assert b"This item is closed" in response.content
    assert b"consensus" not in response.content
    assert Annotation.objects.get(assignment=first).revision_count == 1
