"""A small audited project for the evaluator-audit tests.

Six items; one imported prior vote each resolves as consensus at labelling start (overlap 1),
``q3/c0`` has none and stays open (unresolved). Evaluator ``judge@v1`` gives binary verdicts,
``hhem@v1`` a consistency score (flag when < 0.5). Positive = inadmissible.

| item  | domain | human        | judge        | hhem  |
|-------|--------|--------------|--------------|-------|
| q1/c0 | med    | inadmissible | inadmissible | 0.1   |
| q1/c1 | med    | admissible   | inadmissible | 0.9   |
| q2/c0 | med    | inadmissible | admissible   | 0.3   |
| q2/c1 | med    | admissible   | admissible   | 0.8   |
| q3/c0 | law    | (open)       | inadmissible | 0.2   |
| q3/c1 | law    | admissible   | unavailable  | unavailable |
"""

from __future__ import annotations

from typing import Any

from labeling.models import Evaluator, Project
from tests.factories import calibration_candidate, calibration_project, calibration_record

ROWS = {
    ("q1", "c0"): ("inadmissible", "inadmissible", 0.1),
    ("q1", "c1"): ("admissible", "inadmissible", 0.9),
    ("q2", "c0"): ("inadmissible", "admissible", 0.3),
    ("q2", "c1"): ("admissible", "admissible", 0.8),
    ("q3", "c0"): (None, "inadmissible", 0.2),
    ("q3", "c1"): ("admissible", None, None),
}
DOMAINS = {"q1": "med", "q2": "med", "q3": "law"}


def _candidate(question: str, key: str) -> dict[str, Any]:
    human, verdict, score = ROWS[(question, key)]
    candidate = calibration_candidate(key, answer=key, label=human)
    candidate["evaluator_labels"] = [
        {"evaluator": "judge", "version": "v1", "label": verdict, "available": verdict is not None},
        {"evaluator": "hhem", "version": "v1", "score": score, "available": score is not None},
    ]
    return candidate


def audited_project(project: Project) -> tuple[Project, Evaluator, Evaluator]:
    """Import the table above into ``project``; return it with the two evaluators."""
    records = [
        calibration_record(
            q,
            [_candidate(q, "c0"), _candidate(q, "c1")],
            slices={"domain": DOMAINS[q], "question_type": "fact"},
        )
        for q in ("q1", "q2", "q3")
    ]
    project = calibration_project(project, {"test": records})
    return (
        project,
        Evaluator.objects.get(project=project, name="judge"),
        Evaluator.objects.get(project=project, name="hhem"),
    )


def scored_project(project: Project, *, open_items: int = 0) -> tuple[Project, Evaluator]:
    """Import 40 items, each with an ``hhem@v1`` consistency score; return it with hhem.

    ``judge@v1`` gives every item a verdict: inadmissible iff the score is below 0.5.

    Item k (question ``s{k // 2}``, candidate ``c{k % 2}``) has score (k + 0.5) / 40 and the human
    label inadmissible iff score < 0.5, except every fifth item, where people disagree with
    the score; the last ``open_items`` items have no prior label and stay open.
    """
    records = []
    for q in range(20):
        candidates = []
        for c in range(2):
            k = 2 * q + c
            score = (k + 0.5) / 40
            error = (score < 0.5) != (k % 5 == 0)
            label = None if k >= 40 - open_items else "inadmissible" if error else "admissible"
            candidate = calibration_candidate(f"c{c}", answer=f"c{c}", label=label)
            verdict = "inadmissible" if score < 0.5 else "admissible"
            candidate["evaluator_labels"] = [
                {"evaluator": "hhem", "version": "v1", "score": score},
                {"evaluator": "judge", "version": "v1", "label": verdict},
            ]
            candidates.append(candidate)
        records.append(calibration_record(f"s{q}", candidates, slices={"domain": "med"}))
    project = calibration_project(project, {"test": records})
    return project, Evaluator.objects.get(project=project, name="hhem")
