"""Calibration runs: statistics through the whole stack, counting policies, idempotency, failing
closed, rebuilding from the stored inputs.

Reference values are the selective-risk family, the conformal scores and the two synthetic held-out
counterexamples (full set coverage with a selector that always errs; 20 of 1,000 answered), reached
through imported questions, resolved labels, a spec and a run.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from certification.exceptions import CertificationError, RunNotFound
from certification.models import CalibrationRun, CalibrationSpec, RunStatus
from certification.services import (
    calibration_run_execute,
    calibration_run_rebuild,
    calibration_run_request,
    calibration_run_start,
    calibration_runs_refresh,
    calibration_spec_revise,
)
from certification.stats.errors import StatsError
from certification.stats.intervals import clopper_pearson
from certification.tasks import calibration_run_execute_task
from labeling.exceptions import PermissionDenied
from labeling.models import Item, ItemStatus, Role
from labeling.services import adjudication_mark_unresolved
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db


def run_of(spec):
    """Request and compute a run of ``spec`` in this process."""
    run = calibration_run_request(spec=spec, trigger="manual")
    return calibration_run_execute(run_id=run.pk)


def questions(prefix, rows):
    """One question per (score, label, extra) row, with one selected candidate."""
    return [
        rec(f"{prefix}{i}", [cand("a", answer="x", score=score, label=label, selected=True)])
        for i, (score, label) in enumerate(rows)
    ]


# -- selective risk ----------------------------------------------------------------------------
def family_rows():
    """Nested acceptance sets giving (m, k) = (30,0),(60,1),(100,3),(150,9),(200,16)."""
    blocks = [(5.0, 30, 0), (4.0, 30, 1), (3.0, 40, 2), (2.0, 50, 6), (1.0, 50, 7)]
    rows = []
    for score, size, errors in blocks:
        rows += [(score, "inadmissible")] * errors + [(score, "admissible")] * (size - errors)
    return rows


@pytest.mark.parametrize(
    ("multiplicity", "certified"), [("bonferroni", [2]), ("fixed_sequence", [0, 1, 2])]
)
def test_the_reference_family_through_a_run(project, multiplicity, certified):
    # given the reference family of five thresholds, alpha 0.10, delta 0.05
    calibration_project(project, {"calibration": questions("c", family_rows())})
    spec = make_spec(
        project, thresholds=[5, 4, 3, 2, 1], alpha="0.1", delta="0.05", multiplicity=multiplicity
    )
    # when
    run = run_of(spec)
    # then
    section = run.result["selective_risk"]
    rows = section["rows"]
    assert [(r["accepted"], r["errors"]) for r in rows] == [
        (30, 0),
        (60, 1),
        (100, 3),
        (150, 9),
        (200, 16),
    ]
    expected = [0.0423912, 0.0137771, 0.00783649, 0.0600462, 0.207478]
    assert [r["p_value"] for r in rows] == pytest.approx(expected, rel=2e-6)
    assert section["certified_indices"] == certified
    # the largest answer rate among the certified: the third threshold either way
    assert (section["chosen_index"], section["chosen_threshold"]) == (2, 3.0)
    assert run.result["outcome"] == "certified"
    if multiplicity == "bonferroni":
        assert section["test_level"] == pytest.approx(0.01)
        assert rows[2]["upper_bound"] == pytest.approx(0.09697104527, rel=1e-9)
    else:
        assert [r["tested"] for r in rows] == [True, True, True, True, False]


@pytest.mark.parametrize(("accepted", "certified"), [(43, False), (44, True)])
def test_zero_errors_certify_only_from_44_accepted(project, accepted, certified):
    # given alpha 0.10, delta 0.05 and M = 5 (cutoff 0.01): only the first threshold accepts
    rows = [(1.0, "admissible")] * accepted
    calibration_project(project, {"calibration": questions("c", rows)})
    spec = make_spec(project, thresholds=[0.5, 2, 3, 4, 5], alpha="0.1", delta="0.05")
    run = run_of(spec)
    section = run.result["selective_risk"]
    assert section["rows"][0]["p_value"] == pytest.approx(0.9**accepted, rel=1e-9)
    assert section["rows"][1]["p_value"] == 1.0  # accepts nothing, still counts in M
    assert section["rows"][1]["note"].startswith("accepts nothing")
    assert (section["chosen_index"] == 0) is certified
    assert section["smallest_certifiable_count_zero_errors"] == 44
    if not certified:
        assert section["outcome"] == "no certified operating point"
        assert "at least 44 accepted answers" in section["reason"]


def test_the_unconditional_denominator_tests_against_all_eligible_units(project):
    # given 100 units of which 30 are accepted with 1 error
    rows = [(1.0, "admissible")] * 29 + [(1.0, "inadmissible")] + [(0.0, "inadmissible")] * 70
    calibration_project(project, {"calibration": questions("c", rows)})
    spec = make_spec(project, thresholds=[0.5], denominator="eligible_units", alpha="0.1")
    row = run_of(spec).result["selective_risk"]["rows"][0]
    # then P[Binomial(100, 0.1) <= 1] is the p-value, and the risk is 1/100
    assert (row["accepted"], row["errors"], row["denominator"]) == (30, 1, 100)
    assert row["p_value"] == pytest.approx(0.9**100 + 100 * 0.1 * 0.9**99, rel=1e-9)
    assert row["risk"] == pytest.approx(0.01)


def test_less_than_acceptance_and_missing_scores(project):
    # given "accept iff frequency rank <= t"; a candidate without a canonical form has no rank
    questions_ = [
        rec("q1", [cand("a", answer="1", label="admissible"), cand("b", answer="1")]),
        rec("q2", [cand("a", answer="1", label="inadmissible"), cand("b", answer="2")]),
        rec("q3", [cand("a", answer=None, label="admissible")]),
    ]
    calibration_project(project, {"calibration": questions_})
    spec = make_spec(
        project,
        thresholds=[1, 2],
        acceptance="<=",
        score_field="frequency_rank",
        selector="first_sample",
    )
    section = run_of(spec).result["selective_risk"]
    # q2's first sample ranks 1 (tie, first seen); q3's has no rank and is never accepted
    assert [(r["accepted"], r["errors"]) for r in section["rows"]] == [(2, 1), (2, 1)]
    assert section["counts"]["missing_score"] == 1


# -- conformal sets ----------------------------------------------------------------------------
def conformal_questions():
    """Scores 18 x 1, 1 x 2, 1 x infinity (n = 20)."""
    rows = [rec(f"c{i}", [cand("a", answer="A")]) for i in range(18)]
    rows.append(
        rec(
            "c18",
            [
                cand("a", answer="A", label="inadmissible"),
                cand("b", answer="A", label="inadmissible"),
                cand("c", answer="B"),
            ],
        )
    )
    rows.append(rec("c19", [cand("a", answer="A", label="inadmissible")]))
    return rows


@pytest.mark.parametrize(("alpha", "m_star"), [("0.1", 2.0), ("0.05", "inf"), ("0.15", 1.0)])
def test_the_conformal_reference_through_a_run(project, alpha, m_star):
    calibration_project(project, {"calibration": conformal_questions()})
    spec = make_spec(
        project,
        method="conformal_set",
        selector="mode",
        alpha=alpha,
        thresholds=[],
        score_field="",
    )
    conformal = run_of(spec).result["conformal"]
    assert conformal["threshold"]["value"] == m_star
    assert conformal["reliability"]["level"] == "18/21"
    assert conformal["reliability"]["value"] == pytest.approx(0.857142857, abs=1e-9)
    assert conformal["score_counts"] == [[1.0, 18], [2.0, 1], ["inf", 1]]
    assert conformal["counts"]["unsolvable"] == 1


def test_an_infinite_m_star_on_a_test_question_without_an_answer_is_an_empty_set(project):
    # given M* = inf (alpha 0.05 on the reference questions) and test questions: one answered
    # admissibly, one whose only sample has no answer at all (no class: nothing to return)
    test = [rec("t0", [cand("a", answer="A")]), rec("t1", [cand("a", answer=None)])]
    calibration_project(project, {"calibration": conformal_questions(), "test": test})
    spec = make_spec(
        project,
        method="conformal_set",
        selector="mode",
        alpha="0.05",
        thresholds=[],
        score_field="",
    )
    run = run_of(spec)
    # then the run is done (not failed on "an empty set cannot cover"), and the empty set of
    # the answerless question does not cover
    assert run.status == "done", run.error
    report = run.result["heldout"]["report"]
    coverage = next(m for m in report["metrics"] if m["name"] == "set_coverage")
    assert (coverage["numerator"], coverage["denominator"]) == (1, 2)
    assert report["set_sizes"]["counts"] == [[0, 1], [1, 1]]


def test_sequential_stopping_is_applied_alike_and_reports_samples_saved(project):
    # given questions with 10 unanimous samples: at delta 0.05 sampling stops at k = 8
    def unanimous(prefix, n):
        return [
            rec(f"{prefix}{i}", [cand(f"s{j}", answer="42") for j in range(10)]) for i in range(n)
        ]

    calibration_project(project, {"calibration": unanimous("c", 5), "test": unanimous("t", 3)})
    spec = make_spec(
        project,
        method="conformal_set",
        selector="mode",
        alpha="0.1",
        thresholds=[],
        score_field="",
        stopping_delta="0.05",
    )
    counts = run_of(spec).result["conformal"]["counts"]
    assert counts["stopping"] == {
        "samples_available": 50,
        "samples_used": 40,
        "samples_saved": 10,
        "fraction_saved": 0.2,
        "no_answer_samples": 0,
    }
    assert counts["test_stopping"]["samples_saved"] == 6


def test_seed_000_coverage_survives_while_selection_fails(project):
    # given 100 questions whose set {bad, good} always holds the admissible "good" while the
    # selector always emits "bad" (calibration and test built alike)
    def pair(prefix):
        return [
            rec(
                f"{prefix}{i}",
                [
                    cand("a", answer="bad", label="inadmissible", selected=True),
                    cand("b", answer="good", label="admissible"),
                ],
            )
            for i in range(100)
        ]

    calibration_project(project, {"calibration": pair("c"), "test": pair("t")})
    spec = make_spec(
        project,
        method="conformal_set",
        selector="is_selected",
        alpha="0.1",
        thresholds=[],
        score_field="",
    )
    result = run_of(spec).result
    # then the conformal threshold is 2 ("bad" ranks first by the canonical tie rule)
    assert result["conformal"]["threshold"]["value"] == 2.0
    metrics = {m["name"]: m for m in result["heldout"]["report"]["metrics"]}
    assert (metrics["set_coverage"]["numerator"], metrics["set_coverage"]["denominator"]) == (
        100,
        100,
    )
    risk = metrics["emitted_answer_risk"]
    assert (risk["numerator"], risk["denominator"], risk["unit"]) == (100, 100, "emitted answer")
    assert result["heldout"]["report"]["set_sizes"]["counts"] == [[2, 100]]
    ledger = {row["field"]: row["value"] for row in result["ledger"]}
    assert "does not imply that the selected answer is admissible" in ledger["composition_boundary"]


def test_seed_000_refusal_changes_the_denominator(project):
    # given a certified threshold (100 calibration answers, no error) and 1,000 test questions
    # of which 20 pass it: 10 inadmissible (one unsupported claim of five each), 10 admissible
    calibration = questions("c", [(1.0, "admissible")] * 100)
    bad = ("not_supported", "supported", "supported", "supported", "supported")
    good = ("supported",) * 5
    test = [
        rec(
            f"t{i}",
            [cand("a", answer="x", score=1.0, label="inadmissible", claims=bad, selected=True)],
        )
        for i in range(10)
    ]
    test += [
        rec(
            f"t{i}",
            [cand("a", answer="x", score=1.0, label="admissible", claims=good, selected=True)],
        )
        for i in range(10, 20)
    ]
    test += questions("u", [(0.0, "admissible")] * 980)
    calibration_project(project, {"calibration": calibration, "test": test})
    spec = make_spec(project, thresholds=[0.5], alpha="0.1", delta="0.05")
    result = run_of(spec).result
    assert result["selective_risk"]["chosen_threshold"] == 0.5
    metrics = {m["name"]: m for m in result["heldout"]["report"]["metrics"]}
    expected = {
        "answer_rate": (20, 1000),
        "unconditional_failure_rate": (10, 1000),
        "emitted_answer_risk": (10, 20),
        "unsupported_claim_risk": (10, 100),
        "any_error_answer_rate": (10, 20),
    }
    for name, (k, n) in expected.items():
        metric = metrics[name]
        interval = clopper_pearson(k, n, confidence=0.95)
        assert (metric["numerator"], metric["denominator"]) == (k, n), name
        assert metric["value"] == pytest.approx(k / n)
        assert (metric["lower"], metric["upper"]) == pytest.approx(
            (interval.lower, interval.upper), rel=1e-12
        )
    assert metrics["unsupported_claim_risk"]["unit"] == "assessed claim"
    # a policy without sets reports no set metrics (rather than a set coverage of 0)
    assert "set_coverage" not in metrics and result["heldout"]["report"]["set_sizes"] is None


# -- counting policies -------------------------------------------------------------------------
@pytest.fixture
def policy_project(project, member):
    """Ten calibration answers: 5 admissible, 2 inadmissible, 1 abstained, 1 unavailable,
    1 unresolved (adjudicated so), 1 not resolved yet."""
    rows = [cand("a", answer="x", score=0.9, selected=True)]
    records = [rec(f"ok{i}", [cand("a", score=0.9, selected=True)]) for i in range(5)]
    records += [
        rec(f"bad{i}", [cand("a", score=0.9, label="inadmissible", selected=True)])
        for i in range(2)
    ]
    records += [
        rec("abstain", [cand("a", score=0.9, label="abstained", selected=True)]),
        rec(
            "unavailable",
            [cand("a", score=0.9, label="evidence_unavailable", reason="not_found", selected=True)],
        ),
        rec(
            "split",
            [cand("a", score=0.9, labels=("admissible", "inadmissible"), selected=True)],
        ),
        rec("pending", [cand("a", score=0.9, label=None, selected=True)]),
    ]
    del rows
    calibration_project(project, {"calibration": records})
    item = Item.objects.get(project=project, candidate__question__external_id="split")
    assert item.status == ItemStatus.DISAGREEMENT
    adjudication_mark_unresolved(
        project=project,
        item_id=item.pk,
        actor=member(Role.ADJUDICATOR),
        expected_version=item.version,
        reason="ambiguous_guideline",
    )
    return project


def test_by_default_unresolved_unavailable_and_abstained_count_as_errors(policy_project):
    spec = make_spec(policy_project, thresholds=[0.5])
    result = run_of(spec).result
    counts = result["selective_risk"]["counts"]
    assert counts["excluded"] == {"pending": 1}
    assert (counts["used"], counts["errors"]) == (10, 5)
    assert result["selective_risk"]["rows"][0]["errors"] == 5
    # the item not resolved yet is excluded and said so
    assert result["pending"] == {"calibration": 1, "test": 0}
    assert result["covers_only_resolved"] is True
    ledger = {row["field"]: row["value"] for row in result["ledger"]}
    assert "covers only the resolved items" in ledger["population"]
    assert "unresolved as an error" in ledger["admission_policy"]


def test_declared_exclusions_are_counted(policy_project):
    spec = make_spec(
        policy_project,
        thresholds=[0.5],
        unresolved_as="exclude",
        evidence_unavailable_as="exclude",
        abstained_as="exclude",
    )
    counts = run_of(spec).result["selective_risk"]["counts"]
    assert counts["excluded"] == {
        "abstained": 1,
        "evidence_unavailable": 1,
        "pending": 1,
        "unresolved": 1,
    }
    assert (counts["used"], counts["errors"]) == (7, 2)


def test_pending_items_may_count_as_errors(policy_project):
    spec = make_spec(policy_project, thresholds=[0.5], pending_as="error")
    result = run_of(spec).result
    counts = result["selective_risk"]["counts"]
    assert counts["excluded"] == {}
    assert (counts["used"], counts["errors"]) == (11, 6)
    assert result["covers_only_resolved"] is False


def test_any_error_loss_counts_unsupported_claims(project):
    records = [
        rec("q1", [cand("a", score=0.9, claims=("supported", "not_supported"), selected=True)]),
        rec("q2", [cand("a", score=0.9, claims=("supported", "supported"), selected=True)]),
        rec(
            "q3",
            [cand("a", score=0.9, claims=("supported", "evidence_unavailable"), selected=True)],
        ),
    ]
    calibration_project(project, {"calibration": records})
    answer_level = make_spec(project, name="answer", thresholds=[0.5])
    any_error = make_spec(project, name="any", thresholds=[0.5], loss="any_error")
    excluded = make_spec(
        project,
        name="excl",
        thresholds=[0.5],
        loss="any_error",
        evidence_unavailable_as="exclude",
    )
    assert run_of(answer_level).result["selective_risk"]["counts"]["errors"] == 0
    assert run_of(any_error).result["selective_risk"]["counts"]["errors"] == 2
    assert run_of(excluded).result["selective_risk"]["counts"]["errors"] == 1


@pytest.mark.parametrize(
    ("selector", "units", "errors"),
    [("first_sample", 1, 1), ("mode", 1, 0), ("is_selected", 1, 0), ("each_candidate", 3, 1)],
)
def test_the_selector_decides_the_emitted_answer(project, selector, units, errors):
    # given samples x (inadmissible), y, y (admissible); the second one is flagged selected
    record = rec(
        "q1",
        [
            cand("a", answer="x", label="inadmissible", score=0.9),
            cand("b", answer="y", score=0.9, selected=True),
            cand("c", answer="y", score=0.9),
        ],
    )
    calibration_project(project, {"calibration": [record]})
    spec = make_spec(project, thresholds=[0.5], selector=selector)
    counts = run_of(spec).result["selective_risk"]["counts"]
    assert (counts["units"], counts["errors"]) == (units, errors)


@pytest.mark.parametrize(
    ("selector", "unit"), [("each_candidate", "eligible candidate"), ("mode", "eligible question")]
)
def test_the_heldout_units_follow_the_selector(project, selector, unit):
    # given a test question with three candidate answers
    record = rec(
        "t1",
        [cand("a", score=0.9, selected=True), cand("b", score=0.9), cand("c", score=0.9)],
    )
    calibration_project(
        project, {"calibration": questions("c", [(1.0, "admissible")] * 50), "test": [record]}
    )
    spec = make_spec(project, thresholds=[0.5], selector=selector)
    report = run_of(spec).result["heldout"]["report"]
    # then the rows over every unit name a candidate when each candidate is its own unit
    units = {m["name"]: (m["unit"], m["denominator"]) for m in report["metrics"]}
    n = 3 if selector == "each_candidate" else 1
    assert units["answer_rate"] == (unit, n)
    assert units["unconditional_failure_rate"] == (unit, n)


def test_slices_break_the_heldout_report_down(project):
    calibration = questions("c", [(1.0, "admissible")] * 50)
    test = [
        rec(
            f"t{i}",
            [cand("a", score=1.0, selected=True)],
            slices={"domain": "law" if i % 2 else "med"},
        )
        for i in range(10)
    ]
    calibration_project(project, {"calibration": calibration, "test": test})
    spec = make_spec(project, thresholds=[0.5])
    slices = run_of(spec).result["heldout"]["slices"]
    assert sorted(slices["domain"]) == ["law", "med"]
    assert slices["domain"]["law"]["n_eligible"] == 5


# -- fail closed -------------------------------------------------------------------------------
def test_an_empty_calibration_partition_certifies_nothing(project):
    calibration_project(project, {"test": questions("t", [(1.0, "admissible")] * 5)})
    spec = make_spec(project, method="both", selector="mode", thresholds=[0.5])
    run = run_of(spec)
    assert run.status == RunStatus.DONE
    assert run.result["selective_risk"]["outcome"] == "no certified operating point"
    assert run.result["conformal"]["threshold"] is None
    assert run.result["outcome"] == "no certified operating point; no conformal threshold"
    metrics = {m["name"]: m for m in run.result["heldout"]["report"]["metrics"]}
    assert metrics["answer_rate"]["numerator"] == 0  # nothing certified: nothing is emitted


def test_a_statistics_error_fails_the_run_closed(project, monkeypatch):
    calibration_project(project, {"calibration": questions("c", [(1.0, "admissible")])})
    spec = make_spec(project)

    def broken(**kwargs):
        raise StatsError("scores must not contain NaN")

    monkeypatch.setattr("certification.certificates.compute.calibration_result_compute", broken)
    run = run_of(spec)
    assert run.status == RunStatus.FAILED
    assert run.error == "scores must not contain NaN"
    assert run.result == {} and run.outcome == ""


def test_the_task_fails_the_run_on_an_unexpected_error(project, monkeypatch):
    calibration_project(project, {"calibration": questions("c", [(1.0, "admissible")])})
    run = calibration_run_request(spec=make_spec(project), trigger="manual")

    def crash(**kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr("certification.certificates.compute.calibration_result_compute", crash)
    outcome = calibration_run_execute_task.delay(run.pk).get()
    assert outcome == {"run_id": run.pk, "status": "failed", "outcome": ""}
    run.refresh_from_db()
    assert run.error == "RuntimeError: out of memory"


def test_the_task_skips_a_missing_run(db):
    assert calibration_run_execute_task.delay(987654).get() is None
    with pytest.raises(RunNotFound):
        calibration_run_execute(run_id=987654)


def test_a_spec_changed_behind_the_services_back_is_refused(project):
    calibration_project(project, {"calibration": questions("c", [(1.0, "admissible")])})
    spec = make_spec(project)
    CalibrationSpec.objects.filter(pk=spec.pk).update(alpha="0.5")
    spec.refresh_from_db()
    with pytest.raises(CertificationError):
        calibration_run_request(spec=spec, trigger="manual")


# -- idempotency -------------------------------------------------------------------------------
def test_unchanged_inputs_give_the_same_run(project):
    calibration_project(project, {"calibration": questions("c", [(1.0, "admissible")] * 3)})
    spec = make_spec(project)
    first = run_of(spec)
    again = calibration_run_request(spec=spec, trigger="manual")
    assert again.pk == first.pk and again.status == RunStatus.DONE
    finished = first.finished_at
    # executing a finished run again changes nothing
    assert calibration_run_execute(run_id=first.pk).finished_at == finished
    assert CalibrationRun.objects.count() == 1


def test_a_label_change_gives_a_new_run(project, member):
    rows = [rec("q1", [cand("a", score=1.0, labels=("admissible", "inadmissible"), selected=True)])]
    rows += questions("c", [(1.0, "admissible")] * 2)
    calibration_project(project, {"calibration": rows})
    spec = make_spec(project)
    first = run_of(spec)
    item = Item.objects.get(project=project, candidate__question__external_id="q1")
    adjudication_mark_unresolved(
        project=project,
        item_id=item.pk,
        actor=member(Role.ADJUDICATOR),
        expected_version=item.version,
        reason="ambiguous_guideline",
    )
    second = calibration_run_request(spec=spec, trigger="labels_changed")
    assert second.pk != first.pk and second.input_sha256 != first.input_sha256
    assert first.result["pending"]["calibration"] == 1
    assert calibration_run_execute(run_id=second.pk).result["pending"]["calibration"] == 0


def test_a_failed_run_is_retried_on_request(project, monkeypatch):
    calibration_project(project, {"calibration": questions("c", [(1.0, "admissible")])})
    spec = make_spec(project)

    def broken(**kwargs):
        raise StatsError("transient")

    with monkeypatch.context() as patch:
        patch.setattr("certification.certificates.compute.calibration_result_compute", broken)
        failed = run_of(spec)
    retried = run_of(spec)
    assert failed.status == RunStatus.FAILED and retried.status == RunStatus.DONE
    assert retried.pk != failed.pk and retried.input_sha256 == failed.input_sha256


def test_a_stale_running_run_is_replaced(project):
    calibration_project(project, {"calibration": questions("c", [(1.0, "admissible")])})
    spec = make_spec(project)
    stuck = calibration_run_request(spec=spec, trigger="manual")
    CalibrationRun.objects.filter(pk=stuck.pk).update(
        status=RunStatus.RUNNING,
        lease_owner="gone:1:task",
        started_at=timezone.now() - timedelta(hours=2),
        heartbeat_at=timezone.now() - timedelta(hours=1),
    )
    fresh = calibration_run_request(spec=spec, trigger="manual")
    stuck.refresh_from_db()
    assert fresh.pk != stuck.pk
    assert stuck.status == RunStatus.FAILED and "stale" in stuck.error


def test_the_database_allows_one_live_run_per_inputs(project):
    calibration_project(project, {"calibration": questions("c", [(1.0, "admissible")])})
    run = calibration_run_request(spec=make_spec(project), trigger="manual")
    with pytest.raises(IntegrityError), transaction.atomic():
        CalibrationRun.objects.create(
            project=project,
            spec=run.spec,
            trigger="manual",
            spec_sha256=run.spec_sha256,
            input_sha256=run.input_sha256,
            stats_version=run.stats_version,
        )


def test_only_managers_start_runs(project, member):
    calibration_project(project, {"calibration": questions("c", [(1.0, "admissible")])})
    spec = make_spec(project)
    with pytest.raises(PermissionDenied):
        calibration_run_start(spec=spec, actor=member(Role.ADJUDICATOR))
    run = calibration_run_start(spec=spec, actor=member(Role.MANAGER))
    assert run.trigger == "manual" and run.status == RunStatus.PENDING


# -- refresh on label changes ------------------------------------------------------------------
def test_refresh_runs_the_latest_version_of_each_spec_once(project):
    calibration_project(project, {"calibration": questions("c", [(1.0, "admissible")] * 3)})
    old = make_spec(project, name="a")
    manager = old.created_by
    new = calibration_spec_revise(spec=old, actor=manager, alpha="0.2")
    other = make_spec(project, name="b")
    created = calibration_runs_refresh(project_id=project.pk)
    assert sorted(r.spec_id for r in created) == sorted([new.pk, other.pk])
    assert all(r.trigger == "labels_changed" for r in created)
    # unchanged labels: nothing new
    assert calibration_runs_refresh(project_id=project.pk) == []
    assert CalibrationRun.objects.count() == 2


# -- rebuilding --------------------------------------------------------------------------------
def test_every_stored_number_rebuilds_from_the_inputs(project):
    calibration_project(
        project,
        {
            "calibration": questions("c", [(1.0, "admissible")] * 30 + [(0.2, "inadmissible")] * 5),
            "test": questions("t", [(1.0, "admissible")] * 10),
        },
    )
    run = run_of(make_spec(project, method="both", selector="mode", thresholds=[0.5]))
    assert calibration_run_rebuild(run=run)
    # a tampered result no longer rebuilds
    CalibrationRun.objects.filter(pk=run.pk).update(result={**run.result, "outcome": "certified!"})
    run.refresh_from_db()
    assert not calibration_run_rebuild(run=run)
