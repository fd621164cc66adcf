"""POST /api/projects/, GET/PUT /api/projects/<slug>/policy/ and GET .../evaluators/."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from labeling.models import Evaluator, LabelPolicy, Membership, Project, Role
from labeling.policy_presets import preset_get
from tests.factories import UserFactory
from tests.worlds import token_for

pytestmark = pytest.mark.django_db

BODY = {"slug": "second", "name": "Second study", "description": "A second study."}


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    return client


# -- create -----------------------------------------------------------------------------------


def test_staff_creates_a_project_and_becomes_its_manager():
    creator = UserFactory(is_staff=True)

    response = _client(creator).post(
        "/api/projects/",
        {**BODY, "preset": "external_truth", "overlap": 3, "lease_minutes": 45},
        format="json",
    )

    assert response.status_code == 201, response.json()
    assert response.json() == {
        "slug": "second",
        "name": "Second study",
        "description": "A second study.",
        "overlap": 3,
        "lease_minutes": 45,
        "role": "manager",
        "policy_version": 1,
    }
    project = Project.objects.get(slug="second")
    assert Membership.objects.get(project=project, user=creator).role == Role.MANAGER
    policy = LabelPolicy.objects.get(project=project)
    assert policy.evidence_relation == "external_truth"
    assert policy.guideline == preset_get("external_truth").description.guideline
    assert policy.evidence_labels == []


def test_the_default_preset_is_source_relative():
    response = _client(UserFactory(is_staff=True)).post("/api/projects/", BODY, format="json")

    assert response.status_code == 201
    policy = LabelPolicy.objects.get(project__slug="second")
    assert policy.evidence_relation == "source_relative"
    assert policy.evidence_labels == ["supported", "contradicted"]
    assert policy.guideline.startswith("# Source-relative faithfulness")


def test_a_plain_user_may_not_create_a_project():
    response = _client(UserFactory()).post("/api/projects/", BODY, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert not Project.objects.filter(slug="second").exists()


def test_the_add_project_permission_allows_it():
    user = UserFactory()
    user.user_permissions.add(Permission.objects.get(codename="add_project"))

    response = _client(user).post("/api/projects/", BODY, format="json")

    assert response.status_code == 201


def test_the_setting_lets_everyone_create(settings):
    settings.CERTLABEL_ANYONE_CREATES_PROJECTS = True

    response = _client(UserFactory()).post("/api/projects/", BODY, format="json")

    assert response.status_code == 201


def test_anonymous_gets_401():
    assert APIClient().post("/api/projects/", BODY, format="json").status_code == 401


def test_a_taken_slug_is_400_naming_slug(project):
    response = _client(UserFactory(is_staff=True)).post(
        "/api/projects/", {**BODY, "slug": "study"}, format="json"
    )

    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "slug"
    assert body["errors"] == [
        {"field": "slug", "reason": "a project with slug 'study' already exists"}
    ]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"slug": "Not A Slug"}, "slug"),
        ({"slug": 0}, "slug"),  # a JSON number is not the slug "0"
        ({"name": ""}, "name"),
        ({"preset": "vibes"}, "preset"),
        ({"overlap": 0}, "overlap"),
        ({"lease_minutes": 10**9}, "lease_minutes"),
    ],
)
def test_invalid_input_names_the_field(change, field):
    response = _client(UserFactory(is_staff=True)).post(
        "/api/projects/", {**BODY, **change}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
    assert not Project.objects.filter(slug=BODY["slug"]).exists()


# -- policy -----------------------------------------------------------------------------------


def test_every_member_reads_the_policy(project, api):
    response = api("annotator").get("/api/projects/study/policy/")

    assert response.status_code == 200
    body = response.json()
    assert (body["version"], body["editable"], body["frozen_at"]) == (1, True, None)
    assert [row["value"] for row in body["claim_labels"]] == [
        "supported",
        "contradicted",
        "not_supported",
        "evidence_unavailable",
    ]
    assert body["claim_labels"][0]["requires_evidence"] is True
    assert "<h1>" in body["guideline_html"]


def test_a_manager_edits_the_draft_policy(project, api):
    client = api("manager")
    data = client.get("/api/projects/study/policy/").json()
    description = {k: data[k] for k in (
        "evidence_relation", "guideline", "answer_labels", "claim_labels", "unavailable_reasons"
    )}  # fmt: skip
    description["answer_labels"] = description["answer_labels"][:2]
    description["answer_labels"][0].update(text="Faithful", key="f")
    description["guideline"] = "# Rules\n\n<script>alert(1)</script>Be kind."

    response = client.put("/api/projects/study/policy/", description, format="json")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert [(r["value"], r["text"], r["key"]) for r in body["answer_labels"]] == [
        ("admissible", "Faithful", "f"),
        ("inadmissible", "inadmissible", "2"),
    ]
    assert "<script>" not in body["guideline_html"] and "Be kind." in body["guideline_html"]
    assert LabelPolicy.objects.get(project=project).answer_labels == ["admissible", "inadmissible"]


def test_an_invalid_policy_is_400_naming_the_field(project, api):
    client = api("manager")
    data = client.get("/api/projects/study/policy/").json()
    description = {k: data[k] for k in (
        "evidence_relation", "guideline", "answer_labels", "claim_labels", "unavailable_reasons"
    )}  # fmt: skip
    description["claim_labels"][1]["key"] = "1"

    response = client.put("/api/projects/study/policy/", description, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "claim_labels[1].key", "reason": "'1' is already the key of supported"}
    ]


@pytest.mark.parametrize("role", ["annotator", "adjudicator"])
def test_only_managers_edit_the_policy(project, api, role):
    response = api(role).put("/api/projects/study/policy/", {}, format="json")

    assert response.status_code == 403


def test_a_frozen_policy_is_refused_with_a_clear_error(started, api, manager):
    client = api("manager")
    data = client.get("/api/projects/study/policy/").json()
    assert data["editable"] is False
    description = {k: data[k] for k in (
        "evidence_relation", "guideline", "answer_labels", "claim_labels", "unavailable_reasons"
    )}  # fmt: skip
    description["guideline"] = "changed"

    response = client.put("/api/projects/study/policy/", description, format="json")

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "policy_frozen"
    assert "frozen" in body["detail"] and "publish a new version" in body["detail"]
    assert LabelPolicy.objects.get(project=started).guideline != "changed"


def _description(body: dict) -> dict:
    """The editable description in a policy GET body (version, state and HTML left out)."""
    return {k: v for k, v in body.items() if k not in ("version", "frozen_at", "editable",
                                                       "guideline_html")}  # fmt: skip


@pytest.mark.parametrize("level", ["answer", "claim"])
@pytest.mark.parametrize("scale", ["ordinal", "nominal"])
def test_a_manager_sets_a_scale_and_every_member_reads_it(project, api, level, scale):
    client = api("manager")
    description = _description(client.get("/api/projects/study/policy/").json())
    assert (description["answer_scale"], description["claim_scale"]) == ("nominal", "nominal")
    LabelPolicy.objects.filter(project=project).update(**{f"{level}_scale": "ordinal"})
    description[f"{level}_scale"] = scale

    response = client.put("/api/projects/study/policy/", description, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()[f"{level}_scale"] == scale
    assert getattr(LabelPolicy.objects.get(project=project), f"{level}_scale") == scale
    read = api("annotator").get("/api/projects/study/policy/").json()
    other = "answer_scale" if level == "claim" else "claim_scale"
    assert (read[f"{level}_scale"], read[other]) == (scale, "nominal")


@pytest.mark.parametrize(("level", "first"), [("answer", "admissible"), ("claim", "supported")])
@pytest.mark.parametrize("scale", ["interval", "ratio"])
def test_a_numeric_scale_over_named_labels_is_400_naming_the_label(project, api, level, first,
                                                                   scale):  # fmt: skip
    client = api("manager")
    description = _description(client.get("/api/projects/study/policy/").json())
    description[f"{level}_scale"] = scale

    response = client.put("/api/projects/study/policy/", description, format="json")

    assert response.status_code == 400
    reason = f"the {level} label {first!r} is not a number, as the {scale} scale needs"
    assert response.json()["errors"] == [{"field": f"{level}_scale", "reason": reason}]
    assert getattr(LabelPolicy.objects.get(project=project), f"{level}_scale") == "nominal"


def test_the_schema_documents_the_scales_as_one_enum_with_help(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]

    assert schema["LabelScaleEnum"]["enum"] == ["nominal", "ordinal", "interval", "ratio"]
    for component in ("PolicyDescriptionRequest", "Policy"):
        for level in ("answer", "claim"):
            field = schema[component]["properties"][f"{level}_scale"]
            assert field["allOf"] == [{"$ref": "#/components/schemas/LabelScaleEnum"}]
            assert f"the {level} labels" in field["description"]
            assert "ordinal (ranked in the listed order" in field["description"]


def test_a_policy_body_that_is_not_an_object_is_400(project, api):
    response = api("manager").put("/api/projects/study/policy/", ["x"], format="json")

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "policy"


# -- evaluators -------------------------------------------------------------------------------


def test_reviewers_list_the_evaluators(project, api):
    Evaluator.objects.create(project=project, name="judge", version="v2")
    Evaluator.objects.create(project=project, name="judge", version="v1", description="first")

    response = api("adjudicator").get("/api/projects/study/evaluators/")

    assert response.status_code == 200
    rows = response.json()["results"]
    assert [(r["name"], r["version"], r["description"], r["label_count"]) for r in rows] == [
        ("judge", "v1", "first", 0),
        ("judge", "v2", "", 0),
    ]
    assert api("annotator").get("/api/projects/study/evaluators/").status_code == 403
    assert api("nonmember").get("/api/projects/study/evaluators/").status_code == 404
