"""Anytime-valid audit figures (certification.services.audit_anytime) and audit_target_set."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from certification.exceptions import InvalidAudit
from certification.models import AuditReport
from certification.selectors import audit_rows
from certification.services import audit_report_configure, audit_sample_draw
from certification.services.audit_anytime import audit_target_set
from certification.stats.sequential import betting_upper_cs
from labeling.exceptions import PermissionDenied
from labeling.models import Evaluator, Role
from tests.certification.audit_helpers import audited_project
from tests.factories import calibration_candidate, calibration_project, calibration_record

pytestmark = pytest.mark.django_db

#: 40 items: people find 2 errors (items 0 and 1); the judge flags items 0, 1 and 2.
N_ITEMS, HUMAN_ERRORS, JUDGE_FLAGS = 40, 2, 3


def _record(i: int) -> dict:
    human = "inadmissible" if i < HUMAN_ERRORS else "admissible"
    verdict = "inadmissible" if i < JUDGE_FLAGS else "admissible"
    candidate = calibration_candidate("c0", answer=f"a{i}", label=human)
    candidate["evaluator_labels"] = [
        {"evaluator": "judge", "version": "v1", "label": verdict, "available": True}
    ]
    return calibration_record(f"q{i:02d}", [candidate])


@pytest.fixture
def manager(member):
    return member(Role.MANAGER)


@pytest.fixture
def census(project, manager):
    """A declared audit of the 40-item workload, every item sampled (seed 5)."""
    project = calibration_project(project, {"test": [_record(i) for i in range(N_ITEMS)]})
    judge = Evaluator.objects.get(project=project, name="judge")
    audit_report_configure(project=project, evaluator=judge, actor=manager)
    sample = audit_sample_draw(
        project=project, evaluator=judge, actor=manager, size=N_ITEMS, seed=5
    )
    return project, judge, sample


def test_a_bound_below_the_target_says_stop(census, manager):
    project, judge, _ = census
    # when a manager sets a target of 0.5
    report = audit_target_set(project=project, evaluator=judge, actor=manager, target="0.5")
    anytime = report.result["anytime"]
    # then the stratified upper bound (strata: judge positive 3 items, negative 37) is below it
    upper = anytime["error_rate"]["upper_bound"]
    assert anytime["kind"] == "anytime-valid" and anytime["n_prefix"] == N_ITEMS
    assert upper < 0.5
    assert anytime["stop"]["stop"] is True
    assert anytime["stop"]["message"] == (
        f"You may stop now: the anytime-valid upper bound {upper:.3f} is below your target 0.5."
    )
    # and the planner simulates the labels to stop at a quarter, half and 3/4 of the target
    assert [p["rate"] for p in anytime["planner"]] == [0.125, 0.25, 0.375]
    assert anytime["planner"][0]["mean"] <= anytime["planner"][2]["mean"] <= N_ITEMS


def test_the_bound_combines_the_strata_in_the_seeded_order(census, manager):
    project, judge, sample = census
    report = AuditReport.objects.get(evaluator=judge)
    anytime = report.result["anytime"]
    # the sequential order: the members by item id, permuted by default_rng([seed, 1])
    members = sorted(sample.members.values_list("item_id", flat=True))
    order = [members[i] for i in np.random.default_rng([5, 1]).permutation(len(members))]
    rows = audit_rows(evaluator=judge)
    errors = {r.item_id: float(r.human_label == "inadmissible") for r in rows}
    strata = dict(sample.members.values_list("item_id", "stratum"))
    # each of the 2 strata at delta/2 = 0.025 without replacement, weighted by N_h / N
    expected = 0.0
    for key, size in (("positive", JUDGE_FLAGS), ("negative", N_ITEMS - JUDGE_FLAGS)):
        x = [errors[pk] for pk in order if strata[pk] == key]
        expected += size / N_ITEMS * betting_upper_cs(x, alpha=0.025, population=size).final_upper
    assert anytime["error_rate"]["upper_bound"] == pytest.approx(expected)
    assert anytime["error_rate"]["estimate"] == pytest.approx(HUMAN_ERRORS / N_ITEMS)
    # the judge flags 1 of the 38 human-negatives and misses none of the 2 positives
    judge_rates = anytime["judge"]
    assert (judge_rates["false_positive_rate"]["k"], judge_rates["false_positive_rate"]["n"]) == (
        1,
        38,
    )
    assert (judge_rates["false_negative_rate"]["k"], judge_rates["false_negative_rate"]["n"]) == (
        0,
        2,
    )
    assert anytime["stop"] is None and anytime["planner"] is None


def test_a_bound_above_the_target_says_how_far(census, manager):
    project, judge, _ = census
    report = audit_target_set(
        project=project, evaluator=judge, actor=manager, target=Decimal("0.01")
    )
    stop = report.result["anytime"]["stop"]
    assert stop["stop"] is False
    upper = report.result["anytime"]["error_rate"]["upper_bound"]
    assert stop["message"] == (
        f"Keep labelling: the anytime-valid upper bound {upper:.3f} is {upper - 0.01:.3f} "
        "above your target 0.01."
    )
    # clearing the target removes the message
    report = audit_target_set(project=project, evaluator=judge, actor=manager, target=None)
    assert report.anytime_target is None and report.result["anytime"]["stop"] is None


def test_the_prefix_ends_at_the_first_open_member(project, manager):
    # given the six-item audit with q3/c0 still open, every item sampled
    project, judge, _ = audited_project(project)
    audit_report_configure(project=project, evaluator=judge, actor=manager)
    sample = audit_sample_draw(project=project, evaluator=judge, actor=manager, size=6, seed=2)
    anytime = AuditReport.objects.get(evaluator=judge).result["anytime"]
    members = sorted(sample.members.values_list("item_id", flat=True))
    order = [members[i] for i in np.random.default_rng([2, 1]).permutation(6)]
    (open_item,) = [r.item_id for r in audit_rows(evaluator=judge) if not r.resolved]
    position = order.index(open_item)
    # then the prefix is the members before it; the resolved ones after it wait
    assert anytime["n_prefix"] == position
    assert anytime["n_waiting"] == 5 - position


def test_without_a_sample_there_is_no_sequence(project, manager):
    project, judge, _ = audited_project(project)
    report = audit_report_configure(project=project, evaluator=judge, actor=manager)
    assert report.result["anytime"]["reason"].startswith("needs an audit sample")


@pytest.mark.parametrize("target", ["0", "1", "1.5", "-0.1", "abc"])
def test_a_target_outside_the_open_unit_is_refused(census, manager, target):
    project, judge, _ = census
    with pytest.raises(InvalidAudit) as info:
        audit_target_set(project=project, evaluator=judge, actor=manager, target=target)
    assert info.value.field == "anytime_target"


def test_only_managers_set_a_target(census, member):
    project, judge, _ = census
    with pytest.raises(PermissionDenied):
        audit_target_set(
            project=project, evaluator=judge, actor=member(Role.ADJUDICATOR), target="0.1"
        )
