"""API bodies that give a field several values are refused (400 naming it), nothing stored.

A JSON object with a repeated key (``json`` keeps the last) and a multipart upload with a field
twice (a serializer reads the last) are refused by the parsers of ``labeling/api/parsers.py``.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.api.parsers import first_repeated_key
from labeling.models import Annotation, Assignment, AssignmentStatus, Role
from labeling.services import item_claim_next
from tests.conftest import row_counts
from tests.labeling.api.conftest import claim_ids, labels_body

pytestmark = pytest.mark.django_db

FORM = "application/x-www-form-urlencoded"


def url(assignment_id: int) -> str:
    return f"/api/projects/study/assignments/{assignment_id}/annotation/"


@pytest.fixture
def annotator(member):
    return member(Role.ANNOTATOR)


@pytest.fixture
def leased(started, annotator) -> Assignment:
    return item_claim_next(project=started, actor=annotator)


def test_a_json_body_with_answer_label_twice_is_400_naming_it(client_for, annotator, leased):
    body = json.dumps(labels_body(leased.item))
    # the same key again at the end of the object: json.loads would keep "inadmissible"
    raw = body[:-1] + ', "answer_label": "inadmissible"}'
    before = row_counts()

    response = client_for(annotator).put(url(leased.pk), raw, content_type="application/json")

    assert response.status_code == 400
    data = response.json()
    assert (data["code"], data["field"]) == ("multiple_values", "answer_label")
    assert data["detail"] == "answer_label: several values given; this field takes exactly one"
    assert row_counts() == before
    # the body without the repeat is accepted
    ok = client_for(annotator).put(url(leased.pk), body, content_type="application/json")
    assert ok.status_code == 200
    assert Annotation.objects.get().current.answer_label == "admissible"


def test_a_repeated_key_inside_a_claim_is_named_by_its_path(client_for, annotator, leased):
    first, second = claim_ids(leased.item)
    raw = (
        '{"answer_label": "admissible", "claims": ['
        f'{{"claim_id": {first}, "label": "not_supported"}}, '
        f'{{"claim_id": {second}, "label": "not_supported", "label": "cannot_decide"}}]}}'
    )

    response = client_for(annotator).put(url(leased.pk), raw, content_type="application/json")

    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == (
        "multiple_values",
        "claims[1].label",
    )
    assert not Annotation.objects.exists()


def test_a_form_encoded_body_is_415_and_stores_nothing(client_for, annotator, leased):
    body = urlencode([("answer_label", "admissible")])

    response = client_for(annotator).put(url(leased.pk), body, content_type=FORM)

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"
    assert not Annotation.objects.exists()


def test_a_form_encoded_skip_is_415_and_the_lease_is_kept(client_for, annotator, leased):
    skip = f"/api/projects/study/assignments/{leased.pk}/skip/"
    body = urlencode([("reason", "out_of_expertise")])

    response = client_for(annotator).post(skip, body, content_type=FORM)

    assert response.status_code == 415
    leased.refresh_from_db()
    assert leased.status == AssignmentStatus.LEASED


def test_a_multipart_import_with_the_format_twice_is_400_and_imports_nothing(api, started):
    manager = api(Role.MANAGER)
    before = row_counts()
    body = {"format": ["native", "native"], "file": SimpleUploadedFile("w.jsonl", b"{}\n")}

    response = manager.post("/api/projects/study/imports/", body, format="multipart")

    assert response.status_code == 400, response.content
    assert (response.json()["code"], response.json()["field"]) == ("multiple_values", "format")
    assert row_counts() == before


def test_a_json_body_nested_too_deeply_is_400_not_500(client_for, annotator, leased):
    raw = '{"answer_label": ' + "[" * 100_000 + "]" * 100_000 + "}"

    response = client_for(annotator).put(url(leased.pk), raw, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert not Annotation.objects.exists()


def test_malformed_json_is_still_a_parse_error(client_for, annotator, leased):
    response = client_for(annotator).put(url(leased.pk), "{", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"].startswith("JSON parse error - ")


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('{"a": 1, "a": 2}', "a"),
        ('{"a": {"x": 1, "x": 2}, "a": 3}', "a.x"),
        ('{"a": 1, "b": [{"c": 1}, {"c": 1, "d": 2, "d": 3}]}', "b[1].d"),
        ('[{"k": 0}, [{"k": 1, "k": 2}]]', "[1][0].k"),
        ('{"a": {"x": 1}, "b": {"x": 1}}', None),
    ],
)
def test_first_repeated_key_names_the_path_in_document_order(text, path):
    assert first_repeated_key(text) == path
