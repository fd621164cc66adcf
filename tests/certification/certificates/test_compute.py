"""The certificate computation as a pure function: JSON numbers, contract, losses, the result."""

from __future__ import annotations

import json
import math

import pytest

from certification.certificates import STATS_VERSION, calibration_result_compute, from_num, num
from certification.certificates.contract import Contract
from certification.certificates.units import candidate_loss, claim_counts
from certification.stats.errors import StatsError

from .worlds import contract, inputs


@pytest.mark.parametrize(
    ("value", "stored"),
    [(math.inf, "inf"), (-math.inf, "-inf"), (3, 3), (0.25, 0.25), (None, None), (True, True)],
)
def test_num_writes_infinities_as_strings_and_from_num_reads_them_back(value, stored):
    assert num(value) == stored
    if stored is not None and not isinstance(stored, bool):
        assert from_num(stored) == value


def test_num_writes_nan_as_null():
    assert num(math.nan) is None


def test_contract_reads_the_acceptance_direction():
    assert Contract.of(contract(acceptance="<=")).sign == -1.0
    assert Contract.of(contract(acceptance="<")).stats_accept == ">"
    assert Contract.of(contract(acceptance=">=")).sign == 1.0
    terms = Contract.of(contract(method="both"))
    assert terms.selective and terms.conformal


@pytest.mark.parametrize(
    ("outcome", "policy", "expected"),
    [
        ("admissible", "error", (0, None)),
        ("inadmissible", "error", (1, None)),
        ("unresolved", "error", (1, None)),
        ("unresolved", "exclude", (None, "unresolved")),
        ("pending", "exclude", (None, "pending")),
    ],
)
def test_candidate_loss_follows_the_counting_policy(outcome, policy, expected):
    terms = Contract.of(contract(unresolved_as=policy, pending_as=policy))
    assert candidate_loss({"outcome": outcome}, terms) == expected


def test_any_error_counts_an_unsupported_claim_unless_its_evidence_is_excluded():
    candidate = {"outcome": "admissible", "claims": {"supported": 2, "evidence_unavailable": 1}}
    counted = Contract.of(contract(loss="any_error"))
    excluded = Contract.of(contract(loss="any_error", evidence_unavailable_as="exclude"))
    assert candidate_loss(candidate, counted) == (1, None)
    assert candidate_loss(candidate, excluded) == (0, None)
    assert claim_counts(candidate, counted) == (3, 1, 0)
    assert claim_counts(candidate, excluded) == (2, 0, 1)


def test_result_is_json_and_deterministic():
    first = calibration_result_compute(contract=contract(), inputs=inputs())
    second = calibration_result_compute(contract=contract(), inputs=inputs())
    assert json.dumps(first) == json.dumps(second)
    assert first["stats_version"] == STATS_VERSION
    assert set(first) == {
        "stats_version",
        "outcome",
        "pending",
        "covers_only_resolved",
        "selective_risk",
        "conformal",
        "rccs",
        "dependence",
        "heldout",
        "ledger",
    }


def test_sections_of_an_unused_method_are_none():
    selective = calibration_result_compute(
        contract=contract(method="selective_risk"), inputs=inputs()
    )
    conformal = calibration_result_compute(
        contract=contract(method="conformal_set"), inputs=inputs()
    )
    assert selective["conformal"] is None and selective["selective_risk"] is not None
    assert conformal["selective_risk"] is None and conformal["conformal"] is not None
    assert conformal["outcome"].startswith("M* = ")


def test_unknown_canonicaliser_is_refused():
    with pytest.raises(StatsError):
        calibration_result_compute(contract=contract(canonicaliser="nope"), inputs=inputs())
