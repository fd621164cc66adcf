"""One JSON error contract for /api/: every 4xx and 5xx is {detail, code, errors[{field, reason}]}.

Real requests through the Django test client; faults are real exceptions of the database
driver's class (the real outage, a stopped PostgreSQL server, is in test_database_outage.py).
"""

from __future__ import annotations

import io
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import OperationalError, connection, transaction
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from rest_framework.test import APIClient
from rest_framework.throttling import UserRateThrottle

from labeling.api import catalog, items
from labeling.api.params import parameter_table
from labeling.models import Annotation, Resolution, Role
from labeling.services import item_claim_next
from tests.conftest import jsonl_bytes, native_record
from tests.labeling.api.conftest import labels_body

ITEMS = "/api/projects/study/items/"


def assert_contract(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """The response is JSON of the contract's shape with ``status`` (and ``code``)."""
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]
    assert isinstance(body["code"], str) and body["code"]
    assert isinstance(body["errors"], list) and body["errors"]
    for item in body["errors"]:
        assert set(item) >= {"field", "reason"}
        assert item["field"] is None or isinstance(item["field"], str)
        assert isinstance(item["reason"], str) and item["reason"]
    if code is not None:
        assert body["code"] == code
    return body


def fields(body: dict[str, Any]) -> set[str | None]:
    return {item["field"] for item in body["errors"]}


# ---------------------------------------------------------------------------------------------
# 404, 405, 401, 415, 400 and 429
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/projects/study/items/abc/",  # a non-integer id: the URL converter fails
        "/api/projects/study/items/1.5/",
        "/api/projects/study/nowhere/",
        "/api/nothing-here",
    ],
)
@pytest.mark.parametrize("debug", [False, True])
def test_an_unresolved_api_url_is_a_json_404(api, project, settings, path, debug):
    settings.DEBUG = debug  # Django's technical 404 page is replaced too

    body = assert_contract(api(Role.MANAGER).get(path), 404, "not_found")

    assert fields(body) == {None}


def test_a_page_url_that_does_not_resolve_stays_html(login, project):
    response = login(Role.MANAGER).get("/p/study/items/abc/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_an_id_beyond_64_bits_is_a_json_404(api, project):
    assert_contract(api(Role.MANAGER).get(f"{ITEMS}{2**64}/"), 404, "not_found")


def test_a_method_not_allowed_is_a_json_405(api, project):
    body = assert_contract(
        api(Role.MANAGER).delete("/api/projects/study/releases/"), 405, "method_not_allowed"
    )
    assert "DELETE" in body["detail"]


def test_anonymous_is_a_json_401(api, project):
    assert_contract(api("anonymous").get(ITEMS), 401, "not_authenticated")


def test_a_role_refusal_is_a_json_403(api, project):
    assert_contract(api(Role.ANNOTATOR).get("/api/projects/study/settings/"), 403)


def test_a_json_body_on_a_multipart_endpoint_is_a_json_415(api, project):
    response = api(Role.MANAGER).post(
        "/api/projects/study/imports/", {"format": "native"}, format="json"
    )
    assert_contract(response, 415, "unsupported_media_type")


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (encode_multipart(BOUNDARY, {"seed": "1"}), MULTIPART_CONTENT),
        (urlencode({"seed": "1"}), "application/x-www-form-urlencoded"),
    ],
)
def test_a_form_body_on_a_json_endpoint_is_a_json_415(api, project, body, content_type):
    response = api(Role.MANAGER).post(
        "/api/projects/study/partition/", body, content_type=content_type
    )
    assert_contract(response, 415, "unsupported_media_type")


def test_malformed_json_is_a_400_parse_error(api, project):
    response = api(Role.MANAGER).post(
        "/api/projects/study/partition/", b'{"seed": 1', content_type="application/json"
    )
    assert_contract(response, 400, "parse_error")


def test_drf_field_errors_become_the_errors_list_with_dotted_paths(api, project):
    body = {"seed": "x", "proportions": {"dev": 2}}
    response = api(Role.MANAGER).post("/api/projects/study/partition/", body, format="json")

    result = assert_contract(response, 400, "invalid_input")
    assert fields(result) == {"seed", "proportions.dev"}
    assert result["detail"].startswith(("seed: ", "proportions.dev: "))


def test_a_missing_file_names_the_field(api, project):
    response = api(Role.MANAGER).post("/api/projects/study/imports/", {}, format="multipart")

    body = assert_contract(response, 400, "invalid_input")
    assert body["errors"] == [{"field": "file", "reason": "No file was submitted."}]


