"""Downloads of a done run's per-question decisions on its test partition (CSV and JSON).

Adjudicators and managers (who read the run page and its held-out report) download them;
annotators and non-members get 404, as for every certification page.
"""

from __future__ import annotations

import csv
import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_http_methods

from certification.selectors import (
    DECISION_COLUMNS,
    calibration_run_get,
    calibration_run_test_decisions,
    decision_rows,
)
from certification.views.common import certification_project
from labeling.release_format import csv_cell


def _attachment(content_type: str, name: str) -> HttpResponse:
    response = HttpResponse(content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
@require_http_methods(["GET", "HEAD"])
def calibration_run_decisions_json(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    """Download the test decisions as JSON (``heldout_decisions``' records); 404 until done."""
    project, _ = certification_project(request, slug)
    run = calibration_run_get(project=project, run_id=run_id)
    records = calibration_run_test_decisions(run=run)
    response = _attachment("application/json", f"{project.slug}-run-{run.pk}-test-decisions.json")
    response.write(json.dumps(records, ensure_ascii=False, sort_keys=True, indent=1))
    return response


@login_required
@require_http_methods(["GET", "HEAD"])
def calibration_run_decisions_csv(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    """Download the test decisions as CSV, one row per held-out unit; 404 until done.

    Cells a spreadsheet would run as a formula are escaped (``release_format.csv_cell``).
    """
    project, _ = certification_project(request, slug)
    run = calibration_run_get(project=project, run_id=run_id)
    records = calibration_run_test_decisions(run=run)
    response = _attachment(
        "text/csv; charset=utf-8", f"{project.slug}-run-{run.pk}-test-decisions.csv"
    )
    writer = csv.writer(response)
    writer.writerow(DECISION_COLUMNS)
    writer.writerows([csv_cell(cell) for cell in row] for row in decision_rows(records))
    return response
