"""audit_sample_draw with the active design, and the audit's active estimate."""

from __future__ import annotations

import numpy as np
import pytest

from certification.exceptions import InvalidAudit
from certification.models import AuditReport, AuditSample, SampleKind
from certification.selectors import audit_result_for_viewer
from certification.services import audit_report_configure, audit_sample_draw
from certification.stats.ppi import active_inclusion_probabilities, judge_uncertainty
from labeling.models import Evaluator, Item, Role
from tests.certification.audit_helpers import audited_project, scored_project

pytestmark = pytest.mark.django_db

SCORES = (np.arange(40) + 0.5) / 40  # scored_project's item k, in item-id order


@pytest.fixture
def manager(member):
    return member(Role.MANAGER)


def _declared(project, manager, *, open_items=0):
    project, hhem = scored_project(project, open_items=open_items)
    audit_report_configure(project=project, evaluator=hhem, actor=manager, score_threshold=0.5)
    return project, hhem


def test_the_draw_records_each_items_probability_and_prediction(project, manager):
    project, hhem = _declared(project, manager)
    # when a budget of 10 of 40 items is drawn
    sample = audit_sample_draw(
        project=project, evaluator=hhem, actor=manager, size=10, seed=5, kind="active"
    )
    # then the probabilities are the stats rule on sqrt(p(1-p)), p = 1 - score (flag < 0.5)
    expected = active_inclusion_probabilities(judge_uncertainty(1 - SCORES), budget=10, floor=0.2)
    ids = sorted(Item.objects.filter(project=project).values_list("pk", flat=True))
    recorded = np.array([sample.population[str(pk)][0] for pk in ids])
    assert recorded == pytest.approx(expected, rel=1e-12)
    assert [sample.population[str(pk)][1] for pk in ids] == pytest.approx(1 - SCORES)
    # the members are the seeded Poisson draw, each with its probability
    drawn = np.random.default_rng(5).random(40) < expected
    members = dict(sample.members.values_list("item_id", "inclusion_probability"))
    assert sorted(members) == [pk for pk, d in zip(ids, drawn, strict=True) if d]
    assert all(members[pk] == sample.population[str(pk)][0] for pk in members)
    assert (sample.kind, sample.size) == (SampleKind.ACTIVE, int(drawn.sum()))
    assert sample.design["expected_size"] == pytest.approx(10)
    assert set(sample.members.values_list("stratum", flat=True)) == {"active"}


def test_uncertain_items_are_likelier(project, manager):
    project, hhem = _declared(project, manager)
    sample = audit_sample_draw(
        project=project, evaluator=hhem, actor=manager, size=8, seed=1, kind="active"
    )
    pi = {k: v[0] for k, v in sample.population.items()}
    by_score = [pi[str(pk)] for pk in sorted(map(int, pi))]
    # the score nearest 0.5 has the largest probability, the extremes the smallest
    assert max(by_score) in (by_score[19], by_score[20])
    assert min(by_score) in (by_score[0], by_score[39])
    assert min(by_score) >= 0.2 * 8 / 40


def test_an_item_without_a_prediction_is_refused_by_name(project, manager):
    project, judge, _ = audited_project(project)
    audit_report_configure(project=project, evaluator=judge, actor=manager)
    # judge@v1 is unavailable on one item: refused, naming it
    with pytest.raises(InvalidAudit) as excinfo:
        audit_sample_draw(
            project=project, evaluator=judge, actor=manager, size=2, seed=1, kind="active"
        )
    assert excinfo.value.field == "kind" and "q3/c1" in str(excinfo.value)


def test_a_verdict_judge_gets_the_uniform_design(project, manager):
    project, _ = scored_project(project)
    judge = Evaluator.objects.get(project=project, name="judge")
    audit_report_configure(project=project, evaluator=judge, actor=manager)
    sample = audit_sample_draw(
        project=project, evaluator=judge, actor=manager, size=10, seed=1, kind="active"
    )
    assert [p for p, _ in sample.population.values()] == pytest.approx([0.25] * 40)
    assert sample.design["uncertainty"].startswith("constant")


def test_the_estimate_waits_for_every_member(project, manager):
    project, hhem = _declared(project, manager, open_items=3)
    # the whole workload as budget: every item drawn, three still open
    audit_sample_draw(
        project=project, evaluator=hhem, actor=manager, size=40, seed=2, kind="active"
    )
    result = AuditReport.objects.get(evaluator=hhem).result
    assert result["active"]["status"] == "pending"
    assert (result["active"]["n_members"], result["active"]["n_resolved"]) == (40, 37)
    assert result["sample"]["kind"] == "active"
    assert "active" in result["error_rate"]["reason"]


