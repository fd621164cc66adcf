"""partition_freeze: grouped split by connected components, seeded, frozen once."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.exceptions import InvalidInput, InvalidTransition
from labeling.models import Question
from labeling.services import partition_freeze
from labeling.services.partitions import deal_components, grouped_components
from tests.conftest import native_record

PROPORTIONS = {"dev": 0.2, "calibration": 0.4, "test": 0.4}


def record(qid: str, docs: list[str], group_key: str = "") -> dict:
    r = native_record(qid, group_key=group_key)
    r["sources"] = [{"id": d, "text": f"text of {d}"} for d in docs]
    return r


def test_components_join_questions_through_shared_tokens():
    links = [(1, "a"), (2, "a"), (2, "b"), (3, "b"), (4, "c")]
    assert grouped_components([1, 2, 3, 4, 5], links) == [[1, 2, 3], [4], [5]]


@given(
    n=st.integers(1, 60),
    edges=st.lists(st.tuples(st.integers(0, 59), st.integers(0, 15)), max_size=80),
    seed=st.integers(0, 2**32),
    split=st.sampled_from([(0.2, 0.4, 0.4), (0, 0.5, 0.5), (1, 0, 0), (0.1, 0.1, 0.8)]),
)
@settings(max_examples=150, deadline=None)
def test_no_component_is_split_and_every_question_is_dealt(n, edges, seed, split):
    links = [(q, t) for q, t in edges if q < n]
    components = grouped_components(range(n), links)
    proportions = dict(zip(("dev", "calibration", "test"), split, strict=True))
    dealt = deal_components(components, proportions, seed)
    where = {q: p for p, qs in dealt.items() for q in qs}
    assert sorted(where) == list(range(n))
    for component in components:
        assert len({where[q] for q in component}) == 1
    for p, share in proportions.items():
        if share == 0:
            assert dealt[p] == []


def test_deal_is_reproducible_from_the_seed_and_close_to_the_proportions():
    components = [[i] for i in range(1000)]
    first = deal_components(components, PROPORTIONS, seed=7)
    assert first == deal_components(components, PROPORTIONS, seed=7)
    assert first != deal_components(components, PROPORTIONS, seed=8)
    # singletons: the greedy deal hits the targets to within one question
    assert {p: len(q) for p, q in first.items()} == {"dev": 200, "calibration": 400, "test": 400}


@pytest.mark.django_db
def test_freeze_keeps_questions_sharing_a_source_or_group_key_together(project, import_records):
    # given q1–q3 chained by shared documents, q4/q5 by group key, q6 alone
    import_records(
        [
            record("q1", ["d1"]),
            record("q2", ["d1", "d2"]),
            record("q3", ["d2"]),
            record("q4", ["d4"], group_key="entity-x"),
            record("q5", ["d5"], group_key="entity-x"),
            record("q6", ["d6"]),
        ]
    )
    result = partition_freeze(project=project, proportions=PROPORTIONS, seed=42)

    part = dict(Question.objects.values_list("external_id", "partition"))
    assert part["q1"] == part["q2"] == part["q3"]
    assert part["q4"] == part["q5"]
    assert sum(result.questions.values()) == 6
    assert sum(result.components.values()) == 3
    project.refresh_from_db()
    assert project.partition_seed == 42
    assert project.partition_proportions == PROPORTIONS
    assert project.partition_frozen_at is not None


@pytest.mark.django_db
def test_new_version_of_a_document_still_joins_its_questions(project, import_records):
    import_records([record("q1", ["d1"])])
    changed = record("q2", [])
    changed["sources"] = [{"id": "d1", "text": "a changed text of d1"}]
    import_records([changed])
    partition_freeze(project=project, proportions=PROPORTIONS, seed=3)
    assert Question.objects.values("partition").distinct().count() == 1


@pytest.mark.django_db
def test_freeze_twice_is_refused(project, import_records):
    import_records([record("q1", ["d1"])])
    partition_freeze(project=project, proportions=PROPORTIONS, seed=1)
    with pytest.raises(InvalidTransition, match="frozen"):
        partition_freeze(project=project, proportions=PROPORTIONS, seed=2)
    project.refresh_from_db()
    assert project.partition_seed == 1


@pytest.mark.django_db
def test_freeze_refused_once_labelling_has_started(project, import_records):
    from django.utils import timezone

    import_records([record("q1", ["d1"])])
    project.policies.update(frozen_at=timezone.now())
    with pytest.raises(InvalidTransition, match="labelling has started"):
        partition_freeze(project=project, proportions=PROPORTIONS, seed=1)
    assert not Question.objects.exclude(partition=None).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("proportions", "message"),
    [
        ({"dev": 0.5, "calibration": 0.6}, "sum to 1"),
        ({"dev": 0.5, "train": 0.5}, "unknown partition"),
        ({"dev": -0.5, "test": 1.5}, r"\[0, 1\]"),
    ],
)
def test_invalid_proportions_refused(project, import_records, proportions, message):
    import_records([record("q1", ["d1"])])
    with pytest.raises(InvalidInput, match=message):
        partition_freeze(project=project, proportions=proportions, seed=1)


@pytest.mark.django_db
def test_empty_project_cannot_be_partitioned(project):
    with pytest.raises(InvalidInput, match="no questions"):
        partition_freeze(project=project, proportions=PROPORTIONS, seed=1)
