"""Selectors: scoping by membership, overview counts, item lists, and constant query budgets."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from labeling.exceptions import NotFound
from labeling.models import Item, Role
from labeling.selectors import (
    item_generators,
    item_get,
    item_list,
    project_get_for_user,
    project_list_for_user,
    project_overview,
)
from labeling.services import membership_set, partition_freeze, project_create
from tests.conftest import native_record
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

OVERVIEW_QUERIES = 8


def records(n: int, prefix: str = "q") -> list[dict]:
    return [native_record(f"{prefix}{i:03d}") for i in range(n)]


# --- projects --------------------------------------------------------------------------------


def test_project_list_for_user_holds_member_projects_with_counts(project, member, import_records):
    user = member(Role.ADJUDICATOR)
    import_records(records(3))
    project_create(slug="hidden", name="Hidden")

    projects = list(project_list_for_user(user=user))

    assert [(p.slug, p.member_role, p.question_count, p.item_count) for p in projects] == [
        ("study", Role.ADJUDICATOR, 3, 6)
    ]


def test_project_list_for_staff_holds_every_project(project):
    project_create(slug="another", name="Another")

    projects = list(project_list_for_user(user=UserFactory(is_superuser=True, is_staff=True)))

    assert [(p.slug, p.member_role, p.question_count) for p in projects] == [
        ("another", None, 0),
        ("study", None, 0),
    ]


def test_project_list_is_one_query(project, import_records, django_assert_num_queries):
    user = UserFactory()
    for n in range(3):
        other = project_create(slug=f"p{n}", name=f"P{n}")
        membership_set(project=other, user=user, role=Role.ANNOTATOR)
        import_records(records(n + 1, prefix=f"p{n}-"), target=other)

    with django_assert_num_queries(1):
        counts = [(p.question_count, p.item_count) for p in project_list_for_user(user=user)]

    assert counts == [(1, 2), (2, 4), (3, 6)]


def test_project_get_for_user_refuses_non_member_like_a_missing_project(project):
    outsider = UserFactory()

    with pytest.raises(NotFound) as not_member:
        project_get_for_user(slug="study", user=outsider)
    with pytest.raises(NotFound) as missing:
        project_get_for_user(slug="nope", user=outsider)

    assert type(not_member.value) is type(missing.value)


def test_project_get_for_user_annotates_role(project, member):
    user = member(Role.MANAGER)

    assert project_get_for_user(slug="study", user=user).member_role == Role.MANAGER


# --- overview --------------------------------------------------------------------------------


def test_overview_counts_per_partition(project, import_records):
    # given 4 questions, one of which has an unanchored claim, frozen all to calibration
    unanchored = native_record("q-un")
    unanchored["candidates"][0]["text"] = "It opened in 1932."
    import_records([*records(3), unanchored])
    partition_freeze(project=project, proportions={"calibration": 1}, seed=5)
    project.refresh_from_db()

    overview = project_overview(project=project, include_batches=True)

    rows = {r.partition: r for r in overview.partitions}
    assert list(rows) == ["dev", "calibration", "test", "unassigned"]
    assert rows["calibration"] == type(rows["calibration"])(
        partition="calibration",
        questions=4,
        candidates=8,
        items=8,
        claims=8,
        unanchored_claims=1,
        source_versions=4,
    )
    assert rows["dev"].questions == rows["test"].items == rows["unassigned"].claims == 0
    assert overview.totals.questions == 4 and overview.totals.source_versions == 4
    assert overview.unanchored_claims == 1
    assert (overview.partition_seed, overview.partition_frozen_at is not None) == (5, True)
    assert overview.partition_proportions == {"dev": 0.0, "calibration": 1.0, "test": 0.0}
    assert (overview.policy_version, overview.evidence_relation) == (1, "source_relative")
    assert [b.created["questions"] for b in overview.batches] == [4]


def test_overview_is_frozen(project):
    from dataclasses import FrozenInstanceError

    overview = project_overview(project=project, include_batches=True)

    with pytest.raises(FrozenInstanceError):
        overview.unanchored_claims = 3  # type: ignore[misc]


def test_overview_runs_a_constant_number_of_queries(
    project, import_records, django_assert_num_queries
):
    # given a small project
    import_records(records(1))
    with django_assert_num_queries(OVERVIEW_QUERIES):
        project_overview(project=project, include_batches=True)

    # when it grows by many rows and batches
    for batch in range(3):
        import_records(records(15, prefix=f"b{batch}-"))

    # then the overview still takes the same number of queries
    with django_assert_num_queries(OVERVIEW_QUERIES):
        overview = project_overview(project=project, include_batches=True)
    assert overview.totals.questions == 46
    assert len(overview.batches) == 4


# --- items -----------------------------------------------------------------------------------


def test_item_list_filters(project, import_records):
    other = native_record("zz", text="Lighthouse?")
    other["candidates"][0]["generator"] = "model-b"
    import_records([native_record("q1"), other])

    def keys(filters):
        return [
            (i.candidate.question.external_id, i.candidate.key)
            for i in item_list(project=project, filters=filters)
        ]

    assert keys({"generator": "model-b"}) == [("zz", "c0")]
    assert keys({"q": "lighthouse"}) == [("zz", "c0"), ("zz", "c1")]
    assert keys({"partition": "unassigned", "q": "q1"}) == [("q1", "c0"), ("q1", "c1")]
    assert keys({"partition": "dev"}) == []
    assert item_generators(project=project) == ["model-a", "model-b"]


def test_item_list_annotates_claim_counts(project, import_records):
    record = native_record("q1")
    record["candidates"][0]["text"] = "It opened in 1932."
    import_records([record])

    counts = [(i.claim_count, i.unanchored_count) for i in item_list(project=project)]

    assert counts == [(2, 1), (0, 0)]


def test_item_list_runs_one_query_per_page(project, import_records, django_assert_num_queries):
    import_records(records(30))

    with django_assert_num_queries(1):
        rows = [
            (i.pk, i.candidate.key, i.candidate.question.external_id, i.claim_count)
            for i in item_list(project=project)[:50]
        ]

    assert len(rows) == 50


def test_item_list_queries_do_not_grow_with_rows(project, import_records):
    def run() -> int:
        with CaptureQueriesContext(connection) as ctx:
            rows = item_list(project=project, filters={"partition": "unassigned"})[:50]
            seen = [
                (i.candidate.question.text, i.candidate.generator, i.unanchored_count) for i in rows
            ]
            assert seen
        return len(ctx)

    import_records(records(2))
    small = run()
    import_records(records(40, prefix="more-"))

    assert run() == small == 1


def test_item_get_is_scoped_to_the_project(project, import_records):
    other = project_create(slug="other", name="Other")
    import_records([native_record("q1")], target=other)
    foreign = Item.objects.filter(project=other).first()

    with pytest.raises(NotFound):
        item_get(project=project, item_id=foreign.pk)


def test_item_get_loads_everything_up_front(project, import_records, django_assert_num_queries):
    record = native_record("q1")
    record["candidates"][0]["evaluator_labels"] = [
        {"evaluator": "judge", "version": "1", "label": "admissible"}
    ]
    record["candidates"][0]["prior_annotations"] = [
        {"annotator": "a1", "claim_labels": [{"claim": 0, "label": "supported"}]}
    ]
    import_records([record])
    item_id = Item.objects.get(candidate__key="c0").pk

    # item+candidate+question, claims, retrievals, siblings, evaluator labels, prior annotations,
    # their claim labels, evidence, spans
    with django_assert_num_queries(9):
        item = item_get(project=project, item_id=item_id, with_labels=True)
    with django_assert_num_queries(0):
        [c.text for c in item.candidate.claims.all()]
        [r.source_version.document.key for r in item.candidate.question.retrievals.all()]
        [c.item.pk for c in item.candidate.question.candidates.all()]
        [e.evaluator.name for e in item.candidate.evaluator_labels.all()]
        for prior in item.candidate.prior_annotations.all():
            [(cl.claim.index, list(cl.evidence.all())) for cl in prior.claim_labels.all()]
            list(prior.spans.all())


def test_item_get_without_labels_does_not_load_them(
    project, import_records, django_assert_num_queries
):
    import_records([native_record("q1")])
    item_id = Item.objects.get(candidate__key="c0").pk

    with django_assert_num_queries(4):
        item = item_get(project=project, item_id=item_id)

    assert "evaluator_labels" not in item.candidate._prefetched_objects_cache
