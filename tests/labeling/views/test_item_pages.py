"""Item browser and item detail pages: roles, filters, highlighting, escaping and blinding."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from labeling.models import Item, Role
from labeling.services import partition_freeze
from tests.conftest import native_record

pytestmark = pytest.mark.django_db

EVALUATOR = "judge-secret-eval"
PRIOR_ANNOTATOR = "prior-annotator-zeta"
PRIOR_NOTE = "PRIOR-NOTE-MARKER"


def labelled_record(external_id: str = "q1") -> dict:
    """A native record whose first candidate carries an evaluator label and a prior annotation."""
    record = native_record(external_id)
    record["candidates"][0]["evaluator_labels"] = [
        {"evaluator": EVALUATOR, "version": "v9", "label": "admissible", "score": 0.8125},
        {"evaluator": EVALUATOR, "version": "v9", "claim": 0, "label": "supported"},
    ]
    record["candidates"][0]["prior_annotations"] = [
        {
            "annotator": PRIOR_ANNOTATOR,
            "answer_label": "admissible",
            "note": PRIOR_NOTE,
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
        }
    ]
    return record


def first_item(external_id: str = "q1", key: str = "c0") -> Item:
    return Item.objects.get(candidate__question__external_id=external_id, candidate__key=key)


def detail_url(item: Item) -> str:
    return reverse("item-detail", args=["study", item.pk])


# --- role matrix -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 200),
        (Role.ANNOTATOR, 404),
        ("nonmember", 404),
        ("anonymous", 302),
    ],
)
def test_item_browser_access_by_role(login, import_records, role, status):
    import_records([native_record("q1")])

    response = login(role).get(reverse("item-list", args=["study"]))

    assert response.status_code == status


@pytest.mark.parametrize(
    ("role", "status"),
    [
        (Role.MANAGER, 200),
        (Role.ADJUDICATOR, 200),
        (Role.ANNOTATOR, 404),
        ("nonmember", 404),
        ("anonymous", 302),
    ],
)
def test_item_detail_access_by_role(login, import_records, role, status):
    import_records([labelled_record("q1")])

    response = login(role).get(detail_url(first_item()))

    assert response.status_code == status
    if status == 302:
        assert response["Location"].startswith(reverse("login"))


def test_item_of_another_project_is_404(login, import_records, project):
    from labeling.services import project_create

    other = project_create(slug="other", name="Other")
    import_records([native_record("q9")], target=other)
    foreign = Item.objects.get(project=other, candidate__key="c0")

    response = login(Role.MANAGER).get(detail_url(foreign))

    assert response.status_code == 404


def test_nav_hides_items_link_from_annotators(login, project):
    items_url = reverse("item-list", args=["study"]).encode()

    as_annotator = login(Role.ANNOTATOR).get(reverse("project-detail", args=["study"]))

    assert as_annotator.status_code == 200
    assert items_url not in as_annotator.content


# --- browser: pagination and filters ------------------------------------------------------------


def test_browser_paginates_fifty_items_a_page(login, import_records):
    # given 26 questions of 2 candidates: 52 items
    import_records([native_record(f"q{i:02d}") for i in range(26)])
    client = login(Role.ADJUDICATOR)

    first = client.get(reverse("item-list", args=["study"]))
    second = client.get(reverse("item-list", args=["study"]), {"page": 2})

    assert first.context["page"].paginator.count == 52
    assert len(first.context["page"].object_list) == 50
    assert len(second.context["page"].object_list) == 2
    assert b"page=2" in first.content


def test_browser_filters_by_partition_generator_and_text(login, project, import_records):
    # given two questions, one with a different generator and text, all partitioned to test
    other = native_record("zz-special", text="Where is the lighthouse?")
    other["candidates"][1]["generator"] = "model-b"
    import_records([native_record("q1"), other])
    partition_freeze(project=project, proportions={"dev": 0, "calibration": 0, "test": 1}, seed=1)
    client = login(Role.MANAGER)
    url = reverse("item-list", args=["study"])

    def ids(params):
        response = client.get(url, params)
        assert response.status_code == 200
        return [
            i.candidate.question.external_id + "/" + i.candidate.key
            for i in response.context["page"].object_list
        ]

    assert ids({"generator": "model-b"}) == ["zz-special/c1"]
    assert ids({"q": "LIGHTHOUSE"}) == ["zz-special/c0", "zz-special/c1"]
    assert ids({"q": "zz-spec"}) == ["zz-special/c0", "zz-special/c1"]
    assert ids({"partition": "test"}) == ["q1/c0", "q1/c1", "zz-special/c0", "zz-special/c1"]
    assert ids({"partition": "dev"}) == []
    assert ids({"partition": "unassigned"}) == []


def test_browser_ignores_an_invalid_filter_keeps_the_others_and_says_so(login, import_records):
    other = native_record("q2")
    other["candidates"][1]["generator"] = "model-b"
    import_records([native_record("q1"), other])

    response = login(Role.MANAGER).get(
        reverse("item-list", args=["study"]), {"partition": "x", "generator": "model-b"}
    )

    assert response.status_code == 200
    assert response.context["page"].paginator.count == 1
    assert b"not valid" in response.content


# --- detail: highlighting, escaping, sources -------------------------------------------------


def test_claim_after_an_emoji_is_highlighted_at_code_point_offsets(login, import_records):
    # given an answer with an astral-plane emoji (one code point, two UTF-16 units) before the claim
    record = native_record("q1")
    record["candidates"][0].update(
        text="🚀 It opened in 1932. Done.",
        claims=[{"text": "It opened in 1932.", "start": 2, "end": 20}],
    )
    import_records([record])

    response = login(Role.MANAGER).get(detail_url(first_item()))

    # then exactly the claim text is inside the mark, the emoji is before it
    content = response.content.decode()
    answer = re.search(r'<div class="answer" id="answer">(.*?)</div>', content, re.S).group(1)
    assert answer == (
        '🚀 <mark class="claim" data-claims="0" title="claim 0">It opened in 1932.</mark> Done.'
    )


def test_answer_text_is_escaped_and_never_raw_html(login, import_records):
    record = native_record("q1")
    record["candidates"][0].update(
        text="<script>alert(1)</script> It opened in 1932.",
        claims=[{"text": "<script>alert(1)</script>"}],
    )
    import_records([record])

    response = login(Role.ADJUDICATOR).get(detail_url(first_item()))

    content = response.content.decode()
    assert "<script>alert(1)</script>" not in content
    assert (
        '<mark class="claim" data-claims="0" title="claim 0">'
        "&lt;script&gt;alert(1)&lt;/script&gt;</mark>" in content
    )


def test_unanchored_claims_are_listed_and_flagged(login, import_records):
    # "It spans the harbour." is not in the answer below: it is kept unanchored
    record = native_record("q1")
    record["candidates"][0]["text"] = "It opened in 1932."
    import_records([record])

    response = login(Role.MANAGER).get(detail_url(first_item()))

    content = response.content.decode()
    assert 'id="unanchored-claims"' in content
    assert "claim 1: It spans the harbour." in content
    assert content.count('<mark class="claim"') == 1


def test_sources_are_shown_in_full_with_pin_and_crlf_kept(login, import_records):
    text = "\nLine one.\r\nLine two <b>bold</b>.\r\n"
    record = native_record(
        "q1",
        sources=[
            {
                "id": "doc-q1",
                "text": text,
                "uri": "https://example.org/crlf",
                "published_at": "2020-01-02T03:04:05+00:00",
                "observed_at": "2024-05-06T07:08:09+00:00",
            }
        ],
    )
    import_records([record])

    response = login(Role.ADJUDICATOR).get(detail_url(first_item()))

    content = response.content.decode()
    # the newline after <pre> is eaten by HTML parsers, so the text's own leading one survives
    assert (
        '<pre class="source">\n\nLine one.\r\nLine two &lt;b&gt;bold&lt;/b&gt;.\r\n</pre>'
        in content
    )
    assert "https://example.org/crlf" in content
    assert "2020-01-02 03:04:05" in content and "2024-05-06 07:08:09" in content
    version = first_item().candidate.question.retrievals.get().source_version
    assert version.sha256 in content


def test_other_candidates_of_the_question_are_linked(login, import_records):
    import_records([native_record("q1")])
    sibling = first_item("q1", "c1")

    response = login(Role.MANAGER).get(detail_url(first_item()))

    assert detail_url(sibling).encode() in response.content
    assert [c.key for c in response.context["siblings"]] == ["c1"]


# --- detail: blinding ------------------------------------------------------------------------


def test_manager_sees_evaluator_labels_and_prior_annotations_apart(login, import_records):
    import_records([labelled_record("q1")])

    response = login(Role.MANAGER).get(detail_url(first_item()))

    content = response.content.decode()
    section = content[content.index('id="manager-only-labels"') :]
    assert f"{EVALUATOR}@v9" in section
    assert "0.8125" in section
    assert PRIOR_ANNOTATOR in section and PRIOR_NOTE in section
    assert EVALUATOR not in content[: content.index('id="manager-only-labels"')]


def test_adjudicator_never_receives_evaluator_labels_or_prior_annotations(login, import_records):
    import_records([labelled_record("q1")])

    response = login(Role.ADJUDICATOR).get(detail_url(first_item()))

    assert response.status_code == 200
    content = response.content.decode()
    for secret in (EVALUATOR, "0.8125", PRIOR_ANNOTATOR, PRIOR_NOTE, "manager-only-labels"):
        assert secret not in content


def test_annotator_never_receives_evaluator_labels(login, import_records):
    import_records([labelled_record("q1")])
    client = login(Role.ANNOTATOR)

    responses = [
        client.get(detail_url(first_item())),
        client.get(reverse("item-list", args=["study"])),
        client.get(reverse("project-detail", args=["study"])),
    ]

    for response in responses:
        content = response.content.decode()
        for secret in (EVALUATOR, "0.8125", PRIOR_ANNOTATOR, PRIOR_NOTE):
            assert secret not in content


def test_item_pages_run_a_constant_number_of_queries(
    login, import_records, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = login(Role.MANAGER)
    import_records([labelled_record("q1")])
    with CaptureQueriesContext(connection) as small_list:
        client.get(reverse("item-list", args=["study"]))
    with CaptureQueriesContext(connection) as small_detail:
        client.get(detail_url(first_item()))
    # counted now: CaptureQueriesContext reads the connection's log lazily, and the log is reset
    # by every request and every import
    list_queries, detail_queries = len(small_list), len(small_detail)

    # a bigger question: more candidates (siblings), claims, labels and prior annotators
    big = labelled_record("big")
    prior = big["candidates"][0]["prior_annotations"][0]
    big["candidates"][0]["prior_annotations"] = [
        {**prior, "annotator": f"{PRIOR_ANNOTATOR}-{n}"} for n in range(4)
    ]
    big["candidates"] += [
        {"id": f"x{n}", "text": f"Answer {n}.", "claims": [{"text": f"Answer {n}."}]}
        for n in range(8)
    ]
    import_records([big, *(labelled_record(f"r{i}") for i in range(20))])
    with django_assert_max_num_queries(list_queries):
        client.get(reverse("item-list", args=["study"]))
    with django_assert_max_num_queries(detail_queries):
        response = client.get(detail_url(first_item("big")))
    assert len(response.context["siblings"]) == 9
    assert len(response.context["prior_annotations"]) == 4
