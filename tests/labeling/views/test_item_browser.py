"""The item browser: search over question, answer and claim text, filters, sort, pager, bulk."""

from __future__ import annotations

import dataclasses
import re

import pytest
from django.urls import reverse

from labeling.models import Item, ItemStatus, Role
from labeling.services import annotation_submit, item_claim_next
from labeling.views import catalog
from tests.conftest import native_record
from tests.factories import UserFactory, start_labelling
from tests.worlds import own_labels

pytestmark = pytest.mark.django_db

URL = reverse("item-list", args=["study"])


def record(external_id, answers):
    """A native record whose candidates carry the given (answer text, claim text) pairs."""
    return native_record(
        external_id,
        text="Summarize the passage.",
        candidates=[
            {"id": f"c{n}", "text": text, "generator": "model-a", "claims": [{"text": claim}]}
            for n, (text, claim) in enumerate(answers)
        ],
    )


def vote(project, user, *, answer="admissible"):
    assignment = item_claim_next(project=project, actor=user)
    data = dataclasses.replace(own_labels(assignment.item), answer_label=answer)
    annotation_submit(project=project, assignment_id=assignment.pk, actor=user, data=data)
    return assignment.item


@pytest.fixture
def flow(project, import_records, member):
    """Four items: ``resolved`` (consensus, admissible), ``disputed`` (answer labels differ),
    two open ones. Texts are distinct per item; the questions are all the same text."""
    first = record(
        "q1",
        [("The bridge opened in 1932.", "opened in 1932"), ("It cost ten pounds.", "ten pounds")],
    )
    second = record(
        "q2",
        [("A zebra crossing.", "zebra stripes"), ("The harbour is deep.", "deep water")],
    )
    second["candidates"][1]["prior_annotations"] = [
        {"annotator": "dataset-rater-7", "answer_label": "inadmissible"}
    ]
    import_records([first, second])
    start_labelling(project, overlap=2)
    a, b = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    a.username, b.username = "ann_a", "ann_b"
    a.save()
    b.save()
    resolved = vote(project, a)
    assert vote(project, b) == resolved
    disputed = vote(project, a)
    assert vote(project, b, answer="inadmissible") == disputed
    items = {"resolved": resolved, "disputed": disputed, "a": a, "b": b}
    items["open"] = list(
        Item.objects.filter(project=project, status=ItemStatus.OPEN).order_by("pk")
    )
    return items


def listed(response):
    assert response.status_code == 200
    return [item.pk for item in response.context["page"].object_list]


def test_search_finds_answer_and_claim_text_not_only_the_question(login, flow):
    client = login(Role.MANAGER)
    by_answer = listed(client.get(URL, {"q": "ZEBRA CROSSING"}))
    by_claim = listed(client.get(URL, {"q": "deep water"}))
    assert len(by_answer) == len(by_claim) == 1
    assert Item.objects.get(pk=by_answer[0]).candidate.text == "A zebra crossing."
    assert Item.objects.get(pk=by_claim[0]).candidate.text == "The harbour is deep."
    assert len(listed(client.get(URL, {"q": "Summarize"}))) == 4


def test_filters_status_disagreement_labels_and_annotator(login, flow):
    client = login(Role.MANAGER)
    resolved, disputed = flow["resolved"].pk, flow["disputed"].pk
    opened = [i.pk for i in flow["open"]]
    assert listed(client.get(URL, {"status": "resolved"})) == [resolved]
    assert listed(client.get(URL, {"disagreement": "answer"})) == [disputed]
    assert listed(client.get(URL, {"disagreement": "claim"})) == []
    assert listed(client.get(URL, {"disagreement": "none"})) == sorted([resolved, *opened])
    assert listed(client.get(URL, {"resolved_label": "admissible"})) == [resolved]
    assert listed(client.get(URL, {"voted_label": "inadmissible"})) == sorted(
        [disputed, *(pk for pk in opened if Item.objects.get(pk=pk).prior_votes)]
    )
    annotator = str(flow["a"].pk)
    assert listed(client.get(URL, {"annotator": annotator})) == sorted([resolved, disputed])
    # combined with the search
    assert listed(client.get(URL, {"annotator": annotator, "q": "zebra"})) == []


def test_adjudicators_voted_label_ignores_imported_prior_votes(login, flow):
    with_prior = [i.pk for i in flow["open"] if i.prior_votes]
    assert with_prior  # the q2/c1 prior vote
    manager = listed(login(Role.MANAGER).get(URL, {"voted_label": "inadmissible"}))
    adjudicator = listed(login(Role.ADJUDICATOR).get(URL, {"voted_label": "inadmissible"}))
    assert set(with_prior) <= set(manager)
    assert not set(with_prior) & set(adjudicator)
    assert adjudicator == [flow["disputed"].pk]


