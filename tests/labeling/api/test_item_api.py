"""GET /api/projects/<slug>/items/ and /items/<id>/: roles, filters, pagination, blinding."""

from __future__ import annotations

import json

import pytest
from django.utils.dateparse import parse_datetime

from labeling.models import Claim, Item, Role
from labeling.services import partition_freeze, project_create
from tests.conftest import native_record

pytestmark = pytest.mark.django_db

EVALUATOR = "judge-secret-eval"
PRIOR_ANNOTATOR = "prior-annotator-zeta"


def labelled_record(external_id: str = "q1") -> dict:
    record = native_record(external_id)
    record["candidates"][0]["evaluator_labels"] = [
        {"evaluator": EVALUATOR, "version": "v9", "label": "inadmissible", "score": 0.8125}
    ]
    record["candidates"][0]["prior_annotations"] = [
        {
            "annotator": PRIOR_ANNOTATOR,
            "answer_label": "admissible",
            "claim_labels": [
                {
                    "claim": 0,
                    "label": "supported",
                    "evidence": [
                        {
                            "source": f"doc-{external_id}",
                            "start": 0,
                            "end": 26,
                            "quote": "The bridge opened in 1932.",
                        }
                    ],
                }
            ],
            "spans": [{"start": 0, "end": 2, "quote": "It", "labels": ["x"]}],
        }
    ]
    return record


def item(external_id: str = "q1", key: str = "c0") -> Item:
    return Item.objects.get(candidate__question__external_id=external_id, candidate__key=key)


# --- list ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 200),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_item_list_access_by_role(api, import_records, role, status):
    import_records([labelled_record("q1")])

    response = api(role).get("/api/projects/study/items/")

    assert response.status_code == status
    assert EVALUATOR not in response.content.decode()


def test_item_list_paginates_fifty_by_default(api, import_records):
    import_records([native_record(f"q{i:02d}") for i in range(26)])
    client = api(Role.ADJUDICATOR)

    first = client.get("/api/projects/study/items/").json()
    rest = client.get("/api/projects/study/items/", {"offset": 50}).json()

    assert first["count"] == 52
    assert len(first["results"]) == 50
    assert first["next"] is not None
    assert len(rest["results"]) == 2
    row = first["results"][0]
    # untouched since the import: last updated when created
    assert parse_datetime(row.pop("updated_at")) == item("q00", "c0").created_at
    assert row == {
        "id": item("q00", "c0").pk,
        "question_id": item("q00", "c0").candidate.question_id,
        "question_external_id": "q00",
        "question_text": "When did the bridge open?",
        "partition": None,
        "candidate_key": "c0",
        "generator": "model-a",
        "sample_index": 0,
        "is_selected": False,
        "claim_count": 2,
        "unanchored_count": 0,
        "status": "open",
        "overlap": 2,
        "vote_count": 0,
        "resolved_label": None,
    }


def test_item_list_filters(api, project, import_records):
    other = native_record("zz", text="Lighthouse?")
    other["candidates"][1]["generator"] = "model-b"
    import_records([native_record("q1"), other])
    partition_freeze(project=project, proportions={"test": 1}, seed=1)
    client = api(Role.MANAGER)

    def keys(params):
        response = client.get("/api/projects/study/items/", params)
        assert response.status_code == 200
        return [(r["question_external_id"], r["candidate_key"]) for r in response.json()["results"]]

    assert keys({"generator": "model-b"}) == [("zz", "c1")]
    assert keys({"q": "lighthouse"}) == [("zz", "c0"), ("zz", "c1")]
    assert keys({"partition": "test", "q": "q1"}) == [("q1", "c0"), ("q1", "c1")]
    assert keys({"partition": "unassigned"}) == []


def test_item_list_refuses_an_unknown_partition(api, import_records):
    import_records([native_record("q1")])

    response = api(Role.MANAGER).get("/api/projects/study/items/", {"partition": "nope"})

    assert response.status_code == 400
    assert "partition" in {e["field"] for e in response.json()["errors"]}


