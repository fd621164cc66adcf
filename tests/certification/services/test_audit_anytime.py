"""Anytime-valid audit figures (certification.services.audit_anytime) and audit_target_set."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from certification.exceptions import InvalidAudit
from certification.models import AuditReport
from certification.selectors import audit_rows
from certification.services import audit_report_configure, audit_sample_draw
from certification.services.audit import audit_target_set
from certification.stats.ppi import active_observation_range
from certification.stats.sequential import active_betting_bounds, betting_cs, betting_upper_cs
from labeling.exceptions import PermissionDenied
from labeling.models import Evaluator, Role
from tests.certification.audit_helpers import audited_project, scored_project
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


# -- an active sample -------------------------------------------------------------------------
#: scored_project's item k (in item-id order): prediction 1 - score, a human error by its rule.
SCORES = (np.arange(40) + 0.5) / 40
HUMAN_ERROR = (SCORES < 0.5) != (np.arange(40) % 5 == 0)


def _active(project, manager, *, size, seed, open_items=0):
    project, hhem = scored_project(project, open_items=open_items)
    audit_report_configure(project=project, evaluator=hhem, actor=manager, score_threshold=0.5)
    sample = audit_sample_draw(
        project=project, evaluator=hhem, actor=manager, size=size, seed=seed, kind="active"
    )
    ids = sorted(map(int, sample.population))
    order = [ids[i] for i in np.random.default_rng([seed, 1]).permutation(len(ids))]
    members = set(sample.members.values_list("item_id", flat=True))
    return hhem, sample, ids, order, members


def test_an_active_sample_bounds_the_rate_over_the_workload_in_the_seeded_order(project, manager):
    hhem, sample, ids, order, members = _active(project, manager, size=12, seed=9)
    anytime = AuditReport.objects.get(evaluator=hhem).result["anytime"]
    # independent: every item in the permutation of the ids by default_rng([seed, 1]); a drawn
    # item weighs its label by 1 / pi, an item not drawn gives its prediction 1 - score
    k = {pk: i for i, pk in enumerate(ids)}
    pi = {pk: sample.population[str(pk)][0] for pk in ids}
    lo, hi = active_observation_range(1 - SCORES, [pi[pk] for pk in ids], floor=0.2)
    expected = active_betting_bounds(
        [1 - SCORES[k[pk]] for pk in order],
        [pi[pk] for pk in order],
        [pk in members for pk in order],
        [float(HUMAN_ERROR[k[pk]]) for pk in order],
        lower=lo,
        upper=hi,
        alpha=0.05,
    )
    rate = anytime["error_rate"]
    assert (anytime["design"], rate["kind"]) == ("active", "anytime-valid")
    assert (anytime["n_prefix"], rate["n"], rate["n_labelled"]) == (40, 40, len(members))
    assert (rate["lower"], rate["upper"], rate["upper_bound"]) == pytest.approx(
        (expected.lower, expected.upper, expected.upper_bound)
    )
    assert (rate["range_lower"], rate["range_upper"]) == pytest.approx((lo, hi))
    assert anytime["judge"] is None and anytime["planner"] is None and anytime["stop"] is None


def test_an_active_census_is_the_plain_sequence_of_the_labels(project, manager):
    # given a budget of the whole workload: every item drawn with pi = 1, so Z = Y
    hhem, _, ids, order, _ = _active(project, manager, size=40, seed=3)
    k = {pk: i for i, pk in enumerate(ids)}
    y = [float(HUMAN_ERROR[k[pk]]) for pk in order]
    # when the manager sets a target of 0.9
    report = audit_target_set(project=project, evaluator=hhem, actor=manager, target=Decimal("0.9"))
    anytime = report.result["anytime"]
    # then the bounds are the plain betting sequences of the labels in the seeded order
    upper = betting_upper_cs(y, alpha=0.05).final_upper
    assert anytime["error_rate"]["upper_bound"] == pytest.approx(upper)
    assert anytime["error_rate"]["upper"] == pytest.approx(betting_cs(y, alpha=0.05).final_upper)
    assert (anytime["error_rate"]["range_lower"], anytime["error_rate"]["range_upper"]) == (0, 1)
    assert upper < 0.9 and anytime["stop"]["stop"] is True
    assert anytime["stop"]["message"].startswith("You may stop now")


def test_the_active_prefix_ends_at_the_first_open_drawn_item(project, manager):
    # given the last 6 items open, and a budget of 20
    hhem, _, ids, order, members = _active(project, manager, size=20, seed=4, open_items=6)
    anytime = AuditReport.objects.get(evaluator=hhem).result["anytime"]
    open_items = set(ids[-6:])
    blocked = [t for t, pk in enumerate(order) if pk in members and pk in open_items]
    assert blocked  # the seed draws an open item
    # then the sequence stops before the first drawn open item; items not drawn never wait
    assert anytime["n_prefix"] == blocked[0]
    drawn_before = sum(pk in members for pk in order[: blocked[0]])
    assert anytime["error_rate"]["n_labelled"] == drawn_before
    assert anytime["n_waiting"] == len(members - open_items) - drawn_before
