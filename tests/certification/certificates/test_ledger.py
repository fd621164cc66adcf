"""The guarantee ledger: one function per field, joined selective-first, from pure inputs."""

from __future__ import annotations

import pytest

from certification.certificates import calibration_result_compute
from certification.certificates.contract import Contract
from certification.certificates.ledger import (
    FIELD_FUNCTIONS,
    LEDGER_FIELDS,
    RANDOMNESS_TEXT,
    LedgerFacts,
    ledger,
    numerator,
    population,
)

from .worlds import contract, inputs


def _result(**changes):
    return calibration_result_compute(contract=contract(**changes), inputs=inputs())


def _facts(result, snapshot, **changes) -> LedgerFacts:
    return LedgerFacts(
        contract=Contract.of(contract(**changes)),
        inputs=snapshot,
        selective=result["selective_risk"],
        conformal=result["conformal"],
        dependence=result["dependence"],
        pending=result["pending"],
    )


def test_every_field_has_its_function_in_display_order():
    assert list(FIELD_FUNCTIONS) == [key for key, _ in LEDGER_FIELDS]
    assert len(LEDGER_FIELDS) == 12


@pytest.mark.parametrize("method", ["both", "selective_risk", "conformal_set"])
def test_stored_ledger_is_the_field_functions(method):
    # given a run computed from a pure snapshot
    snapshot = inputs()
    result = calibration_result_compute(contract=contract(method=method), inputs=snapshot)
    facts = _facts(result, snapshot, method=method)
    # then each stored field is its function's sentence, in the declared order
    assert result["ledger"] == [
        {"field": key, "title": title, "value": FIELD_FUNCTIONS[key](facts)}
        for key, title in LEDGER_FIELDS
    ]
    assert (
        ledger(
            contract=facts.contract,
            inputs=snapshot,
            selective=facts.selective,
            conformal=facts.conformal,
            dependence=facts.dependence,
            pending=facts.pending,
        )
        == result["ledger"]
    )


def test_both_methods_join_selective_then_conformal():
    snapshot = inputs()
    both = _facts(_result(method="both"), snapshot, method="both")
    selective = _facts(_result(method="selective_risk"), snapshot, method="selective_risk")
    conformal = _facts(_result(method="conformal_set"), snapshot, method="conformal_set")
    for key in ("output_object", "loss", "numerator", "denominator", "parameters"):
        function = FIELD_FUNCTIONS[key]
        assert function(both) == f"{function(selective)} | {function(conformal)}", key
    assert " | " not in numerator(selective)
    assert numerator(selective) == "accepted answers with loss 1 (k_j, per threshold)"


def test_randomness_is_the_same_sentence_for_every_run():
    for method in ("both", "selective_risk", "conformal_set"):
        values = {row["field"]: row["value"] for row in _result(method=method)["ledger"]}
        assert values["randomness"] == RANDOMNESS_TEXT


def test_population_reports_pending_items_and_the_declared_description():
    snapshot = inputs(pending=3)
    result = calibration_result_compute(
        contract=contract(description="declared text"), inputs=snapshot
    )
    text = population(_facts(result, snapshot, description="declared text"))
    assert text.startswith("Eligible questions of the 'calibration' partition of project 'study'")
    assert "3 candidate(s) of this partition are not resolved yet" in text
    assert "excluded 3 pending" in text
    assert text.endswith(" Declared: declared text")


def test_composition_boundary_names_the_acceptance_rule_only_with_selective_risk():
    selective = {r["field"]: r["value"] for r in _result(method="selective_risk")["ledger"]}
    conformal = {r["field"]: r["value"] for r in _result(method="conformal_set")["ledger"]}
    assert "and acceptance rule" in selective["composition_boundary"]
    assert "and acceptance rule" not in conformal["composition_boundary"]
    assert "Set coverage does not imply" in conformal["composition_boundary"]
