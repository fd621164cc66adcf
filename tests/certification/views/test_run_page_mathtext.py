"""A run page whose evaluator name reads as matplotlib mathtext renders it as plain text.

Its own module: it imports a workload into a fresh project (``project`` of tests/conftest.py),
while test_calibration_pages.py shares one frozen project across its tests.
"""

from __future__ import annotations

import pytest

from certification.services import calibration_run_execute, calibration_run_request
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

BASE = "/p/study/certification"


@pytest.mark.parametrize("name", [r"$\cmd$", r"judge $x^$ \frac", "$$"])
def test_a_run_page_whose_evaluator_name_reads_as_mathtext_renders_it_plainly(project, login, name):
    # an evaluator named like matplotlib mathtext: the run page was a 500 for every viewer
    calibration = [
        rec(f"c{i}", [cand("a", answer="x", evaluator=(name, "1", 0.9), selected=True)])
        for i in range(30)
    ]
    test = [
        rec(f"t{i}", [cand("a", answer="x", evaluator=(name, "1", 0.9), selected=True)])
        for i in range(10)
    ]
    data = calibration_project(project, {"calibration": calibration, "test": test})
    spec = make_spec(
        data, method="both", selector="mode", thresholds=[0.5], score_field=f"evaluator:{name}@1"
    )
    run = calibration_run_execute(run_id=calibration_run_request(spec=spec, trigger="manual").pk)

    for role in ("adjudicator", "manager"):
        response = login(role).get(f"{BASE}/runs/{run.pk}/")

        assert response.status_code == 200
        body = response.content.decode().replace("\n", "")
        assert 'id="plot-selective-risk"><svg' in body
        # the label is drawn as written: matplotlib keeps each text in an SVG comment
        assert f"<!-- threshold (evaluator:{name}@1 &gt;= t) -->" in body
