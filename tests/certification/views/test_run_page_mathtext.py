"""A run page whose evaluator name holds ``$``, ``\\`` or ``<`` draws it as plain, escaped text.

Its own module: it imports a workload into a fresh project (``project`` of tests/conftest.py),
while test_calibration_pages.py shares one frozen project across its tests.
"""

from __future__ import annotations

import pytest
from django.utils.html import escape

from certification.services import calibration_run_execute, calibration_run_request
from tests.factories import calibration_candidate as cand
from tests.factories import calibration_project, make_spec
from tests.factories import calibration_record as rec

pytestmark = pytest.mark.django_db

BASE = "/p/study/certification"


@pytest.mark.parametrize("name", [r"$\cmd$", r"judge $x^$ \frac", "$$", "<b>judge</b> & $x$"])
def test_a_run_page_draws_an_evaluator_name_as_written(project, login, name):
    # an evaluator named like TeX math or HTML: the charts write it as text, escaped
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
        chart = body[body.index('id="chart-selective-risk"') :]
        label = escape(f"threshold (evaluator:{name}@1 >= t)")
        # the x-axis label and the data table's first column heading
        assert f'text-anchor="middle">{label}</text>' in chart
        assert f'<th scope="col">{label}</th>' in chart
        assert "<b>judge</b>" not in body  # the name never becomes markup