def test_the_estimate_is_the_ipw_formula_on_the_recorded_design(project, manager):
    project, hhem = _declared(project, manager)
    sample = audit_sample_draw(
        project=project, evaluator=hhem, actor=manager, size=12, seed=9, kind="active"
    )
    result = AuditReport.objects.get(evaluator=hhem).result["active"]
    assert result["status"] == "done" and result["n_unresolved_as_error"] == 0
    # independent: the formula over all 40 items, people's labels from the fixture's rule
    k = np.arange(40)
    y = ((SCORES < 0.5) != (k % 5 == 0)).astype(float)
    ids = sorted(Item.objects.filter(project=project).values_list("pk", flat=True))
    members = set(sample.members.values_list("item_id", flat=True))
    xi = np.array([pk in members for pk in ids], dtype=float)
    pi = np.array([sample.population[str(pk)][0] for pk in ids])
    f = 1 - SCORES
    terms = f + (y - f) * xi / pi
    estimate = result["estimate"]
    assert estimate["estimate"] == pytest.approx(terms.mean(), rel=1e-12)
    assert estimate["se"] == pytest.approx(terms.std() / np.sqrt(40), rel=1e-12)
    residual = (y - f) ** 2 * xi
    uniform = 40 * (residual / pi).sum() / (residual / pi**2).sum()
    assert estimate["uniform_labels"] == pytest.approx(uniform, rel=1e-12)
    assert estimate["saving"] == pytest.approx(1 - 12 / uniform, rel=1e-9)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": "greedy"}, "kind"),
        ({"kind": "active", "slice_dimension": "domain"}, "slice_dimension"),
        ({"kind": "active", "floor": 0}, "floor"),
        ({"kind": "active", "floor": 1.5}, "floor"),
        ({"floor": 0.5}, "floor"),
        ({"kind": "active", "size": 41}, "size"),
    ],
)
def test_invalid_active_draws_are_refused(project, manager, fields, field):
    project, hhem = _declared(project, manager)
    values = {"size": 5, "seed": 1, **fields}
    with pytest.raises(InvalidAudit) as excinfo:
        audit_sample_draw(project=project, evaluator=hhem, actor=manager, **values)
    assert excinfo.value.field == field
    assert not AuditSample.objects.exists()


def _keys(value):
    """Every key of a JSON document, at any depth."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


@pytest.mark.parametrize("kind", ["active", "stratified"])
def test_an_adjudicator_gets_no_per_item_figure_while_audited_items_are_open(
    project, manager, kind
):
    # given an audit with three items still open to people and a sample of either design
    project, hhem = _declared(project, manager, open_items=3)
    audit_sample_draw(project=project, evaluator=hhem, actor=manager, size=20, seed=4, kind=kind)
    report = AuditReport.objects.get(evaluator=hhem)
    # when a manager and an adjudicator read the result
    seen = audit_result_for_viewer(report=report, role=Role.MANAGER).result
    blind = audit_result_for_viewer(report=report, role=Role.ADJUDICATOR).result
    # then the manager sees the strata (stratified) or the active sequence; the adjudicator gets
    # no per-stratum population anywhere, and no active sequence (its prefix adds predictions)
    assert "strata" not in _keys(blind)
    if kind == "stratified":
        assert "strata" in _keys(seen)
        assert blind["error_rate"]["ppi"] == seen["error_rate"]["ppi"]
    else:
        assert "n_prefix" in seen["anytime"]
        assert "hidden from adjudicators" in blind["anytime"]["reason"]
        assert "n_prefix" not in blind["anytime"]


def test_an_adjudicator_sees_every_figure_once_every_audited_item_is_closed(project, manager):
    # given an audit whose items are all resolved by consensus, and an active sample
    project, hhem = _declared(project, manager)
    audit_sample_draw(
        project=project, evaluator=hhem, actor=manager, size=20, seed=4, kind="active"
    )
    report = AuditReport.objects.get(evaluator=hhem)
    # then the adjudicator reads what the manager reads
    assert (
        audit_result_for_viewer(report=report, role=Role.ADJUDICATOR).result
        == audit_result_for_viewer(report=report, role=Role.MANAGER).result
    )


def test_a_draw_that_selects_no_item_is_refused_and_writes_nothing(project, manager):
    # given a budget of one item: each item is drawn on its own, so some seeds draw none
    project, hhem = _declared(project, manager)
    refused = []
    for seed in range(20):
        try:
            audit_sample_draw(
                project=project, evaluator=hhem, actor=manager, size=1, seed=seed, kind="active"
            )
        except InvalidAudit as exc:
            refused.append((seed, exc))
    # then those draws are refused on the size, naming the seed, and leave no sample behind
    assert refused
    seed, exc = refused[0]
    assert exc.field == "size" and f"seed {seed} selected no item" in exc.message
    assert AuditSample.objects.filter(evaluator=hhem).count() == 20 - len(refused)


def test_the_active_estimate_accepts_an_empty_sample():
    from certification.stats.ppi import active_ppi_mean

    estimate = active_ppi_mean([0.2, 0.4], [0.5, 0.5], [], [], delta=0.1)
    assert estimate.estimate == pytest.approx(0.3)
