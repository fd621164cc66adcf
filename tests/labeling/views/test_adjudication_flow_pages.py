"""Adjudication page flow: pre-fill, "Use" on imported votes, every problem in the page's words,
the next queue item after a decision (HTML redirect and JSON for the page script)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from labeling.models import Claim, Item, ItemStatus, ResolutionStatus, ResolvedClaimLabel, Role
from tests.factories import start_labelling, work_record

pytestmark = pytest.mark.django_db

JSON = {"HTTP_ACCEPT": "application/json"}


def prior(annotator: str, answer: str, *labels: str, note: str = "") -> dict:
    return {
        "annotator": annotator,
        "answer_label": answer,
        "note": note,
        "claim_labels": [{"claim": n, "label": label} for n, label in enumerate(labels)],
        "spans": [
            {"start": 3, "end": 9, "quote": "opened", "labels": ["Unwanted"], "note": "FLAG-NOTE"}
        ]
        if note
        else [],
    }


@pytest.fixture
def queue(project, import_records) -> list[Item]:
    """Two items (q1/c0, q2/c0), each with two imported votes: claim 0 agreed, the rest not."""
    records = []
    for external_id in ("q1", "q2"):
        record = work_record(external_id)
        record["candidates"][0]["prior_annotations"] = [
            prior("ds-a", "admissible", "supported", "supported", note="PRIOR-NOTE-A"),
            prior("ds-b", "inadmissible", "supported", "contradicted"),
        ]
        records.append(record)
    import_records(records)
    start_labelling(project, overlap=2)
    items = list(
        Item.objects.filter(status=ItemStatus.DISAGREEMENT).order_by(
            "candidate__question__external_id"
        )
    )
    assert len(items) == 2
    return items


def url(item: Item, query: str = "") -> str:
    return reverse("adjudication-item", args=["study", item.pk]) + (f"?{query}" if query else "")


def use_all(item: Item, column: int = 0, **extra: str) -> dict[str, str]:
    """The form as "Use all" of an imported column fills it (no evidence), plus a rationale."""
    first, second = Claim.objects.filter(candidate=item.candidate).order_by("index")
    labels = [
        ("admissible", "supported", "supported"),
        ("inadmissible", "supported", "contradicted"),
    ]
    answer, one, two = labels[column]
    data = {
        "answer_label": answer,
        f"claim-{first.pk}-label": one,
        f"claim-{second.pk}-label": two,
        "rationale": "The source says so.",
        "expected_version": str(item.version),
        "action": "resolve",
    }
    data.update(extra)
    return data


def test_agreed_fields_are_pre_filled_and_marked(login, queue):
    client = login(Role.ADJUDICATOR)
    item = queue[0]
    first, second = Claim.objects.filter(candidate=item.candidate).order_by("index")

    response = client.get(url(item))

    content = response.content.decode()
    assert response.status_code == 200
    # claim 1 agreed (supported by both), claim 2 and the answer differ
    assert f'name="claim-{first.pk}-label" value="supported" checked' in content
    assert f'name="claim-{second.pk}-label" value="supported" checked' not in content
    assert 'name="answer_label" value="admissible" checked' not in content
    note = re.search(r'id="prefill-note">(.*?)</p>', content).group(1)
    assert note == "Pre-filled where every vote agrees: claim 1. Check each before resolving."
    assert content.count('class="claim-wrap prefilled"') == 1
    # both claims may adopt the imported labels without evidence
    assert content.count('class="muted waiver-hint"') == 2


def test_notes_and_who_and_when_are_shown_beside_the_votes(login, queue):
    client = login(Role.ADJUDICATOR)

    content = client.get(url(queue[0])).content.decode()

    assert '<p class="note">PRIOR-NOTE-A</p>' in content
    assert "FLAG-NOTE" in content and "flagged “opened”" in content
    assert content.count('class="vote-meta muted">from the dataset</span>') == 2
    assert "ds-a" not in content and "ds-b" not in content  # no dataset identity


def test_use_all_on_an_imported_vote_resolves_and_opens_the_next_item(login, queue):
    client = login(Role.ADJUDICATOR)
    first, second = queue

    response = client.post(url(first, "level=claim"), use_all(first, column=1))

    assert response.status_code == 302
    assert response["Location"] == url(second, "level=claim")
    first.refresh_from_db()
    assert first.resolution.status == ResolutionStatus.ADJUDICATED
    labels = ResolvedClaimLabel.objects.filter(resolution=first.resolution).order_by("claim__index")
    assert [(cl.label, cl.evidence_waived) for cl in labels] == [
        ("supported", True),
        ("contradicted", True),
    ]
    # the decided item's page says its evidence was waived
    page = client.get(url(first)).content.decode()
    assert "evidence waived for claim 1, claim 2 (imported votes without spans)" in page


def test_the_last_decision_returns_to_the_queue(login, queue):
    client = login(Role.ADJUDICATOR)
    first, second = queue
    assert client.post(url(first), use_all(first)).status_code == 302

    response = client.post(
        url(second),
        {
            "action": "unresolved",
            "unresolved_reason": "ambiguous_guideline",
            "rationale": "",
            "expected_version": str(second.version),
        },
    )

    assert response["Location"] == reverse("adjudication-queue", args=["study"])


def test_json_decision_answers_with_the_next_url(login, queue):
    client = login(Role.ADJUDICATOR)
    first, second = queue

    response = client.post(url(first), use_all(first), **JSON)

    assert response.status_code == 200
    assert response.json() == {"message": f"Item #{first.pk} adjudicated.", "next_url": url(second)}


def test_every_problem_is_listed_at_once_in_the_pages_words(login, queue):
    client = login(Role.ADJUDICATOR)
    item = queue[0]
    first, second = Claim.objects.filter(candidate=item.candidate).order_by("index")
    data = use_all(item, rationale="")
    data[f"claim-{first.pk}-label"] = "not_supported"
    data[f"claim-{second.pk}-label"] = "evidence_unavailable"
    del data["answer_label"]

    response = client.post(url(item), data)

    assert response.status_code == 400
    content = response.content.decode()
    problems = re.findall(r'<li data-field="([^"]*)">(.*?)</li>', content)
    assert problems == [
        ("answer_label", "The answer — choose a label"),
        (
            "claims[1].reason",
            "Claim 2 — &#x27;evidence unavailable&#x27; needs a reason: choose why the evidence "
            "is unavailable",
        ),
        (
            "rationale",
            "Rationale — write why you decided this (required to resolve, and for “other”)",
        ),
    ]
    assert "3 problems to fix:" in content
    # each also next to its field, and the input is kept
    assert 'id="rationale-error"' in content
    assert f'name="claim-{first.pk}-label" value="not_supported" checked' in content


def test_a_supported_label_nobody_gave_asks_for_evidence_in_words(login, queue):
    client = login(Role.ADJUDICATOR)
    item = queue[0]
    first, _ = Claim.objects.filter(candidate=item.candidate).order_by("index")
    data = use_all(item)
    data[f"claim-{first.pk}-label"] = "contradicted"

    response = client.post(url(item), data, **JSON)

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_input"
    assert body["errors"] == [
        {
            "field": "claims[0].evidence",
            "target": "claim",
            "claim_position": 0,
            "where": "Claim 1",
            "text": "'contradicted' needs evidence: select text in a source and press c",
            "message": "Claim 1 — 'contradicted' needs evidence: select text in a source and "
            "press c",
        }
    ]


def test_unresolved_without_a_reason_says_choose_why(login, queue):
    client = login(Role.ADJUDICATOR)
    item = queue[0]

    response = client.post(
        url(item),
        {
            "action": "unresolved",
            "unresolved_reason": "",
            "rationale": "",
            "expected_version": str(item.version),
        },
    )

    assert response.status_code == 400
    content = response.content.decode()
    assert '<li data-field="reason">Choose why it stays unresolved</li>' in content
    assert 'id="unresolved-reason-error"' in content


def test_next_item_link_follows_the_queue_order(login, queue):
    client = login(Role.ADJUDICATOR)
    first, second = queue

    one = client.get(url(first, "level=claim")).content.decode()
    two = client.get(url(second)).content.decode()

    assert f'href="{url(second, "level=claim")}" id="next-item"' in one
    assert f'href="{url(first)}" id="next-item"' in two  # wraps around
    queue_page = client.get(reverse("adjudication-queue", args=["study"]) + "?level=claim")
    assert f'href="{url(first, "level=claim")}"' in queue_page.content.decode()


def test_the_item_page_shows_the_waived_evidence(login, queue):
    client = login(Role.ADJUDICATOR)
    first, _ = queue
    client.post(url(first), use_all(first))
    manager = login(Role.MANAGER)

    content = manager.get(reverse("item-detail", args=["study", first.pk])).content.decode()

    section = re.search(r'<section id="item-resolution">(.*?)</section>', content, re.S).group(1)
    assert "adjudicated · answer admissible" in section
    assert section.count("waived: imported votes without spans") == 2
