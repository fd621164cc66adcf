"""A single-choice field posted with several values is refused (400 naming it), nothing stored.

Browsers send each radio group, select and hidden input of the labelling and adjudication forms
once; a post that repeats one (a forged or broken form) used to store the last value.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from labeling.models import (
    Annotation,
    AnnotationRevision,
    AssignmentStatus,
    Claim,
    Item,
    ItemStatus,
    Resolution,
)
from tests.conftest import row_counts
from tests.labeling.views.conftest import claim_next, form_url, labels_post
from tests.labeling.views.test_adjudication_pages import decision_post, item_url

pytestmark = pytest.mark.django_db


def test_answer_label_posted_twice_is_400_at_the_answer_and_nothing_is_stored(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    data = labels_post(assignment.item)
    data["answer_label"] = ["admissible", "inadmissible"]  # type: ignore[assignment]
    before = row_counts()

    response = client.post(form_url(assignment), data)

    assert response.status_code == 400
    content = response.content.decode()
    assert (
        '<p class="errorlist" id="answer-error" role="alert">answer_label: 2 values given; '
        "this field takes exactly one</p>"
    ) in content
    assert row_counts() == before
    assert not Annotation.objects.exists()
    # the same post with one value is accepted
    data["answer_label"] = "inadmissible"
    assert client.post(form_url(assignment), data).status_code == 302
    assert Annotation.objects.get().current.answer_label == "inadmissible"


def test_a_claim_label_posted_twice_is_400_next_to_that_claim(client, started, annotator):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    second = Claim.objects.filter(candidate=assignment.item.candidate).order_by("index")[1]
    data = labels_post(assignment.item)
    data[f"claim-{second.pk}-label"] = ["supported", "not_supported"]  # type: ignore[assignment]

    response = client.post(form_url(assignment), data)

    assert response.status_code == 400
    rows = response.context["claim_rows"]
    assert [row.error for row in rows] == [
        None,
        "claims[1].label: 2 values given; this field takes exactly one",
    ]
    assert "claims[1].label: 2 values given" in response.content.decode()
    assert not AnnotationRevision.objects.exists()


@pytest.mark.parametrize(
    "field", ["revision", "time_spent_seconds", "comment", "evidence"], ids=lambda f: f
)
def test_any_field_of_the_labelling_form_repeated_is_refused(client, started, annotator, field):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    first = Claim.objects.filter(candidate=assignment.item.candidate).order_by("index")[0]
    data = labels_post(assignment.item, revision="0")
    key = f"claim-{first.pk}-evidence-0-start" if field == "evidence" else field
    data[key] = [data[key], data[key]]  # type: ignore[assignment]

    response = client.post(form_url(assignment), data)

    assert response.status_code == 400
    name = "claims[0].evidence" if field == "evidence" else field
    assert f"{name}: 2 values given; this field takes exactly one" in response.content.decode()
    assert not Annotation.objects.exists()


@pytest.mark.parametrize(
    ("key", "values"),
    [
        ("answer_label", ["admissible", "inadmissible"]),
        ("expected_version", None),
        ("rationale", ["one", "two"]),
    ],
)
def test_a_decision_with_a_field_posted_twice_is_400_and_nothing_is_resolved(
    client, started, member, key, values
):
    # given a disputed item (two annotators disagree on the answer)
    item = None
    for answer in ("admissible", "inadmissible"):
        user = member("annotator")
        assignment = claim_next(started, user)
        client.force_login(user)
        assert client.post(form_url(assignment), labels_post(assignment.item, answer=answer))
        item = assignment.item
    item = Item.objects.get(pk=item.pk)
    assert item.status == ItemStatus.DISAGREEMENT
    client.force_login(member("adjudicator"))
    data = decision_post(item)
    data[key] = values or [data[key], data[key]]  # type: ignore[assignment]

    response = client.post(item_url(item), data)

    assert response.status_code == 400
    # the page names the field in its own words (the rationale's is "Rationale")
    where = "Rationale — " if key == "rationale" else f"{key}: "
    assert f"{where}2 values given; this field takes exactly one" in response.content.decode()
    assert not Resolution.objects.filter(item=item).exists()
    assert Item.objects.get(pk=item.pk).status == ItemStatus.DISAGREEMENT


def test_the_skip_form_with_its_reason_twice_is_400_and_the_lease_is_kept(
    client, started, annotator
):
    client.force_login(annotator)
    assignment = claim_next(started, annotator)
    skip = reverse("annotate-skip", args=["study", assignment.pk])

    response = client.post(skip, {"reason": ["other", "out_of_expertise"], "note": "x"})

    assert response.status_code == 400
    assert response.context["form"].errors == {
        "reason": ["2 values given; this field takes exactly one"]
    }
    assert "2 values given; this field takes exactly one" in response.content.decode()
    assignment.refresh_from_db()
    assert assignment.status == AssignmentStatus.LEASED


def test_the_settings_form_with_the_serving_order_twice_is_400_and_nothing_changes(
    client, project, member
):
    client.force_login(member("manager"))
    project.refresh_from_db()
    before = (project.serving_order, project.overlap)
    url = reverse("project-settings", args=["study"])

    response = client.post(
        url,
        {
            "overlap": "3",
            "lease_minutes": "30",
            "serving_order": ["partition", "seeded_random"],
            "serving_seed": "7",
        },
    )

    assert response.status_code == 400
    assert response.context["form"].errors["serving_order"] == [
        "2 values given; this field takes exactly one"
    ]
    project.refresh_from_db()
    assert (project.serving_order, project.overlap) == before
