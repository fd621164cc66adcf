"""The label policy versions page: preview the diff, then publish; a stale labelling form."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from labeling.models import Annotation, Claim, LabelPolicy, Role
from labeling.selectors.policies import policy_description_data
from labeling.services import membership_set
from tests.factories import UserFactory
from tests.labeling.views.conftest import claim_next, form_url

pytestmark = pytest.mark.django_db


def page(project) -> str:
    return reverse("policy-versions", args=[project.slug])


def form_fields(project, *, drop: str = "abstained", **extra: str) -> dict[str, str]:
    """The page's form for the current version with the answer label ``drop`` unticked."""
    content = policy_description_data(project.policies.get(version=1))
    fields = {
        "based_on_version": "1",
        "note": "abstained is no longer an answer label",
        "evidence_relation": content["evidence_relation"],
        "guideline": content["guideline"],
        "resolved": "keep",
        "action": "preview",
        "gold_rate": str(content["gold_rate"]),
        "qualification_items": str(content["qualification_items"]),
        "qualification_threshold": str(content["qualification_threshold"]),
        "answer_scale": content["answer_scale"],
        "claim_scale": content["claim_scale"],
    }
    for level in ("answer", "claim"):
        for n, row in enumerate(content[f"{level}_labels"], start=1):
            prefix = f"{level}-{row['value']}-"
            fields |= {
                prefix + "position": str(n),
                prefix + "text": row["text"],
                prefix + "description": row["description"],
                prefix + "key": row["key"],
            }
            if row["value"] != drop:
                fields[prefix + "offered"] = "on"
            if row.get("requires_evidence"):
                fields[prefix + "requires_evidence"] = "on"
    for row in content["unavailable_reasons"]:
        prefix = f"reason-{row['value']}-"
        fields |= {
            prefix + "offered": "on",
            prefix + "position": str(n),
            prefix + "text": row["text"],
        }
    return {**fields, **extra}


@pytest.fixture
def manager_client(client, started) -> Any:
    manager = UserFactory()
    membership_set(project=started, user=manager, role=Role.MANAGER)
    client.force_login(manager)
    return client


def test_the_page_lists_the_versions_and_offers_the_next(manager_client, started):
    response = manager_client.get(page(started))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-version="1"' in html and "(current)" in html
    assert "Publish version v2" in html
    assert 'name="answer-abstained-offered"' in html
    assert 'id="publish-version"' not in html  # only after a preview


def test_preview_shows_the_diff_then_publish_creates_v2(manager_client, started):
    response = manager_client.post(page(started), form_fields(started))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-field="answer_labels"' in html
    assert "<td>abstained</td>" in html
    assert 'id="publish-version"' in html
    assert LabelPolicy.objects.filter(project=started).count() == 1
    response = manager_client.post(page(started), form_fields(started, action="publish"))
    assert response.status_code == 302
    v2 = LabelPolicy.objects.get(project=started, version=2)
    assert "abstained" not in v2.answer_labels
    assert v2.change_note == "abstained is no longer an answer label"
    assert 'data-version="2"' in manager_client.get(page(started)).content.decode()


def test_a_scale_change_is_previewed_as_before_and_after_then_published(manager_client, started):
    fields = form_fields(started, drop="", claim_scale="ordinal", note="claims are ranked")
    response = manager_client.post(page(started), fields)
    assert response.status_code == 200
    html = response.content.decode()
    row = re.search(r'<tr data-field="claim_scale">(.*?)</tr>', html, re.S)
    assert row is not None and "nominal → ordinal" in row.group(1)
    assert 'data-field="answer_scale"' not in html  # only what changed
    response = manager_client.post(page(started), {**fields, "action": "publish"})
    assert response.status_code == 302
    scales = LabelPolicy.objects.filter(project=started).values_list("version", "claim_scale")
    assert sorted(scales) == [(1, "nominal"), (2, "ordinal")]


def test_a_missing_note_is_shown_and_nothing_is_published(manager_client, started):
    response = manager_client.post(page(started), form_fields(started, note=" ", action="publish"))
    assert response.status_code == 400
    assert "change note is required" in response.content.decode()
    assert LabelPolicy.objects.filter(project=started).count() == 1


def test_nothing_changed_is_refused(manager_client, started):
    response = manager_client.post(page(started), form_fields(started, drop=""))
    assert response.status_code == 400
    assert "nothing to publish" in response.content.decode()


def test_before_labelling_starts_the_page_says_the_policy_is_a_draft(client, project):
    manager = UserFactory()
    membership_set(project=project, user=manager, role=Role.MANAGER)
    client.force_login(manager)
    response = client.get(page(project))
    assert response.status_code == 200
    assert 'id="policy-draft"' in response.content.decode()


def test_a_form_loaded_under_v1_is_shown_again_under_v2(client, started, member):
    annotator = member(Role.ANNOTATOR)
    assignment = claim_next(started, annotator)
    client.force_login(annotator)
    form = client.get(form_url(assignment)).content.decode()
    assert 'name="policy_version" value="1"' in form
    # the manager publishes v2 meanwhile
    manager = UserFactory()
    membership_set(project=started, user=manager, role=Role.MANAGER)
    client.force_login(manager)
    assert client.post(page(started), form_fields(started, action="publish")).status_code == 302
    # the annotator's submit of the v1 form is refused with the policy message
    client.force_login(annotator)
    claims = Claim.objects.filter(candidate=assignment.item.candidate).order_by("index")
    posted = {
        "answer_label": "inadmissible",
        "revision": "0",
        "policy_version": "1",
        **{f"claim-{c.pk}-label": "not_supported" for c in claims},
    }
    response = client.post(form_url(assignment), posted)
    assert response.status_code == 409
    html = response.content.decode()
    assert "The label policy changed from v1 to v2" in html
    assert 'name="policy_version" value="2"' in html
    assert not Annotation.objects.filter(assignment=assignment).exists()
    # submitted again under v2, it is saved
    response = client.post(form_url(assignment), {**posted, "policy_version": "2"})
    assert response.status_code == 302
    assert Annotation.objects.get(assignment=assignment).current.policy.version == 2
