"""Evaluator audits on the shared FaithBench data: the README's worked example.

FaithBench (vectara/FaithBench batches 1-8, 400 summaries of 40 passages) is imported and
resolved exactly as in ``test_real_data_calibration``: unanimous batch annotators resolve as
consensus (135), the 265 disagreements are adjudicated with the declared worst-label rule
(inadmissible if any annotator flagged Unwanted). Positive = inadmissible (a hallucination).
The five binary judges are audited on their verdicts; the three HHEM detectors on their
consistency score, flagged when score < 0.5 (Vectara's documented cut-off). The data was chosen
where detectors disagree with people: low sensitivity is the expected, honest answer.
Every figure asserted here is quoted in the README.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from certification.services import audit_report_configure
from labeling.importers.faithbench import BINARY_JUDGES, EVALUATOR_VERSION, SCORE_DETECTORS
from labeling.models import Evaluator
from tests.certification.test_real_data_calibration import _faithbench

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]

HHEM_THRESHOLD = 0.5


def _figures(report) -> dict[str, object]:
    m = report.result["metrics"]
    b = m["matrix"]["binary"]
    er = {s["method"]: s for s in report.result["error_rate"]["summaries"]}

    def r(x):
        return None if x is None else round(x, 4)

    return {
        "tp_fp_fn_tn": (b["tp"], b["fp"], b["fn"], b["tn"]),
        "unavailable": m["n_unavailable"],
        "sensitivity": r(m["sensitivity"]["value"]),
        "sensitivity_ci": (
            r(m["sensitivity"]["interval"]["lower"]),
            r(m["sensitivity"]["interval"]["upper"]),
        ),
        "specificity": r(m["specificity"]["value"]),
        "ppv": r(m["ppv"]["value"]),
        "npv": r(m["npv"]["value"]),
        "accuracy": r(m["accuracy"]["value"]),
        "kappa": r(m["kappa"]["kappa"]),
        "mcnemar_p": m["mcnemar"]["p_value"],
        "human_only": (r(er["human-only"]["estimate"]), r(er["human-only"]["upper_bound"])),
        "ppi": (r(er["ppi"]["estimate"]), r(er["ppi"]["upper_bound"])),
        "ppi++": (r(er["ppi++"]["estimate"]), r(er["ppi++"]["upper_bound"])),
        "union": r(er["union bound"]["upper_bound"]),
        "disagreements": len(report.result["disagreements"]),
    }


def _audit_all(shared_data):
    project, adjudicated = _faithbench(shared_data)
    reports = {}
    for name in (*BINARY_JUDGES, *SCORE_DETECTORS):
        evaluator = Evaluator.objects.get(project=project, name=name, version=EVALUATOR_VERSION)
        threshold = HHEM_THRESHOLD if name in SCORE_DETECTORS else None
        reports[name] = audit_report_configure(
            project=project, evaluator=evaluator, actor=None, score_threshold=threshold
        )
    return project, adjudicated, reports


# Per evaluator: (TP, FP, FN, TN), sensitivity, its exact 95% interval, specificity, PPV, NPV,
# Cohen's kappa, union-bound upper bound on the error rate. Positive = inadmissible.
EXPECTED = {
    "gpt-3.5-turbo": (
        (76, 71, 156, 97),
        0.3276,
        (0.2676, 0.3921),
        0.5774,
        0.517,
        0.3834,
        -0.0888,
        1.0,
    ),
    "gpt-4-turbo": (
        (57, 12, 175, 156),
        0.2457,
        (0.1917, 0.3063),
        0.9286,
        0.8261,
        0.4713,
        0.1537,
        0.7967,
    ),
    "gpt_4o": (
        (53, 10, 179, 158),
        0.2284,
        (0.1761, 0.2879),
        0.9405,
        0.8413,
        0.4688,
        0.1483,
        0.7824,
    ),
    "trueteacher": (
        (42, 24, 190, 144),
        0.181,
        (0.1337, 0.2367),
        0.8571,
        0.6364,
        0.4311,
        0.0336,
        0.8277,
    ),
    "true_nli": ((8, 3, 224, 165), 0.0345, (0.015, 0.0668), 0.9821, 0.7273, 0.4242, 0.0141, 0.6742),
    "hhemv1": ((61, 22, 171, 146), 0.2629, (0.2075, 0.3245), 0.869, 0.7349, 0.4606, 0.1176, 0.8459),
    "hhem-2.1": (
        (40, 15, 192, 153),
        0.1724,
        (0.1261, 0.2273),
        0.9107,
        0.7273,
        0.4435,
        0.0726,
        0.7849,
    ),
    "hhem-2.1-english": (
        (14, 6, 218, 162),
        0.0603,
        (0.0334, 0.0992),
        0.9643,
        0.7,
        0.4263,
        0.021,
        0.7001,
    ),
}


def test_faithbench_judges_against_resolved_labels(shared_data):
    # given the 400 summaries resolved (135 consensus, 265 by the worst-label rule), when
    project, adjudicated, reports = _audit_all(shared_data)
    # then
    assert adjudicated == 265
    figures = {name: _figures(report) for name, report in reports.items()}
    got = {
        name: (
            f["tp_fp_fn_tn"],
            f["sensitivity"],
            f["sensitivity_ci"],
            f["specificity"],
            f["ppv"],
            f["npv"],
            f["kappa"],
            f["union"],
        )
        for name, f in figures.items()
    }
    assert got == EXPECTED
    for f in figures.values():
        assert f["unavailable"] == 0
        # every summary is labelled: the human-only rate is the census, 232/400
        assert f["human_only"] == (0.58, 0.6213)
        assert f["ppi"][0] == 0.58 and f["ppi++"][0] == 0.58
        assert f["mcnemar_p"] < 1e-7  # every judge misses far more than it over-flags
    assert figures["gpt-4-turbo"]["disagreements"] == 187


def test_audit_evaluator_command_prints_the_report(shared_data):
    project, _, _ = _audit_all(shared_data)
    out = io.StringIO()
    call_command(
        "audit_evaluator",
        "--project",
        project.slug,
        "--evaluator",
        f"gpt-4-turbo@{EVALUATOR_VERSION}",
        stdout=out,
    )
    text = out.getvalue()
    assert "Audit of gpt-4-turbo@faithbench-cf89797 (400 items, 400 resolved, 0 pending)" in text
    assert "sensitivity  0.2457  57/232  [0.1917, 0.3063]" in text
    assert "Disagreements: 187" in text