def test_import_errors_keep_their_location(api, project):
    bad = native_record("q2")
    bad["candidates"][0]["claims"][0]["end"] = 999
    upload = io.BytesIO(jsonl_bytes([native_record("q1"), bad]))
    upload.name = "w.jsonl"

    response = api(Role.MANAGER).post(
        "/api/projects/study/imports/", {"file": upload}, format="multipart"
    )

    body = assert_contract(response, 400, "import_failed")
    assert [(e["location"], e["field"]) for e in body["errors"]] == [
        ("line 2", "candidates[0].claims[0]")
    ]


def test_a_domain_error_keeps_its_field_at_the_top_and_in_errors(api, project):
    response = api(Role.MANAGER).post(
        "/api/projects/study/partition/",
        {"seed": 1, "proportions": {"dev": 0.7, "test": 0.7}},
        format="json",
    )

    body = assert_contract(response, 400, "invalid_input")
    assert body["errors"][0]["field"] == body.get("field")


def test_a_throttled_request_is_a_json_429_with_retry_after(api, project, monkeypatch):
    class OneAMinute(UserRateThrottle):
        rate = "1/min"
        scope = "contract-test"

    monkeypatch.setattr(catalog.ProjectListApi, "throttle_classes", [OneAMinute])
    client = api(Role.MANAGER)
    assert client.get("/api/projects/").status_code == 200

    response = client.get("/api/projects/")

    assert_contract(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0


# ---------------------------------------------------------------------------------------------
# Query parameters: malformed, empty and unknown ones are refused, naming the parameter
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "parameter", "reason"),
    [
        ("offset=null", "offset", "must be an integer"),
        ("offset=-1", "offset", "must be at least 0"),
        ("limit=0", "limit", "must be at least 1"),
        ("limit=ten", "limit", "must be an integer"),
        ("limit=1&limit=2", "limit", "give one value, not 2"),
        ("generator=", "generator", "must not be empty (omit the parameter instead)"),
        ("partition=", "partition", "must not be empty (omit the parameter instead)"),
        ("partiton=dev", "partiton", "unknown query parameter"),
    ],
)
def test_malformed_query_parameters_are_400_naming_them(api, project, query, parameter, reason):
    response = api(Role.MANAGER).get(f"{ITEMS}?{query}")

    body = assert_contract(response, 400, "invalid_input")
    assert fields(body) == {parameter}
    assert body["errors"][0]["reason"].startswith(reason)


def test_well_formed_query_parameters_pass(api, project, import_records):
    import_records([native_record("q1")])

    response = api(Role.MANAGER).get(f"{ITEMS}?limit=1&offset=1&generator=model-a&q=q1")

    assert response.status_code == 200
    assert response.json()["count"] == 2
    assert len(response.json()["results"]) == 1


def test_a_parameter_of_a_query_free_endpoint_is_refused(api, project):
    response = api(Role.MANAGER).get("/api/projects/study/settings/?verbose=1")

    body = assert_contract(response, 400, "invalid_input")
    assert body["errors"] == [
        {"field": "verbose", "reason": "unknown query parameter (this endpoint takes none)"}
    ]


def test_the_role_check_comes_before_the_parameter_check(api, project):
    response = api(Role.ANNOTATOR).get("/api/projects/study/settings/?verbose=1")

    assert_contract(response, 403)


def test_every_documented_operation_has_a_parameter_entry():
    table = parameter_table()
    views = {cls.__name__ for cls, _ in table}
    assert {"ItemListApi", "DisagreementListApi", "ReleaseFileApi", "AuditSampleListApi"} <= views
    assert set(table[(items.ItemListApi, "GET")]) >= {
        "query:limit",
        "query:offset",
        "query:partition",
        "query:generator",
        "query:q",
        "path:slug",
    }


# ---------------------------------------------------------------------------------------------
# 500 and 503
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def unraised(api):
    """An API client whose unexpected errors become responses (as in production)."""

    def make(role: str) -> APIClient:
        client = api(role)
        client.raise_request_exception = False
        return client

    return make


def test_an_unexpected_error_is_a_json_500(unraised, project, monkeypatch):
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(items, "item_list", broken)

    body = assert_contract(unraised(Role.MANAGER).get(ITEMS), 500, "server_error")

    assert "a bug" not in body["detail"]


