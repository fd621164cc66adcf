"""Adjudicator pages: queue with filters and counts, side-by-side view, resolve, unresolved,
version conflicts and self-adjudication."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from certification.selectors import item_posterior_get
from certification.services.reliability import reliability_recompute
from labeling.models import (
    Item,
    ItemStatus,
    LabelPolicy,
    Membership,
    Resolution,
    ResolutionStatus,
    Role,
    SourceVersion,
)
from labeling.services import partition_freeze
from tests.factories import WORK_SOURCE, start_labelling, work_record
from tests.labeling.views.conftest import (
    EVALUATOR,
    PRIOR_ANNOTATOR,
    PRIOR_NOTE,
    claim_next,
    form_url,
    labels_post,
    secret_record,
)

pytestmark = pytest.mark.django_db

QUEUE = reverse("adjudication-queue", args=["study"])


def item_url(item: Item) -> str:
    return reverse("adjudication-item", args=["study", item.pk])


def submit(client, project, user, **labels) -> Item:
    assignment = claim_next(project, user)
    client.force_login(user)
    response = client.post(form_url(assignment), labels_post(assignment.item, **labels))
    assert response.status_code == 302, response.content.decode()[:2000]
    return assignment.item


@pytest.fixture
def disputed(client, started, member) -> Item:
    """Item q1/c0 annotated by two annotators whose answer labels differ."""
    alice, bob = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    item = submit(client, started, alice, answer="admissible", comment="ALICE-COMMENT")
    assert submit(client, started, bob, answer="inadmissible") == item
    item.refresh_from_db()
    assert item.status == ItemStatus.DISAGREEMENT
    client.logout()
    return item


def decision_post(item: Item, **extra) -> dict[str, str]:
    """The decision form as the 'Use all' button of a column fills it (code-point evidence)."""
    data = labels_post(item, answer="admissible")
    version = SourceVersion.objects.get(retrievals__question=item.candidate.question)
    for key in list(data):
        if key.endswith("-start") or key.endswith("-end"):
            quote_key = key.rsplit("-", 1)[0] + "-quote_json"
            quote = json.loads(data[quote_key])
            start = version.text.index(quote)
            data[key] = str(start if key.endswith("-start") else start + len(quote))
        if key.endswith("-unit"):
            data[key] = "codepoint"
    data.pop("time_spent_seconds")
    data.update({"expected_version": str(item.version), "rationale": "Source line 1 says so."})
    data.update(extra)
    return data


# --- queue -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.ADJUDICATOR, 200),
        (Role.MANAGER, 200),
        (Role.ANNOTATOR, 404),
        ("nonmember", 404),
        ("anonymous", 302),
    ],
)
def test_queue_and_item_pages_by_role(login, disputed, role, status):
    client = login(role)

    assert client.get(QUEUE).status_code == status
    assert client.get(item_url(disputed)).status_code == status


def test_queue_lists_the_disputed_item_with_counts_and_levels(login, disputed):
    response = login(Role.ADJUDICATOR).get(QUEUE)

    content = response.content.decode()
    assert [i.pk for i in response.context["page"].object_list] == [disputed.pk]
    assert response.context["waiting"] == 1
    assert item_url(disputed) in content
    assert '<span class="badge warn">answer</span>' in content


def test_queue_filters_by_level_partition_and_age(client, project, import_records, member):
    # given a partition frozen before labelling, and a disputed item
    import_records([work_record("q1")])
    partition_freeze(project=project, proportions={"dev": 0, "calibration": 1, "test": 0}, seed=3)
    start_labelling(project, overlap=2)
    disputed = submit(client, project, member(Role.ANNOTATOR), answer="admissible")
    submit(client, project, member(Role.ANNOTATOR), answer="inadmissible")
    client.force_login(member(Role.ADJUDICATOR))

    def ids(params):
        response = client.get(QUEUE, params)
        assert response.status_code == 200
        return [i.pk for i in response.context["page"].object_list]

    assert ids({"level": "answer"}) == [disputed.pk]
    assert ids({"level": "claim"}) == []
    assert ids({"partition": "calibration"}) == [disputed.pk]
    assert ids({"partition": "test"}) == []
    assert ids({"min_age_hours": "0"}) == [disputed.pk]
    assert ids({"min_age_hours": "5"}) == []
    # an invalid filter is reported and ignored
    response = client.get(QUEUE, {"level": "bogus"})
    assert b"not valid" in response.content
    assert [i.pk for i in response.context["page"].object_list] == [disputed.pk]


# --- side by side ----------------------------------------------------------------------------


def test_side_by_side_shows_pseudonyms_never_names_and_highlights_differences(login, disputed):
    annotators = [m.user.username for m in Membership.objects.filter(role=Role.ANNOTATOR)]

    response = login(Role.ADJUDICATOR).get(item_url(disputed))

    content = response.content.decode()
    assert response.status_code == 200
    headers = re.findall(r'<th class="annotator-column" scope="col">(Annotator \d)', content)
    assert headers == ["Annotator 1", "Annotator 2"]
    for username in annotators:
        assert not re.search(rf"\b{username}\b", content)
    assert 'class="answer-votes differs"' in content
    assert "ALICE-COMMENT" in content  # the comment, not the name
    assert f'name="expected_version" value="{disputed.version}"' in content
    # the copy buttons' data carry the columns' code-point evidence
    data = json.loads(re.search(r'id="columns-data"[^>]*>(.*?)</script>', content, re.S).group(1))
    first = disputed.candidate.claims.get(index=0)
    span = data[0]["claims"][str(first.pk)]["evidence"][0]
    assert WORK_SOURCE[span["start"] : span["end"]] == span["quote"] == "opened in 1932"
    assert [c["answer_label"] for c in data] == ["admissible", "inadmissible"]


def test_prior_annotations_appear_as_annotators_without_their_dataset_identity(
    client, project, import_records, member
):
    # given an item with one imported vote and overlap 2: one live annotation completes it
    import_records([secret_record("q1")])
    start_labelling(project, overlap=2)
    submit(client, project, member(Role.ANNOTATOR), answer="admissible")
    item = Item.objects.get(candidate__key="c0")
    assert item.status == ItemStatus.DISAGREEMENT
    client.force_login(member(Role.ADJUDICATOR))

    response = client.get(item_url(item))

    content = response.content.decode()
    assert 'Annotator 2 <span class="badge">imported</span>' in content
    # the imported annotator's note is shown beside the vote; the dataset's identity is not
    assert f'<p class="note">{PRIOR_NOTE}</p>' in content
    for secret in (PRIOR_ANNOTATOR, EVALUATOR, "0.8125"):
        assert secret not in content


# --- decisions -------------------------------------------------------------------------------


def test_resolve_writes_the_adjudicated_labels_and_returns_to_the_queue(login, disputed):
    client = login(Role.ADJUDICATOR)

    response = client.post(item_url(disputed), decision_post(disputed))

    assert response.status_code == 302
    assert response["Location"] == QUEUE
    disputed.refresh_from_db()
    resolution = disputed.resolution
    assert resolution.status == ResolutionStatus.ADJUDICATED
    assert resolution.answer_label == "admissible"
    assert resolution.rationale == "Source line 1 says so."
    spans = [
        (e.start, e.end, e.quote) for cl in resolution.claim_labels.all() for e in cl.evidence.all()
    ]
    assert all(WORK_SOURCE[s:e] == q for s, e, q in spans) and len(spans) == 2


def test_mark_unresolved_with_a_reason(login, disputed):
    client = login(Role.ADJUDICATOR)

    response = client.post(
        item_url(disputed),
        {
            "action": "unresolved",
            "unresolved_reason": "ambiguous_guideline",
            "rationale": "",
            "expected_version": str(disputed.version),
        },
    )

    assert response.status_code == 302
    disputed.refresh_from_db()
    assert disputed.resolution.status == ResolutionStatus.UNRESOLVED
    assert disputed.resolution.unresolved_reason == "ambiguous_guideline"


def test_an_invalid_decision_keeps_the_input_and_names_the_field(login, disputed):
    client = login(Role.ADJUDICATOR)

    response = client.post(item_url(disputed), decision_post(disputed, rationale=""))

    assert response.status_code == 400
    content = response.content.decode()
    assert 'id="form-errors"' in content and "rationale" in content
    assert 'name="answer_label" value="admissible" checked' in content
    assert not Resolution.objects.filter(item=disputed).exists()


def test_a_stale_version_shows_a_conflict_and_reloads_the_current_state(login, disputed, member):
    # given two adjudicators who opened the page at the same version
    client = login(Role.ADJUDICATOR)
    page = client.get(item_url(disputed))
    stale = page.context["view"].version
    other = member(Role.ADJUDICATOR)
    client.force_login(other)
    assert client.post(item_url(disputed), decision_post(disputed)).status_code == 302
    client.force_login(Membership.objects.filter(role=Role.ADJUDICATOR).first().user)

    # when the first decides with the stale version
    response = client.post(
        item_url(disputed),
        decision_post(disputed, expected_version=str(stale), rationale="MY-RATIONALE"),
    )

    # then a conflict, the current resolution shown, the new version in the form, input kept
    assert response.status_code == 409
    content = response.content.decode()
    assert 'id="conflict"' in content
    assert 'id="current-resolution"' in content and "adjudicated" in content
    disputed.refresh_from_db()
    assert f'name="expected_version" value="{disputed.version}"' in content
    assert disputed.version != stale
    assert "MY-RATIONALE" in content
    assert Resolution.objects.filter(item=disputed).count() == 1


def test_an_adjudicator_who_annotated_the_item_is_refused(client, started, member):
    alice, bob = member(Role.ANNOTATOR), member(Role.ANNOTATOR)
    item = submit(client, started, alice, answer="admissible")
    submit(client, started, bob, answer="inadmissible")
    Membership.objects.filter(user=alice).update(role=Role.ADJUDICATOR)
    client.force_login(alice)

    queue = client.get(QUEUE)
    page = client.get(item_url(item))

    assert list(queue.context["page"].object_list) == []
    assert page.status_code == 403


def test_a_consensus_item_has_nothing_to_adjudicate(client, started, member):
    item = submit(client, started, member(Role.ANNOTATOR))
    submit(client, started, member(Role.ANNOTATOR))
    item.refresh_from_db()
    assert item.resolution.status == ResolutionStatus.CONSENSUS
    client.force_login(member(Role.ADJUDICATOR))

    response = client.get(item_url(item))

    assert response.status_code == 200
    assert b'id="not-adjudicable"' in response.content
    assert b'id="adjudication-form"' not in response.content


def test_an_open_item_is_not_in_the_queue_pages(login, started):
    item = Item.objects.get(candidate__question__external_id="q1", candidate__key="c0")

    assert login(Role.ADJUDICATOR).get(item_url(item)).status_code == 404


def test_an_item_under_another_projects_slug_is_404(login, disputed):
    from labeling.services import project_create

    project_create(slug="other", name="Other")
    client = login("staff")

    assert client.get(reverse("adjudication-item", args=["other", disputed.pk])).status_code == 404


def test_an_unknown_action_is_refused_and_changes_nothing(login, disputed):
    client = login(Role.ADJUDICATOR)

    response = client.post(item_url(disputed), {**decision_post(disputed), "action": "zzz"})

    assert response.status_code == 400
    disputed.refresh_from_db()
    assert disputed.resolution is None


def test_votes_and_the_model_estimate_read_as_the_policys_labels_and_say_whom_it_sides_with(
    login, disputed
):
    # given a policy with display texts of its own, and the model estimate computed
    policy = LabelPolicy.objects.get(project=disputed.candidate.question.project)
    policy.label_details = {
        "answer": {"admissible": {"text": "Fine as it is"}, "inadmissible": {"text": "Must go"}},
        "claim": {"supported": {"text": "Backed by the source"}},
    }
    policy.save()
    reliability_recompute(project_id=policy.project_id)
    claim_ids = tuple(disputed.candidate.claims.order_by("index").values_list("pk", flat=True))
    posterior = item_posterior_get(project=policy.project, item_id=disputed.pk, claim_ids=claim_ids)
    assert posterior is not None

    content = login(Role.ADJUDICATOR).get(item_url(disputed)).content.decode()

    # then the vote cells show the policy's texts, never the tokens
    answers = re.search(r'<tr class="answer-votes[^"]*">(.*?)</tr>', content, re.S).group(1)
    assert re.findall(r"<td>([^<(]*)</td>", answers) == ["Fine as it is", "Must go"]
    claims = re.findall(r'<tr class="claim-votes[^"]*"[^>]*>.*?<td>([^<]*?)\s*<div', content, re.S)
    assert claims[:1] == ["Backed by the source"]
    table = content[content.index('id="model-posterior"') :]
    table = table[: table.index("</table>")]
    assert "admissible" not in table.replace("Fine as it is", "")
    assert "supported" not in table
    # and each row names the annotators who voted the estimate's most probable label
    # (Annotator 1 voted admissible, Annotator 2 inadmissible; both the same claim labels)
    texts = {"admissible": "Fine as it is", "inadmissible": "Must go"}
    top = posterior.answer[0][0]
    who = "Annotator 1" if top == "admissible" else "Annotator 2"
    sides = re.findall(r'<td class="sides-with">(.*?)</td>', table)
    assert sides[0] == f"{who} ({texts[top]})"
    assert len(sides) == 1 + len(posterior.claims)
    for pairs, text in zip(posterior.claims.values(), sides[1:], strict=True):
        expected = (
            "Annotator 1, Annotator 2 (Backed by the source)"
            if pairs[0][0] == "supported"
            else f"no annotator: none voted {pairs[0][0].replace('_', ' ')}"
        )
        assert text == expected