def test_item_list_query_count_does_not_grow(api, import_records, django_assert_max_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api(Role.MANAGER)
    import_records([native_record("q1")])
    with CaptureQueriesContext(connection) as small:
        client.get("/api/projects/study/items/")
    small_queries = len(small)  # now: the log is reset by later requests and imports
    import_records([native_record(f"m{i}") for i in range(30)])

    with django_assert_max_num_queries(small_queries):
        response = client.get("/api/projects/study/items/")
    assert len(response.json()["results"]) == 50


# --- detail ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 200),
        (Role.ANNOTATOR, 403),
        ("nonmember", 404),
        ("anonymous", 401),
    ],
)
def test_item_detail_access_by_role(api, import_records, role, status):
    import_records([labelled_record("q1")])

    response = api(role).get(f"/api/projects/study/items/{item().pk}/")

    assert response.status_code == status


def test_item_detail_has_question_claims_sources_and_siblings(api, import_records):
    record = labelled_record("q1")
    record["sources"][0]["text"] = "\r\nThe bridge opened in 1932.\r\n"
    record["sources"][0]["published_at"] = "2020-01-02T03:04:05+00:00"
    record["candidates"][0]["prior_annotations"][0]["claim_labels"][0]["evidence"][0].update(
        start=2, end=28
    )
    record["candidates"][0]["text"] = "🚀 It opened in 1932. It spans the harbour."
    record["candidates"][0]["claims"] = [{"text": "It opened in 1932.", "start": 2, "end": 20}]
    record["candidates"][0]["prior_annotations"][0]["spans"][0].update(start=2, end=4)
    import_records([record])

    body = api(Role.ADJUDICATOR).get(f"/api/projects/study/items/{item().pk}/").json()

    assert body["question"]["external_id"] == "q1"
    assert body["candidate"]["text"] == "🚀 It opened in 1932. It spans the harbour."
    assert body["claims"] == [
        {
            "claim_id": Claim.objects.get(candidate=item().candidate).pk,
            "index": 0,
            "text": "It opened in 1932.",
            "start": 2,
            "end": 20,
            "unanchored": False,
            "machine_split": False,
        }
    ]
    [source] = body["sources"]
    assert source["text"] == "\r\nThe bridge opened in 1932.\r\n"
    assert source["published_at"] == "2020-01-02T03:04:05Z"
    assert source["observed_at"] is None
    assert len(source["sha256"]) == 64
    assert body["other_candidates"] == [
        {
            "item_id": item("q1", "c1").pk,
            "key": "c1",
            "generator": "model-a",
            "sample_index": 1,
            "is_selected": False,
        }
    ]


def test_manager_gets_evaluator_labels_and_prior_annotations(api, import_records):
    import_records([labelled_record("q1")])

    body = api(Role.MANAGER).get(f"/api/projects/study/items/{item().pk}/").json()

    assert body["evaluator_labels"] == [
        {
            "evaluator": EVALUATOR,
            "version": "v9",
            "claim": None,
            "label": "inadmissible",
            "score": 0.8125,
            "available": True,
        }
    ]
    [prior] = body["prior_annotations"]
    assert prior["annotator"] == PRIOR_ANNOTATOR
    assert prior["claim_labels"][0]["evidence"][0]["quote"] == "The bridge opened in 1932."
    assert prior["spans"][0]["quote"] == "It"


@pytest.mark.parametrize("role", [Role.ADJUDICATOR, Role.ANNOTATOR])
def test_non_managers_never_receive_evaluator_labels(api, import_records, role):
    import_records([labelled_record("q1")])
    client = api(role)

    responses = [
        client.get(f"/api/projects/study/items/{item().pk}/"),
        client.get("/api/projects/study/items/"),
        client.get("/api/projects/study/"),
        client.get("/api/projects/"),
    ]

    for response in responses:
        content = response.content.decode()
        for secret in (EVALUATOR, "inadmissible", "0.8125", PRIOR_ANNOTATOR):
            assert secret not in content
        if response.status_code == 200:
            body = json.loads(content)
            assert "evaluator_labels" not in body and "prior_annotations" not in body


def test_item_of_another_project_is_404(api, project, import_records):
    other = project_create(slug="other", name="Other")
    import_records([native_record("q1")], target=other)
    foreign = Item.objects.filter(project=other).first()

    response = api(Role.MANAGER).get(f"/api/projects/study/items/{foreign.pk}/")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_item_list_limit_is_capped_at_500(api, import_records):
    import_records([native_record(f"q{i}") for i in range(260)])  # 520 items
    body = api(Role.MANAGER).get("/api/projects/study/items/?limit=100000").json()
    assert body["count"] == 520
    assert len(body["results"]) == 500
