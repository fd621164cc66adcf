"""Gold pages: an item's reference form, the gold and qualification page, the dashboard notice."""

from __future__ import annotations

import pytest
from django.urls import reverse

from labeling.models import (
    Claim,
    GoldReference,
    Item,
    ItemStatus,
    LabelPolicy,
    Qualification,
    QualificationStatus,
    Role,
)
from labeling.services import item_claim_next
from tests.labeling.views.conftest import claim_next

pytestmark = pytest.mark.django_db


def first_item():
    return Item.objects.order_by("queue_position").first()


def reference_url(item):
    return reverse("gold-reference", args=["study", item.pk])


GOLD = reverse("gold-overview", args=["study"])


def reference_post(item, *, answer="admissible", quote="The bridge opened in 1932", **extra):
    claims = list(Claim.objects.filter(candidate__item=item).order_by("index"))
    data = {"answer_label": answer, "answer_reason": "", "rationale": "style guide §2"}
    for n, claim in enumerate(claims):
        data[f"claim-{claim.pk}-label"] = "supported" if n == 0 else "not_supported"
        data[f"claim-{claim.pk}-reason"] = ""
        data[f"claim-{claim.pk}-quote"] = quote if n == 0 else ""
    data.update(extra)
    return data


@pytest.mark.parametrize(
    ("role", "status"),
    [("manager", 200), ("adjudicator", 404), ("annotator", 404), ("nonmember", 404)],
)
def test_gold_pages_exist_for_managers_only(login, started, role, status):
    client = login(role)
    item = first_item()

    assert client.get(reference_url(item)).status_code == status
    assert client.get(GOLD).status_code == status
    assert client.post(reference_url(item), reference_post(item)).status_code in (
        {302} if status == 200 else {status}
    )
    assert GoldReference.objects.exists() == (status == 200)


def test_a_manager_makes_an_item_gold_from_its_page(login, started):
    client = login("manager")
    item = first_item()
    detail = client.get(reverse("item-detail", args=["study", item.pk])).content.decode()
    assert "Make this a gold item" in detail

    response = client.post(reference_url(item), reference_post(item))

    assert response.status_code == 302
    reference = GoldReference.objects.get(item=item)
    (span,) = reference.claim_labels.get(label="supported").evidence.all()
    assert span.quote == "The bridge opened in 1932"
    assert span.source_version.text[span.start : span.end] == span.quote
    assert Item.objects.get(pk=item.pk).status == ItemStatus.GOLD
    page = client.get(reverse("item-detail", args=["study", item.pk])).content.decode()
    assert 'id="gold-reference"' in page and "style guide §2" in page
    # The form opens on the current reference
    form = client.get(reference_url(item)).content.decode()
    assert "The bridge opened in 1932" in form and 'id="gold-current"' in form


def test_refusals_are_placed_on_their_fields(login, started):
    client = login("manager")
    item = first_item()

    missing = client.post(reference_url(item), reference_post(item, quote=""))
    absent = client.post(reference_url(item), reference_post(item, quote="not in the source"))
    forged = client.post(reference_url(item), reference_post(item, answer="cannot_decide"))

    assert missing.status_code == 400
    assert "needs at least one evidence span" in missing.content.decode()
    assert absent.status_code == 400
    assert "not in any pinned source" in absent.content.decode()
    assert forged.status_code == 400
    assert not GoldReference.objects.exists()


def test_an_item_given_out_cannot_become_gold(login, started, member):
    assignment = item_claim_next(project=started, actor=member(Role.ANNOTATOR))
    client = login("manager")

    response = client.post(reference_url(assignment.item), reference_post(assignment.item))

    assert response.status_code == 409
    assert "given to an annotator" in response.content.decode()


def test_failed_qualification_shows_on_the_dashboard_and_the_manager_decides(
    login, started, member
):
    # Given an annotator who failed a one-item qualification
    manager_client = login("manager")
    item = first_item()
    manager_client.post(reference_url(item), reference_post(item))
    LabelPolicy.objects.filter(project=started).update(
        qualification_required=True, qualification_items=1, qualification_threshold=1.0
    )
    annotator = member(Role.ANNOTATOR)
    from labeling.services.annotations import annotation_submit
    from labeling.services.label_checks import AnnotationInput, ClaimInput

    gold = claim_next(started, annotator)
    annotation_submit(
        project=started,
        assignment_id=gold.pk,
        actor=annotator,
        data=AnnotationInput(
            answer_label="inadmissible",
            claims=tuple(
                ClaimInput(claim_id=c, label="not_supported")
                for c in Claim.objects.filter(candidate__item=gold.item_id).values_list(
                    "pk", flat=True
                )
            ),
        ),
    )
    assert item_claim_next(project=started, actor=annotator) is None

    dashboard = manager_client.get(reverse("project-detail", args=["study"])).content.decode()
    assert 'id="qualification-notice"' in dashboard and annotator.username in dashboard
    page = manager_client.get(GOLD).content.decode()
    assert "awaiting your decision" in page

    decided = manager_client.post(
        GOLD, {"user_id": annotator.pk, "decision": "admit", "note": "a slip"}
    )

    assert decided.status_code == 302
    assert Qualification.objects.get(annotator=annotator).status == QualificationStatus.ADMITTED
    assert item_claim_next(project=started, actor=annotator) is not None
    dashboard = manager_client.get(reverse("project-detail", args=["study"])).content.decode()
    assert 'id="qualification-notice"' not in dashboard


def test_bad_decisions_are_refused(login, started, member):
    client = login("manager")
    assert client.post(GOLD, {"user_id": "x", "decision": "admit"}).status_code == 400
    assert client.post(GOLD, {"user_id": 999999, "decision": "admit"}).status_code == 404
    assert client.post(GOLD, {"user_id": 1, "decision": "maybe"}).status_code == 400


def test_the_policy_form_sets_the_gold_rule(login, project, import_records):
    from tests.conftest import native_record
    from tests.labeling.views.test_project_create_pages import policy_post

    import_records([native_record("q1")])
    client = login("manager")
    data = policy_post(
        project,
        gold_rate="0.2",
        qualification_required="on",
        qualification_items="3",
        qualification_threshold="0.9",
        action="save",
    )

    response = client.post(reverse("project-policy", args=["study"]), data)

    assert response.status_code == 302, response.content.decode()[:2000]
    policy = LabelPolicy.objects.get(project=project)
    assert (policy.gold_rate, policy.qualification_required, policy.qualification_items) == (
        0.2,
        True,
        3,
    )
    assert policy.qualification_threshold == 0.9
    page = client.get(reverse("project-policy", args=["study"])).content.decode()
    assert 'name="gold_rate"' in page
    bad = client.post(reverse("project-policy", args=["study"]), {**data, "gold_rate": "1.5"})
    assert bad.status_code == 400