def test_a_database_error_is_a_json_503_with_retry_after(api, project, monkeypatch):
    def down(**kwargs: Any) -> Any:
        raise OperationalError("connection to server failed: Connection refused")

    monkeypatch.setattr(items, "item_list", down)

    response = api(Role.MANAGER).get(ITEMS)

    body = assert_contract(response, 503, "service_unavailable")
    assert response["Retry-After"] == "5"
    assert "Connection refused" not in body["detail"]


def test_a_database_error_on_a_page_is_the_styled_503(login, project, monkeypatch, settings):
    from labeling.views import catalog as page_views

    settings.CERTLABEL_RETRY_AFTER_SECONDS = 7

    def down(**kwargs: Any) -> Any:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(page_views, "item_list", down)

    response = login(Role.MANAGER).get("/p/study/items/")

    assert response.status_code == 503
    assert response["Retry-After"] == "7"
    page = response.content.decode()
    assert 'id="service-unavailable"' in page
    assert 'class="site"' in page  # the site's layout
    assert "try again in 7 seconds" in page
    assert "server closed" not in page


# ---------------------------------------------------------------------------------------------
# A committed write is never answered with a 5xx: its body is built before the commit
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def database_gone_after_commit(monkeypatch):
    """Once ``armed``, every query fails with OperationalError from the next commit on."""
    state = {"armed": False, "gone": False}

    def refuse(execute, sql, params, many, context):
        if state["gone"]:
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    original_commit = transaction.Atomic.__exit__

    def exit_then_gone(self, exc_type, exc_value, traceback):
        result = original_commit(self, exc_type, exc_value, traceback)
        if state["armed"] and exc_type is None and not connection.in_atomic_block:
            state["gone"] = True
        return result

    with connection.execute_wrapper(refuse):
        monkeypatch.setattr(transaction.Atomic, "__exit__", exit_then_gone)
        yield state
        monkeypatch.undo()
        state["armed"] = state["gone"] = False


@pytest.mark.django_db(transaction=True)
def test_a_committed_submit_is_answered_200_although_the_database_goes_away(
    started, member, client_for, database_gone_after_commit
):
    annotator = member(Role.ANNOTATOR)
    assignment = item_claim_next(project=started, actor=annotator)
    client = client_for(annotator)
    body = labels_body(assignment.item)
    database_gone_after_commit["armed"] = True

    url = f"/api/projects/study/assignments/{assignment.pk}/annotation/"
    response = client.put(url, body, format="json")

    assert database_gone_after_commit["gone"] is True
    assert response.status_code == 200, response.content[:300]
    assert response.json()["current"]["answer_label"] == "admissible"
    assert [c["label"] for c in response.json()["claims"]] == ["not_supported"] * len(
        body["claims"]
    )
    database_gone_after_commit["armed"] = database_gone_after_commit["gone"] = False
    assert Annotation.objects.get(assignment=assignment).revisions.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_committed_resolution_is_answered_201_although_the_database_goes_away(
    disputed, api, database_gone_after_commit
):
    client = api(Role.MANAGER)
    body = {
        "expected_version": disputed.version,
        "answer_label": "admissible",
        "claims": labels_body(disputed)["claims"],
        "rationale": "the source says so",
    }
    database_gone_after_commit["armed"] = True

    response = client.post(
        f"/api/projects/study/disagreements/{disputed.pk}/resolve/", body, format="json"
    )

    assert database_gone_after_commit["gone"] is True
    assert response.status_code == 201, response.content[:300]
    assert response.json()["rationale"] == "the source says so"
    database_gone_after_commit["armed"] = database_gone_after_commit["gone"] = False
    assert Resolution.objects.filter(item=disputed, status="adjudicated").count() == 1


# ---------------------------------------------------------------------------------------------
# The schema documents the contract on every operation, and the parameters' bounds
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def schema(client) -> dict[str, Any]:
    return client.get("/api/schema/", {"format": "json"}).json()


