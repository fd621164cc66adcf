import io, json
from collections import Counter
import pytest
from django.core.management import call_command
from labeling.models import Project, Item, Question
from labeling.services import partition_freeze
from certification.services import calibration_run_request, calibration_run_execute
from tests.factories import start_labelling, make_spec

pytestmark = pytest.mark.django_db

def test_scratch(shared_data):
    path = shared_data / "gsm8k-model-solutions/grade_school_math/data/example_model_solutions.first400.jsonl"
    call_command("import_workload", path, "--project", "gsm", "--create", "--format", "gsm8k", "--no-progress", stdout=io.StringIO())
    project = Project.objects.get(slug="gsm")
    r = partition_freeze(project=project, proportions={"calibration": 0.5, "test": 0.5}, seed=2026)
    print(r)
    start_labelling(project, overlap=1)
    print(Counter(Item.objects.filter(project=project).values_list("status", flat=True)))
    for alpha in ("0.1", "0.2", "0.3", "0.4"):
        spec = make_spec(project, name=f"a{alpha}", method="conformal_set", selector="mode", canonicaliser="numeric", alpha=alpha, delta="0.05", thresholds=[], score_field="")
        run = calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)
        c = run.result["conformal"]
        print(alpha, run.status, run.error, c["threshold"], c["reliability"], c["counts"], c["score_counts"], c["test_sets"])
        print([ (m["name"], m["numerator"], m["denominator"]) for m in run.result["heldout"]["report"]["metrics"]])
    spec = make_spec(project, name="stop", method="conformal_set", selector="mode", canonicaliser="numeric", alpha="0.4", delta="0.05", thresholds=[], score_field="", stopping_delta="0.05")
    run = calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)
    print(run.result["conformal"]["counts"], run.result["conformal"]["threshold"])
    sel = make_spec(project, name="sel", method="both", selector="mode", canonicaliser="numeric", alpha="0.3", delta="0.05", thresholds=[1,2,3], acceptance="<=", score_field="frequency_rank")
    run = calibration_run_execute(run_id=calibration_run_request(spec=sel, trigger="manual").pk)
    print(run.status, run.error, run.outcome, json.dumps(run.result["selective_risk"]["rows"]))
