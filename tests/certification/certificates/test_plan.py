"""The plan of a spec's inputs snapshot: the certificate's own counts, planned (no database)."""

from __future__ import annotations

import math

import pytest
from scipy.stats import binom

from certification.certificates import calibration_result_compute
from certification.certificates.plan import NOT_A_CERTIFICATE, plan_compute
from certification.stats.conformal import conformal_index

from .worlds import contract, inputs


def first_passing(n, d, k, alpha, level, limit=5000):
    """The first N whose projected counts pass P[Bin(d', alpha) <= k'] <= level (brute force)."""
    for more in range(limit):
        denominator = d + more * d // n
        errors = math.ceil(k * denominator / d)
        if binom.cdf(errors, denominator, alpha) <= level:
            return more
    return None


def test_the_plan_uses_the_certificates_counts_and_says_it_is_not_one():
    # given 40 calibration questions, 8 of them wrong with score 0.6, the rest right with 0.95
    terms, snapshot = contract(), inputs()
    plan = plan_compute(contract=terms, inputs=snapshot, n_more=25)
    result = calibration_result_compute(contract=terms, inputs=snapshot)
    assert plan["notice"] == NOT_A_CERTIFICATE and plan["is_certificate"] is False
    assert NOT_A_CERTIFICATE.startswith("A plan is not a certificate")
    s = plan["selective_risk"]
    certified = result["selective_risk"]["rows"]
    assert (
        [(r["denominator"], r["errors"]) for r in s["rows"]]
        == [(r["denominator"], r["errors"]) for r in certified]
        == [(40, 8), (32, 0), (32, 0)]
    )
    assert [r["certified_now"] for r in s["rows"]] == [r["certified"] for r in certified]
    assert (
        s["zero_error_minimum"]
        == result["selective_risk"]["smallest_certifiable_count_zero_errors"]
    )
    assert (
        s["zero_error_text"]
        == "even with zero errors a threshold needs at least 39 accepted answers"
    )
    # then the rate 8/40 = 0.2 >= alpha never certifies; the others need 39 accepted: 9 more
    assert s["rows"][0]["never"] and s["rows"][0]["additional"] is None
    level = 0.05 / 3
    assert (
        [r["additional"] for r in s["rows"][1:]]
        == [first_passing(40, 32, 0, 0.1, level)] * 2
        == [9] * 2
    )
    assert (s["fewest_index"], s["fewest_additional"], s["certified_now"]) == (1, 9, 0)
    # with 25 more, P(certify) = P[Bin(25, 32/40) >= 7] (zero errors at the observed rate 0)
    assert s["rows"][1]["probability_at_n_more"] == pytest.approx(binom.sf(6, 25, 0.8), rel=1e-12)
    assert s["rows"][1]["probability_at_plan"] == pytest.approx(binom.sf(6, 9, 0.8), rel=1e-12)


def test_the_conformal_plan_counts_unsolvable_questions():
    # 8 of 40 questions have no admissible answer: at alpha 0.1 M* never becomes finite
    c = plan_compute(contract=contract(), inputs=inputs())["conformal"]
    assert (c["n"], c["n_finite"], c["n_mode_admissible"], c["k"]) == (40, 32, 32, 37)
    assert (c["finite_now"], c["never"], c["additional"], c["minimum_n"]) == (False, True, None, 9)
    assert c["reliability_now"] == "32/41"
    # at alpha 0.21 the unsolvable share 0.2 is below alpha: finite from the first N with
    # 32 + floor(0.8 N) >= ceil((41 + N) 0.79)
    c = plan_compute(contract=contract(alpha="0.21"), inputs=inputs(), n_more=10)["conformal"]
    expected = next(
        m for m in range(10_000) if 32 + m * 32 // 40 >= conformal_index(40 + m, "0.21")
    )
    assert c["additional"] == expected and c["planned_n"] == 40 + expected
    assert c["expected_reliability_at_n_more"] == pytest.approx(32 * 50 / (40 * 51), rel=1e-12)


def test_pending_candidates_are_counted_and_left_out():
    plan = plan_compute(contract=contract(), inputs=inputs(pending=4))
    assert plan["pending"] == 4
    assert (plan["questions"], plan["candidates_per_question"]) == (40, 2)
    assert plan["selective_risk"]["n"] == 36 and plan["conformal"]["n"] == 36


def test_a_method_the_spec_does_not_use_has_no_plan():
    plan = plan_compute(contract=contract(method="selective_risk"), inputs=inputs())
    assert plan["conformal"] is None and plan["selective_risk"] is not None
    plan = plan_compute(contract=contract(method="conformal_set"), inputs=inputs())
    assert plan["selective_risk"] is None and plan["conformal"] is not None


def test_eligible_units_plan_every_unit_in_the_denominator():
    plan = plan_compute(contract=contract(denominator="eligible_units"), inputs=inputs())
    rows = plan["selective_risk"]["rows"]
    assert [r["denominator"] for r in rows] == [40, 40, 40]
    assert plan["selective_risk"]["zero_error_text"].endswith("39 questions")
    assert rows[1]["additional"] == first_passing(40, 40, 0, 0.1, 0.05 / 3)
