"""The "New project" page and the label policy page (form, preview, save, frozen)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling.models import LabelPolicy, Membership, Project, Role
from labeling.policy_presets import preset_get
from labeling.project_forms import PolicyForm
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NEW = reverse("project-create")
POLICY = reverse("project-policy", args=["study"])


def create_post(**overrides: str) -> dict[str, str]:
    data = {
        "name": "Second study",
        "slug": "second",
        "description": "",
        "preset": "faithbench",
        "overlap": "3",
        "lease_minutes": "20",
    }
    data.update(overrides)
    return data


def policy_post(project: Project, **overrides: Any) -> dict[str, Any]:
    """The policy form as the page fills it for ``project``, with ``overrides``."""
    initial = PolicyForm.initial_for(LabelPolicy.objects.get(project=project))
    data: dict[str, Any] = {}
    for name, value in initial.items():
        if value is True:
            data[name] = "on"
        elif value is not False:
            data[name] = str(value)
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


# -- new project ------------------------------------------------------------------------------


def test_the_project_list_offers_new_project_to_staff_only(client):
    client.force_login(UserFactory())
    assert 'id="new-project"' not in client.get(reverse("project-list")).content.decode()
    client.force_login(UserFactory(is_staff=True))
    assert 'id="new-project"' in client.get(reverse("project-list")).content.decode()


def test_staff_creates_a_project_from_the_form(client):
    creator = UserFactory(is_staff=True)
    client.force_login(creator)
    page = client.get(NEW).content.decode()
    assert 'value="source_relative"' in page and 'value="gsm8k"' in page

    response = client.post(NEW, create_post())

    assert response.status_code == 302
    assert response["Location"] == reverse("project-policy", args=["second"])
    project = Project.objects.get(slug="second")
    assert (project.name, project.overlap, project.lease_minutes) == ("Second study", 3, 20)
    assert Membership.objects.get(project=project, user=creator).role == Role.MANAGER
    policy = LabelPolicy.objects.get(project=project)
    assert policy.guideline == preset_get("faithbench").description.guideline


def test_a_plain_user_gets_403(client):
    client.force_login(UserFactory())

    assert client.get(NEW).status_code == 403
    assert client.post(NEW, create_post()).status_code == 403
    assert not Project.objects.filter(slug="second").exists()


def test_a_taken_slug_is_shown_on_the_slug_field(client, project):
    client.force_login(UserFactory(is_staff=True))

    response = client.post(NEW, create_post(slug="study"))

    assert response.status_code == 400
    assert response.context["form"].errors["slug"] == [
        "slug: a project with slug 'study' already exists"
    ]


# -- policy page ------------------------------------------------------------------------------


def test_an_annotator_reads_the_policy_without_a_form(login, project):
    page = login(Role.ANNOTATOR).get(POLICY)

    assert page.status_code == 200
    assert page.context["form"] is None
    html = page.content.decode()
    assert 'id="guideline"' in html and "<h3>Source-relative faithfulness</h3>" in html
    assert "policy-form" not in html


def test_the_manager_saves_the_policy(login, project):
    client = login(Role.MANAGER)
    assert 'id="policy-form"' in client.get(POLICY).content.decode()
    data = policy_post(
        project,
        **{
            "answer-abstained-offered": None,
            "answer-admissible-text": "Faithful",
            "answer-admissible-key": "f",
            "claim-not_supported-requires_evidence": "on",
            "claim-not_supported-position": "1",
            "claim-supported-position": "3",
            "reason-blocked-offered": None,
            "guideline": "# New rules\n\nCite everything.",
            "action": "save",
        },
    )

    response = client.post(POLICY, data)

    assert response.status_code == 302, response.context["form"].errors
    policy = LabelPolicy.objects.get(project=project)
    assert policy.answer_labels == ["admissible", "inadmissible", "evidence_unavailable"]
    assert policy.claim_labels == [
        "not_supported",
        "contradicted",
        "supported",
        "evidence_unavailable",
    ]
    assert policy.label_details["answer"]["admissible"]["text"] == "Faithful"
    assert policy.label_details["answer"]["admissible"]["key"] == "f"
    assert policy.evidence_labels == ["not_supported", "contradicted", "supported"]
    assert policy.unavailable_reasons == ["not_found", "source_changed"]
    assert policy.guideline == "# New rules\n\nCite everything."


@pytest.mark.parametrize("level", ["answer", "claim"])
@pytest.mark.parametrize("scale", ["ordinal", "nominal"])
def test_the_manager_sets_a_scale_with_its_select(login, project, level, scale):
    LabelPolicy.objects.filter(project=project).update(**{f"{level}_scale": "ordinal"})
    client = login(Role.MANAGER)
    html = client.get(POLICY).content.decode()
    # the select shows the stored scale, described in plain words
    assert '<option value="ordinal" selected>ordinal (in the declared order)</option>' in html
    assert f'name="{level}_scale" aria-describedby="scale-help"' in html
    assert "disagreement is their difference relative to their size" in html

    response = client.post(POLICY, policy_post(project, **{f"{level}_scale": scale,
                                                           "action": "save"}))  # fmt: skip

    assert response.status_code == 302, response.context["form"].errors
    assert getattr(LabelPolicy.objects.get(project=project), f"{level}_scale") == scale


@pytest.mark.parametrize(("level", "first"), [("answer", "admissible"), ("claim", "supported")])
@pytest.mark.parametrize("scale", ["interval", "ratio"])
def test_a_numeric_scale_over_named_labels_is_shown_on_its_select(login, project, level, first,
                                                                  scale):  # fmt: skip
    client = login(Role.MANAGER)

    response = client.post(POLICY, policy_post(project, **{f"{level}_scale": scale,
                                                           "action": "save"}))  # fmt: skip

    assert response.status_code == 400
    assert response.context["form"].errors[f"{level}_scale"] == [
        f"the {level} label {first!r} is not a number, as the {scale} scale needs"
    ]
    assert "is not a number, as the" in response.content.decode()
    assert getattr(LabelPolicy.objects.get(project=project), f"{level}_scale") == "nominal"


def test_the_read_only_policy_shows_each_scale(login, project):
    LabelPolicy.objects.filter(project=project).update(claim_scale="ordinal")

    html = login(Role.ANNOTATOR).get(POLICY).content.decode()

    assert re.search(r'id="answer-scale">[^<]*<strong>nominal</strong>', html)
    assert re.search(r'id="claim-scale">[^<]*<strong>ordinal \(in the declared order\)', html)


def test_a_duplicate_key_is_shown_on_its_row(login, project):
    client = login(Role.MANAGER)
    data = policy_post(project, **{"claim-contradicted-key": "1", "action": "save"})

    response = client.post(POLICY, data)

    assert response.status_code == 400
    form = response.context["form"]
    assert form.errors["claim-contradicted-key"] == ["'1' is already the key of supported"]
    details = LabelPolicy.objects.get(project=project).label_details
    assert details["claim"]["contradicted"]["key"] == "2"  # nothing saved


def test_preview_renders_sanitised_markdown_and_saves_nothing(login, project):
    before = LabelPolicy.objects.get(project=project).guideline
    client = login(Role.MANAGER)
    guideline = (
        "# Heading\n\n**bold** <script>alert('x')</script> "
        '<img src="x" onerror="alert(1)"> [link](javascript:alert(2))'
    )
    data = policy_post(
        project, **{"guideline": guideline, "answer-admissible-text": "OK", "action": "preview"}
    )

    response = client.post(POLICY, data)

    assert response.status_code == 200
    html = response.content.decode()
    preview = re.search(r'<div class="guideline" id="preview-guideline">(.*?)</div>', html, re.S)
    assert preview is not None
    shown = preview.group(1)
    assert "<h3>Heading</h3>" in shown and "<strong>bold</strong>" in shown
    assert "<script" not in shown and "onerror" not in shown and "javascript:" not in shown
    assert "<strong>OK</strong>" in html  # the label table shows the posted text
    # the form keeps what was typed, and nothing was saved
    assert response.context["form"]["guideline"].value() == guideline
    assert LabelPolicy.objects.get(project=project).guideline == before


def test_the_read_only_guideline_is_sanitised(login, project):
    LabelPolicy.objects.filter(project=project).update(
        guideline="ok <script>alert(1)</script>", frozen_at=timezone.now()
    )

    html = login(Role.MANAGER).get(POLICY).content.decode()

    assert "<script>alert" not in html and "ok" in html


def test_a_frozen_policy_is_read_only_and_a_save_is_409(login, project):
    data = policy_post(project, **{"guideline": "changed", "action": "save"})
    LabelPolicy.objects.filter(project=project).update(frozen_at=timezone.now())
    client = login(Role.MANAGER)

    page = client.get(POLICY)
    assert page.context["form"] is None and "Frozen" in page.content.decode()
    response = client.post(POLICY, data)

    assert response.status_code == 409
    assert "publish a new version" in response.content.decode()
    assert LabelPolicy.objects.get(project=project).guideline != "changed"


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR])
def test_only_managers_post(login, project, role):
    assert login(role).post(POLICY, {"action": "save"}).status_code == 403
