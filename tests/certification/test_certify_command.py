"""``manage.py certify``: the same report as the run page and the API, in text or JSON."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from certification.models import CalibrationRun, RunStatus
from certification.selectors import calibration_run_report
from certification.stats.errors import StatsError
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db


@pytest.fixture
def spec(project):
    calibration = [
        rec(f"c{i}", [cand("a", answer="x", score=1.0, selected=True)]) for i in range(50)
    ]
    test = [rec(f"t{i}", [cand("a", answer="x", score=1.0, selected=True)]) for i in range(10)]
    calibration_project(project, {"calibration": calibration, "test": test})
    return make_spec(project, method="both", selector="mode", thresholds=[0.5, 0.9])


def certify(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("certify", "--project", "study", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_runs_the_spec_and_prints_the_report(spec):
    out, _ = certify("--spec", str(spec.pk))
    run = CalibrationRun.objects.get()
    assert (run.trigger, run.status) == ("command", RunStatus.DONE)
    lines = out.splitlines()
    assert lines[0] == f"Calibration run {run.pk} of main v1 — done"
    for heading in (
        "Outcome: certified; M* = 1",
        "Selective-risk certificate",
        "Conformal prediction sets",
        "Held-out report (test partition): emit the selected answer iff acceptance_score >= 0.5; "
        "return the top M* = 1 canonical classes",
        "Guarantee ledger",
    ):
        assert heading in lines, heading
    assert (
        "  certified operating point: accept iff acceptance_score >= 0.5 (2 of 2 certified, "
        "chosen by answer_rate)"
    ) in lines
    assert "  reliability level 1 - alpha* = 50/51 = 0.980392 (50 modes admissible)" in lines
    assert sum(1 for line in lines if line.startswith("  Population: ")) == 1
    answer_rate = next(line for line in lines if line.startswith("  answer_rate"))
    assert answer_rate.split()[1:6] == ["10", "10", "eligible", "question", "100.00%"]


def test_json_is_the_api_report(spec):
    out, _ = certify("--spec", str(spec.pk), "--json")
    run = CalibrationRun.objects.get()
    assert json.loads(out) == json.loads(json.dumps(calibration_run_report(run=run)))


def test_unchanged_labels_reuse_the_run(spec):
    certify("--spec", str(spec.pk))
    certify("--spec", str(spec.pk))
    assert CalibrationRun.objects.count() == 1


def test_verify_rebuilds_a_stored_run(spec):
    certify("--spec", str(spec.pk))
    run = CalibrationRun.objects.get()
    _, err = certify("--run", str(run.pk), "--verify")
    assert "every number rebuilds from the stored inputs" in err
    CalibrationRun.objects.filter(pk=run.pk).update(result={**run.result, "outcome": "forged"})
    with pytest.raises(CommandError, match="does not rebuild"):
        certify("--run", str(run.pk), "--verify")


def test_a_failed_run_exits_with_its_error(spec, monkeypatch):
    def broken(**kwargs):
        raise StatsError("no data")

    monkeypatch.setattr("certification.certificates.compute.calibration_result_compute", broken)
    with pytest.raises(CommandError, match="failed: no data"):
        certify("--spec", str(spec.pk))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--project", "nope", "--spec", "1"), "no project 'nope'"),
        (("--project", "study", "--spec", "999"), "no calibration spec 999"),
        (("--project", "study", "--run", "999"), "no calibration run 999"),
    ],
)
def test_unknown_objects_are_errors(project, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("certify", *args, stdout=io.StringIO())