def test_sorts(login, flow):
    client = login(Role.MANAGER)
    everything = listed(client.get(URL))
    assert everything == sorted(everything)
    assert listed(client.get(URL, {"sort": "-id"})) == sorted(everything, reverse=True)
    by_votes = client.get(URL, {"sort": "-votes"}).context["page"].object_list
    assert [i.vote_count for i in by_votes] == sorted(
        (i.vote_count for i in by_votes), reverse=True
    )
    statuses = [i.status for i in client.get(URL, {"sort": "status"}).context["page"].object_list]
    assert statuses == ["open", "open", "disagreement", "resolved"]
    newest = listed(client.get(URL, {"sort": "-updated"}))
    assert newest[0] == flow["disputed"].pk  # the latest votes and disagreement


def test_invalid_filters_are_reported_and_ignored(login, flow):
    response = login(Role.MANAGER).get(URL, {"status": "bogus", "sort": "nope", "annotator": "x"})
    assert len(listed(response)) == 4
    assert "Some filters were not valid" in response.content.decode()


def test_the_pager_keeps_the_filters(login, flow, monkeypatch):
    monkeypatch.setattr(catalog, "ITEMS_PER_PAGE", 1)
    body = login(Role.MANAGER).get(URL, {"status": "open", "sort": "-id"}).content.decode()
    (link,) = re.findall(r'href="([^"]*page=2[^"]*)"', body)
    assert "status=open" in link and "sort=-id" in link


def test_managers_get_checkboxes_and_the_bulk_form_adjudicators_do_not(login, flow):
    manager = login(Role.MANAGER).get(URL).content.decode()
    assert 'id="bulk-form"' in manager and 'id="select-all"' in manager
    assert manager.count('name="items"') == 4
    adjudicator = login(Role.ADJUDICATOR).get(URL).content.decode()
    assert 'id="bulk-form"' not in adjudicator and 'name="items"' not in adjudicator


def test_a_manager_prioritises_checked_items_and_returns_to_the_same_list(login, flow):
    target = flow["open"][-1]
    path = f"{URL}?status=open&sort=-id"
    response = login(Role.MANAGER).post(
        path, {"action": "prioritise", "items": [target.pk, flow["resolved"].pk]}
    )
    assert response.status_code == 302 and response["Location"] == path
    first = Item.objects.filter(status=ItemStatus.OPEN).order_by("queue_position", "pk").first()
    assert first.pk == target.pk
    page = login(Role.MANAGER).get(path)
    assert "1 item(s) moved to the front of the queue; 1 left alone (not open)." in (
        page.content.decode()
    )


def test_a_manager_returns_items_to_the_queue(login, flow):
    resolved, disputed = flow["resolved"], flow["disputed"]
    response = login(Role.MANAGER).post(
        URL, {"action": "return", "items": [resolved.pk, disputed.pk], "extra_votes": "2"}
    )
    assert response.status_code == 302
    for item in (resolved, disputed):
        overlap = item.overlap
        item.refresh_from_db()
        assert (item.status, item.overlap) == (ItemStatus.OPEN, overlap + 2)


@pytest.mark.parametrize(("role", "status"), [(Role.ADJUDICATOR, 403), (Role.ANNOTATOR, 404)])
def test_bulk_actions_are_for_managers_only(login, flow, role, status):
    before = list(Item.objects.order_by("pk").values_list("status", "queue_position"))
    response = login(role).post(URL, {"action": "return", "items": [flow["resolved"].pk]})
    assert response.status_code == status
    assert list(Item.objects.order_by("pk").values_list("status", "queue_position")) == before


def test_a_non_member_gets_404(client, flow):
    client.force_login(UserFactory())
    assert client.get(URL).status_code == 404
    assert client.post(URL, {"action": "prioritise", "items": [1]}).status_code == 404


def test_annotators_never_see_the_browser(login, flow):
    assert login(Role.ANNOTATOR).get(URL).status_code == 404


@pytest.mark.parametrize(
    "data",
    [{"action": "prioritise"}, {"action": "prioritise", "items": ["x"]}, {"action": "delete"}],
)
def test_an_invalid_bulk_post_is_400_with_its_error(login, flow, data):
    response = login(Role.MANAGER).post(URL, data)
    assert response.status_code == 400
    assert 'id="bulk-errors"' in response.content.decode()


def test_adjudicators_cannot_filter_by_annotator_nor_see_the_names(login, flow):
    response = login(Role.ADJUDICATOR).get(URL, {"annotator": str(flow["a"].pk)})
    body = response.content.decode()
    assert len(listed(response)) == 4  # the filter is refused and ignored
    assert "ann_a" not in body and 'name="annotator"' not in body


def test_the_page_takes_as_many_queries_for_one_item_as_for_four(login, flow):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = login(Role.MANAGER)
    client.get(URL)  # warm the session and caches
    with CaptureQueriesContext(connection) as four:
        assert len(listed(client.get(URL))) == 4
    with CaptureQueriesContext(connection) as one:
        assert len(listed(client.get(URL, {"status": "resolved"}))) == 1
    assert len(four) == len(one)
