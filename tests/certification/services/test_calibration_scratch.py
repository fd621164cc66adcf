import json
import pytest
from certification.services import calibration_run_request, calibration_run_execute
from certification.models import CalibrationRun
from tests.factories import calibration_candidate as cand, calibration_record as rec, calibration_project, make_spec

pytestmark = pytest.mark.django_db

def test_scratch(project):
    cal = [rec(f"c{i}", [cand("a", answer=str(i%3), label="admissible" if i%4 else "inadmissible", score=i/40, selected=True, retrieval=0.5, confidence=i/40),
                         cand("b", answer=str(i%2), label="inadmissible", score=0.1)], group_key=f"g{i%5}", slices={"domain": "x" if i%2 else "y"}) for i in range(40)]
    test = [rec(f"t{i}", [cand("a", answer=str(i%3), label="admissible" if i%4 else "inadmissible", score=i/20, selected=True)], group_key=f"h{i%5}") for i in range(20)]
    calibration_project(project, {"calibration": cal, "test": test})
    spec = make_spec(project, method="both", selector="is_selected", thresholds=[0.1,0.5,0.9], alpha="0.3", delta="0.1")
    run = calibration_run_request(spec=spec, trigger="manual")
    run = calibration_run_execute(run_id=run.pk)
    print(run.status, run.error)
    print(json.dumps(run.result, indent=1)[:6000])
    from certification.plots import run_plots
    plots = run_plots(run.result)
    print({k: len(v) for k,v in plots.items()})
    assert run.status == "done"