def test_every_operation_documents_the_error_body(schema):
    required = {"400", "401", "403", "404", "405", "406", "415", "429", "500", "503"}
    operations = [
        (path, method, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    ]
    assert len(operations) >= 40
    for path, method, operation in operations:
        responses = operation["responses"]
        assert required <= set(responses), (path, method, required - set(responses))
        if method != "get":
            assert "409" in responses, (path, method)
        for status in required:
            ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
            assert ref.rsplit("/", 1)[-1] in {"Error", "ImportError"}, (path, method, status)
    error = schema["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"detail", "code", "errors"}


def test_release_files_are_documented_in_the_types_they_are_served_in(schema):
    operation = schema["paths"]["/api/projects/{slug}/releases/{release_id}/files/{name}"]["get"]
    served = set(operation["responses"]["200"]["content"])
    assert {"text/csv", "application/jsonl", "application/zip"} <= served
    assert "application/vnd.apache.parquet" in served
    assert "application/octet-stream" not in served
    # report.json and ledger.json are JSON on the wire: a schema of binary bytes would make
    # every schema-checking client (schemathesis included) refuse the file it was served.
    for media_type, content in operation["responses"]["200"]["content"].items():
        is_json = media_type == "application/json" or media_type.endswith("+json")
        assert (content["schema"].get("format") == "binary") is not is_json, media_type


def test_parameter_bounds_are_in_the_schema(schema):
    items = {
        p["name"]: p["schema"]
        for p in schema["paths"]["/api/projects/{slug}/items/"]["get"]["parameters"]
    }
    assert items["limit"]["minimum"] == 1 and items["offset"]["minimum"] == 0
    assert items["generator"]["minLength"] == 1
    detail = schema["paths"]["/api/projects/{slug}/items/{item_id}/"]["get"]["parameters"]
    item_id = next(p["schema"] for p in detail if p["name"] == "item_id")
    assert item_id["maximum"] == 2**63 - 1
    settings_input = schema["components"]["schemas"]["PatchedLabellingSettingsInputRequest"]
    overlap = settings_input["properties"]["overlap"]
    assert (overlap["minimum"], overlap["maximum"]) == (1, 100)


def test_a_tag_named_by_the_integer_0_is_refused(api, project):
    response = api(Role.MANAGER).post(
        "/api/projects/study/release-tags/", {"name": 0, "release": 1}, format="json"
    )

    body = assert_contract(response, 400, "invalid_input")
    assert body["errors"] == [
        {"field": "name", "reason": "Not a valid string: a string is required."}
    ]


def test_every_error_code_is_listed_once_per_app_and_stated_in_the_schema(client):
    """A client can list the codes: each comes from one enum per app, and the schema says them."""
    import ast
    from pathlib import Path

    from rest_framework import exceptions as drf

    from certification.exceptions import CertificationErrorCode
    from labeling.exceptions import ErrorCode, LabelingError, error_codes

    codes = error_codes()
    assert codes == sorted({*ErrorCode, *CertificationErrorCode})
    assert len(codes) == len(ErrorCode) + len(CertificationErrorCode)  # no code in both apps

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    assert {str(c.code) for c in subclasses(LabelingError)} <= set(codes)
    # the codes DRF's own exceptions carry (a validation error becomes invalid_input)
    drf_errors = [c for c in vars(drf).values() if isinstance(c, type)]
    drf_codes = {
        c.default_code
        for c in drf_errors
        if issubclass(c, drf.APIException) and c is not drf.ValidationError
    }
    assert drf_codes <= set(codes)
    # no code is spelt as a string where an error is made: a new one must join an enum
    root = Path(__file__).resolve().parents[3]
    spelt = []
    for path in [*root.glob("labeling/**/*.py"), *root.glob("certification/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            literal = None
            if isinstance(node, ast.keyword) and node.arg == "code":
                literal = node.value
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "code" for t in targets):
                    literal = node.value
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "code":
                        literal = value
            if isinstance(literal, ast.Constant) and isinstance(literal.value, str):
                spelt.append(f"{path.relative_to(root)}:{node.lineno}")
    assert spelt == []
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for name in ("Error", "ImportError"):
        assert schema["components"]["schemas"][name]["properties"]["code"]["enum"] == codes


@pytest.mark.parametrize("url", ["/api/projects/?format=xml", f"{ITEMS}?format=csv"])
def test_a_format_no_renderer_serves_is_a_json_404_of_the_contract(api, project, url):
    assert_contract(api(Role.MANAGER).get(url), 404, "not_found")
    assert_contract(APIClient().get(url), 404, "not_found")


def test_a_body_over_the_upload_limit_is_a_json_413(api, project, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api(Role.MANAGER).post(
        "/api/projects/study/calibration/specs/", {"name": "x" * 2000}, format="json"
    )
    body = assert_contract(response, 413, "request_too_large")
    assert "1000 bytes" in body["detail"]
