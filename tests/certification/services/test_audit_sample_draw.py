"""audit_sample_draw and allocate: seeded stratified audit samples."""

from __future__ import annotations

import pytest

from certification.exceptions import AuditNotConfigured, InvalidAudit
from certification.models import AuditReport, AuditSample
from certification.services import allocate, audit_report_configure, audit_sample_draw
from labeling.exceptions import PermissionDenied
from labeling.models import Item, Role
from tests.certification.audit_helpers import audited_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def manager(member):
    return member(Role.MANAGER)


@pytest.fixture
def declared(project, manager):
    project, judge, hhem = audited_project(project)
    audit_report_configure(project=project, evaluator=judge, actor=manager)
    return project, judge


@pytest.mark.parametrize(
    ("population", "size", "expected"),
    [
        ({"a": 50, "b": 50}, 10, {"a": 5, "b": 5}),
        ({"a": 90, "b": 10}, 10, {"a": 9, "b": 1}),
        ({"a": 99, "b": 1}, 10, {"a": 9, "b": 1}),  # every stratum gets one
        ({"a": 3, "b": 3, "c": 3}, 2, {"a": 1, "b": 1}),  # too small for one each
        ({"a": 2, "b": 8}, 10, {"a": 2, "b": 8}),  # the census
    ],
)
def test_allocate(population, size, expected):
    assert allocate(population, size) == expected
    assert sum(allocate(population, size).values()) == size


def test_draw_records_seed_design_and_inclusion_probabilities(declared, manager):
    project, judge = declared
    # when (strata: judge verdict; 3 positive, 2 negative, 1 unavailable)
    sample = audit_sample_draw(project=project, evaluator=judge, actor=manager, size=3, seed=7)
    # then
    assert sample.seed == 7 and sample.size == 3
    assert sample.design == {
        "negative": {"population": 2, "sampled": 1, "inclusion_probability": 0.5},
        "positive": {"population": 3, "sampled": 1, "inclusion_probability": 1 / 3},
        "unavailable": {"population": 1, "sampled": 1, "inclusion_probability": 1.0},
    }
    members = list(sample.members.values_list("stratum", "inclusion_probability"))
    assert sorted(members) == [("negative", 0.5), ("positive", 1 / 3), ("unavailable", 1.0)]
    assert len(sample.population) == 6


def test_the_same_seed_draws_the_same_items(declared, manager):
    project, judge = declared
    first = audit_sample_draw(project=project, evaluator=judge, actor=manager, size=4, seed=11)
    second = audit_sample_draw(project=project, evaluator=judge, actor=manager, size=4, seed=11)
    assert sorted(first.members.values_list("item_id", flat=True)) == sorted(
        second.members.values_list("item_id", flat=True)
    )


def test_strata_by_slice(declared, manager):
    project, judge = declared
    sample = audit_sample_draw(
        project=project, evaluator=judge, actor=manager, size=6, seed=1, slice_dimension="domain"
    )
    assert set(sample.design) == {
        "negative|med",
        "positive|med",
        "positive|law",
        "unavailable|law",
    }
    assert sample.members.count() == 6  # the census


def test_open_sampled_items_are_served_first(declared, manager):
    project, judge = declared
    open_item = Item.objects.get(project=project, status="open")
    # when the census is drawn, the one open item moves to the front of the queue
    audit_sample_draw(project=project, evaluator=judge, actor=manager, size=6, seed=1)
    first = Item.objects.filter(project=project).order_by("queue_position", "pk").first()
    assert first == open_item


def test_the_audit_uses_the_sample_design(declared, manager):
    project, judge = declared
    audit_sample_draw(project=project, evaluator=judge, actor=manager, size=3, seed=7)
    result = AuditReport.objects.get(evaluator=judge).result
    assert result["sample"]["n_members"] == 3
    assert "audit sample" in result["error_rate"]["sample_assumption"]
    assert result["sample_metrics"]["n_total"] == 3
    assert result["error_rate"]["human_only"]["n_strata_sampled"] >= 1


def test_an_undeclared_audit_cannot_be_sampled(project, manager):
    project, _, hhem = audited_project(project)
    with pytest.raises(AuditNotConfigured):
        audit_sample_draw(project=project, evaluator=hhem, actor=manager, size=2, seed=1)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"size": 0}, "size"),
        ({"size": 7}, "size"),
        ({"slice_dimension": "x"}, "slice_dimension"),
        ({"seed": 2**63}, "seed"),
        ({"seed": -1}, "seed"),
    ],
)
def test_invalid_draws_are_refused(declared, manager, fields, field):
    project, judge = declared
    values = {"size": 2, "seed": 1, **fields}
    with pytest.raises(InvalidAudit) as excinfo:
        audit_sample_draw(project=project, evaluator=judge, actor=manager, **values)
    assert excinfo.value.field == field
    assert not AuditSample.objects.exists()


@pytest.mark.parametrize("role", [Role.ANNOTATOR, Role.ADJUDICATOR])
def test_only_managers_draw(declared, member, role):
    project, judge = declared
    with pytest.raises(PermissionDenied):
        audit_sample_draw(project=project, evaluator=judge, actor=member(role), size=2, seed=1)
