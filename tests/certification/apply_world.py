"""A project whose run certifies t = 0.9 and M* = 1, for the tests of applying certificates.

60 calibration and 30 test questions, each with two candidates: ``x`` (selected; admissible
scoring 0.95, or inadmissible scoring 0.6 for one question in six) and ``y`` (inadmissible,
0.3). With both methods at alpha 0.2 and thresholds 0.5 and 0.9 the run certifies t = 0.9
(50 accepted answers, no error) and M* = 1 (one question in six has no admissible answer).
"""

from __future__ import annotations

from typing import Any

from certification.services import calibration_run_execute, calibration_run_request
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec


def _record(key: str, wrong: bool) -> dict[str, Any]:
    return rec(
        key,
        [
            cand(
                "a",
                answer="x",
                label="inadmissible" if wrong else "admissible",
                score=0.6 if wrong else 0.95,
                selected=True,
            ),
            cand("b", answer="y", label="inadmissible", score=0.3),
        ],
    )


def apply_project(project: Any) -> Any:
    """Import the questions above into ``project`` (partitioned, labelling started)."""
    calibration = [_record(f"c{i}", i % 6 == 0) for i in range(60)]
    test = [_record(f"t{i}", i % 6 == 0) for i in range(30)]
    return calibration_project(project, {"calibration": calibration, "test": test})


def apply_run(project: Any, **fields: Any) -> Any:
    """A done run of a new spec (both methods, mode, alpha 0.2, t in 0.5, 0.9; ``fields``)."""
    values = {"method": "both", "selector": "mode", "alpha": "0.2", "thresholds": [0.5, 0.9]}
    spec = make_spec(project, name=f"spec-{fields.get('method', 'both')}", **{**values, **fields})
    return calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)


def traffic(run: Any) -> list[dict[str, Any]]:
    """The run's test questions as a client sends them (no label)."""
    return [
        {
            "id": q["external_id"],
            "candidates": [
                {"answer": c["answer"], "score": c["score"], "selected": c["selected"]}
                for c in q["candidates"]
            ],
        }
        for q in run.inputs["test"]
    ]
