"""A done run's per-question decisions on its test partition, as pages, API and releases show."""

from __future__ import annotations

import json
from typing import Any

from certification.certificates.apply import certificate_freeze, heldout_decisions
from certification.contract import spec_content
from certification.exceptions import RunNotFound
from certification.models import CalibrationRun, RunStatus

#: The columns of the decisions CSV: one row per held-out unit (per candidate with the
#: ``each_candidate`` selector, else per question).
DECISION_COLUMNS = (
    "question_id",
    "external_id",
    "candidate_index",
    "candidate_id",
    "answer",
    "score",
    "decision",
    "reason",
    "excluded",
    "loss",
    "set_size",
    "set_whole_answer_space",
    "set_classes_json",
    "set_covers",
    "set_excluded",
    "run",
    "spec_sha256",
    "input_sha256",
    "ledger_sha256",
)


def calibration_run_test_decisions(*, run: CalibrationRun) -> list[dict[str, Any]]:
    """Return the run's frozen policy applied to each test question, with its outcome.

    ``certification.certificates.apply.heldout_decisions``: per question the
    accept / abstain decisions and the top-M* prediction set, each decision's exclusion and
    0/1 loss and each set's coverage, as the held-out report counts them. A run that certifies
    no operating point abstains everywhere (fail closed).

    Raises:
        RunNotFound: the run is not done (it has no decisions yet).
    """
    if run.status != RunStatus.DONE:
        raise RunNotFound(f"calibration run {run.pk} is {run.status}: no decisions until done")
    certificate = certificate_freeze(
        run_id=run.pk,
        spec_sha256=run.spec_sha256,
        input_sha256=run.input_sha256,
        contract=spec_content(run.spec),
        result=run.result,
    )
    return heldout_decisions(certificate, run.inputs)


def decision_rows(records: list[dict[str, Any]]) -> list[list[Any]]:
    """Flatten decision records into :data:`DECISION_COLUMNS` rows (JSON values as text)."""
    rows = []
    for record in records:
        reference = record["certificate"]
        sets = record.get("prediction_set")
        set_cells = (
            [None] * 5
            if sets is None
            else [
                sets["size"],
                sets["whole_answer_space"],
                json.dumps(sets["classes"], ensure_ascii=False),
                sets.get("set_covers"),
                sets.get("excluded"),
            ]
        )
        selective = record.get("selective_risk")
        decisions = selective["decisions"] if selective else [None]
        for decision in decisions:
            cells = (
                [None] * 8
                if decision is None
                else [
                    decision["candidate_index"],
                    decision["candidate_id"],
                    decision["answer"],
                    decision["score"],
                    decision["decision"],
                    decision["reason"],
                    decision.get("excluded"),
                    decision.get("loss"),
                ]
            )
            rows.append(
                [
                    record["question"],
                    record.get("external_id"),
                    *cells,
                    *set_cells,
                    reference["run"],
                    reference["spec_sha256"],
                    reference["input_sha256"],
                    reference["ledger_sha256"],
                ]
            )
    return rows
