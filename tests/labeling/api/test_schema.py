"""The OpenAPI schema renders, validates, and is generated without warnings."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from drf_spectacular.validation import validate_schema

pytestmark = pytest.mark.django_db


def test_schema_endpoint_returns_a_valid_openapi_document(client):
    response = client.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    assert {
        "/api/projects/",
        "/api/projects/{slug}/",
        "/api/projects/{slug}/items/",
        "/api/projects/{slug}/items/{item_id}/",
        "/api/projects/{slug}/imports/",
        "/api/projects/{slug}/partition/",
    } <= set(schema["paths"])


def test_schema_generation_has_no_warnings(tmp_path):
    # --fail-on-warn turns every drf-spectacular warning (missing types, name clashes) into an error
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml")
    )


def test_item_detail_schema_documents_manager_only_fields_as_optional(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()

    component = schema["components"]["schemas"]["ItemDetailWithLabels"]
    assert "evaluator_labels" in component["properties"]
    assert "evaluator_labels" not in component.get("required", [])
