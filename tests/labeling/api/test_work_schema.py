"""The OpenAPI schema documents the labelling-work endpoints with request and response bodies."""

from __future__ import annotations

import copy

import pytest

pytestmark = pytest.mark.django_db

P = "/api/projects/{slug}"


@pytest.fixture(scope="module")
def _schema_once(django_db_setup, django_db_blocker):
    # the schema is generated from the code alone: fetched once per module (in a transaction
    # rolled back, should the request write anything)
    from django.db import transaction
    from django.test import Client

    with django_db_blocker.unblock(), transaction.atomic():
        schema = Client().get("/api/schema/", {"format": "json"}).json()
        transaction.set_rollback(True)
    return schema


@pytest.fixture
def schema(_schema_once):
    return copy.deepcopy(_schema_once)


@pytest.mark.parametrize(
    ("path", "method", "request_schema", "success", "response_schema"),
    [
        (f"{P}/assignments/next/", "post", None, "200", "LabellingForm"),
        (f"{P}/assignments/{{assignment_id}}/", "get", None, "200", "LabellingForm"),
        (
            f"{P}/assignments/{{assignment_id}}/annotation/",
            "put",
            "AnnotationInput",
            "200",
            "OwnAnnotation",
        ),
        (f"{P}/assignments/{{assignment_id}}/skip/", "post", "SkipInput", "200", None),
        (f"{P}/annotations/", "get", None, "200", None),
        (f"{P}/disagreements/", "get", None, "200", None),
        (f"{P}/disagreements/{{item_id}}/", "get", None, "200", "AdjudicationView"),
        (f"{P}/disagreements/{{item_id}}/resolve/", "post", "ResolveInput", "201", "Resolution"),
        (
            f"{P}/disagreements/{{item_id}}/unresolved/",
            "post",
            "UnresolvedInput",
            "201",
            "Resolution",
        ),
        (f"{P}/progress/", "get", None, "200", "ProgressCounts"),
        (f"{P}/agreement/", "get", None, "200", "AgreementReport"),
        (f"{P}/settings/", "get", None, "200", "LabellingSettings"),
        (f"{P}/settings/", "patch", "LabellingSettingsInput", "200", "LabellingSettings"),
        (f"{P}/labelling/start/", "post", None, "200", "LabellingSettings"),
        (f"{P}/members/", "get", None, "200", None),
        (f"{P}/members/{{user_id}}/", "patch", "MemberUpdateInput", "200", "Member"),
        (f"{P}/members/{{user_id}}/", "delete", None, "204", None),
        (f"{P}/invitations/", "get", None, "200", "PaginatedInvitationList"),
        (f"{P}/invitations/", "post", "InvitationInput", "201", "InvitationSent"),
        (f"{P}/invitations/{{invitation_id}}/", "delete", None, "204", None),
        ("/api/invitations/{invitation_id}/accept/", "post", None, "200", "Member"),
        ("/api/invitations/{invitation_id}/decline/", "post", None, "204", None),
    ],
)
def test_operation_is_documented(schema, path, method, request_schema, success, response_schema):
    operation = schema["paths"][path][method]
    if request_schema is not None:
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body["$ref"].endswith(f"/{request_schema}") or request_schema in str(body)
    response = operation["responses"][success]
    if response_schema is not None:
        assert f"/{response_schema}" in str(response["content"])
    assert {"404"} <= set(operation["responses"])


def test_an_accounts_own_invitations_are_documented(schema):
    operation = schema["paths"]["/api/invitations/"]["get"]
    assert "OwnInvitation" in str(operation["responses"]["200"]["content"])
    assert {p["name"] for p in operation["parameters"]} >= {"limit", "offset"}


def test_no_work_is_documented_as_204(schema):
    responses = schema["paths"][f"{P}/assignments/next/"]["post"]["responses"]
    assert "204" in responses and "content" not in responses["204"]


def test_the_submission_body_documents_claims_with_evidence(schema):
    components = schema["components"]["schemas"]
    assert set(components["AnnotationInputRequest"]["properties"]) == {
        "answer_label",
        "answer_reason",
        "comment",
        "time_spent_seconds",
        "claims",
        "revision",
        "policy_version",
    }
    assert set(components["ClaimInputRequest"]["properties"]) == {
        "claim_id",
        "label",
        "reason",
        "boundary_error",
        "evidence",
    }
    evidence = components["EvidenceInputRequest"]["properties"]
    assert set(evidence) == {"source_version_id", "start", "end", "quote", "unit"}
    assert evidence["unit"]["default"] == "utf16"
